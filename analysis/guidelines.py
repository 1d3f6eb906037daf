"""``python -m analysis guidelines``: which stripe layout and which format to use, and how sure that is.

A *scenario* is access × format × nodes × ranks per node × sample-size class. For each one the guideline names the
stripe layout (count, size) with the best mean of the metric (bandwidth by default) over its repetitions, its gain
over the baseline (stripe count 1, else the file system's default 0) with a bootstrap 95% confidence interval, and a
verdict:

- ``recommend``: the best layout's interval overlaps no other layout's and its gain interval excludes zero;
- ``keep baseline``: the baseline itself is best and separated from every other layout;
- ``cannot decide``: intervals overlap, repetitions are missing (fewer than ``min_repeats`` of the best layout or
  of the baseline), only one layout was measured, or striping was not applicable (not Lustre: every stripe count
  reads the same bytes from the same place, so a difference between them is noise).

Per access × nodes × ranks per node × sample-size class, the same comparison between formats (each at its best
layout; on a non-Lustre file system, all of a format's points pooled, since their bytes are the same). Then
cross-cutting statements in the paper's style, derived only from the decided rows, each with its numbers.

Bootstrap: every layout's repetitions are resampled with replacement ``n_boot`` times (numpy, seeded), giving the
distribution of its mean; intervals are the 2.5th and 97.5th percentiles. Taking the best of several candidates by
its mean makes its interval slightly optimistic (winner's curse); overlaps are therefore judged conservatively.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from analysis.frames import METRICS, human_bytes, stripe_name

KIB, MIB = 1024, 1024 * 1024
#: (upper bound in bytes, exclusive; name) of the sample-size classes.
SIZE_CLASSES = [(64 * KIB, "small (<64KiB)"), (MIB, "medium (64KiB-1MiB)"), (float("inf"), "large (>=1MiB)")]
SCENARIO = ["access", "format", "nodes", "ppn", "size_class"]
FORMAT_SCENARIO = ["access", "nodes", "ppn", "size_class"]
LAYOUT_COLUMNS = [
    *SCENARIO, "verdict", "reason", "layouts", "best", "best_stripe_count", "best_stripe_size", "best_n",
    "best_mean", "best_lo", "best_hi", "baseline", "baseline_n", "baseline_mean", "gain_pct", "gain_lo_pct",
    "gain_hi_pct", "runner_up", "runner_up_mean", "runner_up_lo", "runner_up_hi", "fs_type",
]
FORMAT_COLUMNS = [
    *FORMAT_SCENARIO, "verdict", "reason", "formats", "best", "best_layout", "best_n", "best_mean", "best_lo",
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


def _measured(points: pd.DataFrame, st: Settings) -> tuple[pd.DataFrame, bool]:
    """The points that have the metric, with their sample-size class; and whether stripe sizes vary."""
    pts = points[points[st.metric].notna()].assign(size_class=size_class(points["sample_size"]))
    return pts, pts["stripe_size"].nunique() > 1


def layout_guidelines(points: pd.DataFrame, st: Settings | None = None) -> pd.DataFrame:
    """One row per scenario (:data:`LAYOUT_COLUMNS`): the best stripe layout, its gain over the baseline in percent
    with a bootstrap CI, and the verdict with its reason. Means and bounds are in the metric's unit."""
    st = st or Settings()
    rng = np.random.default_rng(st.seed)
    if points.empty:
        return pd.DataFrame(columns=LAYOUT_COLUMNS)
    pts, sizes_vary = _measured(points, st)
    rows = []
    for key, sc in pts.groupby(SCENARIO, sort=True):
        row: dict[str, Any] = dict(zip(SCENARIO, key, strict=True))
        row["fs_type"] = ",".join(sorted(sc["fs_type"].dropna().astype(str).unique())) or "unknown"
        applicable = sc["striping_applicable"].fillna(False).astype(bool)
        row["layouts"] = int(sc.groupby(["stripe_count", "stripe_size"]).ngroups)
        if not applicable.any():
            row.update(verdict="cannot decide",
                       reason=f"striping not applicable on {row['fs_type']} (not Lustre): every stripe count reads "
                              "the same bytes, so differences between them are noise")
            rows.append(row)
            continue
        sc = sc[applicable]
        cands, meta = [], {}
        for (count, size), g in sc.groupby(["stripe_count", "stripe_size"], sort=True):
            c = _Cand(_layout_name(count, size, sizes_vary), g[st.metric].to_numpy(dtype=float))
            cands.append(c)
            meta[c.name] = (int(count), int(size))
        _bootstrap(cands, st, rng)
        ranked = _rank(cands, st)
        best = ranked[0]
        base = _baseline(cands, meta, best)
        row.update(best=best.name, best_stripe_count=meta[best.name][0], best_stripe_size=meta[best.name][1],
                   best_n=best.n, best_mean=best.mean, best_lo=best.lo, best_hi=best.hi)
        if len(ranked) > 1:
            ru = ranked[1]
            row.update(runner_up=ru.name, runner_up_mean=ru.mean, runner_up_lo=ru.lo, runner_up_hi=ru.hi)
        if base is not None:
            g, glo, ghi = _gain(best, base, st)
            row.update(baseline=base.name, baseline_n=base.n, baseline_mean=base.mean, gain_pct=g,
                       gain_lo_pct=glo, gain_hi_pct=ghi)
        if len(cands) == 1:
            row.update(verdict="cannot decide", reason=f"only one stripe layout measured ({best.name})")
        elif base is not None and base.n < st.min_repeats:
            row.update(verdict="cannot decide", reason=f"repetitions missing: baseline {base.name} has {base.n}, "
                                                       f"need {st.min_repeats}")
        else:
            verdict, reason = _separate(ranked, st, "layout")
            if verdict:
                row.update(verdict=verdict, reason=reason)
            elif base is None:
                row.update(verdict="recommend", reason=f"{best.name} {_ci(best)} is above every other layout; no "
                                                       "baseline (stripe 1 or default) measured to state a gain")
            elif base is best:
                row.update(verdict="keep baseline",
                           reason=f"{best.name} {_ci(best)} beats {ranked[1].name} {_ci(ranked[1])}")
            elif (row["gain_lo_pct"] <= 0) or np.isnan(row["gain_lo_pct"]):
                row.update(verdict="cannot decide", reason="gain over the baseline is not significant: "
                           f"{row['gain_pct']:+.1f}% [{row['gain_lo_pct']:+.1f}%, {row['gain_hi_pct']:+.1f}%]")
            else:
                row.update(verdict="recommend",
                           reason=f"{best.name} {_ci(best)} vs next {ranked[1].name} {_ci(ranked[1])}")
        rows.append(row)
    return pd.DataFrame(rows).reindex(columns=LAYOUT_COLUMNS)


