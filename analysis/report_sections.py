"""The report's answer-first parts: what to use per scenario (:func:`answers_section`), the validity of the points
(:func:`validity_section`), and readable column names for every table (:func:`readable`).

Evidence is said as :class:`ddlio.evidence.Estimate` says it: ``mean [lo, hi] (n=…)`` in the metric's unit, the
interval a bootstrap interval of the mean over the configuration's repetitions; "cannot decide" where the
intervals of the best and the runner-up overlap (or a repetition is missing, or striping was not applied).
"""

from __future__ import annotations

import html

import numpy as np
import pandas as pd

from analysis import frames as F
from ddlio.evidence import Estimate

#: raw column -> the name a reader sees (guideline and configuration tables)
COLUMN_NAMES = {
    "access": "access", "format": "format", "nodes": "nodes", "ppn": "ranks per node", "size_class": "sample size",
    "setting": "other settings", "verdict": "verdict", "best": "best", "best_layout": "best's layout",
    "best_stripe_count": "best stripe count", "best_stripe_size": "best stripe size", "best_n": "best (n)",
    "best_mean": "best (mean)", "best_lo": "best (low)", "best_hi": "best (high)", "baseline": "baseline",
    "baseline_n": "baseline (n)", "baseline_mean": "baseline (mean)", "gain_pct": "gain %",
    "gain_lo_pct": "gain % (low)", "gain_hi_pct": "gain % (high)", "runner_up": "runner-up",
    "runner_up_layout": "runner-up's layout", "runner_up_n": "runner-up (n)", "runner_up_mean": "runner-up (mean)",
    "runner_up_lo": "runner-up (low)", "runner_up_hi": "runner-up (high)", "reason": "why", "layouts": "layouts",
    "formats": "formats", "fs_type": "file system", "striping_applicable": "striping applied",
    "requested": "requested", "applied": "applied", "points": "points", "validity": "validity",
    "invalid_reasons": "why invalid", "label": "configuration", "n_points": "points", "n_skipped": "skipped",
    "n_completed": "completed", "n_failed": "failed", "started_utc": "started (UTC)", "finished_utc": "finished (UTC)",
    "argv": "command", "host": "host", "id": "sweep", "repeat": "repetition", "error": "error",
}


def readable(df: pd.DataFrame) -> pd.DataFrame:
    """``df`` with its columns renamed by :data:`COLUMN_NAMES` (others: underscores become spaces)."""
    return df.rename(columns={c: COLUMN_NAMES.get(c, str(c).replace("_", " ")) for c in df.columns})


def _est(row: pd.Series, who: str) -> str:
    n = row.get(f"{who}_n")
    est = Estimate(str(row.get(who, "")), int(n) if isinstance(n, int | float | np.number) and n == n else 0,
                   float(row.get(f"{who}_mean", np.nan)), float(row.get(f"{who}_lo", np.nan)),
                   float(row.get(f"{who}_hi", np.nan)))
    return est.text()


def _scenario(row: pd.Series, with_format: bool) -> str:
    parts = [str(row["format"])] if with_format else []
    parts += [f"{row['access']}", f"{int(row['nodes'])} node{'s' if int(row['nodes']) != 1 else ''}",
              f"{int(row['ppn'])} rank{'s' if int(row['ppn']) != 1 else ''} per node", str(row["size_class"])]
    if isinstance(row.get("setting"), str) and row["setting"]:
        parts.append(row["setting"])
    return ", ".join(parts)


def _answer(row: pd.Series, what: str, unit: str, with_format: bool) -> str:
    scen = html.escape(_scenario(row, with_format))
    best, ru = html.escape(str(row.get("best") or "")), html.escape(str(row.get("runner_up") or ""))
    reason = html.escape(str(row.get("reason") or ""))
    if row["verdict"] == "recommend":
        gain = (f", {row['gain_pct']:+.0f}% [{row['gain_lo_pct']:+.0f}%, {row['gain_hi_pct']:+.0f}%]"
                if pd.notna(row.get("gain_pct")) and pd.notna(row.get("gain_lo_pct")) else "")
        over = f"; next: {ru} {html.escape(_est(row, 'runner_up'))}" if ru and "runner_up_mean" in row else ""
        return (f"<li class='recommend'><b>{scen}</b>: use {what} <b>{best}</b>: {unit} "
                f"{html.escape(_est(row, 'best'))}{over}{gain}.</li>")
    if row["verdict"] == "keep baseline":
        return f"<li class='keep'><b>{scen}</b>: keep {html.escape(str(row.get('baseline', '')))}: {reason}</li>"
    return f"<li class='undecided'><b>{scen}</b>: <b>cannot decide</b> the {what}. {reason}</li>"


