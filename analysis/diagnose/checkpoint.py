"""The findings about checkpoint points: one :class:`~analysis.diagnose.Diagnosis` per configuration of checkpoint
points (its repetitions pooled: means), in the format of the other findings (code, level, value against its
threshold, evidence, the ddlio overrides to sweep next and the change outside ddlio).

- ``checkpoint-small-writes``: write calls smaller than the stripe size of the layout applied;
- ``checkpoint-misaligned``: N-1 (one shared file): rank offsets (shard sizes) that are not multiples of the stripe
  size, so neighbouring ranks write into one stripe;
- ``checkpoint-fsync``: fsync takes most of the write time;
- ``checkpoint-metadata``: N-N at scale: creates, opens and closes take a large share of the write time;
- ``checkpoint-stripe``: a stripe count above the useful one: no gain in write or restore bandwidth over a lower
  stripe count measured beside it;
- ``checkpoint-restore-cached``: the restore read files still in the page cache (a memory read).

A finding that cannot be judged from what was stored is left out (no layout applied: no stripe size to judge).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from analysis.checkpoint import checkpoint_configs, scenario_codes
from analysis.diagnose import Diagnosis
from analysis.diagnose.model import Finding, Level, Subject
from analysis.diagnose.thresholds import Thresholds

#: the metrics a diagnosis reads (means of a configuration's repetitions)
_METRICS = ["write_bandwidth_mib_s", "read_bandwidth_mib_s", "write_time_s", "fsync_time_s", "write_meta_time_s",
            "bytes_written", "writes", "files", "checkpoint_bytes", "restore_resident_fraction", "write_to_read_s",
            "offsets_off_stripe", "shard_bytes"]


@dataclass
class CheckpointFacts:
    """One configuration of checkpoint points, the means of its repetitions (bytes, seconds, MiB/s); the stripe
    size is the one applied (None: striping not applied); ``lower``: the best configuration beside it with a lower
    stripe count applied (its stripe count, write and restore bandwidth), None when none was measured."""

    subject: Subject
    nodes: int
    stripe_size: int | None
    transfer_size: int
    m: dict[str, float]
    lower: tuple[int, float, float] | None = None

    def get(self, name: str) -> float:
        v = self.m.get(name, float("nan"))
        return float(v) if v == v else float("nan")


def _facts(cfg: pd.DataFrame, points: dict[str, list[str]]) -> list[CheckpointFacts]:
    """The facts of every configuration of ``cfg`` (:func:`analysis.checkpoint.checkpoint_configs`)."""
    out = []
    for r in cfg.itertuples(index=False):
        applied = bool(r.striping_applicable) and r.applied_stripe_size == r.applied_stripe_size
        s = Subject(kind="checkpoint", key=f"ckpt-{r.config_key}", label=str(r.label), points=points[r.config_key],
                    ranks=int(r.ranks), access=str(r.access), format=str(r.name),
                    stripe_count=int(r.stripe_count) if applied else None,
                    stripe_size=int(r.applied_stripe_size) if applied else None,
                    num_files=int(r.files_mean) if r.files_mean == r.files_mean else 0)
        out.append(CheckpointFacts(s, int(r.nodes), s.stripe_size, int(r.transfer_size or 0),
                                   {m: getattr(r, f"{m}_mean") for m in _METRICS}))
    return out


def _lower(cfg: pd.DataFrame, facts: list[CheckpointFacts]) -> None:
    """Give each configuration whose stripe count was applied the best one beside it (the same scenario: all but
    the stripe count equal) with a lower positive stripe count applied."""
    scen = scenario_codes(cfg, ("stripe_count",))
    ok = cfg["striping_applicable"].astype(bool).to_numpy() & (cfg["stripe_count"].to_numpy() > 0)
    counts = cfg["stripe_count"].to_numpy()
    write = cfg["write_bandwidth_mib_s_mean"].to_numpy(dtype=float)
    read = cfg["read_bandwidth_mib_s_mean"].to_numpy(dtype=float)
    for i, f in enumerate(facts):
        if not ok[i]:
            continue
        beside = np.flatnonzero(ok & (scen == scen[i]) & (counts < counts[i]) & ~np.isnan(write))
        if len(beside):
            j = beside[np.argmax(write[beside])]
            f.lower = (int(counts[j]), float(write[j]), float(read[j]))


def small_writes(f: CheckpointFacts, t: Thresholds) -> Finding | None:
    """Write calls below the stripe size of the layout applied: each write touches part of one stripe."""
    writes, written = f.get("writes"), f.get("bytes_written")
    size = written / writes if writes and writes == writes and written == written else float(f.transfer_size)
    if not f.stripe_size or not size:
        return None
    fired = size < f.stripe_size
    return Finding(
        code="checkpoint-small-writes", level=Level.WARN if fired else Level.OK, title="small checkpoint writes",
        message=f"write calls of {size:.0f} bytes (mean; transfer size {f.transfer_size} bytes) against a "
                f"{f.stripe_size}-byte stripe", value=size / f.stripe_size, threshold=1.0,
        unit="write size / stripe size",
        evidence=[f"{len(f.subject.points)} point(s)", f"{writes:.0f} write calls, {written:.0f} bytes"],
        fix=[f"checkpoint.transfer_size={f.stripe_size}"] if fired else [],
        snippet="write whole stripes: buffer a shard and write it in stripe-size calls" if fired else "",
        counted={"write_bytes": size, "stripe_size": f.stripe_size})


def misaligned(f: CheckpointFacts, t: Thresholds) -> Finding | None:
    """N-1: the ranks' offsets in the shared file (the stored shards laid end to end) off the stripe boundary, so
    two ranks write into one stripe (on Lustre: extent-lock contention between them)."""
    bad_mean, shard = f.get("offsets_off_stripe"), f.get("shard_bytes")
    if f.subject.access != "shared" or not f.stripe_size or bad_mean != bad_mean or f.subject.ranks < 2:
        return None
    total = f.subject.ranks - 1
    bad = round(bad_mean)
    frac = bad / total
    fired = frac > t.misaligned_requests
    size = math.gcd(round(shard), 2**40) if shard == shard else 0  # the largest power of two dividing a shard
    return Finding(
        code="checkpoint-misaligned", level=Level.HIGH if fired else Level.OK, title="unaligned N-1 checkpoint",
        message=f"{bad} of {total} rank offsets in the shared file ({100 * frac:.0f}%) are off the "
                f"{f.stripe_size}-byte stripe boundary (the ranks' shards, {shard:.0f} bytes on average, laid end "
                "to end)", value=frac, threshold=t.misaligned_requests,
        unit="fraction of rank offsets", evidence=[f"{f.subject.ranks} ranks, one shared file",
                                                   f"stripe size {f.stripe_size} bytes"],
        fix=(["access=fpp"] + ([f"stripe_size={size}"] if 65536 <= size < f.stripe_size else [])) if fired else [],
        snippet="pad each rank's shard to a multiple of the stripe size; lfs setstripe -S SIZE CKPT_DIR" if fired
        else "", counted={"misaligned": bad, "total": total})


def fsync(f: CheckpointFacts, t: Thresholds) -> Finding | None:
    """fsync over the write time of the slowest rank: the flush to storage, not the writes, sets the save's time."""
    wt, ft = f.get("write_time_s"), f.get("fsync_time_s")
    if not wt or wt != wt or ft != ft:
        return None
    share = ft / wt
    fired = share > t.checkpoint_fsync_share
    count = f.subject.stripe_count
    return Finding(
        code="checkpoint-fsync", level=Level.WARN if fired else Level.OK, title="fsync dominates the checkpoint",
        message=f"fsync takes {ft:.3g} s of the slowest rank's {wt:.3g} s of write time ({100 * share:.0f}%): the "
                "writes landed in the page cache and the flush to storage is the save's real cost",
        value=share, threshold=t.checkpoint_fsync_share, unit="fraction of write time",
        evidence=[f"{len(f.subject.points)} point(s)", f"write bandwidth {f.get('write_bandwidth_mib_s'):.4g} MiB/s"],
        fix=[f"stripe={2 * count}"] if fired and count and count > 0 else [],
        snippet="spread the flush over more storage targets (lfs setstripe -c); lctl get_param osc.*.max_dirty_mb "
                "(dirty data a client holds before it writes back)" if fired else "",
        counted={"fsync_s": ft, "write_s": wt})


