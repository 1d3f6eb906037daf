"""The checkpoint guideline: per scale (nodes × ranks per node, and the checkpoint measured: model, size, transfer
size, count, file system), the best access × stripe count × layout for writing a checkpoint and, apart, for
restoring it, with bootstrap intervals over the repetitions, or "cannot decide" and why.

The comparison is the train guidelines' (:mod:`analysis.guidelines.compare`: the same candidates, bootstrap,
ranking and separation test), on the bandwidth of each phase (MiB/s, higher is better):

- ``recommend``: the best choice's interval overlaps no other choice's;
- ``cannot decide``: only one choice was measured, the best has fewer than ``min_repeats`` repetitions, or its
  interval overlaps another's (each named with its numbers).

A stripe count that was not applied (``striping_applicable`` false: not Lustre) is no choice: the points of one
access × layout on such a file system are pooled as "stripe not applied", whatever count they asked for. A restore
whose files were still in the page cache when it started (``restore_resident_fraction`` above
:data:`MAX_RESIDENT`) read memory, not the file system: it is left out of the restore comparison, and counted.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import numpy as np
import pandas as pd

from analysis.checkpoint import PHASES
from analysis.frames import human_bytes, stripe_name
from analysis.guidelines.compare import Settings, _bootstrap, _Cand, _ci, _gain, _rank, _separate
from analysis.guidelines.render import interval_text

#: the columns of :func:`checkpoint_guidelines`, in order
CHECKPOINT_COLUMNS = [
    "phase", "nodes", "ppn", "setting", "verdict", "reason", "choices", "best", "best_access", "best_layout",
    "best_stripe_count", "best_n", "best_mean", "best_lo", "best_hi", "runner_up", "runner_up_n", "runner_up_mean",
    "runner_up_lo", "runner_up_hi", "gain_pct", "gain_lo_pct", "gain_hi_pct", "fs_type",
]
#: a restore whose files were more resident in the page cache than this (0..1) when it began read memory
MAX_RESIDENT = 0.1
#: what a scenario holds fixed besides the scale: the checkpoint measured and where
HELD = ("name", "size", "transfer_size", "count", "fs_type")


def _setting(ck: pd.DataFrame) -> pd.Series:
    """Per point, the checkpoint it measured as text: the model's name and the held knobs that vary."""
    text = ck["name"].astype(str)
    for k in HELD[1:]:
        if ck[k].nunique(dropna=False) > 1:
            values = ck[k].map(lambda v, k=k: human_bytes(v) if k in ("size", "transfer_size") and v else v)
            text = text + f" {k}=" + values.astype(str)
    return text


def _choice(ck: pd.DataFrame) -> pd.Series:
    """Per point, its choice: access, layout and the stripe layout (``stripe not applied`` where it was not)."""
    sizes_vary = ck.loc[ck["striping_applicable"].fillna(False).astype(bool), "stripe_size"].nunique() > 1
    stripe = [(stripe_name(c) + (f" S{human_bytes(s)}" if sizes_vary else "")) if ok else "stripe not applied"
              for c, s, ok in zip(ck["stripe_count"], ck["stripe_size"],
                                  ck["striping_applicable"].fillna(False).astype(bool), strict=True)]
    text = ck["access"].astype(str) + " " + ck["layout"].astype(str) + " " + pd.Series(stripe, index=ck.index)
    return text.str.split().str.join(" ")  # N-1's layout is "" (one file, whatever checkpoint.layout says)


def _row(sc: pd.DataFrame, metric: str, st: Settings, rng: np.random.Generator) -> dict[str, Any]:
    """The verdict of one scenario's points ``sc`` on ``metric``."""
    cands, meta = [], {}
    for name, g in sc.groupby("_choice", sort=True):
        c = _Cand(str(name), g[metric].to_numpy(dtype=float))
        cands.append(c)
        meta[c.name] = g.iloc[0]
    _bootstrap(cands, st, rng)
    ranked = _rank(cands, st)
    best = ranked[0]
    b = meta[best.name]
    row: dict[str, Any] = dict(
        choices=len(cands), best=best.name, best_access=b["access"], best_layout=b["layout"],
        best_stripe_count=int(b["stripe_count"]) if bool(b["striping_applicable"]) else None,
        best_n=best.n, best_mean=best.mean, best_lo=best.lo, best_hi=best.hi,
        fs_type=",".join(sorted(sc["fs_type"].dropna().astype(str).unique())) or "unknown")
    unstriped = not sc["striping_applicable"].fillna(False).astype(bool).any()
    if len(ranked) > 1:
        ru = ranked[1]
        g, glo, ghi = _gain(best, ru, st)
        row.update(runner_up=ru.name, runner_up_n=ru.n, runner_up_mean=ru.mean, runner_up_lo=ru.lo,
                   runner_up_hi=ru.hi, gain_pct=g, gain_lo_pct=glo, gain_hi_pct=ghi)
    if len(cands) == 1:
        row.update(verdict="cannot decide", reason=f"only one choice measured ({best.name})")
    else:
        verdict, reason = _separate(ranked, st, "choice")
        row.update(verdict=verdict or "recommend",
                   reason=reason or f"{best.name} {_ci(best)} vs next {ranked[1].name} {_ci(ranked[1])}")
    if unstriped:
        row["reason"] += (f"; stripe counts were not applied on {row['fs_type']} (not Lustre): the choice is "
                          "access and layout only")
    return row


