"""A hung or dead rank must not hang the sweep: barriers that give up, and fault injection to test that."""

from __future__ import annotations

import os
import signal
import sys
import time
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from experiments.config import PointSpec


def guarded_barrier(comm: Any, timeout_s: float, what: str) -> None:
    """A barrier that gives up after ``timeout_s`` seconds: a hung or dead rank must not hang the sweep.
    On time-out the step is aborted (MPI_Abort), naming where it stuck."""
    req = comm.Ibarrier()
    deadline = time.monotonic() + timeout_s
    while not req.Test():
        if time.monotonic() > deadline:
            print(f"ddlio kernel: rank {comm.rank} waited {timeout_s:.0f} s for the other ranks at {what}: "
                  "a rank hung or died; aborting the step", file=sys.stderr, flush=True)
            comm.Abort(4)
        time.sleep(0.001)


def fault_of(point: PointSpec, rank: int) -> str | None:
    """Fault injection for testing failure handling: ``DDLIO_FAULT=crash@RANK[:FORMAT]``, ``kill@RANK[:FORMAT]``
    or ``hang@RANK[:FORMAT]`` makes that rank crash (exit 9), be killed by SIGKILL, or hang in its first epoch."""
    spec = os.environ.get("DDLIO_FAULT", "")
    if not spec:
        return None
    kind, _, where = spec.partition("@")
    r, _, fmt = where.partition(":")
    if int(r or -1) == rank and (not fmt or fmt == point.format.name):
        return kind
    return None


def inject(fault: str, rank: int) -> None:
    """Do the fault :func:`fault_of` named, on this rank (in its first epoch)."""
    if fault == "crash":
        print(f"ddlio kernel: rank {rank} crashing on purpose (DDLIO_FAULT)", file=sys.stderr, flush=True)
        os._exit(9)
    if fault == "kill":
        os.kill(os.getpid(), signal.SIGKILL)
    while fault == "hang":
        time.sleep(1)
