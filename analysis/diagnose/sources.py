"""The subjects of a diagnosis, read from the store: one :class:`Subject` per configuration of emulated points
(its repetitions pooled), one per observed run (an imported Darshan log).

Emulated points give the file-system layer's read calls (``posix_*``: count, bytes, size bins), the application's
bytes, the bytes fetched from storage, the layout applied, and per epoch and rank the I/O, metadata, compute and
wall times. Observed runs give the counts of :mod:`analysis.diagnose.darshan`, kept in the stored record when it
was imported (``diagnose``), or read again from the log for runs imported before.
"""

from __future__ import annotations

import collections
import functools
import json
import os
import shlex
import sys
from typing import Any

from sqlalchemy import Text, cast, or_, select

from analysis.diagnose.model import EpochTable, Subject
from analysis.kinds import applies
from analysis.where import Filter
from ddlio import identity
from ddlio.store import Epoch, Point, StoreReader

#: the formats a ddlio sweep can emulate an observed run's files with
_FORMATS = ("hdf5", "tfrecord", "npz", "npy", "bin", "jpeg", "png", "parquet")


def configuration_key(config: dict[str, Any]) -> str:
    """A configuration's id: the stored point's configuration without ``repeat`` (:func:`ddlio.identity.config_key`,
    the one notion of identity that summary, guidelines, figures and the report use too)."""
    return "cfg-" + identity.config_key(config)


def _json(v: Any) -> Any:
    return json.loads(v) if isinstance(v, str) else v


def _epoch(table: EpochTable, point_key: str, epoch: Any, samples: Any, meta_ops: Any, au: Any, rank_rows: Any,
           first_read: Any, cache: Any, cache_note: Any) -> None:
    """Add one epoch's facts from its stored columns (``rank_rows`` as JSON text or parsed) to ``table``: means
    over its ranks, each rank's I/O time; texts shared (``sys.intern``) across epochs."""
    ranks = _json(rank_rows) or []
    n = max(1, len(ranks))
    wall = read = meta = compute = 0.0  # one pass over the ranks; means as sum / n
    io = []
    for r in ranks:
        get = r.get
        wall += float(get("wall_time_s") or 0.0)
        read += float(get("read_time_s") or 0.0)
        meta += float(get("meta_time_s") or 0.0)
        compute += float(get("compute_time_s") or 0.0)
        io.append(float(get("io_time_s") or 0.0))
    table.add(sys.intern(point_key), int(epoch), int(samples or 0), int(meta_ops or 0), au, wall / n, read / n,
              meta / n, compute / n, io, None if first_read is None else bool(first_read), sys.intern(cache or ""),
              sys.intern(cache_note or ""))


def _applied(layout: dict[str, Any] | None, striping: bool | None) -> tuple[int | None, int | None]:
    """The stripe count and size the backend applied (None when striping does not apply or was not read back)."""
    lay = layout or {}
    applied = lay.get("applied") or {}
    if not striping or not lay.get("applicable", striping) or not applied.get("stripe_count"):
        return None, None
    return int(applied["stripe_count"]), int(applied.get("stripe_size") or 0) or None


@functools.lru_cache(maxsize=4096)
def _size_hist(text: str) -> tuple[int, ...]:
    """A stored ``posix_size_hist`` (JSON text) as counts (repeated texts parsed once)."""
    return tuple(int(v) for v in (json.loads(text) or []))


