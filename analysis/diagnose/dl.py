"""The findings only ddlio can make (Drishti has no counterpart): bytes amplified between the layers, data read
twice, the stripe count against the files and the ranks reading them, accelerator utilisation and what bounds it,
cache honesty, and metadata per sample. One small function per finding, as in :mod:`analysis.diagnose.findings`."""

from __future__ import annotations

import math

from analysis.diagnose.findings import FindingFn, stripe_snippet
from analysis.diagnose.model import Finding, Level, Subject
from analysis.diagnose.thresholds import Thresholds


def _pow2_floor(n: int) -> int:
    return 1 << max(0, int(n).bit_length() - 1)


def amplified_reads(s: Subject, t: Thresholds) -> Finding | None:
    """File-system bytes (read calls) over application bytes (the loader's, or MPI-IO's): an HDF5 sieve buffer
    larger than a sample reads bytes no one asked for."""
    if not s.app_bytes or s.fs_bytes is None:
        return None
    ratio = s.fs_bytes / s.app_bytes
    fired = ratio > t.amplification
    fix, snippet = [], ""
    if fired and s.format == "hdf5" and s.sample_size:
        sieve = int(s.format_options.get("sieve_buf_size", 0) or 0)
        if sieve > s.sample_size:
            fix.append(f"format.sieve_buf_size={_pow2_floor(s.sample_size)}")
            snippet = f"HDF5: H5Pset_sieve_buf_size(fapl, {_pow2_floor(s.sample_size)})  # below one sample"
    if fired and s.format == "hdf5" and not fix:
        fix.append("format.rdcc_nbytes=0")
    return Finding(
        code="amplified-reads", level=Level.WARN if fired else Level.OK, title="read amplification",
        message=f"the file system read {s.fs_bytes} bytes for {s.app_bytes} the application asked for "
                f"({ratio:.3g}x)", value=ratio, threshold=t.amplification, unit="fs bytes / app bytes",
        evidence=[f"{len(s.points)} point(s)"], fix=fix, snippet=snippet,
        counted={"fs_bytes": s.fs_bytes, "app_bytes": s.app_bytes})


def redundant_reads(s: Subject, t: Thresholds) -> Finding | None:
    """Observed runs: bytes read over the bytes below each file's highest offset read (data read more than once).
    Drishti's P09 tests the reverse (highest offset above the bytes read), so the two are not compared."""
    if s.kind != "observed" or not s.below_max_offset or not s.fs_bytes:
        return None
    ratio = s.fs_bytes / s.below_max_offset
    fired = ratio > t.redundant_reads
    return Finding(
        code="redundant-reads", level=Level.WARN if fired else Level.OK, title="redundant reads",
        message=f"{s.fs_bytes} bytes read below highest offsets spanning {s.below_max_offset} bytes ({ratio:.3g}x)",
        value=ratio, threshold=t.redundant_reads, unit="bytes read / bytes below the highest offset",
        fix=["cache=warm"] if fired else [], counted={"bytes_read": s.fs_bytes, "span": s.below_max_offset})


def _readahead_snippet(fs_type: str) -> str:
    """The read-ahead knob of ``fs_type`` (Lustre's, CephFS's client, a local disk's; NFS's mount option)."""
    if fs_type == "lustre":
        return "Lustre: lctl set_param llite.*.max_read_ahead_per_file_mb=4"
    if fs_type == "cephfs":
        return "CephFS: mount with rasize=4194304 (kernel client) or client_readahead_max_bytes (ceph-fuse)"
    if fs_type.startswith("nfs"):
        return "NFS: mount with a smaller rsize, or lower the read_ahead_kb of its BDI (/sys/class/bdi/*/read_ahead_kb)"
    return "local disk: blockdev --setra 256 DEV (read-ahead in 512-byte sectors)"


def readahead(s: Subject, t: Thresholds) -> Finding | None:
    """Emulated points: bytes fetched from storage over bytes the read calls returned (read-ahead that fetched
    pages nobody read, or pages fetched twice)."""
    if s.kind != "configuration" or not s.storage_bytes or not s.fs_bytes:
        return None
    ratio = s.storage_bytes / s.fs_bytes
    fired = ratio > t.storage_over_calls
    return Finding(
        code="readahead", level=Level.WARN if fired else Level.OK, title="storage reads over read calls",
        message=f"storage delivered {s.storage_bytes} bytes for {s.fs_bytes} the read calls returned ({ratio:.3g}x)",
        value=ratio, threshold=t.storage_over_calls, unit="storage bytes / read-call bytes",
        snippet=_readahead_snippet(s.fs_type) if fired else "",
        counted={"storage_bytes": s.storage_bytes, "fs_bytes": s.fs_bytes})


