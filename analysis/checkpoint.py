"""Checkpoint points (``points.kind = 'checkpoint'``) read into frames: every analysis of checkpoints starts here.

A checkpoint point's configuration is its stored config (access, stripe count, nodes, ppn ...) plus the config's
``checkpoint`` part (model name, layout ``dcp``/``torch``, size, transfer size, count, restore ...); its results are
rows of ``point_metrics`` (metric, value, unit). :func:`checkpoint_frame` joins both into one row per point;
:func:`checkpoint_configs` folds the repetitions of a configuration (mean, sample standard deviation, n) as
:func:`analysis.frames.configs` does for train; :func:`bars_frame` and :func:`stripe_frame` are what the figures
draw. Units are the store's: bytes, seconds, MiB/s, GiB/s, µs; counts and fractions have none.

The train analyses never see these points (:mod:`analysis.kinds`: the checkpoint kind declares none of them).
"""

from __future__ import annotations

import ast
import json
from typing import Any

import numpy as np
import pandas as pd
from sqlalchemy import Text, cast, or_, select

from analysis.configs import row_codes
from analysis.frames import human_bytes
from analysis.reading import read_frame
from analysis.where import Filter
from ddlio.identity import config_key, labels
from ddlio.store import Point, PointMetric, StoreReader

#: the workload kind these points carry in ``points.kind``
KIND = "checkpoint"
#: metric -> (axis label with its unit, higher is better)
METRICS: dict[str, tuple[str, bool]] = {
    "write_bandwidth_mib_s": ("write bandwidth (MiB/s, Darshan's slowest rank)", True),
    "read_bandwidth_mib_s": ("restore bandwidth (MiB/s, Darshan's slowest rank)", True),
    "write_throughput_gib_s": ("write throughput (GiB/s, MLPerf)", True),
    "read_throughput_gib_s": ("restore throughput (GiB/s, MLPerf)", True),
    "write_time_s": ("write time, slowest rank (s)", False),
    "read_time_s": ("restore time, slowest rank (s)", False),
    "fsync_time_s": ("fsync time, slowest rank (s)", False),
    "write_meta_time_s": ("write metadata time, slowest rank (s)", False),
}
#: the phases a checkpoint is judged in: phase -> its bandwidth metric (MiB/s)
PHASES = {"write": "write_bandwidth_mib_s", "restore": "read_bandwidth_mib_s"}
#: the metrics ``summary`` shows for each checkpoint point, in order
SUMMARY_METRICS = ["bytes_written", "write_bandwidth_mib_s", "bytes_read", "read_bandwidth_mib_s", "fsync_time_s"]
#: every metric the checkpoint kind stores (point_metrics rows): a column of :func:`checkpoint_frame` each
ALL_METRICS = [
    "checkpoints", "checkpoint_bytes", "files", "bytes_written", "os_write_bytes", "write_time_s",
    "write_bandwidth_mib_s", "write_duration_max_s", "write_throughput_gib_s", "fsync_time_s", "write_meta_time_s",
    "write_lat_p50_us", "write_lat_p99_us", "writes", "bytes_read", "os_read_bytes", "read_time_s",
    "read_bandwidth_mib_s", "read_duration_max_s", "read_throughput_gib_s", "read_meta_time_s", "read_lat_p50_us",
    "read_lat_p99_us", "reads", "restore_resident_fraction", "write_to_read_s", "write_crc_time_s", "read_copy_time_s",
]
#: the checkpoint part's keys that are columns of :func:`checkpoint_frame` (with their value when missing)
CHECKPOINT_KEYS: dict[str, Any] = {"name": "custom", "layout": "dcp", "size": 0, "transfer_size": 0, "count": 1,
                                   "restore": "all", "tensor": 1, "pipeline": 1, "zero_stage": 0, "read_shift": 0}
#: the point's own columns read for each checkpoint point
_POINT_COLUMNS = ("point_key", "status", "error", "repeat", "access", "stripe_count", "stripe_size", "nodes", "ppn",
                  "ranks", "fs_type", "striping_applicable")
