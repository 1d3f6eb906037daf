"""``reader=tf``: the epoch read through TensorFlow's tf.data (:mod:`experiments.kernel.tfdata`: TFRecordDataset for
``tfrecord``, ``Dataset.from_generator`` over the kernel's lane 0 for every other format). tf.data overlaps its
reads with everything and hides them: latencies are per batch, the I/O time is the epoch's. TensorFlow is imported
when the loader is set up, only for ``reader=tf``."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, ClassVar

import numpy as np

from experiments.kernel import tfdata
from experiments.kernel.lanes import EpochArrays
from experiments.kernel.loaders.base import EpochRecord, Loader, ReadContext
from experiments.registry import LOADER_NEEDS, Needs


class TfLoader(Loader):
    """tf.data: ``batch(batch_size, drop_remainder=drop_last).prefetch(prefetch)`` over the point's files."""

    name: ClassVar[str] = "tf"
    needs: ClassVar[Needs | None] = LOADER_NEEDS["tf"]
    reads_per_sample: ClassVar[bool] = False
    primes_lanes: ClassVar[bool] = False  # tf.data's own first, empty iterator primes its runtime instead
    read_threads_are: ClassVar[str] = "TFRecordDataset's num_parallel_reads"

    def __init__(self, ctx: ReadContext) -> None:
        super().__init__(ctx)
        self.tf: Any = tfdata.import_tf()

    def run_epoch(self, epoch: int, ids: np.ndarray, ep: EpochArrays, compute: list[float],
                  step: Callable[[float], float]) -> EpochRecord:
        """One epoch through tf.data; bytes from ``rchar`` (TFRecordDataset) or from ddlio's read calls under the
        generator, which opens through lane 0 (its opens are the lanes'). The progress guard sees every batch tf.data
        delivers; the fault hooks fire in the loop (``hang`` before the first batch)."""
        ctx = self.ctx
        out = tfdata.run_epoch(self.tf, ctx.plan, ctx.point, epoch, ctx.ranks, ctx.rank, ids, ctx.lanes[0], compute,
                               step, watch=ctx.watch, ep=ep, fault=ctx.fault if epoch == 0 else None)
        return EpochRecord(bytes_read=out["bytes"], samples=out["samples"], wait_ns=out["wait_ns"],
                           compute_s=out["compute_s"], lat_ns=out["lat"], read_s=math.inf, overlapped=True,
                           planned=None if ctx.fmt.loads_whole else out["planned"])

    def checks_samples(self, keep: int | None) -> bool:
        """tf.data drops each rank's own remainder with ``drop_last``: the total is checked only without it."""
        return keep is None

    def slack_bytes(self) -> int:
        """TensorFlow's runtime reads a little of /proc and /sys while TFRecordDataset's iterator runs, which
        ``rchar`` cannot tell apart (:data:`~experiments.kernel.tfdata.TF_OTHER_READS_MAX` a rank)."""
        return tfdata.TF_OTHER_READS_MAX * self.ctx.ranks if self.ctx.plan.format == "tfrecord" else 0
