"""``reader=native``: ddlio's own reader. The training loop reads each batch through the kernel's lanes (one read
per sample into a preallocated buffer, the C loop of ``_readrun.c`` where it applies), or ``workload.read_threads``
reader threads each bound to its lane keep up to ``workload.prefetch`` batches in flight ahead of the loop."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, ClassVar

import numpy as np

from experiments.config import PointSpec
from experiments.kernel.guards import inject
from experiments.kernel.lanes import EpochArrays, busy_ns
from experiments.kernel.loaders.base import EpochRecord, Loader, ReadContext


class NativeLoader(Loader):
    """ddlio's own reader: the training loop reads, or reader threads read ahead of it."""

    name: ClassVar[str] = "native"

    def __init__(self, ctx: ReadContext) -> None:
        super().__init__(ctx)
        w = ctx.point.workload
        self.batch, self.threads, self.prefetch = int(w.batch_size), int(w.read_threads), int(w.prefetch)
        self.keeps_starts = bool(self.threads)
        self.pool: ThreadPoolExecutor | None = None
        self.local: Any = None
        if self.threads:
            self.local = local = threading.local()
            counter = iter(range(self.threads))
            lock = threading.Lock()

            def _bind() -> None:
                with lock:
                    local.lane = ctx.lanes[next(counter)]

            self.pool = ThreadPoolExecutor(max_workers=self.threads, thread_name_prefix="ddlio-reader",
                                           initializer=_bind)

    @classmethod
    def lanes_for(cls, point: PointSpec) -> int:
        """One lane per reader thread (one for the loop itself without them)."""
        return max(1, int(point.workload.read_threads))

    def run_epoch(self, epoch: int, ids: np.ndarray, ep: EpochArrays, compute: list[float],
                  step: Callable[[float], float]) -> EpochRecord:
        """The timed loop: every batch fetched (by the loop, or from the reader threads), then its compute; the
        progress guard sees every read and batch, and the fault hooks fire in the first epoch."""
        perf = time.perf_counter_ns
        n, nb = len(ids), -(-len(ids) // self.batch)
        nbytes = wait_ns = 0
        compute_s = 0.0
        fetch = self._fetcher(ep, n, nb)
        ctx = self.ctx
        fault, watch = ctx.fault if epoch == 0 else None, ctx.watch
        watch.start_epoch(epoch, ep, ctx.lanes, window=(self.prefetch + 2) * self.batch)
        if fault == "hang":
            inject(fault, ctx.rank)
        for b in range(nb):
            t = perf()
            nbytes += fetch(b)
            wait_ns += perf() - t
            if fault:
                inject(fault, ctx.rank)
            if compute[b] > 0:
                watch.computing(compute[b])
                compute_s += step(compute[b])
            watch.batch_done()
        lat = np.asarray(ep.lat, dtype=np.int64)
        if self.threads:  # overlapping reads of the reader threads count once, as Darshan counts them
            read_s = busy_ns(np.asarray(ep.start, dtype=np.int64), lat) / 1e9
        else:
            read_s = float(lat.sum()) / 1e9
        return EpochRecord(bytes_read=nbytes, samples=n, wait_ns=wait_ns, compute_s=compute_s, lat_ns=lat,
                           read_s=read_s, overlapped=bool(self.threads))

    def _fetcher(self, ep: EpochArrays, n: int, nb: int) -> Callable[[int], int]:
        """``fetch(b)``: batch b's reads, returning their bytes; done by the training loop itself, or by reader
        threads that keep up to ``prefetch`` batches in flight ahead of the loop."""
        batch, lanes, pool, local = self.batch, self.ctx.lanes, self.pool, self.local
        if pool is None:
            def fetch(b: int) -> int:
                return lanes[0].read_range(b * batch, min((b + 1) * batch, n), ep)

            return fetch

        def task(b: int) -> int:
            return local.lane.read_range(b * batch, min((b + 1) * batch, n), ep)

        futures: dict[int, Future[int]] = {}

        def fetch_ahead(b: int) -> int:
            for ahead in range(b, min(nb, b + 1 + self.prefetch)):  # b, and `prefetch` batches ahead of it
                if ahead not in futures:
                    futures[ahead] = pool.submit(task, ahead)
            return futures.pop(b).result()

        return fetch_ahead

    def close(self) -> None:
        """Stop the reader threads."""
        if self.pool is not None:
            self.pool.shutdown()
