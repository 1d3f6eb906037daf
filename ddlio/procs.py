"""Processes of this host, read from ``/proc``."""

from __future__ import annotations

import os
from pathlib import Path


def process_started(pid: int) -> float | None:
    """When process ``pid`` of this host started (seconds since the epoch, to the second: the boot time's
    resolution), or None when there is no such process or it has ended (a zombie)."""
    try:
        stat = Path(f"/proc/{int(pid)}/stat").read_text()
        btime = next(int(ln.split()[1]) for ln in Path("/proc/stat").read_text().splitlines()
                     if ln.startswith("btime "))
        fields = stat.rsplit(")", 1)[1].split()
        if fields[0] in ("Z", "X"):
            return None
        return btime + int(fields[19]) / os.sysconf("SC_CLK_TCK")
    except (TypeError, ValueError, OSError, StopIteration, IndexError):
        return None
