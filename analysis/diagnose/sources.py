"""The subjects of a diagnosis, read from the store: one :class:`Subject` per configuration of emulated points
(its repetitions pooled), one per observed run (an imported Darshan log).

Emulated points give the file-system layer's read calls (``posix_*``: count, bytes, size bins), the application's
bytes, the bytes fetched from storage, the layout applied, and per epoch and rank the I/O, metadata, compute and
wall times. Observed runs give the counts of :mod:`analysis.diagnose.darshan`, kept in the stored record when it
was imported (``diagnose``), or read again from the log for runs imported before.
"""

from __future__ import annotations

import json
import os
from typing import Any

from sqlalchemy import Text, cast, select

from analysis.diagnose.model import EpochFacts, Subject
from analysis.where import Filter
from ddlio import identity
from ddlio.store import Epoch, Point, StoreReader

#: the formats a ddlio sweep can emulate an observed run's files with
_FORMATS = ("hdf5", "tfrecord", "npz", "npy", "bin", "jpeg", "png")


def configuration_key(config: dict[str, Any]) -> str:
    """A configuration's id: the stored point's configuration without ``repeat`` (:func:`ddlio.identity.config_key`,
    the one notion of identity that summary, guidelines, figures and the report use too)."""
    return "cfg-" + identity.config_key(config)


def _json(v: Any) -> Any:
    return json.loads(v) if isinstance(v, str) else v


def _epoch(point_key: str, e: Any) -> EpochFacts:
    ranks = _json(e.rank_rows) or []
    n = max(1, len(ranks))

    def mean(name: str) -> float:
        return sum(float(r.get(name) or 0.0) for r in ranks) / n

    return EpochFacts(
        point_key=point_key, epoch=int(e.epoch), samples=int(e.samples or 0), meta_ops=int(e.meta_ops or 0),
        au=e.au, wall_s=mean("wall_time_s"), read_s=mean("read_time_s"), meta_s=mean("meta_time_s"),
        compute_s=mean("compute_time_s"), rank_io_s=[float(r.get("io_time_s") or 0.0) for r in ranks],
        first_read=None if e.first_read is None else bool(e.first_read), cache=e.cache or "",
        cache_note=e.cache_note or "")


def _applied(layout: dict[str, Any] | None, striping: bool | None) -> tuple[int | None, int | None]:
    """The stripe count and size the backend applied (None when striping does not apply or was not read back)."""
    lay = layout or {}
    applied = lay.get("applied") or {}
    if not striping or not lay.get("applicable", striping) or not applied.get("stripe_count"):
        return None, None
    return int(applied["stripe_count"]), int(applied.get("stripe_size") or 0) or None


def _sum(rows: list[Any], name: str) -> int | None:
    vals = [getattr(r, name) for r in rows]
    return None if any(v is None for v in vals) else int(sum(vals))


def _configuration(key: str, rows: list[Any], epochs: dict[str, list[EpochFacts]]) -> Subject:
    first = rows[0]
    cfg = _json(first.config) or {}
    hist = [0] * 10
    for r in rows:
        for k, v in enumerate(_json(r.posix_size_hist) or []):
            hist[k] += int(v)
    stripe_count, stripe_size = _applied(_json(first.layout), first.striping_applicable)
    files = int(first.num_files or 0)
    disk = ((_json(first.result) or {}).get("dataset") or {}).get("disk_bytes")
    reads = _sum(rows, "posix_reads") or 0
    return Subject(
        kind="configuration", key=key, label=first.label, points=[r.point_key for r in rows],
        ranks=int(first.ranks or 0), access=first.access, format=first.format,
        format_options=_json(first.format_options) or {}, shuffle=str(cfg.get("shuffle", "none")),
        sample_size=int(first.sample_size or 0), num_files=files,
        file_bytes=int(disk / files) if disk and files else int(first.sample_size or 0) * int(first.samples_per_file),
        reads=reads, small_reads=sum(hist[:5]), app_bytes=_sum(rows, "bytes_read"),
        fs_bytes=_sum(rows, "posix_bytes_read"), storage_bytes=_sum(rows, "os_read_bytes"),
        shared_reads=reads if first.access == "shared" else 0,
        shared_small_reads=sum(hist[:5]) if first.access == "shared" else 0,
        stripe_count=stripe_count, stripe_size=stripe_size, alignment=stripe_size,
        epochs=[e for r in rows for e in epochs.get(r.point_key, [])], cache_policy=first.cache_policy or "",
    )


