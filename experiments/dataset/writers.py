"""A one-rank generation written by several processes: as many writers as this process may use cores
(``os.sched_getaffinity``), forked from the one process that has the plan, each writing its share, the same bytes as
one writer (:func:`generate_by_writers`).

- **Several files**: writer r of W writes files r, r+W, r+2W, ... and checks them, as rank r of a W-rank generation
  step does (:func:`~experiments.dataset.generate.generate_and_check`: the same split, the same code).
- **One file** (one writer per two cores, see :func:`writer_count`) of a format whose records lie at offsets known
  before writing (``bin``, ``npy``, ``tfrecord``, contiguous ``hdf5``, ``npz``:
  :class:`~experiments.formats.ranges.RangedFormat`): the file is created (header or the library's layout, final
  size) once, then writer r writes its contiguous run of the file's generation groups
  at their offsets (``pwritev``), each writing behind its own range (:class:`~lustre.io.RangeWriteBehind`); the
  file is finished (fsync, index, NPZ's CRC-32) once, after every writer is done, then checked. Chunked HDF5 files,
  images and Parquet are written by one process (their libraries lay the file out as they write), and so is a file
  the storage stages elsewhere (an object store).

A writer that fails (an exception, a signal) fails the generation with one error naming it and its files; the
other writers are killed at once, and nothing is verified: the dataset gets no manifest. Writers die with the
process that forked them (``PR_SET_PDEATHSIG``), so a killed generation leaves no writer behind.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import pickle
import selectors
import signal
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, NoReturn

from ddlio.errors import DatasetError
from ddlio.lazy import lazy_import
from experiments.dataset.generate import (
    environment,
    generate_and_check,
    write_verification,
    writes_in_place,
)
from experiments.dataset.plan import DatasetPlan, even_split
from experiments.dataset.verify import check_files, plan_sizes
from experiments.formats import get_format
from experiments.formats.base import GENERATOR_THREADS, generator_threads
from lustre.io import RangeWriteBehind
from lustre.registry import io_for

np = lazy_import("numpy", globals(), "np")  # numpy on first use: see ddlio/lazy.py

_PR_SET_PDEATHSIG = 1


def usable_cores() -> int:
    """The cores this process may run on (its CPU affinity; ``os.cpu_count()`` where that is unknown), at least 1."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


def shares_file(plan: DatasetPlan) -> bool:
    """Whether several processes may write one file of the plan's format: records at known offsets, written in
    place by the storage (not staged elsewhere and uploaded: :meth:`lustre.io.StorageIO.staged`)."""
    fmt = get_format(plan.format, **plan.format_options)
    return writes_in_place(fmt, io_for(plan.directory))


