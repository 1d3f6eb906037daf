"""The findings about request sizes, alignment, order and balance: one small function per finding, each returning
a :class:`Finding` (level ok when quiet) or None where it does not apply. Where Drishti defines the same trigger its
code is in :data:`DRISHTI`, and the formula and threshold are Drishti's, so both fire on the same log with the same
counted values (see :mod:`analysis.diagnose.darshan`). The findings only ddlio can make are in
:mod:`analysis.diagnose.dl`.
"""

from __future__ import annotations

import math
from collections.abc import Callable

from analysis.diagnose.model import Finding, Level, Subject
from analysis.diagnose.thresholds import Thresholds

#: ddlio's code -> Drishti's code for the same trigger (drishti-io 0.8)
DRISHTI = {
    "small-reads": "P05", "small-writes": "P06", "misaligned": "P08", "random-reads": "P11",
    "shared-small-reads": "P15", "shared-small-writes": "P16", "straggler-bytes": "P18", "straggler-time": "P19",
    "imbalance-writes": "P21", "imbalance-reads": "P22",
}
LUSTRE_SNIPPET = "lfs setstripe -c {count} -S {size} DATA_DIR   # before any file exists; lfs getstripe to check"
CEPHFS_SNIPPET = ("setfattr -n ceph.dir.layout -v \"stripe_count={count} stripe_unit={size}\" DATA_DIR   # before any "
                  "file exists; getfattr -n ceph.file.layout to check")


def stripe_snippet(s: Subject, count: int | str, size: int | None) -> str:
    """The command that sets a stripe layout on the subject's file system (Lustre's ``lfs setstripe``, CephFS's
    layout attribute; Lustre's where the file system is unknown, as an observed run's Lustre record implies)."""
    return (CEPHFS_SNIPPET if s.fs_type == "cephfs" else LUSTRE_SNIPPET).format(count=count, size=size)


def _pct(x: float) -> str:
    return f"{100 * x:.2f}%"


def _mean_au(s: Subject) -> float | None:
    """The subject's accelerator utilisation (mean over its epochs with emulated compute; None without any)."""
    aus = [e.au for e in s.epochs if e.au is not None and e.compute_s > 0]
    return sum(aus) / len(aus) if aus else None


def small_read_snippet(s: Subject) -> str:
    """What to change outside ddlio against small reads, in the terms of the subject's format and loader (one line
    each; "" when nothing fits): an HDF5 chunk cache for HDF5 only, a tf.data read buffer for tf.data only, a
    DataLoader's workers for PyTorch only, collective MPI-IO for a shared file."""
    out = []
    if s.format == "hdf5":
        out.append("HDF5: read whole chunks (H5Pset_chunk_cache; h5py: File(..., rdcc_nbytes=...))")
    elif s.format == "tfrecord":
        out.append("TFRecord: fewer, larger reads (tf.data.TFRecordDataset(files, buffer_size=8 << 20))")
    elif s.format in ("npz", "npy", "jpeg", "png", "bin"):
        out.append(f"{s.format}: pack samples into larger files (a record format: TFRecord, WebDataset shards)")
    if s.reader == "torch":
        out.append("PyTorch: DataLoader(num_workers=8, prefetch_factor=4) to overlap the reads")
    elif s.reader == "tf":
        out.append("tf.data: .prefetch(tf.data.AUTOTUNE), num_parallel_reads=tf.data.AUTOTUNE")
    if s.access == "shared" and s.kind == "observed":
        out.append("MPI-IO: aggregate with collective reads (MPI_File_read_all, romio_cb_read=enable)")
    return "\n".join(out)


def _small(s: Subject, t: Thresholds, op: str) -> Finding | None:
    total, small = (s.reads, s.small_reads) if op == "read" else (s.writes, s.small_writes)
    if not total:
        return None
    title = f"small {op} requests"
    if op == "read" and not s.size_bins:  # reads counted, their sizes not: unknown, never "ok" (a gate must see it)
        return Finding(
            code="small-reads", level=Level.WARN, title=title,
            message=f"no size bins recorded for {total} read calls (reader={s.reader or '?'}): small reads cannot "
                    "be judged", unit="fraction of calls", evidence=[f"{len(s.points)} point(s)"],
            counted={"small": None, "total": total, "judged": False})
    fix = ["workload.read_threads=4", "workload.prefetch=4"] if op == "read" else []
    if op == "read" and s.format in ("jpeg", "png", "npy", "npz"):
        fix.append("format=tfrecord")
    frac, level, said, fired, over = _small_level(s, t, op, small, total)
    message = f"{small} of {total} {op} calls ({_pct(frac)}) are below {t.small_bytes} bytes{said}"
    return Finding(
        code=f"small-{op}s", level=level, title=title, message=message,
        value=frac, threshold=t.small_requests, unit="fraction of calls",
        evidence=[f"{len(s.points)} point(s)" if s.kind == "configuration" else f"{s.num_files} file(s) read"],
        fix=fix if level == Level.HIGH else [],
        snippet=small_read_snippet(s) if level == Level.HIGH else "",
        counted={"small": small, "total": total, "judged": fired or not over})


