"""What each rank reads and computes, per epoch: its share of the samples, their order, and the emulated compute
time of every batch (seconds), all deterministic in the point's seed."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from experiments.dataset import DatasetPlan, even_split

if TYPE_CHECKING:
    from experiments.config import PointSpec


def share_sizes(plan: DatasetPlan, point: PointSpec, ranks: int) -> list[int]:
    """Samples each rank is given per epoch, before ``drop_last`` (the same every epoch)."""
    if point.layout.access == "fpp":
        per, starts = plan.num_files // ranks, plan.file_starts
        return [int(starts[(r + 1) * per] - starts[r * per]) for r in range(ranks)]
    if point.workload.shuffle == "sample":
        return [plan.samples // ranks + (r < plan.samples % ranks) for r in range(ranks)]
    return np.diff(even_split(plan.samples, ranks)).tolist()


def drop_last_keep(plan: DatasetPlan, point: PointSpec, ranks: int) -> int | None:
    """With ``drop_last``, the samples every rank reads per epoch (the largest multiple of batch_size that all
    ranks have); None without."""
    if not point.workload.drop_last:
        return None
    batch = point.workload.batch_size
    return min(share_sizes(plan, point, ranks)) // batch * batch


def epoch_ids(plan: DatasetPlan, point: PointSpec, epoch: int, ranks: int, rank: int) -> np.ndarray:
    """Global sample ids that ``rank`` reads in ``epoch``, in reading order.

    - ``shared``: one order of all samples per epoch, identical on every rank, split among the ranks:
      ``shuffle=none`` keeps id order and gives each rank a contiguous block; ``file`` permutes the order of the
      files (samples in a file stay in order) and splits into blocks; ``sample`` is a seeded global permutation
      of which rank r takes every ranks-th id (as PyTorch's DistributedSampler does).
    - ``fpp``: each rank reads only its own files (num_files / ranks consecutive files); ``file`` permutes their
      order, ``sample`` permutes its samples.

    The permutation is seeded by (seed, epoch): different every epoch, the same on every rank and every rerun.
    Without ``drop_last`` every sample is read exactly once per epoch in total. With it, every rank reads the
    same number of whole batches (the largest multiple of batch_size that all ranks have) and the rest is
    dropped (the dropped samples change from epoch to epoch when shuffling).
    """
    shuffle, starts = point.workload.shuffle, plan.file_starts

    def files_ids(files: np.ndarray) -> np.ndarray:
        return np.concatenate([np.arange(starts[f], starts[f + 1], dtype=np.int64) for f in files])

    if point.layout.access == "fpp":
        rng = np.random.Generator(np.random.PCG64([point.seed, 0x5EED, epoch, rank]))
        per = plan.num_files // ranks
        files = np.arange(rank * per, (rank + 1) * per)
        ids = files_ids(rng.permutation(files) if shuffle == "file" else files)
        if shuffle == "sample":
            ids = rng.permutation(ids)
    else:
        rng = np.random.Generator(np.random.PCG64([point.seed, 0x5EED, epoch]))
        if shuffle == "sample":
            ids = rng.permutation(plan.samples)[rank::ranks]
        else:
            order = files_ids(rng.permutation(plan.num_files)) if shuffle == "file" else np.arange(plan.samples)
            bounds = even_split(plan.samples, ranks)
            ids = order[bounds[rank] : bounds[rank + 1]]
    keep = drop_last_keep(plan, point, ranks)
    if keep is not None:
        ids = ids[:keep]
    return np.ascontiguousarray(ids, dtype=np.int64)


def compute_times(point: PointSpec, epoch: int, rank: int, batches: int) -> np.ndarray:
    """Emulated compute per batch, seconds: constant, or normal(mean, stdev) clipped at 0, seeded per
    (seed, epoch, rank)."""
    mean, stdev = float(point.workload.compute_time), float(point.workload.compute_time_stdev)
    if stdev <= 0:
        return np.full(batches, mean)
    rng = np.random.Generator(np.random.PCG64([point.seed, 0xC0, epoch, rank]))
    return np.clip(rng.normal(mean, stdev, batches), 0.0, None)
