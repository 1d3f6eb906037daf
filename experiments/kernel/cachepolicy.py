"""The page cache and the caches below the client, as a point's ``cache`` policy asks: evict (``cold``), warm once
(``warm``) or flush the storage's caches with a flush file first (``storage_cold``) on every node leader before an
epoch, with residency (fraction of the dataset's pages cached, mincore) measured before and after; the epoch's
cache label agreed from every node's report; a fresh dataset settled before anything is measured. The page-cache
primitives are :mod:`experiments.kernel.cache`'s."""

from __future__ import annotations

import calendar
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from experiments.dataset import DatasetPlan, load_manifest
from experiments.kernel import cache as pagecache

if TYPE_CHECKING:
    from experiments.config import PointSpec

#: After eviction, at most this fraction of the dataset's pages may still be resident for an epoch to count cold.
COLD_TOLERANCE = 0.01


def prepare_cache(policy: str, epoch: int, files: list[Path], leader: bool,
                   flush: tuple[Path, int] | None = None) -> dict[str, Any] | None:
    """On a node leader: measure residency, evict (cold) or warm once (warm: before epoch 0, only when some page
    is not resident yet, so a dataset already cached is not read an extra time), measure again. ``storage_cold``
    first reads the flush file ``(path, bytes)`` through, untimed, to push the dataset out of the caches below
    the client, then evicts as ``cold`` does."""
    if not leader:
        return None
    flushed: dict[str, Any] = {}
    io = pagecache.io_of(files)  # the I/O seam of the dataset's storage: eviction and residency go through it
    if policy == "storage_cold" and flush is not None:
        try:
            n, secs = pagecache.read_through([flush[0]])
        except OSError as e:
            return {"before": float("nan"), "after": float("nan"), "error": f"the flush read failed: {e}"}
        flushed = {"flush_bytes": n, "flush_s": secs}
    before = pagecache.residency(files, io)
    if policy in ("cold", "storage_cold"):
        from lustre import drop_client_cache  # lazy: the storage layer, only where a cold epoch asks

        client = drop_client_cache(files)  # a client's own cache (ceph-fuse's), before the page cache
        try:
            pagecache.evict(files, io)
        except OSError as e:
            return {"before": before, "after": float("nan"), "error": f"eviction failed: {e}", **flushed, **client}
        return {"before": before, "after": pagecache.residency(files, io), **flushed, **client}
    elif epoch == 0 and not before >= 1.0:  # already all resident (e.g. just generated): no pass to add
        pagecache.warm(files)
    return {"before": before, "after": pagecache.residency(files, io), **flushed}


def flush_figures(reports: list[dict[str, Any]]) -> dict[str, Any]:
    """An epoch's flush across node leaders: the bytes read through and the read rate of the slowest (MiB/s)."""
    done = [r for r in reports if "flush_bytes" in r]
    if not done:
        return {}
    slowest = max(r["flush_s"] for r in done)
    return {"flush_bytes": sum(r["flush_bytes"] for r in done),
            "flush_mib_s": done[0]["flush_bytes"] / slowest / 2**20 if slowest > 0 else None}


def flush_path(point: PointSpec) -> tuple[Path, int] | None:
    """The storage-cold flush file of a point (``data_root/flush/flush-<bytes>.bin``) and its size in bytes, or
    None."""
    if point.workload.cache != "storage_cold":
        return None
    size = int(point.workload.flush_size)
    return Path(point.data_root) / "flush" / f"flush-{size}.bin", size


def below_client(plan: DatasetPlan) -> tuple[Path, str] | None:
    """Where the dataset's read marker lives and its generation stamp (None for a dataset whose manifest
    predates read tracking: whether it was read since generation is then unknown)."""
    m = load_manifest(plan) or {}
    return (Path(plan.directory), m["created_utc"]) if m.get("tracks_reads") else None


def settle(point: PointSpec, where: tuple[Path, str] | None, files: list[Path]) -> dict[str, Any] | None:
    """Rank 0, before anything is measured: a freshly generated dataset (never read since) is read through,
    untimed, until its read rate is steady (:func:`experiments.kernel.cache.settle`), and dropped from the page cache,
    so that the caches below the client treat every repetition alike (the first read of a fresh file is served by
    the device, every later one by a cache no client can evict, once it has taken the data).
    Only with ``cache=cold`` and ``settle=true``; returns what it did, or None."""
    if point.workload.cache != "cold" or not point.workload.settle or where is None:
        return None
    if not pagecache.claim_first_read(*where):
        return {"settled": False}
    return {"settled": True, **pagecache.settle(files)}


def read_history(where: tuple[Path, str] | None) -> dict[str, Any]:
    """Rank 0, at an epoch's start: is this the dataset's first read since it was generated (claimed
    atomically, so of all points reading it only one sees True), and how long ago was it generated (s)?"""
    if where is None:
        return {"first_read": None, "since_generation_s": None}
    created = calendar.timegm(time.strptime(where[1], "%Y-%m-%dT%H:%M:%SZ"))
    return {"first_read": pagecache.claim_first_read(*where), "since_generation_s": time.time() - created}


def cache_state(policy: str, reports: list[dict[str, Any]]) -> tuple[str, float, float, str]:
    """The epoch's cache label from every node leader's report: ``cold`` only if every node's eviction was
    verified, ``warm`` only if every node holds the whole dataset, else ``unknown`` with the reason. The
    residencies returned are the worst over nodes (NaN where any node could not measure)."""
    def worst(key: str, pick: Any) -> float:
        vals = [r[key] for r in reports]
        return float("nan") if any(v != v for v in vals) else pick(vals)

    before = worst("before", max)
    note = "; ".join(r["error"] for r in reports if r.get("error"))
    if policy == "warm":
        after = worst("after", min)
        if after == after and after >= 1 - COLD_TOLERANCE and not note:
            return "warm", before, after, note
        return "unknown", before, after, note or (
            "residency could not be measured (mincore)" if after != after
            else f"only {after:.1%} of the dataset is cached (larger than the page cache?)")
    after = worst("after", max)
    if after == after and after <= COLD_TOLERANCE and not note:  # measured everywhere, (almost) nothing cached
        return "cold", before, after, note
    return "unknown", before, after, note or (
        "residency could not be measured (mincore)" if after != after
        else f"{after:.1%} of the dataset stayed cached after eviction")
