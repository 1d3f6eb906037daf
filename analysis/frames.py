"""Frames the figures draw: pure functions from :func:`analysis.query.analysis_frame` output to tidy frames.

Every function here takes and returns pandas frames (no drawing, no store), so each is tested with
``assert_frame_equal``. Repetitions are the points that differ only in ``repeat``: they collapse to one
configuration row with the mean, the sample standard deviation (NaN with one repetition) and their count ``n``.
Units are those of the store: bandwidth MiB/s, IOPS ops/s, times seconds, latencies µs, sizes bytes.
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pandas as pd

from analysis.configs import row_codes
from analysis.query import CONFIG_COLUMNS
from ddlio.metrics import BUCKETS_PER_OCTAVE, bucket_mid_ns
from lustre import label_words

#: metric -> (axis label with unit, higher is better)
METRICS: dict[str, tuple[str, bool]] = {
    "bandwidth_mib_s": ("bandwidth (MiB/s)", True),
    "iops": ("IOPS (reads/s)", True),
    "io_time_slowest_s": ("I/O time, slowest rank (s)", False),
    "wall_time_s": ("runtime (s)", False),
    "samples_per_s": ("throughput (samples/s)", True),
    "au": ("accelerator utilisation (0–1)", True),
    "amplification": ("amplification (file-system bytes / bytes returned)", False),
    "lat_p50_us": ("median read latency (µs)", False),
    "lat_p99_us": ("p99 read latency (µs)", False),
}
#: The four panels of the per-configuration figure, as the paper shows them.
CONFIG_PANELS = ["bandwidth_mib_s", "iops", "io_time_slowest_s", "wall_time_s"]
#: Dimensions that may tell configurations apart besides format/access/nodes/ranks/stripe count, in label order.
_EXTRA_DIMS = ["stripe_size", "sample_size", "workload", "ppn"]
#: The extra dimensions a configuration label shows (ppn is already in ``nodes-ranks``).
_LABEL_DIMS = ["stripe_size", "sample_size", "workload"]


def human_bytes(n: float) -> str:
    """``1048576`` -> ``'1MiB'``; ``1536`` -> ``'1.5KiB'``; 0 -> ``'0B'`` (bytes, binary units)."""
    n = float(n)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return f"{n:.3g}{unit}"
        n /= 1024
    raise AssertionError("unreachable")


def stripe_name(count: int) -> str:
    """A stripe count as the paper labels it, in the default striping backend's words (:func:`lustre.label_words`:
    the count and its target's name; 0 is the file system's default, -1 all targets, by name)."""
    return label_words(int(count), named=True)


def paper_label(nodes: pd.Series, ranks: pd.Series, stripe: pd.Series) -> pd.Series:
    """``nodes-ranks-stripe count`` as the paper writes it (``1N-4P-`` and :func:`stripe_name`)."""
    return nodes.astype(int).astype(str) + "N-" + ranks.astype(int).astype(str) + "P-" + stripe.map(stripe_name)


def _dim_text(dim: str, values: pd.Series) -> pd.Series:
    if dim == "stripe_size":
        return "S" + values.map(lambda v: "default" if v == 0 else human_bytes(v))
    if dim == "sample_size":
        return values.map(human_bytes)
    if dim == "ppn":
        return values.astype(str) + "ppn"
    return values.astype(str)


def varying(df: pd.DataFrame, dims: list[str]) -> list[str]:
    """The ``dims`` that take more than one value in ``df``."""
    return [d for d in dims if d in df.columns and df[d].nunique(dropna=False) > 1]


def config_columns(points: pd.DataFrame) -> list[str]:
    """The :data:`CONFIG_COLUMNS` that ``points`` has: with ``config_key`` (:mod:`ddlio.identity`), repetitions are
    exactly the points of one configuration; frames built by hand may lack it."""
    return CONFIG_COLUMNS + (["config_key"] if "config_key" in points.columns else [])


def configs(points: pd.DataFrame, metrics: list[str] | None = None) -> pd.DataFrame:
    """One row per configuration: :data:`CONFIG_COLUMNS`, ``label`` (paper style, plus whatever else varies),
    ``n`` repetitions, and ``<metric>_mean`` / ``<metric>_std`` for each metric (default: those of :data:`METRICS`
    that ``points`` has). Configurations are numbered (``config_id``) in the sorted order of their columns."""
    metrics = metrics or [m for m in METRICS if m in points.columns]
    by = config_columns(points)
    cols = ["config_id", *by, "label", "n"] + [f"{m}_{s}" for m in metrics for s in ("mean", "std")]
    cols.append("striping_applicable")
    if points.empty:
        return pd.DataFrame({c: pd.Series(dtype="float64") for c in cols})
    cid, firsts = config_ids(points)
    g = points[metrics].groupby(cid, sort=True)  # one integer key: the configurations' columns are not grouped
    agg = g.agg(["mean", "std"])
    agg.columns = [f"{m}_{s}" for m, s in agg.columns]
    out = pd.concat([firsts[by].reset_index(drop=True), agg.reset_index(drop=True)], axis=1)
    out.insert(len(by), "n", np.bincount(cid))
    # False when any repetition ran where striping was not applied (not Lustre): its stripe count means nothing
    applicable = points.get("striping_applicable", pd.Series(True, index=points.index)).fillna(False).astype(bool)
    out["striping_applicable"] = applicable.groupby(cid, sort=True).all().to_numpy()
    out.insert(0, "config_id", np.arange(len(out)))
    if "label" in points.columns and "config" in points.columns:  # ddlio.identity's: unique per configuration
        label = points["label"].groupby(cid, sort=True).first().to_numpy()
        label = pd.Series(label).str.split(" ", n=1).str[1].fillna("").to_numpy()  # the panel names format/access
    else:  # frames built without the stored config (tests of the drawing alone)
        label = paper_label(out["nodes"], out["ranks"], out["stripe_count"])
        for dim in varying(out, _LABEL_DIMS):
            label = label + " " + _dim_text(dim, out[dim])
    out.insert(len(by) + 1, "label", label)
    dup = out.duplicated(["format", "access", "label"], keep=False)
    if dup.any():  # configurations that differ only in a knob not shown (batch, seed ...): number them
        out.loc[dup, "label"] = out.loc[dup, "label"] + " #" + out.loc[dup, "config_id"].astype(str)
    return out[cols].sort_values(["format", "access", "nodes", "ranks", "stripe_count", "stripe_size",
                                  "sample_size", "config_id"]).reset_index(drop=True)


def config_ids(points: pd.DataFrame) -> tuple[np.ndarray, pd.DataFrame]:
    """(each point's ``config_id`` as :func:`configs` numbers it, each configuration's first point in
    ``config_id`` order); ``points`` must not be empty."""
    by = config_columns(points)
    codes = row_codes(points[c] for c in by)
    first = np.unique(codes, return_index=True)[1]  # code order: first appearance
    rank = points.iloc[first].groupby(by, sort=True, dropna=False).ngroup().to_numpy()  # each code's id
    return rank[codes], points.iloc[first[np.argsort(rank)]]


def amplification_frame(cfg: pd.DataFrame) -> pd.DataFrame:
    """Amplification per configuration (file-system bytes / bytes the reader returned; 1 = exactly what was
    asked for): columns format, access, label, mean, std, n, in the paper's order; configurations measured
    without the file-system layer (older points) are left out."""
    cols = ["format", "access", "label", "mean", "std", "n"]
    if cfg.empty or "amplification_mean" not in cfg.columns:
        return pd.DataFrame(columns=cols)
    df = cfg[cfg["amplification_mean"].notna()]
    df = df.rename(columns={"amplification_mean": "mean", "amplification_std": "std"})
    return df[cols].reset_index(drop=True)


def config_bars_frame(cfg: pd.DataFrame, format: str, access: str | None = None) -> pd.DataFrame:
    """The configurations of one format (and ``access``, if given) in the paper's order (nodes, ranks, stripe
    count ...), with ``x`` (the paper's ``1N-4P-1OST``, the head of ``label``) and ``series`` (the access mode and
    the rest of the label: what else tells the configurations at one ``x`` apart), for grouped bars."""
    sel = cfg[cfg["format"] == format] if access is None else cfg[(cfg["format"] == format) & (cfg["access"] == access)]
    sel = sel.sort_values(["nodes", "ranks", "stripe_count", "stripe_size", "access", "config_id"])
    head = sel["label"].astype(str).str.partition(" ")
    series = (sel["access"].astype(str) + " " + head[2]).str.strip()
    return sel.assign(x=head[0], series=series).reset_index(drop=True)


def series_name(df: pd.DataFrame, dims: list[str], exclude: list[str]) -> pd.Series:
    """A legend name per row from ``dims`` plus whichever of the other extra dimensions vary (not ``exclude``)."""
    extra = [d for d in varying(df, _EXTRA_DIMS) if d not in exclude and d not in dims]
    name = df[dims[0]].astype(str)
    for d in dims[1:]:
        name = name + "/" + df[d].astype(str)
    for d in extra:
        name = name + " " + _dim_text(d, df[d])
    return name


def stripe_frame(cfg: pd.DataFrame, metric: str) -> pd.DataFrame:
    """``metric`` against stripe count: columns access, nodes, series (format, plus what else varies), stripe_count,
    mean, std, n. Configurations that differ in hidden knobs are averaged (weighted by repetitions)."""
    cols = ["access", "nodes", "series", "stripe_count", "mean", "std", "n"]
    if cfg.empty:
        return pd.DataFrame(columns=cols)
    df = cfg.assign(series=series_name(cfg, ["format"], exclude=[]))
    df = df.assign(_w=df[f"{metric}_mean"] * df["n"])
    g = df.groupby(["access", "nodes", "series", "stripe_count"], sort=True)
    out = g.agg(_w=("_w", "sum"), n=("n", "sum"), std=(f"{metric}_std", "mean")).reset_index()
    out["mean"] = out["_w"] / out["n"]
    return out[cols]


def best_per_scale(cfg: pd.DataFrame, by: str = "bandwidth_mib_s") -> pd.DataFrame:
    """At each node count, the configuration with the best mean ``by`` for each format × access (and each value of
    the other varying non-layout dimensions): its row of :func:`configs` plus ``series`` and ``layout`` (stripe)."""
    if cfg.empty:
        return cfg.assign(series=pd.Series(dtype=str), layout=pd.Series(dtype=str))
    df = cfg.assign(series=series_name(cfg, ["format", "access"], exclude=["stripe_size"]))
    higher = METRICS.get(by, ("", True))[1]
    key = f"{by}_mean"
    df = df[df[key].notna()]
    order = df.sort_values(["series", "nodes", key, "config_id"], ascending=[True, True, not higher, True])
    best = order.groupby(["series", "nodes"], sort=True).head(1)
    layout = best["stripe_count"].map(stripe_name)
    if cfg["stripe_size"].nunique() > 1:
        layout = layout + " " + _dim_text("stripe_size", best["stripe_size"])
    if "striping_applicable" in best.columns:  # off Lustre every stripe count read the same: name none
        layout = layout.where(best["striping_applicable"].astype(bool), "any (not Lustre)")
    return best.assign(layout=layout).sort_values(["series", "nodes"]).reset_index(drop=True)


def heatmap_frame(best: pd.DataFrame, by: str = "bandwidth_mib_s") -> tuple[pd.DataFrame, pd.DataFrame]:
    """From :func:`best_per_scale`: (values, layouts), each indexed by series with a column per node count."""
    values = best.pivot(index="series", columns="nodes", values=f"{by}_mean")
    layouts = best.pivot(index="series", columns="nodes", values="layout")
    return values, layouts


def latency_frame(points: pd.DataFrame, keys: pd.Series, hists: np.ndarray) -> pd.DataFrame:
    """Read-latency distribution per format/access (plus what else varies among format, access and stripe count):
    the histograms of the points summed (``keys``/``hists`` from :func:`analysis.query.hist_frame`, per point or
    per configuration); columns series, bucket, latency_us (bucket's geometric midpoint, µs),
    upper_us (bucket's upper edge, µs), reads, fraction, cdf (fraction of reads faster than upper_us). Buckets
    before the first and after the last non-empty one are dropped."""
    cols = ["series", "bucket", "latency_us", "upper_us", "reads", "fraction", "cdf"]
    if points.empty or hists.size == 0:
        return pd.DataFrame(columns=cols)
    # each point's row in ``hists`` (a hash lookup on object arrays: isin on arrow strings is slow at 100k); rows
    # are per point, or per configuration when ``keys`` names that column (points then share a row, summed once)
    by = keys.name if keys.name in points.columns and keys.name != "point_key" else "point_key"
    row = pd.Index(keys.to_numpy(dtype=object)).get_indexer(points[by].to_numpy(dtype=object))
    pts = points[row >= 0]
    row = row[row >= 0]
    names = series_name(pts, ["format", "access"], exclude=["stripe_size", "sample_size", "workload", "ppn"])
    parts = []
    for name, idx in pts.groupby(names, sort=True).indices.items():
        h = hists[np.unique(row[idx])].sum(axis=0)
        nz = np.flatnonzero(h)
        if len(nz) == 0:
            continue
        k = np.arange(nz[0], nz[-1] + 1)
        reads = h[k]
        total = reads.sum()
        parts.append(pd.DataFrame({
            "series": name, "bucket": k, "latency_us": bucket_mid_ns(k) / 1000.0,
            "upper_us": 2.0 ** ((k + 1) / BUCKETS_PER_OCTAVE) / 1000.0, "reads": reads,
            "fraction": reads / total, "cdf": np.cumsum(reads) / total,
        }))
    if not parts:
        return pd.DataFrame(columns=cols)
    return pd.concat(parts, ignore_index=True)[cols]


# ------------------------------------------------------------------------------------------------- access logs
#: File names of access logs in a point's run folder (written with ``trace=true``).
TRACE_GLOBS = ("trace*.csv", "trace*/*.csv", "access*.csv")
#: canonical column -> accepted names in a trace file
_TRACE_ALIASES = {
    "rank": ("rank",),
    "start_s": ("start_s", "start", "t_start", "time_s", "time"),
    "offset": ("offset", "offset_bytes"),
    "size": ("size", "size_bytes", "bytes", "length"),
}


def find_traces(points: pd.DataFrame) -> pd.DataFrame:
    """Access logs in the points' run folders: columns point_key, label, path (one row per file, sorted)."""
    rows = []
    dirs = points["run_dir"].to_numpy(dtype=object)
    named = np.flatnonzero([isinstance(d, str) and d != "" for d in dirs])  # a million points without one: no rows
    for key, label, run_dir in points.iloc[named][["point_key", "label", "run_dir"]].itertuples(index=False):
        if not Path(run_dir).is_dir():
            continue
        for pattern in TRACE_GLOBS:
            rows += [(key, label, str(p)) for p in sorted(Path(run_dir).glob(pattern))]
    return pd.DataFrame(rows, columns=["point_key", "label", "path"]).drop_duplicates("path").reset_index(drop=True)


def trace_frame(path: str | Path) -> pd.DataFrame:
    """One access log as columns rank, start_s (s), offset (bytes), size (bytes), op, file; sorted by start.

    Reads CSV files whose header names those columns (or a known alias, e.g. ``start``, ``bytes``); raises
    ValueError naming the missing columns otherwise. Only reads (``op`` absent or matching ``read``) are kept.
    """
    raw = pd.read_csv(path)
    lower = {c.lower().strip(): c for c in raw.columns}
    out = {}
    missing = []
    for canon, names in _TRACE_ALIASES.items():
        found = next((lower[n] for n in names if n in lower), None)
        if found is None:
            missing.append(f"{canon} (or {', '.join(names[1:])})" if len(names) > 1 else canon)
        else:
            out[canon] = raw[found]
    if missing:
        raise ValueError(f"{path}: access log lacks column(s) {'; '.join(missing)}; has {list(raw.columns)}")
    df = pd.DataFrame(out)
    df["op"] = raw[lower["op"]].astype(str) if "op" in lower else "read"
    df["file"] = raw[lower["file"]].astype(str) if "file" in lower else ""
    df = df[df["op"].str.contains("read", flags=re.IGNORECASE)]
    df = df.astype({"rank": "int64", "start_s": "float64", "offset": "int64", "size": "int64"})
    return df.sort_values(["start_s", "rank"], kind="stable").reset_index(drop=True)