#: the configuration columns of :func:`checkpoint_configs` (a configuration: equal in all of them but ``repeat``)
CONFIG_COLUMNS = ["config_key", "label", "name", "layout", "access", "nodes", "ppn", "ranks", "stripe_count",
                  "stripe_size", "applied_stripe_size", "size", "transfer_size", "count", "restore", "fs_type"]
#: the checkpoint part's keys a label leaves to the model's name (its shape; the name is the label's head)
_SHAPE = frozenset({"name", "num_layers", "hidden_size", "ffn_hidden_size", "vocab_size", "num_attention_heads",
                    "num_kv_heads", "model_datatype", "optimizer_datatype"})


def _flat(config: dict[str, Any]) -> dict[str, Any]:
    """A checkpoint point's stored config as :func:`ddlio.identity.labels` reads one: the model's name in the
    head's place of the format, each option of the checkpoint part a knob of its own (``layout=torch``,
    ``transfer_size=4MiB``, ``size=model`` for the model's own size), the model's shape left to its name."""
    ck = config.get("checkpoint") or {}
    out = {k: v for k, v in config.items() if k not in ("checkpoint", "kind", "format", "format_options")}
    out["format"] = ck.get("name", "custom")
    for k, v in ck.items():
        if k in _SHAPE:
            continue
        if k in ("size", "transfer_size") and isinstance(v, int | float):
            v = "model" if k == "size" and not v else human_bytes(v)
        out[k] = v
    return out


def checkpoint_labels(configs: list[dict[str, Any]]) -> list[str]:
    """One label per checkpoint config, among ``configs``: ``llama3_8b/shared 1N-2P-4OST`` and every knob in which
    they differ (``layout=torch``, ``transfer_size=4MiB`` ...): equal only for repetitions of one configuration."""
    return labels([_flat(c) for c in configs])


def _applied_stripe_size(layout: Any, applicable: Any) -> float:
    """The stripe size (bytes) the storage backend applied, NaN where striping was not applied or not read back."""
    lay = json.loads(layout) if isinstance(layout, str) else (layout or {})
    size = ((lay or {}).get("applied") or {}).get("stripe_size")
    return float(size) if applicable and size else float("nan")


def _metrics(store: StoreReader, keys: list[str]) -> pd.DataFrame:
    """The checkpoint metrics of the points ``keys`` as a frame indexed by point key, a column per metric."""
    stmt = select(PointMetric.point_key, PointMetric.metric, PointMetric.value).where(PointMetric.kind == KIND)
    rows = read_frame(store, stmt)
    rows = rows[rows["point_key"].isin(keys)]
    wide = rows.pivot_table(index="point_key", columns="metric", values="value", aggfunc="first")
    return wide.reindex(columns=list(dict.fromkeys(ALL_METRICS + list(wide.columns))))