def checkpoint_guidelines(ck: pd.DataFrame, st: Settings | None = None) -> tuple[pd.DataFrame, list[str]]:
    """(one row per phase × scenario (:data:`CHECKPOINT_COLUMNS`: the best choice, its mean and interval in MiB/s,
    the runner-up's, the gain over it in percent with its interval, the verdict and why), notes on the points left
    out) of the checkpoint points ``ck`` (:func:`analysis.checkpoint.checkpoint_frame`)."""
    st = dataclasses.replace(st or Settings(), metric="bandwidth_mib_s")  # MiB/s, higher is better
    rng = np.random.default_rng(st.seed)
    rows, notes = [], []
    if ck.empty:
        return pd.DataFrame(columns=CHECKPOINT_COLUMNS), notes
    ck = ck.assign(setting=_setting(ck), _choice=_choice(ck))
    for phase, metric in PHASES.items():
        pts = ck[ck[metric].notna()]
        if phase == "restore":
            cached = pts["restore_resident_fraction"].fillna(0.0) > MAX_RESIDENT
            if cached.any():
                notes.append(f"{int(cached.sum())} restore(s) left out: more than {MAX_RESIDENT:.0%} of their files "
                             "were in the page cache when the restore began, so they read memory, not the file system")
            pts = pts[~cached]
        for (nodes, ppn, setting), sc in pts.groupby(["nodes", "ppn", "setting"], sort=True):
            rows.append({"phase": phase, "nodes": int(nodes), "ppn": int(ppn), "setting": setting,
                         **_row(sc, metric, st, rng)})
    return pd.DataFrame(rows).reindex(columns=CHECKPOINT_COLUMNS), notes


def checkpoint_markdown(rows: pd.DataFrame, notes: list[str], st: Settings) -> str:
    """The checkpoint guideline as a Markdown section: a table, then the notes."""
    lines = [f"## Checkpoints: what to use per scale, writing and restoring apart (MiB/s, mean of repetitions "
             f"[{st.confidence:.0%} bootstrap CI])", "",
             "| phase | nodes×ppn | checkpoint | verdict | best (access layout stripe) | mean [CI] | runner-up | "
             "gain over runner-up [CI] | why |", "|---|---|---|---|---|---|---|---|---|"]
    for _, r in rows.iterrows():
        ru = (f"{r['runner_up']} {interval_text(r['runner_up_mean'], r['runner_up_lo'], r['runner_up_hi'])}"
              if isinstance(r["runner_up"], str) else "-")
        gain = (interval_text(r["gain_pct"], r["gain_lo_pct"], r["gain_hi_pct"], fmt="{:+.1f}", unit="%")
                if isinstance(r["runner_up"], str) else "-")
        lines.append(f"| {r['phase']} | {int(r['nodes'])}×{int(r['ppn'])} | {r['setting']} | **{r['verdict']}** | "
                     f"{r['best']} | {interval_text(r['best_mean'], r['best_lo'], r['best_hi'], r['best_n'])} | "
                     f"{ru} | {gain} | {r['reason']} |")
    if rows.empty:
        lines.append("| - | - | - | - | - | - | - | - | no checkpoint measured a bandwidth |")
    lines += ["", *[f"- {n}" for n in notes]] if notes else []
    return "\n".join(lines) + "\n"


def checkpoint_json(rows: pd.DataFrame, notes: list[str]) -> dict[str, Any]:
    """The checkpoint guideline as the JSON document's ``checkpoints`` part (NaN as null)."""
    return {"unit": "MiB/s", "metrics": dict(PHASES), "max_resident": MAX_RESIDENT,
            "rows": json.loads(rows.to_json(orient="records")), "notes": notes}
