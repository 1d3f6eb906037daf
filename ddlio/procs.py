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


def processes_naming(path: str | os.PathLike) -> dict[int, str]:
    """This user's processes of this host (this one and its ancestors left out) whose command line names ``path``
    or a file below it: pid -> command line (words joined by spaces). A run folder's path is unique to a store and a
    point, so these are the processes an attempt at that point started."""
    root = os.fspath(path).rstrip(os.sep)
    mine = {os.getpid()}
    pid = os.getppid()
    while pid > 1 and pid not in mine:  # this process's ancestors: the driver itself, its shell
        mine.add(pid)
        try:
            pid = int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            break
    out: dict[int, str] = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit() or int(entry.name) in mine:
            continue
        try:
            if entry.stat().st_uid != os.getuid():
                continue
            words = Path(entry.path, "cmdline").read_bytes().decode(errors="replace").split("\0")
        except OSError:
            continue
        if any(w == root or w.startswith(root + os.sep) for w in words) and process_started(int(entry.name)):
            out[int(entry.name)] = " ".join(w for w in words if w)
    return out