def checkpoint_frame(store: StoreReader, where: str | Filter | None = None, status: str | None = "completed",
                     ) -> pd.DataFrame:
    """One row per checkpoint point (``status``: only those, None: every status), in point-key order: its columns
    (:data:`_POINT_COLUMNS`), ``config_key`` and ``label`` (among the rows returned), the checkpoint part's keys
    (:data:`CHECKPOINT_KEYS`), ``applied_stripe_size`` (bytes; NaN where not applied), ``shard_bytes`` (one
    rank's share of one checkpoint, bytes) and a column per metric of :data:`ALL_METRICS` (NaN where absent).
    ``where`` keeps the rows as :func:`filter_checkpoints` says."""
    cond = (Point.kind == KIND) & or_(Point.source.is_(None), Point.source != "darshan")
    if status is not None:
        cond = cond & (Point.status == status)
    cols = [Point.__table__.columns[c] for c in _POINT_COLUMNS]
    stmt = select(*cols, cast(Point.config, Text).label("config"), cast(Point.layout, Text).label("layout_applied"),
                  cast(Point.result, Text).label("result"))
    df = read_frame(store, stmt.where(cond).order_by(Point.point_key))
    configs = [json.loads(t) if isinstance(t, str) and t else {} for t in df["config"]]
    parts = [(c.get("checkpoint") or {}) for c in configs]
    for k, default in CHECKPOINT_KEYS.items():
        df[k] = [p.get(k, default) for p in parts]
    # the file layout tells N-N points apart (dcp, torch); N-1 writes one file whatever checkpoint.layout says
    df["layout"] = df["layout"].where(df["access"] != "shared", "")
    df["config_key"] = [config_key(c) for c in configs]
    df["label"] = checkpoint_labels(configs) if configs else []
    df["applied_stripe_size"] = [_applied_stripe_size(lay, ok) for lay, ok in
                                 zip(df["layout_applied"], df["striping_applicable"], strict=True)]
    df["striping_applicable"] = df["striping_applicable"].astype("boolean")
    df = df.drop(columns=["layout_applied"])
    metrics = _metrics(store, df["point_key"].tolist())
    df = df.join(metrics, on="point_key")
    for m in metrics.columns:
        df[m] = df[m].astype("float64")
    shards = [_shards(t) for t in df["result"]]
    df = df.drop(columns=["result"])
    df["shard_bytes"] = [float(np.mean(sh)) if sh else float("nan") for sh in shards]
    df["offsets_off_stripe"] = [_off_stripe(sh, a, st) for sh, a, st in
                                zip(shards, df["access"], df["applied_stripe_size"], strict=True)]
    return filter_checkpoints(df, where)


def _shards(result: Any) -> list[int]:
    """Each rank's shard of one checkpoint (bytes), as the point's record stored them; [] where it holds none."""
    try:
        got = json.loads(result)["checkpoints"]["shard_bytes"] if isinstance(result, str) and result else []
    except (ValueError, KeyError, TypeError):
        return []
    return [int(b) for b in got] if isinstance(got, list) else []


def _off_stripe(shards: list[int], access: str, stripe_size: float) -> float:
    """N-1: how many ranks after the first start their shard off a stripe boundary (their offsets are the shards'
    prefix sums); NaN where that does not apply (N-N, striping not applied, shards unknown)."""
    if access != "shared" or len(shards) < 2 or not stripe_size or stripe_size != stripe_size:
        return float("nan")
    offsets = np.cumsum(shards[:-1])
    return float(np.count_nonzero(offsets % int(stripe_size)))


def filter_checkpoints(df: pd.DataFrame, where: str | Filter | None) -> pd.DataFrame:
    """The rows of ``df`` where ``where`` holds. A filter that names a column checkpoint points do not have
    (``format``, ``sample_size`` ...: train's) chooses train points, so it keeps no checkpoint point."""
    if where is None or (isinstance(where, str) and not where.strip()):
        return df
    text = where.text if isinstance(where, Filter) else str(where)
    names = {n.id for n in ast.walk(ast.parse(text.strip(), mode="eval")) if isinstance(n, ast.Name)}
    if not names <= set(df.columns):
        return df.iloc[0:0].reset_index(drop=True)
    checked = Filter.parse(text, list(df.columns))
    return checked.apply(df)