class _Group:
    """One configuration's points as they stream past: the first point's row, the keys, the running sums."""

    _SUMS = ("posix_reads", "bytes_read", "posix_bytes_read", "os_read_bytes")

    def __init__(self, first: Any) -> None:
        self.first = first
        self.points: list[str] = []
        self.hist = [0] * 10
        self.sums: dict[str, int | None] = dict.fromkeys(self._SUMS, 0)  # None once a point lacks the figure
        self.epochs = EpochTable()

    def join(self, other: _Group) -> None:
        """Take ``other``'s points (another stored form of this configuration), keeping key order."""
        self.points = sorted(self.points + other.points)
        self.hist = [a + b for a, b in zip(self.hist, other.hist, strict=True)]
        for name in self._SUMS:
            a, b = self.sums[name], other.sums[name]
            self.sums[name] = None if a is None or b is None else a + b

    def add(self, r: Any) -> None:
        self.points.append(sys.intern(r.point_key))  # the epochs' keys share it
        h = r.posix_size_hist
        for k, v in enumerate((_size_hist(h) if isinstance(h, str) else (h or [])) or []):
            self.hist[k] += int(v)
        for name in self._SUMS:
            v, total = getattr(r, name), self.sums[name]
            self.sums[name] = None if v is None or total is None else total + v


def _configuration(key: str, g: _Group) -> Subject:
    first = g.first
    cfg = _json(first.config) or {}
    hist = g.hist
    stripe_count, stripe_size = _applied(_json(first.layout), first.striping_applicable)
    files = int(first.num_files or 0)
    disk = ((_json(first.result) or {}).get("dataset") or {}).get("disk_bytes")
    total = {k: None if v is None else int(v) for k, v in g.sums.items()}
    reads = total["posix_reads"] or 0
    return Subject(
        kind="configuration", key=key, label=first.label, points=g.points,
        ranks=int(first.ranks or 0), access=first.access, format=first.format,
        format_options=_json(first.format_options) or {}, shuffle=str(cfg.get("shuffle", "none")),
        sample_size=int(first.sample_size or 0), num_files=files,
        file_bytes=int(disk / files) if disk and files else int(first.sample_size or 0) * int(first.samples_per_file),
        reads=reads, small_reads=sum(hist[:5]), app_bytes=total["bytes_read"],
        fs_bytes=total["posix_bytes_read"], storage_bytes=total["os_read_bytes"],
        shared_reads=reads if first.access == "shared" else 0,
        shared_small_reads=sum(hist[:5]) if first.access == "shared" else 0,
        stripe_count=stripe_count, stripe_size=stripe_size, alignment=stripe_size,
        epochs=g.epochs, cache_policy=first.cache_policy or "", fs_type=str(first.fs_type or ""),
        reader=str(cfg.get("reader") or "native"), size_bins=not reads or sum(hist) > 0,
    )


#: a point's columns a diagnosis reads (JSON columns as text: parsed once per configuration, or per repeated text)
_POINT_COLUMNS = ("point_key", "label", "config", "layout", "result", "striping_applicable", "ranks", "access",
                  "format", "format_options", "sample_size", "samples_per_file", "num_files", "posix_reads",
                  "posix_size_hist", "bytes_read", "posix_bytes_read", "os_read_bytes", "cache_policy",
                  "fs_type")
_JSON_COLUMNS = ("config", "layout", "result", "format_options", "posix_size_hist")
_Row = collections.namedtuple("_Row", _POINT_COLUMNS)
#: the columns read for every point (what :class:`_Group` sums); the others are read for a group's first point only
_OWN_COLUMNS = ("point_key", "posix_reads", "posix_size_hist", "bytes_read", "posix_bytes_read", "os_read_bytes")
_Own = collections.namedtuple("_Own", _OWN_COLUMNS)


def _columns(names: tuple[str, ...]) -> list[Any]:
    return [cast(Point.__table__.columns[c], Text).label(c) if c in _JSON_COLUMNS else Point.__table__.columns[c]
            for c in names]