def stripe_layout(s: Subject, t: Thresholds) -> Finding | None:
    """The stripe count of the layout applied against the files and the ranks reading them: wider than a file's
    stripes (OSTs holding nothing of it), or a shared file read by far more ranks than it has stripes."""
    if not s.stripe_count or not s.stripe_size or not s.file_bytes:
        return None
    held = max(1, math.ceil(s.file_bytes / s.stripe_size))  # stripes one file fills
    readers = s.ranks if s.access == "shared" else 1
    if s.stripe_count > held:
        msg = (f"stripe count {s.stripe_count} over {s.num_files} file(s) of {s.file_bytes} bytes: each fills "
               f"{held} stripe(s) of {s.stripe_size} bytes, {s.stripe_count - held} OST(s) per file hold nothing")
        fix = [f"stripe={held}", f"stripe_size={max(65536, s.file_bytes // s.stripe_count // 65536 * 65536)}"]
        level, value, thr = Level.WARN, s.stripe_count / held, 1.0
    elif s.access == "shared" and readers / s.stripe_count > t.readers_per_stripe:
        msg = (f"{readers} ranks read one shared file striped over {s.stripe_count} OST(s): "
               f"{readers / s.stripe_count:.3g} readers per stripe")
        fix = [f"stripe={min(held, readers)}"]
        level, value, thr = Level.WARN, readers / s.stripe_count, t.readers_per_stripe
    else:
        return Finding(code="stripe-layout", level=Level.OK, title="stripe count vs files and readers",
                       message=f"stripe count {s.stripe_count} fits {s.num_files} file(s) of {held} stripe(s) "
                               f"read by {readers} rank(s) each", value=s.stripe_count / held, threshold=1.0,
                       unit="stripe count / stripes a file fills")
    return Finding(code="stripe-layout", level=level, title="stripe count vs files and readers", message=msg,
                   value=value, threshold=thr, unit="ratio", evidence=[f"{s.num_files} file(s), {readers} reader(s)"],
                   fix=fix, snippet=stripe_snippet(s, fix[0].split("=")[1], s.stripe_size))


def au_low(s: Subject, t: Thresholds) -> Finding | None:
    """Accelerator utilisation (compute / wall, mean over ranks) below the MLPerf Storage mark, with what bounds it:
    the reads, the opens and closes, or the compute step itself. Points with no emulated compute have no AU."""
    eps = [e for e in s.epochs if e.au is not None and e.compute_s > 0]
    if not eps:
        return None
    au = sum(e.au for e in eps) / len(eps)
    parts = {"reads": sum(e.read_s for e in eps), "opens": sum(e.meta_s for e in eps),
             "compute": sum(e.compute_s for e in eps)}
    wall = sum(e.wall_s for e in eps) or 1.0
    bound = max(("reads", "opens"), key=lambda k: parts[k]) if au < t.au_min else "compute"
    fired = au < t.au_min
    fixes = {"reads": ["workload.read_threads=4", "workload.prefetch=4"],
             "opens": ["workload.samples_per_file=1024", "format=tfrecord"]}
    low = [f"epoch {e.epoch} of {e.point_key}: AU {e.au:.3f}" for e in eps if e.au < t.au_min]
    return Finding(
        code="au-low", level=Level.HIGH if fired else Level.OK, title="accelerator utilisation",
        message=f"AU {au:.3f} (threshold {t.au_min}); bound by {bound}: of the wall time, reads "
                f"{parts['reads'] / wall:.0%}, opens/closes {parts['opens'] / wall:.0%}, compute "
                f"{parts['compute'] / wall:.0%}", value=au, threshold=t.au_min, unit="compute / wall",
        evidence=low[:10], fix=fixes.get(bound, []) if fired else [], counted={"bound": bound})


def first_read(s: Subject, t: Thresholds) -> Finding | None:
    """An epoch that was its dataset's first read since generation: served by the device cold, or by a cache
    below the client (a controller, a server) that later epochs do not meet."""
    eps = [e for e in s.epochs if e.first_read is not None]
    if not eps:
        return None
    hit = [e for e in eps if e.first_read]
    return Finding(
        code="first-read", level=Level.WARN if hit else Level.OK, title="first read after generation",
        message=f"{len(hit)} of {len(eps)} epochs were their dataset's first read after it was generated",
        value=len(hit), threshold=0, unit="epochs",
        evidence=[f"epoch {e.epoch} of {e.point_key}" for e in hit[:10]],
        fix=["settle=true", "repeat=0,1,2"] if hit else [], counted={"epochs": len(hit)})


def cache_not_cold(s: Subject, t: Thresholds) -> Finding | None:
    """Epochs of a cold-cache point whose eviction was not verified: the number may come from memory."""
    eps = [e for e in s.epochs if s.cache_policy in ("cold", "storage_cold")]
    if not eps:
        return None
    hit = [e for e in eps if e.cache != "cold"]
    return Finding(
        code="cache-not-cold", level=Level.WARN if hit else Level.OK, title="cache not verified cold",
        message=f"{len(hit)} of {len(eps)} epochs of cache={s.cache_policy} points were not verified cold",
        value=len(hit), threshold=0, unit="epochs",
        evidence=[f"epoch {e.epoch} of {e.point_key}: cache {e.cache}" + (f" ({e.cache_note})" if e.cache_note
                                                                          else "") for e in hit[:10]],
        fix=["cache=storage_cold"] if hit else [], counted={"epochs": len(hit)})


def metadata_heavy(s: Subject, t: Thresholds) -> Finding | None:
    """Opens and closes per sample, per epoch: one file per sample pays a metadata round trip for every read."""
    eps = [e for e in s.epochs if e.samples]
    if not eps:
        return None
    per = [(e, e.meta_ops / e.samples) for e in eps]
    worst = max(v for _, v in per)
    hit = [(e, v) for e, v in per if v > t.meta_per_sample]
    return Finding(
        code="metadata-heavy", level=Level.WARN if hit else Level.OK, title="metadata-heavy epochs",
        message=f"up to {worst:.3g} opens and closes per sample; {len(hit)} of {len(eps)} epochs over the limit",
        value=worst, threshold=t.meta_per_sample, unit="meta ops / sample",
        evidence=[f"epoch {e.epoch} of {e.point_key}: {v:.3g}" for e, v in hit[:10]],
        fix=["workload.samples_per_file=1024", "format=tfrecord"] if hit else [], counted={"epochs": len(hit)})


#: the findings of this module, in the order they are shown
FINDINGS: tuple[FindingFn, ...] = (
    amplified_reads, redundant_reads, readahead, stripe_layout, au_low, first_read, cache_not_cold, metadata_heavy,
)