def checkpoint_configs(ck: pd.DataFrame, metrics: list[str] | None = None) -> pd.DataFrame:
    """One row per configuration of :func:`checkpoint_frame`'s rows: :data:`CONFIG_COLUMNS`,
    ``striping_applicable`` (False when any repetition ran unstriped), ``n`` repetitions and
    ``<metric>_mean`` / ``<metric>_std`` (sample std, NaN with one repetition) for each of ``metrics`` (default
    :data:`METRICS`), in the paper's order (nodes, ranks, stripe count, access, layout)."""
    metrics = metrics or list(METRICS)
    cols = [*CONFIG_COLUMNS, "striping_applicable", "n"] + [f"{m}_{s}" for m in metrics for s in ("mean", "std")]
    if ck.empty:
        return pd.DataFrame({c: pd.Series(dtype="float64") for c in cols})
    cid = pd.factorize(ck["config_key"])[0]
    firsts = ck.drop_duplicates("config_key")[CONFIG_COLUMNS].reset_index(drop=True)
    agg = ck[metrics].groupby(cid, sort=True).agg(["mean", "std"])
    agg.columns = [f"{m}_{s}" for m, s in agg.columns]
    out = pd.concat([firsts, agg.reset_index(drop=True)], axis=1)
    out["striping_applicable"] = ck["striping_applicable"].fillna(False).astype(bool).groupby(cid).all().to_numpy()
    out["n"] = np.bincount(cid)
    return out[cols].sort_values(["nodes", "ranks", "stripe_count", "access", "layout", "label"]).reset_index(drop=True)


def _parts(cfg: pd.DataFrame) -> tuple[pd.Series, pd.Series, pd.Series]:
    """A configuration label's parts: ``x`` (the paper's ``1N-2P-4OST``), the model's name where more than one
    model was measured (else ""), and the knobs after the head but the layout (``transfer_size=4MiB`` ...)."""
    head = cfg["label"].astype(str).str.partition(" ")
    tail = head[2].str.partition(" ")
    model = head[0].str.split("/").str[0]
    model = model if model.nunique() > 1 else pd.Series("", index=cfg.index)
    rest = tail[2].str.replace(r"(^| )layout=\S+", "", regex=True).str.strip()
    return tail[0], model, rest


def _join(*texts: pd.Series) -> pd.Series:
    """Texts joined by a space per row, empty ones left out."""
    out = texts[0].astype(str)
    for t in texts[1:]:
        out = out + " " + t.astype(str)
    return out.str.split().str.join(" ")


def bars_frame(cfg: pd.DataFrame) -> pd.DataFrame:
    """The configurations of :func:`checkpoint_configs` as the per-configuration bars take them: ``x`` (the
    paper's ``1N-2P-4OST``) and ``series`` (access and layout, with the model and the other knobs where they
    vary: what tells the bars at one ``x`` apart), in the paper's order."""
    if cfg.empty:
        return cfg.assign(x=pd.Series(dtype=str), series=pd.Series(dtype=str))
    x, model, rest = _parts(cfg)
    return cfg.assign(x=x, series=_join(model, cfg["access"], cfg["layout"], rest)).reset_index(drop=True)


def stripe_frame(cfg: pd.DataFrame, metric: str) -> pd.DataFrame:
    """``metric`` against stripe count for the configurations where striping was applied: columns access,
    nodes, series (layout, with the model, the other knobs and ranks per node where they vary), stripe_count,
    mean, std, n. A stripe count that was not applied is no point of these curves."""
    cols = ["access", "nodes", "series", "stripe_count", "mean", "std", "n"]
    sel = cfg[cfg["striping_applicable"].astype(bool) & cfg[f"{metric}_mean"].notna()] if len(cfg) else cfg
    if sel.empty:
        return pd.DataFrame(columns=cols)
    _, model, rest = _parts(sel)
    ppn = (sel["ppn"].astype(int).astype(str) + "ppn" if sel["ppn"].nunique() > 1
           else pd.Series("", index=sel.index))
    df = sel.assign(series=_join(model, sel["layout"], rest, ppn))
    return (df.rename(columns={f"{metric}_mean": "mean", f"{metric}_std": "std"})[cols]
            .sort_values(["access", "nodes", "series", "stripe_count"]).reset_index(drop=True))


def scenario_codes(cfg: pd.DataFrame, judged: tuple[str, ...]) -> np.ndarray:
    """Each configuration's scenario (int64): configurations equal in every column of :data:`CONFIG_COLUMNS` but
    ``judged`` (and the label and key, which name them all) share one."""
    held = [c for c in CONFIG_COLUMNS if c not in (*judged, "config_key", "label", "applied_stripe_size")]
    return row_codes(cfg[c].astype(str) for c in held)
