"""What the kernel measures, defined once.

Per rank and epoch (:class:`RankEpoch`): bytes read (as the read calls returned them), read ops, metadata ops
(open/close), I/O time (seconds in read and metadata calls), compute time (emulated, seconds), wall time, and a
latency histogram of the reads.

Across ranks, as Darshan aggregates (:func:`aggregate`):

- ``io_time_slowest_s`` = max over ranks of I/O time (Darshan's agg_time_by_slowest), seconds;
- ``bandwidth_mib_s`` = total bytes / io_time_slowest_s / 2**20 (Darshan's agg_perf_by_slowest), MiB/s;
- ``iops`` = total read ops / io_time_slowest_s, operations per second;
- ``wall_time_s`` = max over ranks of the epoch's wall time; ``samples_per_s`` = samples / wall_time_s;
- ``au`` (accelerator utilisation) = mean over ranks of compute time / wall time, in [0, 1];
- ``lat_p50_us``/``lat_p90_us``/``lat_p99_us``: read-latency percentiles in microseconds, from the merged histogram;
- ``os_read_bytes``: bytes the ranks' reads fetched from storage (/proc/self/io ``read_bytes``), an independent
  check of cache state: near ``bytes_read`` (or above, with read-ahead) when cold, 0 when served from memory.

The file-system layer (what the format's library asked the file system for; see :mod:`experiments.kernel.posix`):

- ``posix_reads``: read calls the ranks issued in the epoch (Darshan's POSIX_READS, summed over ranks);
- ``posix_bytes_read``: bytes those calls returned (Darshan's POSIX_BYTES_READ), bytes;
- ``posix_read_time_s``: the slowest rank's time in the samples whose reads reached the file system, seconds
  (an upper bound of POSIX_F_READ_TIME; None with ``reader=tf``);
- ``posix_size_hist``: read calls per Darshan POSIX_SIZE_READ_* bin (0_100 ... 1G_PLUS), summed over ranks;
- ``posix_size_from_app``: how many of those calls were binned by their sample's size from the application layer
  (the thread's counters are read per batch: where a batch's calls and bytes equal its samples and the bytes they
  returned, one call per sample); ``posix_size_approx``: how many were binned by the mean size of several calls
  (the layers disagreed); the rest are single calls binned by their own size;
- ``amplification`` = posix_bytes_read / bytes_read: 1 when the file system served exactly what the reader
  returned, above 1 when the library read more (HDF5's sieve buffer, zip headers, indexes).

Each is None where the layer could not be measured (no /proc I/O accounting).

The histogram has fixed log-spaced buckets (4 per power of two, from 1 ns to ~1100 s), so merging across ranks
and epochs is an exact element-wise sum; a percentile is reported as its bucket's geometric midpoint (within ±9%).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from ddlio.lazy import lazy_import

np = lazy_import("numpy", globals(), "np")  # numpy on first use: see ddlio/lazy.py


BUCKETS_PER_OCTAVE = 4
NUM_BUCKETS = 40 * BUCKETS_PER_OCTAVE  # 2**40 ns ~ 1100 s
MIB = 1024 * 1024


#: Darshan's POSIX_SIZE_READ_* bins: (name suffix, largest size in the bin, bytes, inclusive)
SIZE_BINS: tuple[tuple[str, float], ...] = (
    ("0_100", 100), ("100_1K", 1024), ("1K_10K", 10 * 1024), ("10K_100K", 100 * 1024), ("100K_1M", 1024**2),
    ("1M_4M", 4 * 1024**2), ("4M_10M", 10 * 1024**2), ("10M_100M", 100 * 1024**2), ("100M_1G", 1024**3),
    ("1G_PLUS", float("inf")),
)
SIZE_BIN_NAMES = tuple(f"POSIX_SIZE_READ_{n}" for n, _ in SIZE_BINS)


def size_bin(nbytes: float) -> int:
    """Index into :data:`SIZE_BINS` of a read of ``nbytes`` bytes (Darshan's bucket: the first upper bound >= it)."""
    for k, (_, top) in enumerate(SIZE_BINS):
        if nbytes <= top:
            return k
    return len(SIZE_BINS) - 1


def histogram(latencies_ns: np.ndarray) -> np.ndarray:
    """Bucket counts (int64, NUM_BUCKETS) of latencies in nanoseconds; bucket k holds [2**(k/4), 2**((k+1)/4))."""
    lat = np.maximum(np.asarray(latencies_ns, dtype=np.float64), 1.0)
    idx = np.clip((np.log2(lat) * BUCKETS_PER_OCTAVE).astype(np.int64), 0, NUM_BUCKETS - 1)
    return np.bincount(idx, minlength=NUM_BUCKETS).astype(np.int64)


def bucket_mid_ns(k: int | np.ndarray) -> np.ndarray:
    """Geometric midpoint of bucket ``k``, nanoseconds."""
    return 2.0 ** ((np.asarray(k, dtype=np.float64) + 0.5) / BUCKETS_PER_OCTAVE)


def percentile_us(hist: np.ndarray | list[int], q: float) -> float:
    """The ``q``-th percentile (0-100) of a histogram, microseconds (NaN for an empty histogram)."""
    h = np.asarray(hist, dtype=np.int64)
    total = int(h.sum())
    if total == 0:
        return float("nan")
    rank = max(1, int(np.ceil(q / 100.0 * total)))
    k = int(np.searchsorted(np.cumsum(h), rank))
    return float(bucket_mid_ns(k)) / 1000.0


@dataclass
class RankEpoch:
    """One rank's measurement of one epoch. Bytes in bytes, times in seconds."""

    rank: int
    node: str
    epoch: int
    samples: int = 0
    bytes_read: int = 0
    read_ops: int = 0
    meta_ops: int = 0
    read_time_s: float = 0.0
    meta_time_s: float = 0.0
    compute_time_s: float = 0.0
    wall_time_s: float = 0.0
    #: bytes this rank's reads fetched from storage during the epoch (/proc/self/io read_bytes; 0 when cached)
    os_read_bytes: int = 0
    #: seconds the training loop waited for its batches (all of the read time without reader threads)
    wait_time_s: float = 0.0
    hist: list[int] = field(default_factory=list)
    #: the file-system layer (None where not measured): read calls, bytes they returned, and their time (s)
    posix_reads: int | None = None
    posix_bytes_read: int | None = None
    posix_read_time_s: float | None = None
    #: read calls per Darshan POSIX_SIZE_READ_* bin; how many of them were binned by their sample's mean size
    posix_size_hist: list[int] | None = None
    posix_size_approx: int | None = None
    #: how many were binned by their sample's size from the application layer (the layers agreed per batch)
    posix_size_from_app: int | None = None

    @property
    def io_time_s(self) -> float:
        return self.read_time_s + self.meta_time_s

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["io_time_s"] = self.io_time_s
        return d


def aggregate(ranks: list[RankEpoch]) -> dict[str, Any]:
    """Darshan-style aggregates of one epoch over all ranks (see the module docstring for definitions)."""
    if not ranks:
        raise ValueError("no ranks to aggregate")
    total_bytes = sum(r.bytes_read for r in ranks)
    read_ops = sum(r.read_ops for r in ranks)
    io_slowest = max(r.io_time_s for r in ranks)
    wall = max(r.wall_time_s for r in ranks)
    samples = sum(r.samples for r in ranks)
    hist = np.sum([np.asarray(r.hist, dtype=np.int64) for r in ranks], axis=0)
    return {
        "samples": samples,
        "bytes_read": total_bytes,
        "read_ops": read_ops,
        "meta_ops": sum(r.meta_ops for r in ranks),
        "os_read_bytes": sum(r.os_read_bytes for r in ranks),
        "io_time_slowest_s": io_slowest,
        "io_time_mean_s": float(np.mean([r.io_time_s for r in ranks])),
        "bandwidth_mib_s": total_bytes / io_slowest / MIB if io_slowest > 0 else float("nan"),
        "iops": read_ops / io_slowest if io_slowest > 0 else float("nan"),
        "wall_time_s": wall,
        "compute_time_s": float(np.mean([r.compute_time_s for r in ranks])),
        "wait_time_s": max(r.wait_time_s for r in ranks),
        "samples_per_s": samples / wall if wall > 0 else float("nan"),
        "au": float(np.mean([r.compute_time_s / r.wall_time_s if r.wall_time_s > 0 else 0.0 for r in ranks])),
        "lat_p50_us": percentile_us(hist, 50),
        "lat_p90_us": percentile_us(hist, 90),
        "lat_p99_us": percentile_us(hist, 99),
        "hist": hist.tolist(),
        **posix_aggregate(ranks, total_bytes),
    }


def _sum_or_none(values: list[Any]) -> Any:
    return None if any(v is None for v in values) else sum(values)


def posix_aggregate(ranks: list[RankEpoch], app_bytes: int) -> dict[str, Any]:
    """The file-system layer across ranks, as Darshan aggregates its POSIX records: counts and bytes summed,
    time of the slowest rank, size bins summed; ``amplification`` = file-system bytes / application bytes."""
    fs_bytes = _sum_or_none([r.posix_bytes_read for r in ranks])
    times = [r.posix_read_time_s for r in ranks]
    hists = [r.posix_size_hist for r in ranks]
    return {
        "posix_reads": _sum_or_none([r.posix_reads for r in ranks]),
        "posix_bytes_read": fs_bytes,
        "posix_read_time_s": None if any(t is None for t in times) else max(times),
        "posix_size_hist": None if any(h is None for h in hists) else np.sum(hists, axis=0).astype(int).tolist(),
        "posix_size_approx": _sum_or_none([r.posix_size_approx for r in ranks]),
        "posix_size_from_app": _sum_or_none([r.posix_size_from_app for r in ranks]),
        "amplification": fs_bytes / app_bytes if fs_bytes is not None and app_bytes > 0 else None,
    }


def aggregate_run(per_epoch_ranks: list[list[RankEpoch]]) -> dict[str, Any]:
    """Whole-run aggregates: each rank's figures summed over epochs first, then aggregated across ranks as
    :func:`aggregate` does (so ``io_time_slowest_s`` is the slowest rank's total I/O time, as Darshan reports)."""
    by_rank: dict[int, RankEpoch] = {}
    for epoch in per_epoch_ranks:
        for r in epoch:
            first = r.rank not in by_rank
            acc = by_rank.setdefault(r.rank, RankEpoch(r.rank, r.node, -1, hist=[0] * NUM_BUCKETS))
            acc.samples += r.samples
            acc.bytes_read += r.bytes_read
            acc.read_ops += r.read_ops
            acc.meta_ops += r.meta_ops
            acc.read_time_s += r.read_time_s
            acc.meta_time_s += r.meta_time_s
            acc.compute_time_s += r.compute_time_s
            acc.wall_time_s += r.wall_time_s
            acc.os_read_bytes += r.os_read_bytes
            acc.wait_time_s += r.wait_time_s
            acc.hist = (np.asarray(acc.hist) + np.asarray(r.hist)).tolist()
            for name in ("posix_reads", "posix_bytes_read", "posix_read_time_s", "posix_size_approx",
                         "posix_size_from_app"):
                v, have = getattr(r, name), getattr(acc, name)
                setattr(acc, name, v if first else None if v is None or have is None else have + v)
            h = r.posix_size_hist
            have_h = acc.posix_size_hist
            acc.posix_size_hist = h if first else (
                None if h is None or have_h is None else [a + b for a, b in zip(have_h, h, strict=True)])
    return aggregate(list(by_rank.values()))