def _small_level(s: Subject, t: Thresholds, op: str, small: int, total: int
                 ) -> tuple[float, Level, str, bool, bool]:
    """How ``small`` of ``total`` calls below the size threshold weigh: (fraction, level, what the message adds,
    fired, over). Over the fraction but under the absolute floor: too few to judge (info); fired on an
    accelerator that was fed (AU >= au_min): info, they cost no training time; else high."""
    frac = small / total
    over = bool(small) and frac > t.small_requests
    fired = over and small > t.small_requests_absolute
    au = _mean_au(s) if op == "read" else None
    fed = fired and au is not None and au >= t.au_min  # the accelerator did not wait on them: info, not high
    level = (Level.INFO if fed else Level.HIGH) if fired else Level.INFO if over else Level.OK
    said = ""
    if over and not fired:
        said = f": too few reads to judge ({small} small, the floor is {t.small_requests_absolute})"
    elif fed:
        said = f"; the accelerator was fed (AU {au:.3f} >= {t.au_min}), so they cost no training time"
    return frac, level, said, fired, over


def small_reads(s: Subject, t: Thresholds) -> Finding | None:
    """Small read requests (Drishti P05): over 10% of reads and over 1000 below 1 MiB."""
    return _small(s, t, "read")


def small_writes(s: Subject, t: Thresholds) -> Finding | None:
    """Small write requests (Drishti P06), observed runs only (ddlio's points read)."""
    return _small(s, t, "write") if s.kind == "observed" else None


def _aligned_stripe_size(sample: int, stripe: int) -> int:
    """The stripe size nearest above ``stripe`` that is a multiple of both the sample size and 64 KiB (Lustre's
    unit), so that no sample laid end to end crosses a stripe boundary (bytes)."""
    unit = math.lcm(sample, 65536)
    return unit * max(1, math.ceil(stripe / unit))


def misaligned(s: Subject, t: Thresholds) -> Finding | None:
    """Requests off the stripe boundary of the layout applied (Drishti P08: POSIX_FILE_NOT_ALIGNED over reads and
    writes). Emulated points: the reads of samples laid end to end from a stripe boundary that start off one."""
    if not s.alignment or not (s.reads + s.writes):
        return None
    ops = s.reads + s.writes
    if s.kind == "configuration":
        if not s.sample_size:
            return None
        g = math.gcd(s.sample_size, s.alignment)
        bad = round(s.reads * (1 - g / s.alignment)) if s.sample_size % s.alignment else 0
    else:
        bad = int(s.file_not_aligned or 0)
    frac = bad / ops
    fired = frac > t.misaligned_requests
    # emulated samples that all fit inside one stripe start off its boundary but never cross it: harmless, info
    inside = s.kind == "configuration" and s.alignment % s.sample_size == 0
    level = (Level.INFO if inside else Level.HIGH) if fired else Level.OK
    fix, snippet = [], ""
    if level == Level.HIGH and s.kind == "configuration":
        fix = [f"stripe_size={_aligned_stripe_size(s.sample_size, s.alignment)}"]
        if s.format == "hdf5":
            fix.append(f"format.alignment={s.alignment}")
    if level == Level.HIGH:
        snippet = stripe_snippet(s, s.stripe_count or 1, s.alignment)
        if s.format == "hdf5" or s.kind == "observed":
            snippet += f"\nHDF5: H5Pset_alignment(fapl, 0, {s.alignment})  # h5py: File(..., alignment_interval=...)"
    return Finding(
        code="misaligned", level=level, title="misaligned requests",
        message=f"{bad} of {ops} requests ({_pct(frac)}) start off a {s.alignment}-byte boundary (the layout's "
                "stripe size; in a Darshan log, POSIX_FILE_ALIGNMENT)"
                + ("; each sample lies within one stripe, so none crosses a boundary" if inside and fired else ""),
        value=frac, threshold=t.misaligned_requests, unit="fraction of requests",
        evidence=[f"alignment {s.alignment} bytes", f"sample size {s.sample_size} bytes" if s.sample_size else
                  f"{s.num_files} file(s)"], fix=fix, snippet=snippet, counted={"misaligned": bad, "total": ops})