def _baseline(cands: list[_Cand], meta: dict[str, tuple[int, int]], best: _Cand) -> _Cand | None:
    """Stripe count 1 (at the best's stripe size if measured, else the most repeated), else the default (0)."""
    for count in (1, 0):
        pool = [c for c in cands if meta[c.name][0] == count]
        if pool:
            same = [c for c in pool if meta[c.name][1] == meta[best.name][1]]
            return same[0] if same else max(pool, key=lambda c: (c.n, c.name))
    return None


def _format_candidates(sc: pd.DataFrame, st: Settings, sizes_vary: bool) -> list[tuple[_Cand, str]]:
    """Each format's values in one scenario: at its best stripe layout, or pooled when striping is not applicable."""
    out = []
    for fmt, g in sc.groupby("format", sort=True):
        applicable = g["striping_applicable"].fillna(False).astype(bool)
        if not applicable.any():
            out.append((_Cand(str(fmt), g[st.metric].to_numpy(dtype=float)), "pooled, not Lustre"))
            continue
        g = g[applicable]
        layouts = [(_layout_name(c, s, sizes_vary), x[st.metric].to_numpy(dtype=float))
                   for (c, s), x in g.groupby(["stripe_count", "stripe_size"], sort=True)]
        name, vals = _rank([_Cand(n, v) for n, v in layouts], st)[0].name, None
        vals = dict(layouts)[name]
        out.append((_Cand(str(fmt), vals), name))
    return out