def answers_section(lay: pd.DataFrame, fmt: pd.DataFrame, metric: str, note: str = "") -> list[str]:
    """The report's first section: per scenario measured, the format and the stripe layout to use, with the
    evidence (mean [interval] (n) of the best and the runner-up), or "cannot decide" and why."""
    unit = F.METRICS[metric][0]
    parts = ["<h2 id='answers'>What to use</h2>",
             f"<p class='note'>Per scenario, by {html.escape(unit)}: mean of the repetitions of a configuration "
             "[95% bootstrap interval] (n = repetitions). <b>cannot decide</b>: the intervals overlap, a repetition "
             "is missing, or the knob was not applied (striping off Lustre).</p>"]
    if note:
        parts.append(f"<p class='note'>{html.escape(note)}</p>")
    short = html.escape(unit.split(" (")[0])
    if len(fmt):
        parts.append("<h3>Format</h3><ul class='answers'>")
        parts += [_answer(r, "format", short, False) for _, r in fmt.iterrows()]
        parts.append("</ul>")
    if len(lay):
        parts.append("<h3>Stripe layout</h3><ul class='answers'>")
        parts += [_answer(r, "stripe layout", short, True) for _, r in lay.iterrows()]
        parts.append("</ul>")
    if not len(fmt) and not len(lay):
        parts.append("<p>No scenario has two choices measured: nothing to compare yet.</p>")
    return parts


def validity_section(points: pd.DataFrame) -> tuple[str, pd.DataFrame]:
    """(a sentence: how many points are valid, and the thresholds; the invalid points with their reasons)."""
    from analysis.validity import MAX_CV, MIN_STEPS  # lazy: validity reads query's frames

    if "validity" not in points.columns or points.empty:
        return "No validity verdicts (no completed points).", pd.DataFrame()
    bad = points[points["validity"] != "valid"]
    text = (f"{len(points) - len(bad)} of {len(points)} points valid. A point is invalid when its cache was asked "
            f"cold but not verified cold, an epoch was the first read after generation, it ran fewer than "
            f"{MIN_STEPS} steps, its configuration's repetitions vary by a CV above {MAX_CV:g}, or striping was "
            "requested but not applied. The guidelines use valid points only.")
    return text, readable(bad[["label", "repeat", "invalid_reasons"]].reset_index(drop=True))


def checkpoint_answers(rows: pd.DataFrame, notes: list[str]) -> list[str]:
    """What to use for checkpoints (:func:`analysis.guidelines.checkpoint.checkpoint_guidelines`' rows): per phase
    and scale the access, layout and stripe layout with its evidence (MiB/s), or "cannot decide" and why."""
    parts = ["<p class='note'>Per scale (nodes × ranks per node) and checkpoint, writing and restoring apart, by "
             "bandwidth (MiB/s, Darshan's slowest rank): mean of repetitions [95% bootstrap interval] (n). A stripe "
             "count that was not applied (not Lustre) is never part of the answer.</p>", "<ul class='answers'>"]
    for _, r in rows.iterrows():
        scen = html.escape(f"{r['phase']}, {int(r['nodes'])} node{'s' if int(r['nodes']) != 1 else ''} × "
                           f"{int(r['ppn'])} rank{'s' if int(r['ppn']) != 1 else ''}, {r['setting']}")
        if r["verdict"] == "recommend":
            parts.append(f"<li class='recommend'><b>{scen}</b>: use <b>{html.escape(str(r['best']))}</b>: "
                         f"{html.escape(_est(r, 'best'))}; next: {html.escape(str(r['runner_up']))} "
                         f"{html.escape(_est(r, 'runner_up'))}.</li>")
        else:
            parts.append(f"<li class='undecided'><b>{scen}</b>: <b>cannot decide</b>. "
                         f"{html.escape(str(r['reason']))}</li>")
    parts.append("</ul>")
    parts += [f"<p class='note'>{html.escape(n)}</p>" for n in notes]
    return parts


def prediction_section(points: pd.DataFrame) -> list[str]:
    """Beyond the measured scale (:mod:`analysis.predict`): each configuration of the valid ``points`` (first reads
    left out) measured at three node counts (else three ranks per node) or more, predicted at twice its axis's
    largest measured value, or refused and why."""
    from analysis.below import holds_first_read  # lazy: below reads query's frames
    from analysis.predict import MAX_HELD_OUT, MIN_SCALES, predictions  # lazy: the model, on first use
    from analysis.validity import is_valid  # lazy: validity reads query's frames

    points = points[is_valid(points) & ~holds_first_read(points)]  # as the command reads them
    axis = next((a for a in ("nodes", "ppn") if a in points.columns and points[a].nunique() >= MIN_SCALES), None)
    parts = ["<h2 id='prediction'>Beyond the measured scale</h2>"]
    if axis is None:
        return [*parts, f"<p>No configuration was measured at {MIN_SCALES} node counts or {MIN_SCALES} ranks per "
                "node: nothing to predict from (<code>python -m analysis predict</code>).</p>"]
    at = int(2 * points[axis].max())
    preds = predictions(points, axis, at, draws=500)
    parts.append(f"<p class='note'>Bandwidth at {axis}={at}: min(ranks × rate, ceiling) / (1 + contention × "
                 f"(ranks − 1)) fitted on the valid repetitions [95% prediction interval]; refused where the largest "
                 f"measured scale, predicted from the others, is off by more than {MAX_HELD_OUT:.0%}.</p>"
                 "<ul class='answers'>")
    for p in preds:
        name = html.escape(p.label)
        if p.refused:
            parts.append(f"<li class='undecided'><b>{name}</b>: refused: {html.escape(p.refused)}</li>")
            continue
        err = f"held-out error {p.check.error:.1%}" if p.check else ""
        parts.append(f"<li class='recommend'><b>{name}</b>: {p.value:.4g} MiB/s [{p.lo:.4g}, {p.hi:.4g}] "
                     f"({html.escape(p.model.form if p.model else '')} model; {err})</li>")
    return [*parts, "</ul>"]
