"""The start-up handshake between an MPI step's ranks and the watchdog that launched it.

The launcher (``experiments.run.mpirun.run_step``) names a file in :data:`STARTED_ENV`; every MPI program ddlio
runs as a step (the dataset generator, the reader kernel) calls :func:`announce_started` right after MPI start-up,
and rank 0 creates that file once all ranks are through. A step whose file does not appear in time is killed as
hung in start-up. The handshake lives on the floor because both sides use it: the runner and the programs it runs.

A step may also be started *ahead* of what it needs (the job starts its kernel step's ranks while the dataset is
written: their start-up, ~0.3 s of interpreter, numpy and MPI here, then costs no wall time): the launcher names
a gate file in :data:`GATE_ENV`, and :func:`wait_for_gate` holds every rank, asleep (not in a blocking MPI call,
which would spin a core), until the launcher creates it (or another file of the phases beside it,
:func:`phase_path`).
"""

from __future__ import annotations

import contextlib
import os
import socket
import sys
import time

from ddlio.errors import KernelError

#: the environment variable that names the file rank 0 creates once every rank is through MPI start-up
STARTED_ENV = "DDLIO_STEP_STARTED"
#: the file a rank that aborts the step also writes its last words to (MPI_Abort can end the launcher before it has
#: passed on what the rank printed)
LAST_WORDS_ENV = "DDLIO_STEP_LAST_WORDS"
#: the file whose creation lets a step started ahead go on (:func:`wait_for_gate`)
GATE_ENV = "DDLIO_STEP_GATE"
#: until when (seconds since the epoch) the ranks wait for the gate: the point's time limit
GATE_UNTIL_ENV = "DDLIO_STEP_GATE_UNTIL"
#: ``host|pid namespace|pid`` of the process that will open the gate: ranks that see it (on that host, in that
#: pid namespace) stop waiting when it is gone
GATE_OWNER_ENV = "DDLIO_STEP_GATE_OWNER"
#: seconds between two looks at the gate: 5 ms for the first 2 s (a small point's dataset), then 50 ms
GATE_POLL_S = (0.005, 2.0, 0.05)


def announce_started(comm: object) -> None:
    """In an MPI step's ranks, right after MPI start-up: wait until every rank is through it (a barrier), then
    rank 0 creates the file :data:`STARTED_ENV` names (it holds the time, in seconds since the epoch), which tells
    the launcher's watchdog that the step started. Without the variable (a reproducer run by hand) only the
    barrier."""
    comm.Barrier()  # type: ignore[attr-defined]
    path = os.environ.get(STARTED_ENV)
    if path and comm.rank == 0:  # type: ignore[attr-defined]
        with open(path, "w") as f:
            f.write(f"{time.time():.3f}\n")


def last_words(text: str) -> None:
    """What a rank says before it aborts the step: printed to its stderr, and appended to the file
    :data:`LAST_WORDS_ENV` names, which the launcher reads when the step's own output lost it."""
    path = os.environ.get(LAST_WORDS_ENV)
    if path:
        with contextlib.suppress(OSError), open(path, "a") as f:
            f.write(text.rstrip("\n") + "\n")
    with contextlib.suppress(OSError, ValueError):
        print(text, file=sys.stderr, flush=True)


def gate_env(path: str | os.PathLike, until: float) -> dict[str, str]:
    """The environment of a step started ahead: its ranks wait in :func:`wait_for_gate` until ``path`` exists,
    at most until ``until`` (seconds since the epoch), and no longer than this process lives."""
    return {GATE_ENV: os.fspath(path), GATE_UNTIL_ENV: f"{until:.3f}",
            GATE_OWNER_ENV: f"{socket.gethostname()}|{_pid_namespace()}|{os.getpid()}"}


def _pid_namespace() -> str:
    try:
        return os.readlink("/proc/self/ns/pid")
    except OSError:  # no /proc: the owner's pid cannot be checked
        return "?"


def _owner(text: str) -> int | None:
    """The pid of the gate's owner when this process sees the same pids (same host, same pid namespace)."""
    host, ns, pid = [*text.split("|"), "", "", ""][:3]
    if not pid.isdigit() or host != socket.gethostname() or ns == "?" or ns != _pid_namespace():
        return None
    return int(pid)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's process of that pid: ours is gone
        return False
    return True


def phase_path(gate: str | os.PathLike, phase: str) -> str:
    """The file of another phase beside a step's gate: ``kernel.go`` -> ``kernel.<phase>`` (``gen``: a dataset to
    generate first; ``generated``: rank 0's word that it is written and checked)."""
    base, _ = os.path.splitext(os.fspath(gate))
    return f"{base}.{phase}"


def wait_for_gate(comm: object, also: tuple[str, ...] = ()) -> tuple[float, str | None]:
    """In a step's ranks, after :func:`announce_started`: without :data:`GATE_ENV`, return at once; with it, wait
    until its file (or one of the files ``also`` names) exists. Rank 0 looks (every 5 ms for 2 s, then every 50
    ms); the others wait in a non-blocking barrier with sleeps, so no rank spins a core and only one looks at the
    file system. Returns (seconds waited, the file that appeared: the gate's path or one of ``also``; None
    without a gate). KernelError on every rank when the point's time limit passes first, or the process that was
    to open it (seen from rank 0's host) has ended."""
    path = os.environ.get(GATE_ENV)
    if not path:
        return 0.0, None
    t0 = time.monotonic()
    found: str | None = None
    problem = ""
    if comm.rank == 0:  # type: ignore[attr-defined]
        try:
            found = _look(path, also)
        except KernelError as e:
            problem = str(e)
    req = comm.Ibarrier()  # type: ignore[attr-defined]
    while not req.Test():
        time.sleep(GATE_POLL_S[0] if time.monotonic() - t0 < GATE_POLL_S[1] else GATE_POLL_S[2])
    found, problem = comm.bcast((found, problem), root=0)  # type: ignore[attr-defined]
    if problem:
        raise KernelError(problem)
    return time.monotonic() - t0, found


def _look(path: str, also: tuple[str, ...]) -> str:
    """Rank 0's wait for the gate (or a file of ``also``): which appeared first."""
    until = float(os.environ.get(GATE_UNTIL_ENV) or "inf")
    owner = _owner(os.environ.get(GATE_OWNER_ENV, ""))
    fast, fast_for, slow = GATE_POLL_S
    t0 = time.monotonic()
    while True:
        for candidate in (*also, path):
            if os.path.exists(candidate):
                return candidate
        if time.time() > until:
            raise KernelError(f"the step was started ahead and its gate ({path}) did not open within the point's "
                              "time limit")
        if owner is not None and not _alive(owner):
            raise KernelError(f"the step was started ahead and the job process {owner} that was to open its gate "
                              f"({path}) has ended")
        time.sleep(fast if time.monotonic() - t0 < fast_for else slow)