def format_guidelines(points: pd.DataFrame, st: Settings | None = None) -> pd.DataFrame:
    """One row per access × nodes × ppn × sample-size class (:data:`FORMAT_COLUMNS`): the best format (each at its
    best layout), its gain over the runner-up format in percent with a bootstrap CI, and the verdict."""
    st = st or Settings()
    rng = np.random.default_rng(st.seed + 1)
    if points.empty:
        return pd.DataFrame(columns=FORMAT_COLUMNS)
    pts, sizes_vary = _measured(points, st)
    rows = []
    for key, sc in pts.groupby(FORMAT_SCENARIO, sort=True):
        row: dict[str, Any] = dict(zip(FORMAT_SCENARIO, key, strict=True))
        pairs = _format_candidates(sc, st, sizes_vary)
        layout_of = {c.name: lay for c, lay in pairs}
        cands = [c for c, _ in pairs]
        _bootstrap(cands, st, rng)
        ranked = _rank(cands, st)
        best = ranked[0]
        row.update(formats=len(cands), best=best.name, best_layout=layout_of[best.name], best_n=best.n,
                   best_mean=best.mean, best_lo=best.lo, best_hi=best.hi)
        if len(ranked) == 1:
            row.update(verdict="cannot decide", reason=f"only one format measured ({best.name})")
            rows.append(row)
            continue
        ru = ranked[1]
        g, glo, ghi = _gain(best, ru, st)
        row.update(runner_up=ru.name, runner_up_layout=layout_of[ru.name], runner_up_n=ru.n,
                   runner_up_mean=ru.mean, runner_up_lo=ru.lo, runner_up_hi=ru.hi, gain_pct=g, gain_lo_pct=glo,
                   gain_hi_pct=ghi)
        verdict, reason = _separate(ranked, st, "format")
        if not verdict and ru.n < st.min_repeats:
            verdict, reason = "cannot decide", f"repetitions missing: {ru.name} has {ru.n}, need {st.min_repeats}"
        if not verdict:
            verdict, reason = "recommend", f"{best.name} {_ci(best)} vs {ru.name} {_ci(ru)}"
        row.update(verdict=verdict, reason=reason + _amplification_note(sc, [best.name, ru.name]))
        rows.append(row)
    return pd.DataFrame(rows).reindex(columns=FORMAT_COLUMNS)


#: amplification this far from 1 (or further) is cited in a format verdict's reason
AMPLIFICATION_NOTE = 0.05


def _amplification_note(sc: pd.DataFrame, formats: list[str]) -> str:
    """Why, at the file system: the formats (best, runner-up) whose reads made the file system serve more (or
    fewer) bytes than the reader returned, with their mean amplification in the scenario; '' when none differs
    from 1 by AMPLIFICATION_NOTE or more, or the points predate the file-system layer."""
    if "amplification" not in sc.columns:
        return ""
    amp = sc.groupby("format")["amplification"].mean()
    cited = [f"{f} {amp[f]:.2f}x" for f in formats if f in amp and amp[f] == amp[f]
             and abs(amp[f] - 1) >= AMPLIFICATION_NOTE]
    if not cited:
        return ""
    return "; amplification (file-system bytes / bytes returned): " + ", ".join(cited)


# ------------------------------------------------------------------------------------------------ statements
def _pct(row: pd.Series) -> str:
    return f"{row['gain_pct']:+.0f}% [{row['gain_lo_pct']:+.0f}%, {row['gain_hi_pct']:+.0f}%]"


def _scale(row: pd.Series) -> str:
    return f"{int(row['nodes'])}N×{int(row['ppn'])}ppn {row['size_class'].split(' ')[0]}"