def _configurations(store: StoreReader, stored: dict[str, _Group]) -> tuple[dict[str, _Group], dict[str, _Group]]:
    """(groups per configuration key, each stored form's group): each stored form's first point read whole, and
    the stored forms of one configuration (:func:`configuration_key`) joined, in the order of their first point."""
    from analysis.reading import rows_of_points  # lazy: pandas-backed module

    firsts = [g.points[0] for g in stored.values()]
    whole = {r[0]: _Row(*r) for r in rows_of_points(store, select(*_columns(_POINT_COLUMNS)), firsts)}
    groups: dict[str, _Group] = {}  # per configuration: stored forms of one configuration joined
    joined: dict[str, _Group] = {}  # stored form (digest) -> its configuration's group
    for digest, g in stored.items():
        g.first = whole[g.points[0]]
        cfg = _json(g.first.config)
        key = configuration_key(cfg if isinstance(cfg, dict) else {})
        if key in groups:
            groups[key].join(g)
        else:
            groups[key] = g
        joined[digest] = groups[key]
    return groups, joined


def emulated_subjects(store: StoreReader, keys: list[str] | None = None) -> list[Subject]:
    """One subject per configuration among the completed points ``keys`` (None: every completed point of the
    sweeps, not observed runs), in the order of their first point. Points are read in slices and folded into
    their stored configuration (``config_digest``) as they pass; each such group's first point is then read whole
    (its stored config, layout, result) and the groups of one configuration (:func:`configuration_key`) joined.
    Epochs are read in slices and kept as their facts only."""
    from analysis.reading import config_group, read_rows  # lazy: pandas-backed module

    group = config_group()
    stmt = select(group, *_columns(_OWN_COLUMNS)).order_by(Point.point_key)
    kinds = applies(store, "diagnose") if keys is None else None  # the points of the kinds diagnose applies to
    if keys is None:
        stmt = stmt.where(Point.status == "completed", or_(Point.source.is_(None), Point.source != "darshan"), kinds)
    wanted = None if keys is None else set(keys)
    stored: dict[str, _Group] = {}  # per stored configuration (digest), in the order of its first point
    for rows in read_rows(store, stmt):
        for t in rows:
            if wanted is not None and t[1] not in wanted:
                continue
            g = stored.get(t[0])
            if g is None:
                g = stored[t[0]] = _Group(None)
            g.add(_Own(*t[1:]))
    groups, joined = _configurations(store, stored)
    ecols = (Epoch.point_key, Epoch.epoch, Epoch.samples, Epoch.meta_ops, Epoch.au,
             cast(Epoch.rank_rows, Text).label("rank_rows"), Epoch.first_read, Epoch.cache, Epoch.cache_note)
    if keys is None:  # every completed point: each epoch comes with its point's digest (no map of a million keys)
        estmt = (select(group, *ecols).join(Point, Point.point_key == Epoch.point_key)
                 .where(Point.status == "completed", or_(Point.source.is_(None), Point.source != "darshan"), kinds))
        group_of: dict[str, _Group] = joined
    else:  # the chosen points only: by key
        estmt = select(Epoch.point_key, *ecols)
        group_of = {k: g for g in groups.values() for k in g.points}
    estmt = estmt.order_by(Epoch.point_key, Epoch.epoch)
    for rows in read_rows(store, estmt):  # in point then epoch order: each configuration's epochs in its points' order
        for e in rows:
            g = group_of.get(e[0])
            if g is not None:
                _epoch(g.epochs, *e[1:])
    subjects = [_configuration(k, g) for k, g in groups.items()]
    names = identity.labels([_json(g.first.config) or {} for g in groups.values()])
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
    log = shlex.quote(str(rec["log"])) if rec.get("log") else "LOG"  # a user's path: quoted for the shell
    access = shlex.quote(str(rec.get("access") or "shared"))
    repro = (f"python -m analysis import-darshan {log} --workload-out conf/workload/{name}.yaml"
             f" && python sweep.py workload={name} access={access} format={fmt}") \
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
            from analysis.darshan_log import log_counters  # lazy: pydarshan, only for older imports

            rec["diagnose"] = log_counters(r.run_dir)
        out.append(observed_subject(r.point_key, r.label, rec))
    return out
