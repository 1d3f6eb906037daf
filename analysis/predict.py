"""``python -m analysis predict --at nodes=16`` (or ``ppn=``, ``ranks=``): bandwidth beyond the measured scale.

Per configuration (every knob but the scale axis fixed: :func:`ddlio.identity.config_key` without ``nodes``, without
``ppn``, or without both for ``ranks``), the bounded model of :mod:`analysis.scalemodel` is fitted on the valid
points' repetitions at the measured scales, and gives the bandwidth at the asked scale with a bootstrap prediction
interval. Every fit checks itself: refitted without the largest measured scale (the same form, where the smaller
scales suffice: :func:`~analysis.scalemodel.held_out`), it predicts that scale, and the relative error is reported.
A configuration is refused, with the reason in one line, when it was measured at fewer than :data:`MIN_SCALES`
scales, when the asked scale is beyond :data:`MAX_REACH` × the largest measured one, or when the held-out error
passes :data:`MAX_HELD_OUT`.

Where the workload has a compute time, the answer is also said in accelerators: a rank (an accelerator) needs
``batch_size × sample_size / compute_time`` bytes a second to be kept busy; with its I/O overlapped with compute
(prefetch), AU = compute / max(compute, I/O) = min(1, supply / demand), the supply being the predicted bandwidth over
the ranks; fed when AU ≥ ``workload.au_floor`` (0.90 where a point does not store it).
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from analysis.below import excluded_note, holds_first_read
from analysis.query import analysis_frame, parse_where
from analysis.scalemodel import Fit, HeldOut, fit, held_out, prediction_interval
from analysis.validity import is_valid, valid_only
from ddlio.errors import DdlioError
from ddlio.identity import config_key, labels
from ddlio.store import open_store_for_reading

#: the scale axes ``--at`` takes -> the stored knobs a configuration is grouped without
AXES = {"nodes": ("nodes",), "ppn": ("ppn",), "ranks": ("nodes", "ppn")}
#: fewest distinct measured scales a prediction is made from
MIN_SCALES = 3
#: furthest a prediction reaches: this many times the largest measured scale
MAX_REACH = 2.0
#: largest held-out relative error (the largest scale predicted from the others) a prediction is given with
MAX_HELD_OUT = 0.25
#: the accelerator utilisation a point keeps its accelerators fed at, where it stores none (MLPerf Storage's)
AU_FLOOR = 0.9
#: the confidence of the prediction intervals
CONFIDENCE = 0.95


def parse_at(text: str) -> tuple[str, int]:
    """``"nodes=16"`` -> ("nodes", 16); bad input raises :class:`DdlioError` naming the valid form."""
    axis, _, value = (text or "").partition("=")
    axis = axis.strip()
    try:
        n = int(value.strip())
    except ValueError:
        n = 0
    if axis not in AXES or n < 1:
        raise DdlioError(f"--at {text!r}: give one scale as AXIS=N with AXIS one of {', '.join(AXES)} and N a "
                         "whole number of at least 1, e.g. --at nodes=16")
    return axis, n


@dataclass
class Prediction:
    """One configuration's answer at the asked scale: ``value`` (MiB/s) with ``lo``..``hi`` (its prediction
    interval), or ``refused`` (why, one line); ``measured``: (axis value, ranks, repetitions, mean MiB/s) per scale."""

    label: str
    key: str
    axis: str
    at: int
    ranks: int
    measured: list[tuple[int, int, int, float]]
    refused: str = ""
    value: float = float("nan")
    lo: float = float("nan")
    hi: float = float("nan")
    model: Fit | None = None
    check: HeldOut | None = None
    targets: int | None = None
    au: dict[str, Any] = field(default_factory=dict)

    def per_unit(self) -> int:
        """Ranks per unit of the axis (ppn along nodes, nodes along ppn, 1 along ranks)."""
        return max(self.ranks // self.at, 1)

    def as_dict(self) -> dict[str, Any]:
        """The prediction for ``--format json`` (MiB/s; NaN as None)."""
        def num(v: float) -> float | None:
            return None if v != v else round(float(v), 6)

        model = self.model.as_dict() if self.model else None
        if model is not None:
            model["targets"] = self.targets
            ceiling = model["ceiling_mib_s"]
            model["per_target_mib_s"] = ceiling / self.targets if self.targets and ceiling else None
        check = None
        if self.check:
            check = {self.axis: int(self.check.ranks) // self.per_unit(), "ranks": int(self.check.ranks),
                     "predicted_mib_s": num(self.check.predicted), "measured_mib_s": num(self.check.measured),
                     "error": num(self.check.error)}
        return {"configuration": self.label, "config_key": self.key, self.axis: self.at, "ranks": self.ranks,
                "refused": self.refused or None, "bandwidth_mib_s": num(self.value), "lo_mib_s": num(self.lo),
                "hi_mib_s": num(self.hi), "confidence": CONFIDENCE, "model": model, "held_out": check,
                "measured": [{self.axis: a, "ranks": r, "n": n, "mean_mib_s": num(m)} for a, r, n, m in self.measured],
                "accelerators": self.au or None}


def _targets(row: pd.Series) -> int | None:
    """The storage targets a configuration's files are striped over (its stripe count where striping applied and
    the count is explicit); None: not known (an unstriped file system, the default, all targets)."""
    count, applied = row.get("stripe_count"), row.get("striping_applicable")
    known = isinstance(count, int | float | np.number) and count == count and int(count) > 0
    if known and applied is not None and not pd.isna(applied) and bool(applied):
        return int(count)
    return None


def _accelerators(row: pd.Series, cfg: dict[str, Any], ranks: int, value: float, lo: float, hi: float
                  ) -> dict[str, Any]:
    """The accelerators the predicted bandwidth feeds at ``ranks`` ({} without a compute time)."""
    compute = float(row.get("compute_time_s") or 0.0)
    batch, size = float(row.get("batch_size") or 0), float(row.get("sample_size") or 0)
    if not compute > 0 or not batch > 0 or not size > 0:
        return {}
    need = batch * size / compute / 2**20  # MiB/s a rank reads to keep its accelerator busy
    floor = float(cfg.get("au_floor", AU_FLOOR))

    def au(bw: float) -> float:
        return float(min(1.0, bw / ranks / need)) if bw == bw else float("nan")

    a, a_lo, a_hi = au(value), au(lo), au(hi)
    verdict = "fed" if a_lo >= floor else "starved" if a_hi < floor else "cannot decide"
    return {"accelerators": ranks, "au": a, "au_lo": a_lo, "au_hi": a_hi, "au_floor": floor, "verdict": verdict,
            "demand_mib_s_per_rank": need}


def _one(g: pd.DataFrame, label: str, key: str, axis: str, at: int, draws: int, seed: int) -> Prediction:
    """The prediction of one configuration's points ``g`` (valid, with a bandwidth) at ``axis`` = ``at``."""
    unit = 1 if axis == "ranks" else int(g.iloc[0]["ranks"] // g.iloc[0][axis])
    axis_of = g["ranks"] if axis == "ranks" else g[axis]
    per = g.assign(_a=axis_of.astype(int)).groupby("_a", sort=True)
    measured = [(int(a), int(s["ranks"].iloc[0]), len(s), float(s["bandwidth_mib_s"].mean())) for a, s in per]
    p = Prediction(label, key, axis, at, at * unit, measured, targets=_targets(g.iloc[0]))
    shown = ", ".join(str(a) for a, *_ in measured)
    top = measured[-1][0]
    if len(measured) < MIN_SCALES:
        p.refused = (f"measured at {len(measured)} scale{'s' if len(measured) != 1 else ''} ({axis} {shown}); a "
                     f"prediction needs at least {MIN_SCALES}")
        return p
    if at > MAX_REACH * top:
        p.refused = (f"{axis}={at} is beyond {MAX_REACH:g}× the largest measured scale ({axis}={top}: at most "
                     f"{axis}={int(MAX_REACH * top)})")
        return p
    r, y = g["ranks"].to_numpy(dtype=float), g["bandwidth_mib_s"].to_numpy(dtype=float)
    model = fit(r, y)
    p.check = held_out(r, y, model.form)
    if p.check.error > MAX_HELD_OUT:
        p.refused = (f"the held-out check failed: {axis}={top} predicted from the smaller scales at "
                     f"{p.check.predicted:.4g} MiB/s, measured {p.check.measured:.4g} MiB/s (error "
                     f"{p.check.error:.0%} > {MAX_HELD_OUT:.0%})")
        return p
    p.model = model
    p.value = float(p.model.predict(p.ranks))
    p.lo, p.hi = prediction_interval(r, y, p.model.form, p.ranks, draws, seed, CONFIDENCE)
    p.au = _accelerators(g.iloc[0], json.loads(g.iloc[0]["config"] or "{}"), p.ranks, p.value, p.lo, p.hi)
    return p


def predictions(points: pd.DataFrame, axis: str, at: int, draws: int = 1000, seed: int = 0) -> list[Prediction]:
    """One :class:`Prediction` per configuration of ``points`` (an :func:`analysis.query.analysis_frame`, valid
    points only) grouped without the ``axis`` knobs, in label order."""
    pts = points[pd.to_numeric(points["bandwidth_mib_s"], errors="coerce") > 0]
    if pts.empty:
        return []
    texts = pts["config"].fillna("").astype(str)
    parsed = {t: json.loads(t) if t else {} for t in texts.unique()}
    keys = texts.map({t: config_key(c, AXES[axis]) for t, c in parsed.items()})
    out = []
    groups = list(pts.groupby(keys.to_numpy(), sort=True))
    shown = []
    for _, g in groups:  # the label of the configuration at the asked scale
        cfg = dict(parsed[str(g.sort_values("ranks")["config"].iloc[-1] or "")])
        if axis != "ranks" and cfg:
            cfg[axis] = at
        shown.append(cfg)
    names = labels(shown) if shown else []
    for (key, g), name in zip(groups, names, strict=True):
        out.append(_one(g, str(name), str(key), axis, at, draws, seed))
    return sorted(out, key=lambda p: p.label)


def band(points: pd.DataFrame, axis: str = "nodes", steps: int = 4, draws: int = 200) -> pd.DataFrame:
    """The prediction band of each configuration of ``points`` that predicts beyond its largest measured scale:
    columns key (the configuration without the axis), label, ``axis``, value, lo, hi (MiB/s), from that scale out
    to :data:`MAX_REACH` × it in up to ``steps`` whole steps; refused scales are left out (empty frame: no
    configuration predicts). Invalid points and first reads are left out, as the command leaves them."""
    cols = ["key", "label", axis, "value", "lo", "hi"]
    if len(points):
        points = points[is_valid(points) & ~holds_first_read(points)]
    if points.empty or not {"config", "ranks", "bandwidth_mib_s", axis} <= set(points.columns):
        return pd.DataFrame(columns=cols)  # nothing to fit (a frame of figures without stored configs)
    top = int(points[axis].max())
    ats = sorted({top + int(np.ceil(k * (MAX_REACH - 1) * top / steps)) for k in range(0, steps + 1)})
    rows = [(p.key, p.label, at, p.value, p.lo, p.hi) for at in ats for p in predictions(points, axis, at, draws)
            if not p.refused and p.measured[-1][0] <= at]
    return pd.DataFrame(rows, columns=cols)


# --------------------------------------------------------------------------------------------- the command

def setup_parser(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--at", required=True, metavar="AXIS=N",
                        help="the scale to predict: nodes=N, ppn=N or ranks=N (ranks = nodes × ppn)")
    parser.add_argument("--db", help="SQLite file or SQLAlchemy URL (default: $DDLIO_DB or ./results.db)")
    parser.add_argument("--format", choices=("table", "json"), default="table", help="table (default) or JSON")
    parser.add_argument("--where", help="keep the points where this holds, e.g. \"format == 'hdf5' and ppn <= 4\" "
                                          "(the columns of the other commands' --where)")
    parser.add_argument("--bootstrap", type=int, default=1000, help="bootstrap refits (default 1000)")
    parser.add_argument("--seed", type=int, default=0, help="bootstrap seed (default 0)")


def _text(p: Prediction) -> list[str]:
    """A prediction as the table shows it: its first line, then the model, the check and the accelerators."""
    if p.refused:
        return [f"{p.label}: refused: {p.refused}"]
    m = p.model
    assert m is not None and p.check is not None
    shown = ", ".join(str(a) for a, *_ in p.measured)
    ceiling = "no ceiling" if not np.isfinite(m.ceiling) else f"ceiling {m.ceiling:.4g} MiB/s"
    if p.targets and np.isfinite(m.ceiling):
        ceiling += f" ({m.ceiling / p.targets:.4g} MiB/s a target over {p.targets})"
    lines = [f"{p.label}: {p.value:.4g} MiB/s [{p.lo:.4g}, {p.hi:.4g}] at {p.axis}={p.at} ({p.ranks} ranks)",
             f"  model {m.form}: {m.rate:.4g} MiB/s a rank, {ceiling}, contention {m.contention:.3g}; fitted on "
             f"{p.axis} {shown} ({sum(n for *_, n, _ in p.measured)} repetitions)",
             f"  held-out: {p.axis}={int(p.check.ranks) // p.per_unit()} predicted from the smaller scales at "
             f"{p.check.predicted:.4g} MiB/s, measured {p.check.measured:.4g} MiB/s (error {p.check.error:.1%})"]
    if p.au:
        a = p.au
        au = f"AU {a['au']:.2f} [{a['au_lo']:.2f}, {a['au_hi']:.2f}]"
        say = {"fed": f"feeds {p.ranks} accelerators at AU ≥ {a['au_floor']:.2f}: {au}",
               "starved": f"starves {p.ranks} accelerators: {au} < {a['au_floor']:.2f}",
               "cannot decide": f"cannot decide whether {p.ranks} accelerators are fed: {au} spans "
                                f"{a['au_floor']:.2f}"}[a["verdict"]]
        lines.append(f"  {say} (each needs {a['demand_mib_s_per_rank']:.4g} MiB/s)")
    return lines


def _points(args: argparse.Namespace) -> tuple[pd.DataFrame, list[str]]:
    """The store's valid points (after ``--where``) and the notes on what was left out."""
    where = parse_where(args.where)
    points = analysis_frame(open_store_for_reading(args.db), where, "guidelines")
    valid, invalid = valid_only(points)
    kept, first = excluded_note(valid)
    return kept, [n for n in (invalid, first) if n]


def main(args: argparse.Namespace) -> int:
    axis, at = parse_at(args.at)
    if args.bootstrap < 100:
        raise DdlioError("--bootstrap must be at least 100")
    points, notes = _points(args)
    preds = predictions(points, axis, at, args.bootstrap, args.seed)
    if args.format == "json":
        doc = {"at": {axis: at}, "metric": "bandwidth_mib_s", "confidence": CONFIDENCE, "max_reach": MAX_REACH,
               "max_held_out_error": MAX_HELD_OUT, "predictions": [p.as_dict() for p in preds], "notes": notes}
        sys.stdout.write(json.dumps(doc, indent=1) + "\n")
    elif not preds:
        print("no valid completed points with a bandwidth in the store (after --where): nothing to predict from",
              file=sys.stderr)
    else:
        print(f"bandwidth at {axis}={at}, {CONFIDENCE:.0%} prediction intervals; model: min(ranks × rate, ceiling)"
              " / (1 + contention × (ranks − 1))")
        for p in preds:
            print("\n".join(_text(p)))
    for n in notes if args.format != "json" else []:
        print(f"note: {n}")
    return 0 if any(not p.refused for p in preds) else 1