def metadata(f: CheckpointFacts, t: Thresholds) -> Finding | None:
    """N-N at scale: creates, opens and closes of a file per rank over the write time (a metadata storm)."""
    wt, mt, files = f.get("write_time_s"), f.get("write_meta_time_s"), f.get("files")
    if f.subject.access != "fpp" or not wt or wt != wt or mt != mt:
        return None
    share = mt / wt
    fired = share > t.checkpoint_meta_share and files == files and files >= t.checkpoint_meta_files
    return Finding(
        code="checkpoint-metadata", level=Level.WARN if fired else Level.OK, title="checkpoint metadata storm",
        message=f"creates, opens and closes take {mt:.3g} s of the slowest rank's {wt:.3g} s of write time "
                f"({100 * share:.0f}%) with {files:.0f} files per checkpoint", value=share,
        threshold=t.checkpoint_meta_share, unit="fraction of write time",
        evidence=[f"{files:.0f} files per checkpoint (N-N, {f.subject.ranks} ranks)",
                  f"at least {t.checkpoint_meta_files} files count as at scale"],
        fix=["access=shared"] if fired else [],
        snippet="spread the directory over metadata servers (lfs setdirstripe -c MDTS CKPT_DIR) or write fewer "
                "files (N-1)" if fired else "", counted={"meta_s": mt, "write_s": wt, "files": files})


