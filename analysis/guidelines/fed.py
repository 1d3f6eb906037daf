"""The guidelines' answer to "does my training stay fed": for every configuration whose workload has a compute
time, its accelerator utilisation (AU: compute time over wall time, 0-1, the mean over its repetitions with a
bootstrap interval) against its ``workload.au_floor`` (MLPerf Storage's 0.90 unless the workload says otherwise),
and the verdict :func:`ddlio.evidence.fed` gives: ``fed`` (the interval's lower end at or above the floor, or the one
value), ``starved`` (its upper end below), ``undecided`` (it straddles the floor). The accelerators are the ranks:
one a rank, as a data-parallel trainer runs one process per accelerator.

Invalid points and points holding their dataset's first read are left out, as for the other guidelines.
"""

from __future__ import annotations

from typing import Any

import pandas as pd

from analysis.below import holds_first_read
from analysis.validity import fed_columns, is_valid
from ddlio.evidence import fed

#: the columns of :func:`fed_rows`, in order
FED_COLUMNS = ["label", "nodes", "ppn", "ranks", "n", "au", "au_lo", "au_hi", "floor", "verdict", "bandwidth_mib_s"]
#: the verdicts in the order the table lists them
_ORDER = {"fed": 0, "undecided": 1, "starved": 2}


def fed_rows(points: pd.DataFrame) -> pd.DataFrame:
    """One row per configuration of ``points`` (the analysis frame) with a compute time: :data:`FED_COLUMNS`
    (AU 0-1 with its interval, the floor, the verdict, the mean bandwidth in MiB/s), fed first, then by AU and
    bandwidth."""
    if points.empty or "compute_time_s" not in points.columns:
        return pd.DataFrame(columns=FED_COLUMNS)
    step = pd.to_numeric(points["compute_time_s"], errors="coerce").fillna(0.0)
    keep = is_valid(points) & ~holds_first_read(points) & (step > 0) & points["au"].notna()
    pts = points[keep]
    if pts.empty:
        return pd.DataFrame(columns=FED_COLUMNS)
    floors, _ = fed_columns(pts)
    rows: list[dict[str, Any]] = []
    for key, g in pts.groupby("config_key", sort=False):
        verdict = fed(g["au"].astype(float).tolist(), float(floors.loc[g.index[0]]), key=str(key))
        if verdict is None:
            continue
        first = g.iloc[0]
        rows.append({"label": first["label"], "nodes": int(first["nodes"]), "ppn": int(first["ppn"]),
                     "ranks": int(first["ranks"]), "n": verdict.est.n, "au": verdict.est.mean,
                     "au_lo": verdict.est.lo, "au_hi": verdict.est.hi, "floor": verdict.floor,
                     "verdict": verdict.word, "bandwidth_mib_s": float(g["bandwidth_mib_s"].mean())})
    out = pd.DataFrame(rows, columns=FED_COLUMNS)
    order = out["verdict"].map(_ORDER)
    return out.assign(_o=order).sort_values(["_o", "au", "bandwidth_mib_s"], ascending=[True, False, False],
                                            kind="stable").drop(columns="_o").reset_index(drop=True)


def _au(r: pd.Series) -> str:
    if r["au_lo"] != r["au_lo"]:
        return f"{r['au']:.2f} (n={int(r['n'])}, no interval)"
    return f"{r['au']:.2f} [{r['au_lo']:.2f}, {r['au_hi']:.2f}] (n={int(r['n'])})"


def fed_headline(rows: pd.DataFrame) -> str:
    """One sentence: how many configurations keep their accelerators fed, and the one that feeds the most."""
    counts = rows["verdict"].value_counts().to_dict()
    n_fed = int(counts.get("fed", 0))
    text = (f"{n_fed} of {len(rows)} configuration{'s' if len(rows) != 1 else ''} keep their accelerators fed"
            + (f", {int(counts['undecided'])} undecided (more repetitions decide)" if counts.get("undecided") else ""))
    fed_ones = rows[rows["verdict"] == "fed"]
    if len(fed_ones):
        most = fed_ones.sort_values(["ranks", "au"], ascending=[False, False], kind="stable").iloc[0]
        text += (f"; the most accelerators fed: {int(most['ranks'])} ({most['label']}, AU {_au(most)} ≥ "
                 f"{most['floor']:.2f})")
    return text + "."


def fed_markdown(rows: pd.DataFrame) -> str:
    """The section of the Markdown guidelines (empty without a configuration that has a compute time)."""
    if rows.empty:
        return ""
    lines = ["## Accelerators: fed or starved", "", fed_headline(rows), "",
             "| configuration | accelerators (nodes×ppn) | AU [95% CI] | floor | verdict | MiB/s |",
             "|---|---|---|---|---|---|"]
    for _, r in rows.iterrows():
        lines.append(f"| {r['label']} | {int(r['ranks'])} ({int(r['nodes'])}×{int(r['ppn'])}) | {_au(r)} | "
                     f"{r['floor']:.2f} | **{r['verdict']}** | {r['bandwidth_mib_s']:.1f} |")
    lines += ["", "AU: compute time over wall time, one accelerator a rank; fed when the interval's lower end (or the "
              "one repetition) is at or above the workload's floor (`workload.au_floor`), starved when its upper end "
              "is below it.", ""]
    return "\n".join(lines)


def fed_json(rows: pd.DataFrame) -> list[dict[str, Any]]:
    """The rows as JSON-ready dicts (NaN bounds as None)."""
    out = []
    for rec in rows.to_dict(orient="records"):
        out.append({k: (None if isinstance(v, float) and v != v else v) for k, v in rec.items()})
    return out
