"""The protocol every loader follows (:class:`Loader`), what the kernel hands it (:class:`ReadContext`) and what an
epoch returns (:class:`EpochRecord`).

A loader is what reads the dataset every epoch the way a training job's input pipeline does: ddlio's own reader
(``reader=native``), tf.data (``tf``), PyTorch's DataLoader (``torch``), or a plug-in registered under the entry point
group ``ddlio.loaders`` (:data:`experiments.registry.LOADERS`). The kernel owns everything around the reads — the
page cache before each epoch, the barriers, the file-system counters around the epoch, the plan check, the record —
and asks the loader only to read an epoch and say what it read. No code outside a loader's own module branches on a
loader's name: what differs between loaders is a class attribute or a method here.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np

from experiments.config import PointSpec
from experiments.dataset import DatasetPlan
from experiments.kernel.lanes import EpochArrays, Lane
from experiments.registry import Needs
from lustre.io import StorageIO


@dataclass
class ReadContext:
    """What the kernel gives a loader when it sets it up: the point, its dataset's plan, this rank, the dataset's
    files, the lanes (ddlio's own read path: one preallocated buffer each, reused for every read) and the guards."""

    point: PointSpec
    plan: DatasetPlan
    #: ranks in the step and this rank's index
    ranks: int
    rank: int
    #: the dataset's files, by file index
    paths: list[str]
    #: ddlio's read path: :attr:`Loader.lanes_for` of them, lane 0 first
    lanes: list[Lane]
    #: bytes of every record (sample) as measured at generation, by sample id
    record: np.ndarray
    #: the format's reader factory (:class:`~experiments.formats.base.Format`)
    fmt: Any
    #: whether every read is logged to the rank's access log
    trace: bool
    #: the hang guard of the timed loop (:class:`~experiments.kernel.guards.ProgressWatch`)
    watch: Any
    #: the I/O seam of the dataset's storage (:class:`lustre.io.StorageIO`): a loader that reads other than through
    #: the lanes opens and reads through it
    io: StorageIO
    #: the fault this rank injects (``DDLIO_FAULT``; None: none)
    fault: str | None = None


@dataclass
class EpochRecord:
    """One rank's epoch as its loader read it. Bytes are what the read calls returned; times in ns unless named
    ``_s`` (seconds). ``None`` fields are the kernel's to fill from its own lanes (the loaders that read through
    them: native, and tf.data's generator for formats without a tf.data reader)."""

    #: bytes the reads returned
    bytes_read: int
    #: samples delivered to the training loop
    samples: int
    #: ns the training loop waited for its batches
    wait_ns: int
    #: seconds of emulated compute the loop ran
    compute_s: float
    #: latency of every read (ns), or of every batch where the loader hides its reads (tf.data)
    lat_ns: Any
    #: the I/O time of the reads (s), overlapping reads counted once as Darshan counts them; ``inf``: the loader
    #: overlaps its reads with everything and cannot see them, so the I/O time is the epoch's wall time
    read_s: float
    #: whether the reads overlap each other or the loop: the I/O time is then cut to the epoch's wall time
    overlapped: bool
    #: bytes the plan says the reads must return (None: the records of the ids read through the kernel's lanes)
    planned: int | None = None
    #: files opened and their open/close time (ns) (None: counted by the kernel's lanes)
    opens: int | None = None
    meta_ns: int | None = None
    #: (read calls, bytes, bytes from storage) counted in other processes (DataLoader workers); None: this one's
    posix: tuple[int, int, int] | None = None
    #: those read calls by size (:class:`~experiments.kernel.posix.SizeHistogram`), binned where they were made
    posix_sizes: Any = None
    #: the reads as they were made, for the access log (None: the kernel's ids and arrays)
    ids: np.ndarray | None = None
    ep: EpochArrays | None = None
    #: (start ns, duration ns, file, op) of opens made outside the kernel's lanes, for the access log
    open_events: list[tuple[int, int, int, str]] = field(default_factory=list)


class Loader:
    """A loader. Subclasses set :attr:`name` and implement :meth:`run_epoch`; everything else has a default that
    fits a loader reading through the kernel's lanes in the training loop's own thread."""

    #: the ``reader=`` name (its key in :data:`experiments.registry.LOADERS`)
    name: ClassVar[str] = ""
    #: what it needs beyond ddlio's dependencies, and the install hint (None: nothing); validation asks before a job
    needs: ClassVar[Needs | None] = None
    #: workload knobs only this loader takes, at their defaults: another loader refuses them away from these
    options: ClassVar[dict[str, Any]] = {}
    #: whether its reads are made one sample at a time in this process through the lanes, so that the file-system
    #: counters can be binned per read (False: the loader reads in batches, or in other processes)
    reads_per_sample: ClassVar[bool] = True
    #: whether the kernel primes the format's read path through lane 0 before anything is timed
    primes_lanes: ClassVar[bool] = True
    #: what ``workload.read_threads`` means to it, for the docs (threads, worker processes ...)
    read_threads_are: ClassVar[str] = "reader threads per rank"

    def __init__(self, ctx: ReadContext) -> None:
        self.ctx = ctx
        #: whether the kernel keeps every read's start (ns) in the epoch's arrays: the loader's reads overlap (reader
        #: threads) and their union is the I/O time
        self.keeps_starts = False

    @classmethod
    def lanes_for(cls, point: PointSpec) -> int:
        """How many lanes (reading threads of this process, each with its buffer) the kernel sets up for it."""
        return 1

    def run_epoch(self, epoch: int, ids: np.ndarray, ep: EpochArrays, compute: list[float],
                  step: Callable[[float], float]) -> EpochRecord:
        """Read epoch ``epoch``: this rank's sample ids in order (``ids``, with ``ep`` their per-read arrays), each
        batch followed by its compute (``compute[b]`` seconds; ``step(seconds)`` runs it and returns its wall time in
        seconds). Returns what was read."""
        raise NotImplementedError

    def checks_samples(self, keep: int | None) -> bool:
        """Whether rank 0 holds each epoch to the plan's sample count (``keep``: samples a rank keeps with
        ``drop_last``, None without); False where the loader checks its own sampler's ids."""
        return True

    def slack_bytes(self) -> int:
        """Bytes the reads may return beyond the plan, summed over ranks (a library's own index reads)."""
        return 0

    def describe(self) -> dict[str, Any]:
        """What the rank's result records of the loader beyond the figures (its knobs, its workers), merged into
        the rank's info; {} for none."""
        return {}

    def close(self) -> None:
        """Release what the loader holds (threads, worker processes, files it opened itself)."""
