"""Cross-cutting statements in the paper's style, derived only from the decided guideline rows."""

from __future__ import annotations

from typing import Any

import pandas as pd

from analysis.frames import METRICS
from analysis.guidelines.compare import Settings
from analysis.guidelines.render import swept_layouts


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
    for (access, fmt, setting), g in decided.groupby(["access", "format", "setting"], sort=True, dropna=False):
        fmt = f"{fmt} ({setting})" if isinstance(setting, str) and setting else fmt
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
    for (access, ppn, sclass, setting), g in fdec.groupby(["access", "ppn", "size_class", "setting"], sort=True,
                                                          dropna=False):
        g = g.sort_values("nodes")
        winners = g["best"].tolist()
        lead = winners[-1]
        k = len(winners)
        while k > 0 and winners[k - 1] == lead:
            k -= 1
        run = g.iloc[k:]
        allnodes = formats[(formats["access"] == access) & (formats["ppn"] == ppn) & (formats["size_class"] == sclass)
                           & (formats["setting"].fillna("") == (setting if isinstance(setting, str) else ""))]
        where = f" with {setting}" if isinstance(setting, str) and setting else ""
        frm = int(run["nodes"].min())
        span = "at every node count measured" if k == 0 and len(run) == len(allnodes) else f"from {frm} nodes"
        ev = [f"{int(r['nodes'])}N: {r['best']} ({r['best_layout']}) {r['best_mean']:.4g} {unit}, {_pct(r)} over "
              f"{r['runner_up']} ({r['runner_up_layout']})" for _, r in run.iterrows()]
        lo, hi = run["gain_pct"].min(), run["gain_pct"].max()
        gains = f"{lo:+.0f}%" if round(lo) == round(hi) else f"{lo:+.0f}% to {hi:+.0f}%"
        ranks = f"{ppn} rank{'s' if ppn != 1 else ''} per node"
        out.append({"text": f"{lead} leads {access} {sclass.split(' ')[0]}-sample reads ({ranks}{where}) "
                            f"{span}: "
                            f"{gains} {METRICS[st.metric][0].split(' (')[0]} over the next format.", "evidence": ev})
    swept = swept_layouts(layouts)  # a scenario with one stripe layout measured had nothing to decide
    for undecided, what in ((swept, "stripe-layout"), (formats, "format")):
        und = undecided[undecided["verdict"] == "cannot decide"]
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