def emulated_subjects(store: StoreReader, keys: list[str]) -> list[Subject]:
    """One subject per configuration among the completed points ``keys``, in the order of their first point."""
    cols = (Point.point_key, Point.label, cast(Point.config, Text).label("config"), Point.layout, Point.result,
            Point.striping_applicable,
            Point.ranks, Point.access, Point.format, Point.format_options, Point.sample_size, Point.samples_per_file,
            Point.num_files, Point.posix_reads, Point.posix_size_hist, Point.bytes_read, Point.posix_bytes_read,
            Point.os_read_bytes, Point.cache_policy)
    wanted = set(keys)
    with store.session() as s:
        rows = [r for r in s.execute(select(*cols).order_by(Point.point_key)) if r.point_key in wanted]
        ecols = (Epoch.point_key, Epoch.epoch, Epoch.samples, Epoch.meta_ops, Epoch.au, Epoch.rank_rows,
                 Epoch.first_read, Epoch.cache, Epoch.cache_note)
        erows = [e for e in s.execute(select(*ecols).order_by(Epoch.point_key, Epoch.epoch))
                 if e.point_key in wanted]
    epochs: dict[str, list[EpochFacts]] = {}
    for e in erows:
        epochs.setdefault(e.point_key, []).append(_epoch(e.point_key, e))
    from analysis.query import _bare  # lazy: pandas-backed module

    groups: dict[str, list[Any]] = {}
    known: dict[str, str] = {}  # a config without its per-point fields -> its key: parsed once per configuration
    for r in rows:
        if isinstance(r.config, str):
            bare = _bare(r.config)
            key = known.get(bare)
            if key is None:
                key = known[bare] = configuration_key(json.loads(bare) if bare else {})
        else:
            key = configuration_key(r.config or {})
        groups.setdefault(key, []).append(r)
    subjects = [_configuration(k, g, epochs) for k, g in groups.items()]
    names = identity.labels([_json(g[0].config) or {} for g in groups.values()])
    for subject, name in zip(subjects, names, strict=True):
        subject.label = name  # every knob in which the configurations shown together differ
    return subjects


def observed_subject(key: str, label: str, rec: dict[str, Any]) -> Subject:
    """The subject of one observed run: its record as :mod:`analysis.darshan_log` reads it (with ``diagnose``)."""
    d = rec.get("diagnose") or {}
    bytes_read = d.get("bytes_read", rec.get("posix_bytes_read"))
    stripe = d.get("lustre_stripe_count")
    name = f"observed-{key.removeprefix('darshan-')[:8]}"
    fmt = rec.get("format") if rec.get("format") in _FORMATS else "bin"  # as import-darshan's preset suggests
    repro = (f"python -m analysis import-darshan {rec.get('log', 'LOG')} --workload-out conf/workload/{name}.yaml"
             f" && python sweep.py workload={name} access={rec.get('access', 'shared')} format={fmt}") \
        if rec.get("posix_reads") else ""
    return Subject(
        kind="observed", key=key, label=label, points=[key], ranks=int(rec.get("ranks") or 0),
        access=rec.get("access", ""), format=rec.get("format", ""), shuffle="unknown",
        num_files=len(d.get("files_read") or rec.get("files") or []),
        reads=int(d.get("reads") or 0), writes=int(d.get("writes") or 0), small_reads=int(d.get("small_reads") or 0),
        small_writes=int(d.get("small_writes") or 0), shared_writes=int(d.get("shared_writes") or 0),
        shared_small_writes=int(d.get("shared_small_writes") or 0),
        file_write_imbalance=sorted((d.get("write_imbalance") or {}).items()),
        app_bytes=rec.get("mpiio_bytes_read") or None, fs_bytes=bytes_read,
        below_max_offset=d.get("below_max_offset"), file_not_aligned=d.get("file_not_aligned"),
        alignment=d.get("alignment"), random_reads=d.get("random_reads"),
        shared_reads=int(d.get("shared_reads") or 0), shared_small_reads=int(d.get("shared_small_reads") or 0),
        shared_files=list(d.get("shared_files") or []),
        shared_imbalance=[(f, float((d.get("shared_bytes_imbalance") or {}).get(f, 0.0)),
                           float((d.get("shared_time_imbalance") or {}).get(f, 0.0)))
                          for f in d.get("shared_files", [])],
        file_imbalance=sorted((d.get("read_imbalance") or {}).items()),
        stripe_count=stripe, stripe_size=d.get("lustre_stripe_size"),
        file_bytes=int(bytes_read / max(1, len(d.get("files_read") or [1]))) if bytes_read else 0,
        repro=repro, cache_policy="observed",
    )


def observed_keys(store: StoreReader, checked: Filter) -> set[str]:
    """The observed runs for which the filter ``checked`` holds, over the columns ``--where`` may name."""
    import pandas as pd

    from analysis.query import ANALYSIS_COLUMNS, DERIVED_COLUMNS  # lazy: the columns --where may name

    stored = [c for c in ANALYSIS_COLUMNS if c != "format_options" and c not in DERIVED_COLUMNS]
    cols = [Point.__table__.columns[c] for c in stored]
    with store.session() as s:
        rows = s.execute(select(*cols).where(Point.source == "darshan")).mappings().all()
    # an observed run is no configuration of ddlio's and gets no verdict: the derived columns are empty for it
    df = pd.DataFrame(rows, columns=stored).assign(format_options="{}", **dict.fromkeys(DERIVED_COLUMNS, ""))
    return set(checked.apply(df)["point_key"].tolist())


def observed_subjects(store: StoreReader) -> list[Subject]:
    """One subject per observed run in the store; a run imported before the store kept the counts has them read
    again from its log (``run_dir``), or is diagnosed from what the store has when the log is gone."""
    with store.session() as s:
        rows = s.execute(select(Point.point_key, Point.label, Point.result, Point.run_dir)
                         .where(Point.source == "darshan").order_by(Point.point_key)).all()
    out = []
    for r in rows:
        rec = dict(_json(r.result) or {})
        if "diagnose" not in rec and rec.get("posix_reads") and r.run_dir and os.path.isfile(r.run_dir):
            from analysis.diagnose.darshan import log_counters  # lazy: pydarshan, only for older imports

            rec["diagnose"] = log_counters(r.run_dir)
        out.append(observed_subject(r.point_key, r.label, rec))
    return out
