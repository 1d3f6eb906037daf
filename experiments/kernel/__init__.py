"""The MPI reader kernel: ``mpiexec -n RANKS python -m experiments.kernel SPEC.json``.

Each rank reads its share of the dataset's samples in batches, for every epoch, the way a data loader feeds a
training step: open files as they are first needed, one read per sample into a preallocated buffer, then the
batch's emulated compute (``workload.compute``: a sleep, or CPU work; see :mod:`experiments.kernel.compute`). Every
read and metadata call is timed (``time.perf_counter_ns``); the figures are defined in :mod:`ddlio.metrics`.

Before each epoch, one rank per node evicts the dataset's pages (``cache=cold``) and measures residency with
mincore before and after, so every epoch is labelled ``cold`` (eviction verified), ``warm`` (data read once before
the first epoch and left cached) or ``unknown`` (eviction could not be verified). Rank 0 checks that the bytes the
reads returned equal the plan exactly, and writes the result file atomically.

The parts: :mod:`~experiments.kernel.sampling` (who reads what, in which order), :mod:`~experiments.kernel.lanes`
(the read loop), :mod:`~experiments.kernel.cachepolicy` (the cache policies, on :mod:`~experiments.kernel.cache`),
:mod:`~experiments.kernel.guards` (barriers that give up, fault injection), :mod:`~experiments.kernel.kernel` (one
rank's run, and rank 0's plan check and record), :mod:`~experiments.kernel.main`
(``run``, ``main``); the loaders, one module each behind one protocol (:mod:`~experiments.kernel.loaders`:
native over the lanes, tf over :mod:`~experiments.kernel.tfdata`, torch over :mod:`~experiments.kernel.torchdata`,
or a plug-in's); :mod:`~experiments.kernel.compute`
(the emulated compute), :mod:`~experiments.kernel.posix` (the file-system layer).

The set-up and entry (``Kernel``, ``run``, ``main``) are not re-exported here: experiments.config imports
:mod:`experiments.kernel.compute` today, and the kernel's set-up imports experiments.config.
"""

from __future__ import annotations

import importlib
from typing import Any

#: the re-exports, each imported from its module on first use (PEP 562): the driver imports this package for
#: flush_path, and the read loop's modules (numpy, the C loop) are the ranks' to load
_EXPORTS = {
    "COLD_TOLERANCE": "cachepolicy", "flush_path": "cachepolicy", "guarded_barrier": "guards",
    "TRACE_COLUMNS": "lanes", "EpochArrays": "lanes", "Lane": "lanes", "busy_ns": "lanes",
    "compute_times": "sampling", "epoch_ids": "sampling", "share_sizes": "sampling",
}


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value


__all__ = sorted(_EXPORTS, key=str.casefold)