def statements(layouts: pd.DataFrame, formats: pd.DataFrame, points: pd.DataFrame,
               st: Settings | None = None) -> list[dict[str, Any]]:
    """Cross-cutting findings in the paper's style, each ``{"text": ..., "evidence": [...]}``; derived only from
    the decided rows of the two guideline frames (and the points' cache states)."""
    st = st or Settings()
    unit = METRICS[st.metric][0]
    out: list[dict[str, Any]] = []
    decided = layouts[layouts["verdict"].isin(["recommend", "keep baseline"])]
    for (access, fmt), g in decided.groupby(["access", "format"], sort=True):
        top = g["best"].value_counts()
        name, count = str(top.index[0]), int(top.iloc[0])
        rows = g[g["best"] == name]
        ev = [f"{_scale(r)}: {r['best']} {r['best_mean']:.4g} {unit}, "
              + (f"{_pct(r)} over {r['baseline']}" if isinstance(r["baseline"], str) else "no baseline")
              for _, r in rows.iterrows()]
        nodes = ", ".join(str(int(n)) for n in sorted(rows["nodes"].unique()))
        what = "keeping the baseline" if (rows["verdict"] == "keep baseline").all() else f"stripe {name}"
        out.append({"text": f"{fmt} with {access} access: {what} is best in {count} of {len(g)} decided scenarios "
                            f"(nodes {nodes}).", "evidence": ev})
    fdec = formats[formats["verdict"] == "recommend"]
    for (access, ppn, sclass), g in fdec.groupby(["access", "ppn", "size_class"], sort=True):
        g = g.sort_values("nodes")
        winners = g["best"].tolist()
        lead = winners[-1]
        k = len(winners)
        while k > 0 and winners[k - 1] == lead:
            k -= 1
        run = g.iloc[k:]
        allnodes = formats[(formats["access"] == access) & (formats["ppn"] == ppn) & (formats["size_class"] == sclass)]
        frm = int(run["nodes"].min())
        span = "at every node count measured" if k == 0 and len(run) == len(allnodes) else f"from {frm} nodes"
        ev = [f"{int(r['nodes'])}N: {r['best']} ({r['best_layout']}) {r['best_mean']:.4g} {unit}, {_pct(r)} over "
              f"{r['runner_up']} ({r['runner_up_layout']})" for _, r in run.iterrows()]
        lo, hi = run["gain_pct"].min(), run["gain_pct"].max()
        gains = f"{lo:+.0f}%" if round(lo) == round(hi) else f"{lo:+.0f}% to {hi:+.0f}%"
        out.append({"text": f"{lead} leads {access} {sclass.split(' ')[0]}-sample reads ({ppn} per node) {span}: "
                            f"{gains} {METRICS[st.metric][0].split(' (')[0]} over the next format.", "evidence": ev})
    for verdicts, what in ((layouts["verdict"], "stripe-layout"), (formats["verdict"], "format")):
        undecided = layouts if what == "stripe-layout" else formats
        und = undecided[verdicts == "cannot decide"]
        if len(und):
            why = und["reason"].str.split(":").str[0].value_counts()
            out.append({"text": f"{len(und)} of {len(undecided)} {what} scenarios cannot be decided.",
                        "evidence": [f"{n}× {r}" for r, n in why.items()]})
    if "cache" in points.columns:
        warm = points[points["cache"].fillna("unknown") != "cold"]
        if len(warm):
            out.append({"text": f"{len(warm)} of {len(points)} points were not verified cold (read partly from "
                                "memory): their figures may overstate storage speed.",
                        "evidence": [f"{k}: {v}" for k, v in warm["cache"].fillna("unknown").value_counts().items()]})
    return out


# ---------------------------------------------------------------------------------------------- rendering
def _num(v: Any, fmt: str = "{:.4g}") -> str:
    return "" if v is None or (isinstance(v, float) and np.isnan(v)) else fmt.format(v)


def markdown(layouts: pd.DataFrame, formats: pd.DataFrame, stmts: list[dict[str, Any]], st: Settings,
             notes: list[str] | None = None) -> str:
    """The guidelines as Markdown: a table of layouts, a table of formats, the statements with their evidence."""
    unit = METRICS[st.metric][0]
    ci = f"{st.confidence:.0%}"
    lines = [f"# Guidelines: {unit}, mean of repetitions [{ci} bootstrap CI, {st.n_boot} resamples, seed {st.seed}]",
             "", "## Stripe layout per scenario", "",
             "| access | format | nodes×ppn | sample size | verdict | best layout | mean [CI] | gain over baseline "
             "[CI] | why |", "|---|---|---|---|---|---|---|---|---|"]
    for _, r in layouts.iterrows():
        best = r["best"] if isinstance(r["best"], str) else "-"
        mean = f"{_num(r['best_mean'])} [{_num(r['best_lo'])}, {_num(r['best_hi'])}]" if best != "-" else "-"
        gain = (f"{_num(r['gain_pct'], '{:+.1f}')}% [{_num(r['gain_lo_pct'], '{:+.1f}')}%, "
                f"{_num(r['gain_hi_pct'], '{:+.1f}')}%] vs {r['baseline']}") if isinstance(r["baseline"], str) else "-"
        lines.append(f"| {r['access']} | {r['format']} | {int(r['nodes'])}×{int(r['ppn'])} | {r['size_class']} | "
                     f"**{r['verdict']}** | {best} | {mean} | {gain} | {r['reason']} |")
    lines += ["", "## Format per scenario", "",
              "| access | nodes×ppn | sample size | verdict | best format (layout) | mean [CI] | runner-up | gain "
              "[CI] | why |", "|---|---|---|---|---|---|---|---|---|"]
    for _, r in formats.iterrows():
        ru = f"{r['runner_up']} ({r['runner_up_layout']})" if isinstance(r["runner_up"], str) else "-"
        gain = (f"{_num(r['gain_pct'], '{:+.1f}')}% [{_num(r['gain_lo_pct'], '{:+.1f}')}%, "
                f"{_num(r['gain_hi_pct'], '{:+.1f}')}%]") if isinstance(r["runner_up"], str) else "-"
        lines.append(f"| {r['access']} | {int(r['nodes'])}×{int(r['ppn'])} | {r['size_class']} | "
                     f"**{r['verdict']}** | {r['best']} ({r['best_layout']}) | {_num(r['best_mean'])} "
                     f"[{_num(r['best_lo'])}, {_num(r['best_hi'])}] | {ru} | {gain} | {r['reason']} |")
    lines += ["", "## Statements", ""]
    for s in stmts:
        lines.append(f"- {s['text']}")
        lines += [f"  - {e}" for e in s["evidence"]]
    if not stmts:
        lines.append("- none: nothing in the store is decided yet")
    if notes:
        lines += ["", "## Caches below the client", "", *[f"- {n}" for n in notes]]
    return "\n".join(lines) + "\n"


