"""The comparison behind every guideline: scenarios and sample-size classes, :class:`Settings`, candidates (a
layout's or a format's repetitions) with their bootstrap intervals, gains, ranking and the separation test."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from analysis.configs import row_codes
from analysis.frames import METRICS, human_bytes, stripe_name

KIB, MIB = 1024, 1024 * 1024
#: (upper bound in bytes, exclusive; name) of the sample-size classes.
SIZE_CLASSES = [(64 * KIB, "small (<64KiB)"), (MIB, "medium (64KiB-1MiB)"), (float("inf"), "large (>=1MiB)")]
SCENARIO = ["access", "format", "nodes", "ppn", "size_class"]
FORMAT_SCENARIO = ["access", "nodes", "ppn", "size_class"]
#: the knobs each comparison judges: its scenarios hold every other knob fixed (:func:`scenarios`)
LAYOUT_KNOBS = ("stripe_count", "stripe_size")
FORMAT_KNOBS = ("format", "format_options", "stripe_count", "stripe_size")
LAYOUT_COLUMNS = [
    *SCENARIO, "setting", "verdict", "reason", "layouts", "best", "best_stripe_count", "best_stripe_size", "best_n",
    "best_mean", "best_lo", "best_hi", "baseline", "baseline_n", "baseline_mean", "gain_pct", "gain_lo_pct",
    "gain_hi_pct", "runner_up", "runner_up_mean", "runner_up_lo", "runner_up_hi", "fs_type",
]
FORMAT_COLUMNS = [
    *FORMAT_SCENARIO, "setting", "verdict", "reason", "formats", "best", "best_layout", "best_n", "best_mean",
    "best_lo",
    "best_hi", "runner_up", "runner_up_layout", "runner_up_n", "runner_up_mean", "runner_up_lo", "runner_up_hi",
    "gain_pct", "gain_lo_pct", "gain_hi_pct",
]


def size_class(sample_size: pd.Series) -> pd.Series:
    """The sample-size class of each mean sample size in bytes (:data:`SIZE_CLASSES`)."""
    bounds = [0] + [b for b, _ in SIZE_CLASSES]
    return pd.cut(sample_size.astype(float), bins=bounds, right=False,
                  labels=[n for _, n in SIZE_CLASSES]).astype(str)


@dataclass
class Settings:
    """How the guidelines are computed: the metric (a column of the points), bootstrap resamples and seed, the
    confidence level (0..1) and the fewest repetitions a compared configuration needs."""

    metric: str = "bandwidth_mib_s"
    n_boot: int = 2000
    seed: int = 0
    confidence: float = 0.95
    min_repeats: int = 2

    @property
    def higher_is_better(self) -> bool:
        return METRICS[self.metric][1]


@dataclass
class _Cand:
    name: str
    values: np.ndarray
    boot: np.ndarray | None = None  # bootstrap means, n_boot
    lo: float = float("nan")
    hi: float = float("nan")

    @property
    def n(self) -> int:
        return len(self.values)

    @property
    def mean(self) -> float:
        return float(self.values.mean())


def _bootstrap(cands: list[_Cand], st: Settings, rng: np.random.Generator) -> None:
    a = (1 - st.confidence) / 2
    for c in cands:
        if c.n < st.min_repeats:
            continue
        # uint16 indices are drawn ~2.4x faster than int32 (the bootstrap's cost at 100,000 points)
        idx = rng.integers(0, c.n, size=(st.n_boot, c.n), dtype=np.uint16 if c.n < 2**16 else np.int64)
        c.boot = c.values[idx].mean(axis=1)
        c.lo, c.hi = (float(v) for v in np.quantile(c.boot, [a, 1 - a]))


def _gain(best: _Cand, base: _Cand, st: Settings) -> tuple[float, float, float]:
    """Improvement of best over base in percent (higher-is-better: ratio of means - 1; else base/best - 1)."""
    def ratio(b: np.ndarray | float, r: np.ndarray | float) -> Any:
        return (b / r - 1) * 100 if st.higher_is_better else (r / b - 1) * 100

    g = float(ratio(best.mean, base.mean))
    if best.boot is None or base.boot is None:
        return g, float("nan"), float("nan")
    a = (1 - st.confidence) / 2
    lo, hi = np.quantile(ratio(best.boot, base.boot), [a, 1 - a])
    return g, float(lo), float(hi)


def _rank(cands: list[_Cand], st: Settings) -> list[_Cand]:
    return sorted(cands, key=lambda c: (-c.mean if st.higher_is_better else c.mean, c.name))


def _overlaps(a: _Cand, b: _Cand) -> bool:
    return not (a.lo > b.hi or b.lo > a.hi)


def _ci(c: _Cand) -> str:
    return f"{c.mean:.4g} [{c.lo:.4g}, {c.hi:.4g}]" if c.boot is not None else f"{c.mean:.4g} (n={c.n})"


def _layout_name(count: int, size: int, sizes_vary: bool) -> str:
    return stripe_name(count) + (f" {human_bytes(size)}" if sizes_vary else "")


def _separate(ranked: list[_Cand], st: Settings, what: str) -> tuple[str, str]:
    """(verdict-or-'', reason): '' when the best is separated from every other repeated candidate."""
    best = ranked[0]
    if best.n < st.min_repeats:
        return "cannot decide", f"repetitions missing: best {what} {best.name} has {best.n}, need {st.min_repeats}"
    tied = [c for c in ranked[1:] if c.boot is not None and _overlaps(best, c)]
    if tied:
        return "cannot decide", "intervals overlap: " + "; ".join(
            f"{c.name} {_ci(c)}" for c in [best, *tied])
    return "", ""


def scenarios(pts: pd.DataFrame, judged: tuple[str, ...]) -> pd.DataFrame:
    """``pts`` with ``scenario`` (the configuration key without the ``judged`` knobs, :func:`ddlio.identity.
    config_key`: points in one scenario differ only in the judged knobs and ``repeat``) and ``setting`` (the other
    knobs in which the scenarios differ, as text: ``layout=example reader=tf``). Frames without the stored
    ``config`` (hand-built) fall back to one scenario per row of the scenario columns."""
    from ddlio.identity import config_key, settings  # lazy: only the guidelines need it

    if "config" not in pts.columns or pts.empty:
        return pts.assign(scenario="", setting="")
    # each distinct config text parsed once (analysis_frame's points of one configuration share one text)
    parsed: dict[Any, tuple[str, dict]] = {}
    keys = []
    first: dict[str, dict] = {}
    for text in pts["config"]:
        hit = parsed.get(text)
        if hit is None:
            c = json.loads(text) if isinstance(text, str) and text else {}
            hit = parsed[text] = (config_key(c, judged), c)
        keys.append(hit[0])
        first.setdefault(hit[0], hit[1])
    text = dict(zip(first, settings(list(first.values()), judged, shown=(*SCENARIO, "ranks", "workload_name")),
                    strict=True))
    return pts.assign(scenario=keys, setting=[text[k] for k in keys])


#: the columns of the points the comparisons read (besides the metric)
COMPARED = ("access", "format", "nodes", "ppn", "sample_size", "stripe_count", "stripe_size", "striping_applicable",
             "fs_type", "config", "amplification")
#: the columns a group of :class:`Compared` shares: every compared column but the per-point measurements
GROUPED = tuple(c for c in COMPARED if c != "amplification")


@dataclass
class Compared:
    """The points a comparison reads, folded into groups of points that agree in every :data:`GROUPED` column
    (one configuration's repetitions, as a rule): a million points are a few hundred rows to compare. ``groups``
    has one row per group (those columns, ``size_class`` and ``n``, its points), numbered in the order of their
    first point; :meth:`values` gives a set of groups' metric values per point, in the points' own order, so a
    comparison of groups draws the bootstrap exactly as one of the points would."""

    groups: pd.DataFrame
    metric: np.ndarray  # the metric per point (its unit), the points in frame order
    amplification: np.ndarray | None  # file-system bytes / bytes returned per point (NaN: not measured)
    order: np.ndarray  # point positions, group by group, ascending within each
    starts: np.ndarray  # group i's positions are order[starts[i]:starts[i + 1]]
    sizes_vary: bool  # whether stripe sizes differ (layouts are then named with their size)

    def positions(self, groups: Any) -> np.ndarray:
        """The positions of the points of ``groups`` (labels of :attr:`groups`), ascending."""
        idx = np.asarray(groups, dtype=np.int64)
        parts = [self.order[self.starts[i]:self.starts[i + 1]] for i in idx]
        return parts[0] if len(parts) == 1 else np.sort(np.concatenate(parts)) if parts else np.zeros(0, np.int64)

    def values(self, groups: Any) -> np.ndarray:
        """The metric values of the points of ``groups``, in point order."""
        return self.metric[self.positions(groups)]

    def mean_amplification(self, groups: Any) -> float:
        """The mean amplification of the points of ``groups`` that measured it (NaN if none did or the points
        predate the file-system layer)."""
        if self.amplification is None:
            return float("nan")
        a = self.amplification[self.positions(groups)]
        a = a[~np.isnan(a)]
        return float(a.mean()) if len(a) else float("nan")


def compared(points: pd.DataFrame, st: Settings, keep: np.ndarray | None = None) -> Compared:
    """:class:`Compared` of the points (those where ``keep`` holds, if given) that have the metric. Costs one
    factorization of each grouped column: no copy of the points."""
    ok = points[st.metric].notna().to_numpy(dtype=bool)
    if keep is not None:
        ok = ok & keep
    pos = np.flatnonzero(ok)
    cols = [c for c in GROUPED if c in points.columns]
    # a group per distinct combination (NaN a value of its own), numbered by first appearance among the kept
    gid = pd.factorize(row_codes(points[c] for c in cols)[pos])[0].astype(np.int64)
    order = np.argsort(gid, kind="stable")
    counts = np.bincount(gid, minlength=int(gid.max()) + 1 if len(gid) else 0)
    starts = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
    firsts = pos[order[starts[:-1]]]
    groups = points.iloc[firsts][cols].reset_index(drop=True)
    groups = groups.assign(size_class=size_class(groups["sample_size"]), n=counts)
    amp = (points["amplification"].to_numpy(dtype=float)[pos] if "amplification" in points.columns else None)
    return Compared(groups, points[st.metric].to_numpy(dtype=float)[pos], amp, order, starts,
                    bool(groups["stripe_size"].nunique() > 1))
