"""pandas frames from the store: the only way the rest of ``analysis`` reads it."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
from sqlalchemy import Text, cast, func, or_, select

from analysis.configs import Configs, identities
from analysis.kinds import applies
from analysis.reading import (
    SLICE_ROWS,
    read_coded,
    read_frame,
    read_grouped,
    read_rows,
    release_freed_memory,
    shared_texts,
)
from analysis.validity import fed_columns, verdicts
from analysis.where import Filter
from ddlio.store import Environment, Epoch, Measurement, Point, StoreReader

#: The columns of ``summary`` (and of its csv), in order.
SUMMARY_COLUMNS = [
    "point_key", "status", "label", "format", "access", "stripe_count", "stripe_size", "nodes", "ppn", "ranks",
    "hosts", "repeat", "workload", "samples", "sample_size", "epochs", "bytes_read", "bytes_planned",
    "posix_reads", "posix_bytes_read", "amplification",
    "io_time_slowest_s", "bandwidth_mib_s", "iops", "wall_time_s", "samples_per_s", "au", "lat_p50_us",
    "lat_p99_us", "cache", "first_read", "overlapping", "fs_type", "job_id", "job_state", "error", "finished_utc",
    "measurement_id", "source", "settle", "validity", "invalid_reasons", "compute_time_s", "au_floor", "fed",
]


def points_frame(store: StoreReader, status: str | None = None) -> pd.DataFrame:
    """One row per point with its config columns and whole-run figures (bytes, seconds, MiB/s, ops/s)."""
    cols = [c for c in Point.__table__.columns if c.name not in ("config", "result", "layout", "format_options")]
    stmt = select(*cols).order_by(Point.submitted_utc, Point.point_key)
    if status:
        stmt = stmt.where(Point.status == status)
    with store.session() as s:
        rows = s.execute(stmt).mappings().all()
    return pd.DataFrame(rows, columns=[c.name for c in cols])


def measurements_frame(store: StoreReader, point_key: str | None = None) -> pd.DataFrame:
    """The points' history: one row per outcome ever stored (completed or failed), oldest first, with
    ``current`` True for the one the point's row (and so every analysis) uses."""
    cols = [c for c in Measurement.__table__.columns if c.name != "record"]
    stmt = select(*cols, (Point.measurement_id == Measurement.id).label("current")).join(
        Point, Point.point_key == Measurement.point_key).order_by(Measurement.id)
    if point_key:
        stmt = stmt.where(Measurement.point_key == point_key)
    with store.session() as s:
        rows = s.execute(stmt).mappings().all()
    df = pd.DataFrame(rows, columns=[c.name for c in cols] + ["current"])
    df["current"] = df["current"].fillna(False).astype(bool)
    return df


def epochs_frame(store: StoreReader) -> pd.DataFrame:
    """One row per (point, epoch) with the per-epoch aggregates, joined to the point's config columns."""
    ecols = [c for c in Epoch.__table__.columns if c.name not in ("hist", "rank_rows")]
    pcols = [Point.format, Point.access, Point.stripe_count, Point.nodes, Point.ranks, Point.repeat]
    stmt = select(*ecols, *pcols).join(Point, Point.point_key == Epoch.point_key).order_by(Epoch.point_key, Epoch.epoch)
    with store.session() as s:
        rows = s.execute(stmt).mappings().all()
    return pd.DataFrame(rows, columns=[c.name for c in ecols] + [c.name for c in pcols])


def summary_frame(store: StoreReader) -> pd.DataFrame:
    """The ``summary`` table: one row per point, :data:`SUMMARY_COLUMNS` in order; ``label`` is
    :func:`ddlio.identity.labels` among all the store's points, ``validity`` and ``invalid_reasons`` those of
    :mod:`analysis.validity` (empty for points not completed)."""
    df = points_frame(store)
    df["source"] = df["source"].fillna("ddlio")  # stores older than the column hold only ddlio's own points
    with store.session() as s:
        configs = dict(s.execute(select(Point.point_key, cast(Point.config, Text))).all())
    df["config"] = df["point_key"].map(configs)
    own = df["source"] == "ddlio"  # observed runs (imported logs) keep the label their import gave them
    kinds = df["kind"].fillna("train")
    for kind in kinds[own].unique():  # each kind's points labelled among their own kind's
        mine = own & (kinds == kind)
        df.loc[mine, "label"] = relabel(df[mine])
    done = analysis_frame(store) if len(df) else pd.DataFrame(columns=["point_key"])
    for c in ("validity", "invalid_reasons"):
        df[c] = df["point_key"].map(dict(zip(done["point_key"], done.get(c, pd.Series(dtype=object)), strict=True)))
    df["au_floor"], df["fed"] = fed_columns(df)
    return df.reindex(columns=SUMMARY_COLUMNS).reset_index(drop=True)