def stripe(f: CheckpointFacts, t: Thresholds) -> Finding | None:
    """A stripe count above the useful one: neither the write nor the restore bandwidth gains over the best lower
    stripe count measured beside it (all else equal)."""
    if f.lower is None:
        return None
    count, write, read = f.lower
    gain_w = f.get("write_bandwidth_mib_s") / write - 1
    gain_r = f.get("read_bandwidth_mib_s") / read - 1 if read == read else float("nan")
    gains = [g for g in (gain_w, gain_r) if g == g]
    fired = bool(gains) and max(gains) < t.checkpoint_stripe_gain
    return Finding(
        code="checkpoint-stripe", level=Level.WARN if fired else Level.OK, title="stripe count over the useful one",
        message=f"stripe count {f.subject.stripe_count} against {count} measured beside it: write {100 * gain_w:+.1f}%"
                + (f", restore {100 * gain_r:+.1f}%" if gain_r == gain_r else ""),
        value=max(gains) if gains else None, threshold=t.checkpoint_stripe_gain,
        unit="fraction of bandwidth gained", evidence=[f"{count} stripe(s): write {write:.4g} MiB/s"
                                                       + (f", restore {read:.4g} MiB/s" if read == read else "")],
        fix=[f"stripe={count}"] if fired else [],
        snippet=f"lfs setstripe -c {count} CKPT_DIR" if fired else "",
        counted={"stripe_count": f.subject.stripe_count, "useful": count})


def restore_cached(f: CheckpointFacts, t: Thresholds) -> Finding | None:
    """The restore read files that were still in the page cache when it began: its bandwidth is memory's."""
    res = f.get("restore_resident_fraction")
    if res != res or f.get("read_bandwidth_mib_s") != f.get("read_bandwidth_mib_s"):
        return None
    fired = res > t.checkpoint_resident
    gap = f.get("write_to_read_s")
    return Finding(
        code="checkpoint-restore-cached", level=Level.WARN if fired else Level.OK, title="restore from the page cache",
        message=f"{100 * res:.0f}% of the restored files were in the page cache when the restore began",
        value=res, threshold=t.checkpoint_resident, unit="fraction resident",
        evidence=[f"{gap:.3g} s between the last write and the restore (MLPerf Storage allows 30)"] if gap == gap
        else [], fix=["checkpoint.read_shift=1"] if fired and f.nodes > 1 else [],
        snippet="restore on other nodes than the writers, or drop the page cache between save and restore" if fired
        else "", counted={"resident": res})


#: every checkpoint finding, in the order shown
FINDINGS = (small_writes, misaligned, fsync, metadata, stripe, restore_cached)


def checkpoint_diagnoses(ck: pd.DataFrame, t: Thresholds | None = None) -> list[Diagnosis]:
    """One diagnosis per configuration of the checkpoint points ``ck`` (:func:`analysis.checkpoint.
    checkpoint_frame`), in the order of :func:`~analysis.checkpoint.checkpoint_configs`."""
    t = t or Thresholds()
    if ck.empty:
        return []
    cfg = checkpoint_configs(ck, _METRICS)
    points: dict[str, Any] = ck.groupby("config_key")["point_key"].apply(list).to_dict()
    facts = _facts(cfg, points)
    _lower(cfg, facts)
    return [Diagnosis(f.subject, [x for fn in FINDINGS if (x := fn(f, t)) is not None]) for f in facts]