def writer_count(plan: DatasetPlan, sizes: np.ndarray, cores: int | None = None) -> int:
    """How many processes write the plan's files: one per usable core (``cores``, default :func:`usable_cores`),
    at most one per file; for one file that several may write (:func:`shares_file`), one per two cores (each
    with a thread that generates ahead of it), at most one per generation group
    (:meth:`~experiments.formats.base.FilePayload.groups`); at least 1.

    One file's writers take turns at its inode's lock (a buffered write holds it on ext4 and XFS): on 2 cores one
    writer with a generating thread wrote 256 MiB faster than two writers (bin 1350 against 1226 MiB/s, npy 1046
    against 953; 0.64-0.74 against 0.80-0.87 CPU-s/GiB), its write-behind keeping three ranges in flight
    (:data:`lustre.io.WRITE_BEHIND_DEPTH`)."""
    cores = usable_cores() if cores is None else max(1, cores)
    if plan.num_files > 1:
        return min(cores, plan.num_files)
    if plan.num_files == 1 and cores // 2 > 1 and shares_file(plan):
        return min(cores // 2, len(plan.file_payload(0, sizes).groups()))
    return 1


def generate_by_writers(plan_path: str | os.PathLike, env: Mapping[str, str] | None = None,
                        writers: int | None = None) -> list[str]:
    """Write every file of the plan (with ``env`` set), by ``writers`` processes forked from this one (default:
    :func:`writer_count`; one: in this process, :func:`~experiments.dataset.generate.generate_here`'s way), check
    them and write the verification. Returns the files' names; DatasetError naming the writer that failed."""
    plan = DatasetPlan.from_dict(json.loads(Path(plan_path).read_text()))
    with environment(env or {}):
        sizes = plan_sizes(plan)
        cores = usable_cores()
        w = writer_count(plan, sizes, cores) if writers is None else max(1, writers)
        if plan.num_files > 1:
            w = min(w, plan.num_files)
        elif w > 1 and not shares_file(plan):  # one file only one process may write
            w = 1
        # the cores the writers leave: threads generating ahead of each (none where the writers fill them all)
        with generator_threads(min(GENERATOR_THREADS, max(0, cores - w) // w)):
            parts = _write(plan, sizes, w)
        write_verification(plan, sizes, parts)
        return [plan.file_name(f) for f in range(plan.num_files)]


def _write(plan: DatasetPlan, sizes: np.ndarray, w: int) -> list[dict[str, Any]]:
    """The plan's files written by ``w`` writers (:func:`generate_by_writers`); every writer's part of the
    verification."""
    if w > 1 and plan.num_files > 1:
        return run_writers(w, lambda r: generate_and_check(plan, r, w, sizes),
                           lambda r: ", ".join(plan.file_name(f) for f in range(r, plan.num_files, w)))
    if w > 1:  # one file that several may write (generate_by_writers says so)
        return [write_shared(plan, sizes, w)]
    return [generate_and_check(plan, 0, 1, sizes)]


def generate_in_one_rank(comm: Any, plan_path: str | os.PathLike) -> None:
    """A one-rank step's generation (``comm`` of one rank: a one-rank point's kernel, started ahead): the plan's
    files by :func:`writer_count` processes forked from the rank (:func:`generate_by_writers`), as
    :func:`~experiments.dataset.generate_in` would write them with one, the same bytes. A failure prints why and
    aborts the step, as ``generate_in``'s does."""
    try:
        generate_by_writers(plan_path)
    except Exception as e:  # the step must end, saying why
        print(f"rank {comm.rank}: dataset generation failed: {type(e).__name__}: {e}", file=sys.stderr, flush=True)
        comm.Abort(1)


def write_shared(plan: DatasetPlan, sizes: np.ndarray, writers: int) -> dict[str, Any]:
    """The plan's one file written by ``writers`` processes (each a contiguous run of its groups), then fsync'd,
    indexed and checked once: this process's part of the verification
    (:func:`~experiments.dataset.verify.check_files`)."""
    fmt = get_format(plan.format, **plan.format_options)
    path = plan.file_path(0)
    payload = plan.file_payload(0, sizes)
    cuts = even_split(len(payload.groups()), writers).tolist()
    starts = fmt.begin(path, payload, sized=True)

    def share(r: int) -> str:
        lo, hi = cuts[r], cuts[r + 1]
        return f"{plan.file_name(0)}, groups {lo}..{hi - 1} of {cuts[-1]}"

    def write(r: int) -> Any:
        return fmt.write_groups(path, payload, starts, slice(cuts[r], cuts[r + 1]), RangeWriteBehind())

    done = run_writers(writers, write, share)
    fmt.finish(path, payload, starts - starts[0], done)
    return check_files(plan, sizes, [0])


def run_writers(n: int, work: Callable[[int], Any], share: Callable[[int], str]) -> list[Any]:
    """Fork ``n`` writers, writer r running ``work(r)``, and return what each returned (pickled back through a
    pipe), in writer order. A writer that fails: DatasetError naming it (``share(r)``: its files) and why, the
    other writers killed and reaped first."""
    running: dict[int, tuple[int, int, bytearray]] = {}  # pipe's read end -> (writer, pid, what it sent)
    results: list[Any] = [None] * n
    sel = selectors.DefaultSelector()
    me = os.getpid()
    for stream in (sys.stdout, sys.stderr):  # a writer inherits what is buffered: it would print it once more
        with contextlib.suppress(Exception):
            stream.flush()
    try:
        for r in range(n):
            rfd, wfd = os.pipe()
            pid = os.fork()
            if pid == 0:  # the writer: os._exit on every path
                for fd in (rfd, *running):
                    os.close(fd)
                _writer(work, r, wfd, me)
            os.close(wfd)
            running[rfd] = (r, pid, bytearray())
            sel.register(rfd, selectors.EVENT_READ)
        while running:
            for key, _ in sel.select():
                r, pid, got = running[key.fd]
                chunk = os.read(key.fd, 1 << 20)
                if chunk:
                    got += chunk
                    continue
                sel.unregister(key.fd)
                os.close(key.fd)
                del running[key.fd]
                _, status = os.waitpid(pid, 0)
                ok, value = _outcome(status, bytes(got))
                if not ok:
                    raise DatasetError(f"generation writer {r} of {n} ({share(r)}) failed: {value}")
                results[r] = value
        return results
    finally:  # a writer failed, or this process was interrupted: no writer is left running
        for fd, (_, pid, _) in running.items():
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
            with contextlib.suppress(ChildProcessError, OSError):
                os.waitpid(pid, 0)
            os.close(fd)
        sel.close()


def _outcome(status: int, sent: bytes) -> tuple[bool, Any]:
    """(whether the writer succeeded, what it returned or why it failed) from its exit status and what it sent."""
    try:
        ok, value = pickle.loads(sent) if sent else (False, None)
    except Exception as e:  # a writer killed while it sent
        ok, value = False, f"its answer is unreadable ({type(e).__name__})"
    if os.WIFSIGNALED(status):
        return False, f"killed by {signal.Signals(os.WTERMSIG(status)).name}"
    if not ok or status != 0:
        return False, value or f"it ended with status {os.waitstatus_to_exitcode(status)}"
    return True, value


def _writer(work: Callable[[int], Any], r: int, wfd: int, parent: int) -> NoReturn:
    """A forked writer: die with its parent (pid ``parent``), run ``work(r)``, send back what it returned (or why it
    failed), end."""
    code = 0
    try:
        with contextlib.suppress(OSError, AttributeError):  # Linux: killed when the process that forked it dies
            ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
        if os.getppid() != parent:  # it died before the line above
            os._exit(1)
        said = pickle.dumps((True, work(r)))
    except BaseException as e:  # everything, Ctrl-C included, goes back as text
        code, said = 1, pickle.dumps((False, f"{type(e).__name__}: {e}"))
    try:
        view = memoryview(said)
        while view:
            view = view[os.write(wfd, view) :]
    finally:
        for stream in (sys.stdout, sys.stderr):  # what the writer printed: os._exit flushes nothing
            with contextlib.suppress(Exception):
                stream.flush()
        os._exit(code)
