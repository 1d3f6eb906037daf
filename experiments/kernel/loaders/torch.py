"""``reader=torch``: the epoch read through PyTorch's DataLoader (:mod:`experiments.kernel.torchdata`: a map-style
Dataset over ddlio's files, DistributedSampler or ddlio's order, ``workload.read_threads`` worker *processes*).
The workers measure their own reads and bring the figures back with every batch. Each batch is then copied to the
accelerator where there is one (``workload.device``), as a training step does. PyTorch is imported when the
loader is set up, only for ``reader=torch``."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ClassVar

import numpy as np

from experiments.kernel.lanes import EpochArrays
from experiments.kernel.loaders.base import EpochRecord, Loader, ReadContext
from experiments.registry import LOADER_NEEDS, LOADER_OPTIONS, Needs


class TorchLoader(Loader):
    """PyTorch's ``DataLoader(batch_size, drop_last, num_workers, prefetch_factor, persistent_workers,
    pin_memory, multiprocessing_context)``, built once (persistent workers live across epochs)."""

    name: ClassVar[str] = "torch"
    needs: ClassVar[Needs | None] = LOADER_NEEDS["torch"]
    options: ClassVar[dict[str, Any]] = dict(LOADER_OPTIONS["torch"])
    reads_per_sample: ClassVar[bool] = False  # the workers read, in other processes
    read_threads_are: ClassVar[str] = "the DataLoader's num_workers, worker processes per rank"

    def __init__(self, ctx: ReadContext) -> None:
        super().__init__(ctx)
        from experiments.kernel import torchdata  # lazy: PyTorch

        self.loader = torchdata.TorchLoader(ctx.plan, ctx.point, ctx.ranks, ctx.rank, ctx.paths,
                                            int(ctx.record.max()), ctx.trace)

    def run_epoch(self, epoch: int, ids: np.ndarray, ep: EpochArrays, compute: list[float],
                  step: Callable[[float], float]) -> EpochRecord:
        """One epoch of the DataLoader; bytes, opens, read calls (binned by size as the rank's own) and the plan
        as the workers counted them, the samples the ones its sampler gave (checked there). The progress guard
        sees every batch delivered; the fault hooks fire in the processes that read (the workers)."""
        ctx = self.ctx
        out = self.loader.run_epoch(epoch, compute, step, watch=ctx.watch, ep=ep,
                                    fault=ctx.fault if epoch == 0 else None, rank=ctx.rank)
        log = ctx.trace
        return EpochRecord(bytes_read=out["bytes"], samples=out["samples"], wait_ns=out["wait_ns"],
                           compute_s=out["compute_s"], lat_ns=out["lat"], read_s=out["read_ns"] / 1e9,
                           overlapped=True, planned=out["planned"], opens=out["opens"], meta_ns=out["meta_ns"],
                           posix=(out["posix_reads"], out["posix_bytes"], out["os_read_bytes"]),
                           posix_sizes=out["size_hist"],
                           ids=np.asarray(out["ids"], dtype=np.int64), ep=self.loader.epoch_arrays(out),
                           open_events=self.loader.open_events(out) if log else [])

    def checks_samples(self, keep: int | None) -> bool:
        """The DataLoader's samples are checked against its sampler's ids, epoch by epoch."""
        return False

    def describe(self) -> dict[str, Any]:
        """The DataLoader's knobs and every worker's opens per epoch."""
        return {"torch": self.loader.info()}

    def close(self) -> None:
        """End the persistent workers and close this process's files."""
        self.loader.close()