def status_counts(store: StoreReader) -> dict[str, int]:
    """How many points of the store are in each status (``summary``'s ``status`` counted, in SQL)."""
    stmt = select(Point.status, func.count()).where(Point.status.is_not(None)).group_by(Point.status)
    with store.session() as s:
        return {str(k): int(n) for k, n in s.execute(stmt).all()}


def failed_frame(store: StoreReader, completed: pd.DataFrame | None = None) -> pd.DataFrame:
    """The failed points as :func:`summary_frame` shows them, in its order: ``point_key, label, repeat, error``,
    the label among all the store's own points, without reading every point's row. ``completed``: every completed
    point as :func:`analysis_frame` gives it without a filter, when the caller has it (its configs stand for those
    points'; only the others' configs are read)."""
    own = or_(Point.source.is_(None), Point.source == "ddlio")  # summary's own points: observed runs keep theirs
    coder = Configs()
    if completed is not None and len(completed) and not _other_sources(store):
        # bare texts: code as themselves (one object per configuration: a dict sees them at a pointer's cost,
        # where pd.unique would hash each text's characters)
        coder.add(list(dict.fromkeys(completed["config"].tolist())))
        rest = select(cast(Point.config, Text)).where(own, Point.status != "completed")
    else:
        rest = select(cast(Point.config, Text)).where(own)
    for rows in read_rows(store, rest):
        coder.add([r[0] for r in rows])
    stmt = (select(Point.point_key, Point.label, Point.repeat, Point.error, Point.source,
                   cast(Point.config, Text).label("config"))
            .where(Point.status == "failed").order_by(Point.submitted_utc, Point.point_key))
    df = read_coded(store, stmt, coder)
    if len(df):
        _, names = coder.identities()
        mine = df["source"].isna() | (df["source"] == "ddlio")
        df["label"] = np.where(mine, names[df["_code"].to_numpy(dtype=np.int64)], df["label"].to_numpy(dtype=object))
    return df[["point_key", "label", "repeat", "error"]].reset_index(drop=True)


def _other_sources(store: StoreReader) -> bool:
    """Whether completed points come from a source other than ddlio and Darshan (then :func:`analysis_frame`'s
    points and ``summary``'s own points are not the same completed points)."""
    stmt = select(func.count()).where(Point.status == "completed", Point.source.is_not(None),
                                      Point.source.not_in(["ddlio", "darshan"]))
    with store.session() as s:
        return bool(s.execute(stmt).scalar())


# --------------------------------------------------------------------------------------------- analysis frames
#: Columns that identify a configuration: points equal in all of them differ only in ``repeat`` (repetitions).
CONFIG_COLUMNS = [
    "format", "format_options", "access", "stripe_count", "stripe_size", "nodes", "ppn", "ranks", "workload",
    "samples", "sample_size", "sample_size_stdev", "samples_per_file", "num_files", "batch_size", "epochs",
    "compute_time_s", "cache_policy", "settle", "seed", "cluster",
]
#: Whole-run figures the analysis uses (bytes/s as MiB/s, ops/s, seconds, µs, 0..1).
METRIC_COLUMNS = [
    "bandwidth_mib_s", "iops", "io_time_slowest_s", "wall_time_s", "samples_per_s", "au", "lat_p50_us",
    "lat_p90_us", "lat_p99_us", "posix_reads", "posix_bytes_read", "amplification",
]
_ANALYSIS_EXTRA = ["point_key", "config_key", "label", "status", "config", "validity", "invalid_reasons", "repeat",
                   "cache", "overlapping", "fs_type", "striping_applicable",
                   "run_dir", "first_read", "env_id", "measurement_id"]
#: The columns of :func:`analysis_frame`, in order: what ``--where`` may name.
ANALYSIS_COLUMNS = list(dict.fromkeys(_ANALYSIS_EXTRA + CONFIG_COLUMNS + METRIC_COLUMNS))


def parse_where(where: str | Filter | None) -> Filter | None:
    """The ``--where`` text checked against :data:`ANALYSIS_COLUMNS` (None or empty: no filter). Commands call it
    before they open the store, so a refused filter touches nothing; raises :class:`analysis.where.FilterError`."""
    if where is None or isinstance(where, Filter):
        return where
    return Filter.parse(where, ANALYSIS_COLUMNS) if where.strip() else None


