"""The stripe-layout guideline: per scenario, the best layout, its gain over the baseline and the verdict."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from analysis.guidelines.compare import (
    LAYOUT_COLUMNS,
    LAYOUT_KNOBS,
    SCENARIO,
    Compared,
    Settings,
    _bootstrap,
    _Cand,
    _ci,
    _gain,
    _layout_name,
    _rank,
    _separate,
    compared,
    scenarios,
)


def layout_guidelines(points: pd.DataFrame, st: Settings | None = None) -> pd.DataFrame:
    """One row per scenario (:data:`LAYOUT_COLUMNS`): the best stripe layout, its gain over the baseline in percent
    with a bootstrap CI, and the verdict with its reason. Means and bounds are in the metric's unit."""
    st = st or Settings()
    if points.empty:
        return pd.DataFrame(columns=LAYOUT_COLUMNS)
    return layouts_of(compared(points, st), st)


def layouts_of(pts: Compared, st: Settings) -> pd.DataFrame:
    """:func:`layout_guidelines` of the points folded into groups (:func:`~analysis.guidelines.compare.compared`)."""
    rng = np.random.default_rng(st.seed)
    rows = []
    for key, sc in scenarios(pts.groups, LAYOUT_KNOBS).groupby([*SCENARIO, "setting", "scenario"], sort=True):
        row: dict[str, Any] = dict(zip([*SCENARIO, "setting"], key[:-1], strict=True))
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
            c = _Cand(_layout_name(count, size, pts.sizes_vary), pts.values(g.index))
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