def random_reads(s: Subject, t: Thresholds) -> Finding | None:
    """Random reads (Drishti P11: POSIX_READS - POSIX_SEQ_READS over 20% and over 1000). Unlike Drishti, a random
    order that is the loader's shuffle (emulated ``shuffle=sample``, or an observed run declared so) is info."""
    if s.kind == "configuration":
        if s.shuffle in ("none", ""):
            return Finding(code="random-reads", level=Level.OK, title="random reads",
                           message="samples are read in file order (shuffle=none)", counted={"shuffle": s.shuffle})
        return Finding(code="random-reads", level=Level.INFO, title="random reads",
                       message=f"random order is the loader's shuffle (shuffle={s.shuffle}), as SGD needs: expected",
                       evidence=[f"shuffle={s.shuffle}"], counted={"shuffle": s.shuffle})
    if not s.reads or s.random_reads is None:
        return None
    frac = s.random_reads / s.reads
    fired = bool(s.random_reads) and frac > t.random_operations and s.random_reads > t.random_operations_absolute
    level = (Level.INFO if t.observed_loader_shuffle else Level.HIGH) if fired else Level.OK
    return Finding(
        code="random-reads", level=level, title="random reads",
        message=f"{s.random_reads} of {s.reads} reads ({_pct(frac)}) are neither consecutive nor sequential"
        + (" (the loader's shuffle, as declared)" if fired and t.observed_loader_shuffle else ""),
        value=frac, threshold=t.random_operations, unit="fraction of reads",
        fix=["workload.shuffle=file"] if level == Level.HIGH else [],
        counted={"random": s.random_reads, "total": s.reads})


def _shared_small(s: Subject, t: Thresholds, op: str) -> Finding | None:
    total, small = (s.shared_reads, s.shared_small_reads) if op == "read" else (s.shared_writes, s.shared_small_writes)
    if not total or (op == "read" and not s.size_bins):  # unbinned reads: small-reads says so once
        return None
    frac, level, said, fired, over = _small_level(s, t, op, small, total)
    message = f"{small} of {total} {op}s to shared files ({_pct(frac)}) are below {t.small_bytes} bytes{said}"
    high = level == Level.HIGH
    fix = ["access=fpp", "workload.read_threads=4"] if high and op == "read" else []
    snippet = ("MPI-IO: collective reads (MPI_File_read_all) with romio_cb_read=enable" if s.kind == "observed"
               else small_read_snippet(s)) if high else ""
    return Finding(
        code=f"shared-small-{op}s", level=level, title=f"small {op}s to a shared file", message=message,
        value=frac, threshold=t.small_requests, unit="fraction of shared-file calls",
        evidence=[f"shared: {', '.join(s.shared_files[:5])}" if s.shared_files else f"access={s.access}"],
        fix=fix, snippet=snippet, counted={"small": small, "total": total, "judged": fired or not over})


def shared_small_reads(s: Subject, t: Thresholds) -> Finding | None:
    """Small reads to a shared file (Drishti P15)."""
    return _shared_small(s, t, "read")


def shared_small_writes(s: Subject, t: Thresholds) -> Finding | None:
    """Small writes to a shared file (Drishti P16), observed runs only."""
    return _shared_small(s, t, "write") if s.kind == "observed" else None