def analysis_frame(store: StoreReader, where: str | Filter | None = None, analysis: str | None = None) -> pd.DataFrame:
    """Completed points of sweeps (not observed runs, see :func:`observed_frame`), one row each:
    :data:`CONFIG_COLUMNS` (``format_options`` as JSON text), ``repeat``,
    :data:`METRIC_COLUMNS` and provenance columns; read with one query over the points' own columns and one per
    500 configurations for what a configuration's points share (:func:`analysis.reading.read_grouped`).

    ``where`` is a filter in the language of :mod:`analysis.where` over these columns (e.g.
    ``"format == 'hdf5' and nodes >= 2"``), checked before the store is read; a refused one raises
    :class:`analysis.where.FilterError` (a :class:`ddlio.errors.DdlioError`) saying what is allowed.

    ``analysis`` (``figures``, ``guidelines``, ``diagnose``): only the points of the workload kinds it applies to
    (:func:`analysis.kinds.applies`); None: the points of every kind.
    """
    checked = parse_where(where)
    # the sweep's own points: observed runs (imported Darshan logs) are shown beside them, never compared as them
    own = or_(Point.source.is_(None), Point.source != "darshan")
    # what every point of a configuration shares is read once per configuration (and its stored config with it)
    shared = [cast(Point.format_options, Text).label("format_options") if c == "format_options"
              else Point.__table__.columns[c] for c in CONFIG_COLUMNS if c not in _MEASURED_CONFIG]
    names = {c.name for c in shared} | set(DERIVED_COLUMNS) | {"config", "label"}
    own_cols = [Point.__table__.columns[c] for c in ANALYSIS_COLUMNS if c not in names]
    coder = Configs()
    cond = (Point.status == "completed") & own
    df = read_grouped(store, own_cols, shared, cond & applies(store, analysis) if analysis else cond, coder)
    df["striping_applicable"] = df["striping_applicable"].astype("boolean")
    for c in METRIC_COLUMNS:
        df[c] = df[c].astype("float64")
    df = _with_codes(df, coder, _memory(store) if len(df) else {}, _apart(store) if len(df) else {})
    df = df[[c for c in ANALYSIS_COLUMNS if c not in DERIVED_COLUMNS] + list(DERIVED_COLUMNS)]  # as stored, then
    df = checked.apply(df) if checked else df
    if len(df) >= SLICE_ROWS:
        release_freed_memory()
    return df


def _memory(store: StoreReader) -> dict[str, float]:
    """Each environment's node memory in bytes (its ``raw.memory_bytes``; environments without it left out)."""
    with store.session() as s:
        rows = s.execute(select(Environment.id, Environment.raw)).all()
    return {i: float(raw["memory_bytes"]) for i, raw in rows if isinstance(raw, dict) and raw.get("memory_bytes")}


def _apart(store: StoreReader) -> dict[str, dict]:
    """Each environment's probe of MLPerf's results-apart rule (its ``raw.results_apart``, :mod:`ddlio.mlperf`;
    environments without it left out: only points of MLPerf's presets probe)."""
    with store.session() as s:
        rows = s.execute(select(Environment.id, Environment.raw)).all()
    return {i: raw["results_apart"] for i, raw in rows if isinstance(raw, dict) and raw.get("results_apart")}


#: :data:`CONFIG_COLUMNS` the store sets from the point's outcome, not its config alone: read for each point
_MEASURED_CONFIG = ("settle",)
#: columns of :func:`analysis_frame` computed from the stored config (:mod:`ddlio.identity`) and the verdict
DERIVED_COLUMNS = ("config_key", "validity", "invalid_reasons")


def with_identity(df: pd.DataFrame, memory_bytes: dict[str, float] | None = None) -> pd.DataFrame:
    """``df`` (a frame with the stored ``config`` as JSON text) with ``config_key`` (the point without ``repeat``)
    and ``label`` (:func:`ddlio.identity.labels` among all of ``df``'s points) and the validity verdict
    (:func:`analysis.validity.verdicts`): ``validity`` valid | invalid and ``invalid_reasons`` ("; "-joined).
    ``config`` becomes the stored config without its per-point fields (:func:`bare`), one text per
    configuration shared by its points."""
    coder = Configs()
    codes = coder.add(df.get("config", pd.Series(dtype=str)).tolist())
    return _with_codes(df.assign(_code=codes), coder, memory_bytes)


