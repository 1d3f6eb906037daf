"""The format guideline: per access × nodes × ppn × sample-size class, the best format (each at its best
layout), its gain over the runner-up and the verdict, with the file system's amplification cited."""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pandas as pd

from analysis.guidelines.compare import (
    FORMAT_COLUMNS,
    FORMAT_KNOBS,
    FORMAT_SCENARIO,
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


def _format_candidates(sc: pd.DataFrame, pts: Compared, st: Settings) -> list[tuple[_Cand, str]]:
    """Each format's values in one scenario (``sc``: its rows of ``pts.groups``): at its best stripe layout, or
    pooled when striping is not applicable."""
    out = []
    names = _format_names(sc)
    for fmt, g in sc.groupby(names, sort=True):
        applicable = g["striping_applicable"].fillna(False).astype(bool)
        if not applicable.any():  # repetitions only: one stripe request, the default if measured (the others
            # are configurations of their own whose stripe was not applied, never pooled with it)
            layouts = g.groupby(["stripe_count", "stripe_size"], sort=True)
            points = layouts["n"].sum()  # points per layout
            pick = (1, 1024 * 1024) if (1, 1024 * 1024) in layouts.groups else max(
                layouts.groups, key=lambda k: (int(points[k]), k))
            out.append((_Cand(str(fmt), pts.values(layouts.groups[pick])), "striping not applied"))
            continue
        g = g[applicable]
        layouts = [(_layout_name(c, s, pts.sizes_vary), pts.values(x.index))
                   for (c, s), x in g.groupby(["stripe_count", "stripe_size"], sort=True)]
        name, vals = _rank([_Cand(n, v) for n, v in layouts], st)[0].name, None
        vals = dict(layouts)[name]
        out.append((_Cand(str(fmt), vals), name))
    return out


def _format_names(sc: pd.DataFrame) -> pd.Series:
    """A candidate's name per point: its format, plus the format options in which that format's configurations
    in the scenario differ (``hdf5 layout=array``): two option sets of one format are two candidates."""
    if "config" not in sc.columns:
        return sc["format"].astype(str)
    from ddlio.identity import knobs  # lazy: only the guidelines need it

    memo: dict[Any, dict[str, str]] = {}  # each distinct config text parsed once

    def options(c: Any) -> dict[str, str]:
        hit = memo.get(c)
        if hit is None:
            hit = memo[c] = ({k: v for k, v in knobs(json.loads(c)).items() if k.startswith("format_options.")}
                             if isinstance(c, str) and c else {})
        return hit

    per = [options(c) for c in sc["config"]]
    fmts = sc["format"].astype(str).to_numpy()
    varied: dict[str, set[str]] = {}
    for f in set(fmts):
        mine = [k for k, x in zip(per, fmts, strict=True) if x == f]
        names = {n for k in mine for n in k}
        varied[f] = {n for n in names if len({k.get(n) for k in mine}) > 1}
    return pd.Series([" ".join([f, *(k[n] for n in sorted(varied[f]) if n in k)])
                      for k, f in zip(per, fmts, strict=True)], index=sc.index)


def format_guidelines(points: pd.DataFrame, st: Settings | None = None) -> pd.DataFrame:
    """One row per access × nodes × ppn × sample-size class (:data:`FORMAT_COLUMNS`): the best format (each at its
    best layout), its gain over the runner-up format in percent with a bootstrap CI, and the verdict."""
    st = st or Settings()
    if points.empty:
        return pd.DataFrame(columns=FORMAT_COLUMNS)
    return formats_of(compared(points, st), st)


def formats_of(pts: Compared, st: Settings) -> pd.DataFrame:
    """:func:`format_guidelines` of the points folded into groups (:func:`~analysis.guidelines.compare.compared`)."""
    rng = np.random.default_rng(st.seed + 1)
    rows = []
    for key, sc in scenarios(pts.groups, FORMAT_KNOBS).groupby([*FORMAT_SCENARIO, "setting", "scenario"], sort=True):
        row: dict[str, Any] = dict(zip([*FORMAT_SCENARIO, "setting"], key[:-1], strict=True))
        pairs = _format_candidates(sc, pts, st)
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
        row.update(verdict=verdict, reason=reason + _amplification_note(sc, pts, [best.name, ru.name]))
        rows.append(row)
    return pd.DataFrame(rows).reindex(columns=FORMAT_COLUMNS)


#: amplification this far from 1 (or further) is cited in a format verdict's reason
AMPLIFICATION_NOTE = 0.05


def _amplification_note(sc: pd.DataFrame, pts: Compared, formats: list[str]) -> str:
    """Why, at the file system: the formats (best, runner-up) whose reads made the file system serve more (or
    fewer) bytes than the reader returned, with their mean amplification in the scenario (``sc``: its rows of
    ``pts.groups``); '' when none differs from 1 by AMPLIFICATION_NOTE or more, or the points predate the
    file-system layer."""
    if pts.amplification is None:
        return ""
    amp = {f: pts.mean_amplification(g.index) for f, g in sc.groupby("format")}
    cited = [f"{f} {amp[f]:.2f}x" for f in formats if f in amp and amp[f] == amp[f]
             and abs(amp[f] - 1) >= AMPLIFICATION_NOTE]
    if not cited:
        return ""
    return "; amplification (file-system bytes / bytes returned): " + ", ".join(cited)