def _straggler_epochs(s: Subject, t: Thresholds) -> Finding | None:
    rows = [(e, max(e.rank_io_s), min(e.rank_io_s), sum(e.rank_io_s) / len(e.rank_io_s))
            for e in s.epochs if len(e.rank_io_s) > 1 and max(e.rank_io_s) >= t.straggler_min_io_s]
    if not rows:
        return None
    worst = max(rows, key=lambda r: r[1] / r[3])
    e, slow, fast, mean = worst
    over = slow / mean - 1
    fired = [r for r in rows if r[1] / r[3] - 1 > t.imbalance_stragglers]
    ev = [f"epoch {r[0].epoch} of {r[0].point_key}: rank {r[0].rank_io_s.index(r[1])} {r[1]:.4g} s, mean "
          f"{r[3]:.4g} s, fastest {r[2]:.4g} s" for r in fired[:10]]
    return Finding(
        code="straggler-time", level=Level.WARN if fired else Level.OK, title="straggler rank",
        message=f"slowest rank's I/O time is {slow / mean:.3g}x the mean and {slow / fast if fast else math.inf:.3g}x"
        f" the fastest (worst epoch {e.epoch}); {len(fired)} of {len(rows)} epochs over the limit",
        value=over, threshold=t.imbalance_stragglers, unit="slowest over mean, minus 1", evidence=ev,
        fix=(["workload.read_threads=4"] + ([f"stripe={max(2, s.ranks)}"] if s.stripe_count else [])) if fired else [],
        counted={"epochs": len(fired)})


def straggler_time(s: Subject, t: Thresholds) -> Finding | None:
    """Stragglers: emulated, the slowest rank's I/O time over the mean (per epoch); observed, Drishti P19 (a shared
    file's slowest rank time minus the fastest, over its read + write + meta time, above 15%)."""
    if s.kind == "configuration":
        return _straggler_epochs(s, t)
    if not s.shared_imbalance:
        return None
    hit = [(f, tm) for f, _, tm in s.shared_imbalance if tm > t.imbalance_stragglers]
    worst = max((tm for _, _, tm in s.shared_imbalance), default=0.0)
    return Finding(
        code="straggler-time", level=Level.HIGH if hit else Level.OK, title="straggler rank (time)",
        message=f"{len(hit)} shared file(s) with a time imbalance above {_pct(t.imbalance_stragglers)}",
        value=worst, threshold=t.imbalance_stragglers, unit="(slowest - fastest) / file time",
        evidence=[f"{f}: {_pct(v)}" for f, v in hit[:10]], counted={"files": len(hit)})


def straggler_bytes(s: Subject, t: Thresholds) -> Finding | None:
    """Data imbalance on a shared file (Drishti P18: slowest rank's bytes minus the fastest's over the file's
    bytes, above 15%), observed runs (an emulated point's ranks read equal shares by construction)."""
    if s.kind != "observed" or not s.shared_imbalance:
        return None
    hit = [(f, b) for f, b, _ in s.shared_imbalance if b > t.imbalance_stragglers]
    return Finding(
        code="straggler-bytes", level=Level.HIGH if hit else Level.OK, title="straggler rank (bytes)",
        message=f"{len(hit)} shared file(s) with a data imbalance above {_pct(t.imbalance_stragglers)}",
        value=max((b for _, b, _ in s.shared_imbalance), default=0.0), threshold=t.imbalance_stragglers,
        unit="(slowest - fastest bytes) / file bytes", evidence=[f"{f}: {_pct(v)}" for f, v in hit[:10]],
        counted={"files": len(hit)})


def _imbalance(s: Subject, t: Thresholds, op: str) -> Finding | None:
    rows = s.file_imbalance if op == "read" else s.file_write_imbalance
    if s.kind != "observed" or not rows:
        return None
    hit = [(f, v) for f, v in rows if v > t.imbalance_size]
    return Finding(
        code=f"imbalance-{op}s", level=Level.HIGH if hit else Level.OK, title=f"{op} imbalance across ranks",
        message=f"{len(hit)} individual file(s) whose ranks {op} unequal shares (over {_pct(t.imbalance_size)})",
        value=max(v for _, v in rows), threshold=t.imbalance_size, unit="(max - min) / max bytes",
        evidence=[f"{f}: {_pct(v)}" for f, v in hit[:10]], counted={"files": len(hit)})


def imbalance_reads(s: Subject, t: Thresholds) -> Finding | None:
    """Per-file read imbalance (Drishti P22), observed runs."""
    return _imbalance(s, t, "read")


def imbalance_writes(s: Subject, t: Thresholds) -> Finding | None:
    """Per-file write imbalance (Drishti P21), observed runs."""
    return _imbalance(s, t, "write")


FindingFn = Callable[[Subject, Thresholds], "Finding | None"]
#: the findings of this module, in the order they are shown
FINDINGS: tuple[FindingFn, ...] = (
    small_reads, small_writes, misaligned, random_reads, shared_small_reads, shared_small_writes, straggler_time,
    straggler_bytes, imbalance_reads, imbalance_writes,
)