def _with_codes(df: pd.DataFrame, coder: Configs, memory_bytes: dict[str, float] | None,
                apart: dict[str, dict] | None = None) -> pd.DataFrame:
    """:func:`with_identity` of ``df`` whose configs ``coder`` coded (column ``_code``, dropped here)."""
    codes = df.pop("_code").to_numpy(dtype=np.int64)
    keys, names = coder.identities()
    texts = np.array(coder.texts, dtype=object)
    df = df.assign(config=shared_texts(texts[codes], df.index), config_key=shared_texts(keys[codes], df.index),
                   label=shared_texts(names[codes], df.index))
    v = verdicts(df, memory_bytes, apart)
    return df.assign(validity=shared_texts(v["validity"].to_numpy(), df.index),
                     invalid_reasons=shared_texts(v["invalid_reasons"].to_numpy(), df.index))


def relabel(df: pd.DataFrame) -> pd.Series:
    """Labels of ``df``'s points among themselves only (:func:`ddlio.identity.labels`), e.g. for one figure."""
    return pd.Series(identities(df["config"].tolist())[1], index=df.index, dtype=object)


def observed_frame(store: StoreReader) -> pd.DataFrame:
    """Observed runs (imported Darshan logs, ``source = darshan``), one row each: label, job, ranks, format,
    access, stripe layout, files, POSIX reads, bytes and ``agg_perf_by_slowest_mib_s`` (MiB/s)."""
    cols = [Point.point_key, Point.label, Point.job_id, Point.ranks, Point.format, Point.access, Point.stripe_count,
            Point.stripe_size, Point.num_files, Point.posix_reads, Point.posix_bytes_read, Point.sample_size,
            Point.amplification, Point.agg_perf_by_slowest_mib_s, Point.io_time_slowest_s, Point.run_dir]
    return read_frame(store, select(*cols).where(Point.source == "darshan").order_by(Point.point_key))


def parse_hists(texts: list[str] | pd.Series) -> np.ndarray:
    """Latency histograms stored as JSON text -> an int64 matrix (one row each, zero-padded to the longest).

    Bucket ``k`` counts reads with latency in [2**(k/4), 2**((k+1)/4)) ns (see :mod:`ddlio.metrics`).
    """
    bodies = [t.strip("[] ") if isinstance(t, str) else "" for t in texts]
    if not bodies:
        return np.zeros((0, 0), dtype=np.int64)
    lengths = np.array([b.count(",") + 1 if b else 0 for b in bodies])
    width = int(lengths.max())
    if width == 0:
        return np.zeros((len(bodies), 0), dtype=np.int64)
    if (lengths == width).all():  # the usual case: fixed-width histograms; parse all in one C call
        return np.fromstring(",".join(bodies), sep=",", dtype=np.int64).reshape(len(bodies), width)
    out = np.zeros((len(bodies), width), dtype=np.int64)
    for i, b in enumerate(bodies):
        if lengths[i]:
            out[i, : lengths[i]] = np.fromstring(b, sep=",", dtype=np.int64)
    return out