def as_json(layouts: pd.DataFrame, formats: pd.DataFrame, stmts: list[dict[str, Any]], st: Settings,
            notes: list[str] | None = None) -> str:
    """The guidelines as one JSON document (NaN as null)."""
    def recs(df: pd.DataFrame) -> list[dict[str, Any]]:
        return json.loads(df.to_json(orient="records"))

    return json.dumps({"metric": st.metric, "unit": METRICS[st.metric][0], "confidence": st.confidence,
                       "n_boot": st.n_boot, "seed": st.seed, "min_repeats": st.min_repeats,
                       "layouts": recs(layouts), "formats": recs(formats), "statements": stmts,
                       "notes": notes or []}, indent=1)


def compute(points: pd.DataFrame, st: Settings) -> tuple[pd.DataFrame, pd.DataFrame, list[dict[str, Any]]]:
    """(layout guidelines, format guidelines, statements) for ``points``. Points that include their dataset's
    first read since generation are left out (:func:`analysis.below.excluded_note`): a first read is served by
    the device, every other read by a cache below the client, and the two must never be compared."""
    from analysis.below import excluded_note

    points, _ = excluded_note(points)
    lay = layout_guidelines(points, st)
    fmt = format_guidelines(points, st)
    return lay, fmt, statements(lay, fmt, points, st)


def below_notes(store: Any, points: pd.DataFrame) -> list[str]:
    """What the guidelines say of caches below the client: points left out for holding a first read, and
    configurations whose first reads differ from their repeats."""
    from analysis.below import excluded_note, store_notes

    _, left_out = excluded_note(points)
    return ([left_out] if left_out else []) + store_notes(store, points)


def setup_parser(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--db", help="SQLite file or SQLAlchemy URL (default: $DDLIO_DB or ./results.db)")
    parser.add_argument("--format", choices=("md", "json"), default="md", help="Markdown (default) or JSON")
    parser.add_argument("--where", help="keep the points where this holds, e.g. \"format == 'hdf5' and nodes >= 2\" "
                                          "(columns, literals, comparisons, in [...], and/or/not, arithmetic)")
    parser.add_argument("--metric", choices=list(METRICS), default="bandwidth_mib_s",
                        help="what 'best' means (default: bandwidth_mib_s; times: lower is better)")
    parser.add_argument("--bootstrap", type=int, default=2000, help="bootstrap resamples (default 2000)")
    parser.add_argument("--seed", type=int, default=0, help="bootstrap seed (default 0)")
    parser.add_argument("--min-repeats", type=int, default=2, help="repetitions a compared layout needs (default 2)")


def main(args: argparse.Namespace) -> int:
    from analysis.query import analysis_frame, parse_where
    from ddlio.errors import DdlioError
    from ddlio.store import open_store_for_reading

    if args.bootstrap < 100 or args.min_repeats < 2:
        raise DdlioError("--bootstrap must be at least 100 and --min-repeats at least 2 (an interval needs two "
                         "repetitions)")
    st = Settings(metric=args.metric, n_boot=args.bootstrap, seed=args.seed, min_repeats=args.min_repeats)
    where = parse_where(args.where)
    store = open_store_for_reading(args.db)
    points = analysis_frame(store, where)
    if points.empty:
        print("no completed points in the store (after --where): nothing to recommend", file=sys.stderr)
        return 1
    lay, fmt, stmts = compute(points, st)
    notes = below_notes(store, points)
    sys.stdout.write(as_json(lay, fmt, stmts, st, notes) + "\n" if args.format == "json"
                     else markdown(lay, fmt, stmts, st, notes))
    return 0
