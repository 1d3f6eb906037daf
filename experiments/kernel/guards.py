"""A hung or dead rank must not hang the sweep: barriers that give up, a progress watch inside the epoch, and fault
injection to test them."""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ddlio.mpistep import last_words

if TYPE_CHECKING:
    from experiments.config import PointSpec


def guarded_barrier(comm: Any, timeout_s: float, what: str) -> None:
    """A barrier that gives up after ``timeout_s`` seconds: a hung or dead rank must not hang the sweep.
    On time-out the step is aborted (MPI_Abort), naming where it stuck."""
    req = comm.Ibarrier()
    deadline = time.monotonic() + timeout_s
    while not req.Test():
        if time.monotonic() > deadline:
            last_words(f"ddlio kernel: rank {comm.rank} waited {timeout_s:.0f} s for the other ranks at {what}: "
                       "a rank hung or died; aborting the step")
            comm.Abort(4)
        time.sleep(0.001)


def fault_of(point: PointSpec, rank: int) -> str | None:
    """Fault injection for testing failure handling: ``DDLIO_FAULT=crash@RANK[:FORMAT]``, ``kill@RANK[:FORMAT]``
    or ``hang@RANK[:FORMAT]`` makes that rank crash (exit 9), be killed by SIGKILL, or hang in its first epoch.
    Every reader takes it: native and tf.data in the training loop, PyTorch's DataLoader in the process that reads
    (each worker, or the rank itself with no workers: :meth:`experiments.kernel.torchset.FileSamples.fault`)."""
    spec = os.environ.get("DDLIO_FAULT", "")
    if not spec:
        return None
    kind, _, where = spec.partition("@")
    r, _, fmt = where.partition(":")
    if int(r or -1) == rank and (not fmt or fmt == point.format.name):
        return kind
    return None


def inject(fault: str, rank: int) -> None:
    """Do the fault :func:`fault_of` named, on this rank (in its first epoch: ``hang`` before its first read,
    the others after its first batch)."""
    if fault == "crash":
        print(f"ddlio kernel: rank {rank} crashing on purpose (DDLIO_FAULT)", file=sys.stderr, flush=True)
        os._exit(9)
    if fault == "kill":
        os.kill(os.getpid(), signal.SIGKILL)
    while fault == "hang":
        time.sleep(1)


class ProgressWatch:
    """A rank that returns no read and finishes no batch for ``timeout_s`` seconds has hung inside the epoch: a
    watchdog thread then names the rank, the epoch, the file and the offset it was reading, and aborts the step
    (MPI_Abort), so the point fails at once instead of at ``cluster.timeout_min``. The timed loop tells it only
    of the epoch's start, each batch's compute (time allowed on top) and each finished batch; reads are seen as
    the latencies the loop fills in (``lat[k]`` stays 0 until read ``k`` has returned), counted from the first
    read not yet returned over a window as long as the reads that can be in flight at once, so a tick costs the
    reads of the window, not of the epoch."""

    def __init__(self, comm: Any, timeout_s: float, paths: list[str], tick_s: float | None = None) -> None:
        self.comm, self.timeout_s, self.paths = comm, float(timeout_s), paths
        self.tick_s = tick_s if tick_s is not None else min(1.0, self.timeout_s / 10)
        self.epoch: int | None = None  # None: not in a timed loop (barriers have their own guard)
        self.ep: Any = None
        self.lanes: list[Any] = []
        self.batches = 0
        self.window = 0
        self._first: tuple[Any, int] = (None, 0)  # (the epoch's arrays, a read every read before which returned)
        #: what the loader says it was waiting for when it stalled (None: the first read not returned, from ``ep``)
        self.where: Callable[[], str] | None = None
        self.last = time.monotonic()
        self.allowed_until = 0.0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, name="ddlio-progress-watch", daemon=True)
        self._thread.start()

    def start_epoch(self, epoch: int, ep: Any, lanes: list[Any], window: int | None = None,
                    where: Callable[[], str] | None = None) -> None:
        """The timed loop of ``epoch`` begins, over the per-sample arrays ``ep`` read by ``lanes``; ``window``:
        how many reads past the first one not returned can have returned (the batches in flight, in samples;
        default the whole epoch). A loader whose reads happen out of the kernel's sight (tf.data's threads, a
        DataLoader's workers) leaves ``ep`` unfilled, reports each batch it receives, and gives ``where``: what
        it was waiting for, said when it stalls."""
        self.ep, self.lanes, self.batches, self.where = ep, lanes, 0, where
        self.window = len(ep.lat) if window is None else max(1, int(window))
        self.last, self.allowed_until = time.monotonic(), 0.0
        self.epoch = epoch

    def computing(self, seconds: float) -> None:
        """The loop computes for ``seconds`` (emulated): that long is allowed on top of the time-out."""
        self.allowed_until = time.monotonic() + seconds

    def batch_done(self) -> None:
        self.batches += 1
        self.last = time.monotonic()

    def end_epoch(self) -> None:
        self.epoch = None

    def stop(self) -> None:
        self._stop.set()

    def _watch(self) -> None:
        seen = (-1, -1, -1)
        while not self._stop.wait(self.tick_s):
            epoch, ep = self.epoch, self.ep
            if epoch is None or ep is None:
                continue
            now = (epoch, self.batches, self.returned(ep))
            if now != seen:
                seen, self.last = now, max(self.last, time.monotonic())
                continue
            if time.monotonic() > max(self.last, self.allowed_until) + self.timeout_s and self.epoch == epoch:
                last_words(f"ddlio kernel: {self.stall_message(epoch, ep)}; aborting the step")
                self.comm.Abort(5)

    def returned(self, ep: Any) -> int:
        """How many reads of the epoch's arrays ``ep`` have returned (``lat[k] != 0``), counted from the first one
        that has not over :attr:`window` reads (none beyond can have returned)."""
        lat = ep.lat
        seen, first = self._first
        try:
            first = lat.index(0, first if seen is ep else 0)
        except ValueError:
            first = len(lat)
        self._first = (ep, first)
        return first + sum(1 for x in lat[first:first + self.window] if x)

    def stall_message(self, epoch: int, ep: Any) -> str:
        """What the rank was doing when it stalled: the first read of the epoch that has not returned."""
        head = (f"rank {self.comm.rank} made no progress for {self.timeout_s:g} s in epoch {epoch} (no read "
                f"returned and no batch finished; cluster.hang_timeout_s)")
        if self.where is not None:
            return f"{head}: {self.where()}"
        try:
            k = ep.lat.index(0)
        except ValueError:
            return f"{head}: every read of the epoch had returned; it stalled after them"
        f, i = ep.fo[k], ep.lo[k]
        return f"{head}: it was reading {self.paths[f]} at {self._offset(f, i)} (record {i} of that file)"

    def _offset(self, f: int, i: int) -> str:
        """The record's file offset, asked of a lane's open reader (or of the file opened anew), in a helper
        thread given two seconds: a reader stuck inside its library may hold that library's lock."""
        box: list[Any] = []

        def ask() -> None:
            for lane in self.lanes:
                r = lane.readers.get(f)
                if r is not None:
                    box.append(r.record_offset(i))
                    return
            if self.lanes:
                with self.lanes[0].fmt.open(self.paths[f]) as r:
                    box.append(r.record_offset(i))

        t = threading.Thread(target=ask, daemon=True)
        t.start()
        t.join(2.0)
        if box and isinstance(box[0], int) and box[0] >= 0:
            return f"offset {box[0]}"
        return "an offset its format's library decides (chunked HDF5)" if box else "an offset not known"