def hist_frame(store: StoreReader, point_keys: list[str] | None = None,
               by: pd.Series | None = None) -> tuple[pd.Series, np.ndarray]:
    """Each completed point's read-latency histogram summed over its epochs: (point keys sorted, int64 matrix).

    With ``by`` (a Series from point key to a group, e.g. each point's ``config_key``), the histograms are summed
    per group instead: (the groups, in order of their first point by key; their matrix), a row per configuration
    rather than per point; points not in ``by`` are left out. The epochs are read in slices, so their texts are
    never in memory at once, and per group summed as they pass."""
    if by is None:
        stmt = (select(Epoch.point_key, cast(Epoch.hist, Text).label("hist"))
                .join(Point, Point.point_key == Epoch.point_key).where(Point.status == "completed")
                .order_by(Epoch.point_key))
        wanted = None if point_keys is None else pd.Index(np.asarray(point_keys, dtype=object), dtype=object)
        return _hists_per_point(store, stmt, wanted)
    # per group: the epochs in any order (each group's place is its first point's, by key), only the completed
    # points' unless the caller names its points (analysis_frame's are completed ones)
    stmt = select(Epoch.point_key, cast(Epoch.hist, Text).label("hist"))
    if point_keys is None:
        stmt = stmt.join(Point, Point.point_key == Epoch.point_key).where(Point.status == "completed")
    if by.empty:
        return pd.Series([], dtype=object, name=by.name or "group"), np.zeros((0, 0), dtype=np.int64)
    index = pd.Index(by.index.to_numpy(dtype=object), dtype=object)
    rank = np.empty(len(index), dtype=np.int64)  # each of by's points: its place in key order
    rank[np.argsort(index.to_numpy(), kind="stable")] = np.arange(len(index))
    # each of by's points: its group as a number (a point not in ``by``, or not wanted: -1, left out)
    gcodes, gnames = pd.factorize(pd.Series(by.to_numpy(dtype=object), dtype=object), use_na_sentinel=False)
    if point_keys is not None:
        gcodes = np.where(index.isin(pd.Index(np.asarray(point_keys, dtype=object), dtype=object)), gcodes, -1)
    gnames = np.asarray(gnames, dtype=object)
    acc = np.zeros((len(gnames), 0), dtype=np.int64)
    first = np.full(len(gnames), np.iinfo(np.int64).max)  # each group's first point (its rank)
    for rows in read_rows(store, stmt):
        pos = index.get_indexer([r[0] for r in rows])
        g = np.where(pos >= 0, gcodes[pos], -1)
        keep = g >= 0
        if not keep.all():
            rows = [r for r, k in zip(rows, keep, strict=True) if k]
            pos, g = pos[keep], g[keep]
        if not rows:
            continue
        mat = parse_hists([r[1] for r in rows])
        if mat.shape[1] > acc.shape[1]:
            acc = np.pad(acc, ((0, 0), (0, mat.shape[1] - acc.shape[1])))
        _add_rows(acc, g, mat)
        np.minimum.at(first, g, rank[pos])
    present = np.flatnonzero(first < np.iinfo(np.int64).max)
    order = present[np.argsort(first[present], kind="stable")]
    return pd.Series(gnames[order], dtype=object, name=by.name or "group"), acc[order]


def _add_rows(acc: np.ndarray, rows: np.ndarray, mat: np.ndarray) -> None:
    """``acc[rows[i], :mat.shape[1]] += mat[i]`` for every i: a column at a time (a count per row of ``acc``;
    exact while a column's sum stays below 2**53)."""
    cols = np.ascontiguousarray(mat.T)
    for j in range(cols.shape[0]):
        if cols[j].any():
            acc[:, j] += np.bincount(rows, weights=cols[j], minlength=acc.shape[0]).astype(np.int64)


def _hists_per_point(store: StoreReader, stmt: Any, wanted: pd.Index | None) -> tuple[pd.Series, np.ndarray]:
    """:func:`hist_frame` without groups: a row per point (its epochs summed), in point-key order."""
    names: list[Any] = []  # each row's point key
    row_of: dict[Any, int] = {}
    parts: list[tuple[np.ndarray, np.ndarray]] = []
    width = 0
    for rows in read_rows(store, stmt):
        if wanted is not None:
            keep = wanted.get_indexer([r[0] for r in rows]) >= 0
            rows = [r for r, k in zip(rows, keep, strict=True) if k]
        if not rows:
            continue
        mat = parse_hists([r[1] for r in rows])
        idx = np.empty(len(rows), dtype=np.int64)
        for i, r in enumerate(rows):
            j = row_of.get(r[0])
            if j is None:
                j = row_of[r[0]] = len(names)
                names.append(r[0])
            idx[i] = j
        width = max(width, mat.shape[1])
        parts.append((idx, mat))
    out = np.zeros((len(names), width), dtype=np.int64)
    for idx, mat in parts:
        _add_rows(out, idx, mat)
    return pd.Series(names, dtype=object, name="point_key"), out


def per_configuration(points: pd.DataFrame) -> pd.Series:
    """Each point's ``config_key`` by point key (for :func:`hist_frame`'s ``by``: a histogram per configuration)."""
    return pd.Series(points["config_key"].to_numpy(dtype=object), index=points["point_key"].to_numpy(dtype=object),
                     name="config_key")


def environments_frame(store: StoreReader) -> pd.DataFrame:
    """The ``environments`` table with package versions as JSON text, one row per environment."""
    stmt = select(Environment.id, Environment.host, Environment.os, Environment.git_commit, Environment.git_dirty,
                  cast(Environment.packages, Text).label("packages"), cast(Environment.raw, Text).label("raw"))
    with store.engine.connect() as conn:
        return pd.read_sql(stmt, conn)


