"""Whether the driver holding a point's claim in the store is alive: on this host its PID tells (read from
``/proc``, a recycled PID is not it), on another host a claim refreshed within :data:`CLAIM_STALE_S`."""

from __future__ import annotations

import datetime as dt
import socket
from typing import Any

from ddlio.procs import process_started

#: a claim held by a driver on another host that has not refreshed it for this long belongs to a dead driver
#: (on the same host the driver's PID tells at once), in seconds
CLAIM_STALE_S = 300.0


def process_alive(pid: int | None, since: Any) -> bool:
    """Whether process ``pid`` of this host runs and is the one that was alive at ``since`` (a naive UTC datetime):
    a PID recycled by a process started later is not it."""
    if pid is None:
        return False
    started = process_started(pid)
    if started is None:
        return False
    if since is None:
        return True
    when = since.replace(tzinfo=dt.timezone.utc).timestamp() if isinstance(since, dt.datetime) else float(since)
    return started <= when + 2.0  # btime has a resolution of one second


def claim_alive(row: dict[str, Any]) -> bool:
    """Whether the driver holding a point's claim is alive: on this host its PID says so; on another host its
    claim must have been refreshed within :data:`CLAIM_STALE_S` seconds."""
    if not row.get("claim_token"):
        return False
    if row.get("claim_host") == socket.gethostname():
        return process_alive(row.get("claim_pid"), row.get("claim_utc"))
    when = row.get("claim_utc")
    if when is None:
        return False
    now = dt.datetime.now(dt.timezone.utc).replace(tzinfo=None)
    return (now - when).total_seconds() < CLAIM_STALE_S
