"""The guidelines as Markdown or as one JSON document."""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pandas as pd

from analysis.frames import METRICS
from analysis.guidelines.compare import Settings


def _num(v: Any, fmt: str = "{:.4g}") -> str:
    return "" if v is None or (isinstance(v, float) and np.isnan(v)) else fmt.format(v)


def _missing(v: Any) -> bool:
    return v is None or (isinstance(v, float) and np.isnan(v))


def interval_text(mean: Any, lo: Any, hi: Any, n: Any = None, fmt: str = "{:.4g}", unit: str = "") -> str:
    """``"115.4 [107.3, 121.3]"``; without an interval ``"115.4 (n=1, no interval)"``; "-" without a mean. Never
    ``[, ]``: a missing bound is said, not left blank."""
    if _missing(mean):
        return "-"
    text = fmt.format(mean) + unit
    if _missing(lo) or _missing(hi):
        return text + (f" (n={int(n)}, no interval)" if not _missing(n) else " (no interval)")
    return f"{text} [{fmt.format(lo)}{unit}, {fmt.format(hi)}{unit}]" + (f" (n={int(n)})" if not _missing(n) else "")


def _setting(r: pd.Series) -> str:
    s = r.get("setting")
    return s if isinstance(s, str) and s else ""


def _settings_vary(df: pd.DataFrame) -> bool:
    """Whether any row of a guideline table has a setting of its own (then the table shows a ``setting`` column)."""
    return "setting" in df.columns and bool(df["setting"].map(lambda v: isinstance(v, str) and bool(v)).any())


def swept_layouts(layouts: pd.DataFrame) -> pd.DataFrame:
    """The layout rows of scenarios where more than one stripe layout was measured (a scenario with one has no
    stripe layout to choose: it is not a row of the table, nor a statement)."""
    if layouts.empty or "layouts" not in layouts.columns:
        return layouts
    return layouts[pd.to_numeric(layouts["layouts"], errors="coerce").fillna(0) > 1]


def _ranks(r: pd.Series) -> str:
    return f"{int(r['nodes'])}×{int(r['ppn'])}"


def markdown(layouts: pd.DataFrame, formats: pd.DataFrame, stmts: list[dict[str, Any]], st: Settings,
             notes: list[str] | None = None) -> str:
    """The guidelines as Markdown: a table of layouts (scenarios where stripe layouts were compared), a table of
    formats, the statements with their evidence, and the points left out. A ``setting`` column (the knobs that
    set a scenario apart: a sample size, a reader ...) only where some scenario has one."""
    unit = METRICS[st.metric][0]
    ci = f"{st.confidence:.0%}"
    lines = [f"# Guidelines: {unit}, mean of repetitions [{ci} bootstrap CI, {st.n_boot} resamples, seed {st.seed}]",
             "", "## Stripe layout per scenario", ""]
    swept = swept_layouts(layouts)
    if swept.empty:
        lines.append("No scenario measured more than one stripe layout: nothing to choose (sweep e.g. "
                     "`stripe=1,4,16` on a file system that stripes).")
    else:
        set_col = _settings_vary(swept)
        lines += ["| access | format | " + ("setting | " if set_col else "") + "nodes×ppn | sample size | verdict | "
                  "best layout | mean [CI] | gain over baseline [CI] | why |",
                  "|---|---|" + ("---|" if set_col else "") + "---|---|---|---|---|---|---|"]
        for _, r in swept.iterrows():
            best = r["best"] if isinstance(r["best"], str) else "-"
            mean = interval_text(r["best_mean"], r["best_lo"], r["best_hi"], r["best_n"]) if best != "-" else "-"
            gain = (interval_text(r["gain_pct"], r["gain_lo_pct"], r["gain_hi_pct"], fmt="{:+.1f}", unit="%")
                    + f" vs {r['baseline']}") if isinstance(r["baseline"], str) else "-"
            lines.append(f"| {r['access']} | {r['format']} | " + (f"{_setting(r)} | " if set_col else "")
                         + f"{_ranks(r)} | {r['size_class']} | **{r['verdict']}** | {best} | {mean} | {gain} | "
                         f"{r['reason']} |")
        if len(swept) < len(layouts):
            lines += ["", f"{len(layouts) - len(swept)} scenario(s) with one stripe layout measured are not listed."]
    lines += ["", "## Format per scenario", ""]
    set_col = _settings_vary(formats)
    lines += ["| access | " + ("setting | " if set_col else "") + "nodes×ppn | sample size | verdict | best format "
              "(layout) | mean [CI] | runner-up | gain [CI] | why |",
              "|---|" + ("---|" if set_col else "") + "---|---|---|---|---|---|---|---|"]
    for _, r in formats.iterrows():
        ru = f"{r['runner_up']} ({r['runner_up_layout']})" if isinstance(r["runner_up"], str) else "-"
        gain = (interval_text(r["gain_pct"], r["gain_lo_pct"], r["gain_hi_pct"], fmt="{:+.1f}", unit="%")
                if isinstance(r["runner_up"], str) else "-")
        lines.append(f"| {r['access']} | " + (f"{_setting(r)} | " if set_col else "")
                     + f"{_ranks(r)} | {r['size_class']} | **{r['verdict']}** | {r['best']} ({r['best_layout']}) | "
                     f"{interval_text(r['best_mean'], r['best_lo'], r['best_hi'], r['best_n'])} | {ru} | {gain} | "
                     f"{r['reason']} |")
    lines += ["", "## Statements", ""]
    for s in stmts:
        lines.append(f"- {s['text']}")
        lines += [f"  - {e}" for e in s["evidence"]]
    if not stmts:
        lines.append("- none: nothing in the store is decided yet")
    if notes:
        lines += ["", "## Points left out, and caches below the client", "", *[f"- {n}" for n in notes]]
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
