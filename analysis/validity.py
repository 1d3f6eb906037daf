"""A validity verdict per point, as MLPerf Storage gives one per run: ``valid``, or ``invalid`` with the reasons.

A point is invalid when any of these holds (each reason names its numbers):

- ``cache not verified cold``: the point asked for a cold cache (``cold`` or ``storage_cold``) but the kernel could
  not verify that the dataset's pages were evicted (``cache`` is not ``cold``); when the dataset is smaller than
  the node's memory the reason says so, since its reads may then have come from memory;
- ``first read after generation``: one of its epochs was the dataset's first read since it was written (a cache
  below the client may hold what was just written, or may not: it never compares with repeats);
- ``fewer than MIN_STEPS steps``: too few training steps (samples / (batch × ranks) × epochs) for a stable rate;
- ``repetitions vary``: the coefficient of variation of the configuration's repetitions' bandwidth exceeds
  :data:`MAX_CV`;
- ``timed I/O too short``: the slowest rank's timed I/O (``io_time_slowest_s``) is below :data:`MIN_IO_S`: a
  rate over a few milliseconds is mostly timer and scheduling noise (the same configuration read 394, 113 and
  324 MiB/s over ~4 ms), never a basis for a recommendation;
- ``striping requested but not applied``: a stripe layout other than the default (count 1, 1 MiB) was asked for
  on a file system that does not stripe;
- MLPerf Storage's two rules, for points of its presets only (``workload=mlperf/<name>``, :mod:`ddlio.mlperf`):
  ``not an MLPerf-sized run`` (the dataset under 5 × the nodes' memory, or an epoch under 500 steps: a run scaled
  down with ``workload.scale`` is measured, and said to be no MLPerf run), and ``results on the storage under
  test`` (the job's hard-link probe found the run folder or the SQLite store on the datasets' file system). A
  workload of one's own is judged by the rules above alone: its cache is verified cold by the kernel, not inferred
  from the dataset's size.

:func:`verdicts` is a pure function of :func:`analysis.query.analysis_frame`'s columns (tested with frames);
guidelines use the valid points only and say how many they left out, and why (:func:`left_out_note`).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from analysis.configs import row_codes
from ddlio.evidence import AU_FLOOR, DEFAULT_STRIPE, MIN_IO_S, stripe_unapplied, too_short
from ddlio.mlperf import apart_shortfall, is_mlperf, size_shortfalls

__all__ = ["DEFAULT_STRIPE", "MAX_CV", "MIN_IO_S", "MIN_STEPS", "fed_columns", "is_valid", "left_out_note",
           "valid_only", "verdicts"]

#: fewest training steps (batches per rank, over all epochs) a valid point has
MIN_STEPS = 2
#: largest coefficient of variation (sample std / mean) of a configuration's repetitions' bandwidth
MAX_CV = 1.0


def _human(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(n) < 1024:
            return f"{n:.3g}{unit}"
        n /= 1024
    return f"{n:.3g}TiB"


def _reasons(r: pd.Series, cv: float, memory: float) -> list[str]:
    out = []
    policy = r.get("cache_policy") or "cold"
    if policy in ("cold", "storage_cold") and r.get("cache") != "cold":
        why = f"cache not verified cold (asked {policy}, measured {r.get('cache') or 'unknown'})"
        data = float(r.get("samples") or 0) * float(r.get("sample_size") or 0)
        if memory == memory and data < memory:
            why += f": the dataset ({_human(data)}) fits in node memory ({_human(memory)}), reads may be from memory"
        out.append(why)
    if r.get("first_read") is True or r.get("first_read") == 1:
        out.append("first read after generation")
    ranks, batch = float(r.get("ranks") or 1), float(r.get("batch_size") or 1)
    steps = np.floor(float(r.get("samples") or 0) / max(batch * ranks, 1)) * float(r.get("epochs") or 1)
    if steps < MIN_STEPS:
        out.append(f"fewer than {MIN_STEPS} steps ({steps:.0f})")
    io = r.get("io_time_slowest_s")
    if io is not None and io is not pd.NA and too_short(float(io)):
        out.append(f"timed I/O too short ({float(io) * 1000:.3g} ms < {MIN_IO_S} s): grow the workload (samples, "
                   "epochs) to measure something")
    if cv == cv and cv > MAX_CV:
        out.append(f"repetitions vary: CV {cv:.2f} > {MAX_CV}")
    stripe = (r.get("stripe_count"), r.get("stripe_size"))
    applicable = r.get("striping_applicable")
    if applicable is not pd.NA and stripe_unapplied(*stripe, applicable):
        out.append(f"striping requested (count {stripe[0]}, size {_human(float(stripe[1] or 0))}) but not applied "
                   f"on {r.get('fs_type') or 'this file system'}")
    if is_mlperf(r.get("workload")):
        out += _mlperf_reasons(r, memory)
    return out


def _mlperf_reasons(r: pd.Series, memory: float) -> list[str]:
    """MLPerf Storage's dataset-size and results-apart rules (:mod:`ddlio.mlperf`) for a point of its presets."""
    out = []
    short = size_shortfalls(int(r.get("samples") or 0), int(r.get("sample_size") or 0), int(r.get("batch_size") or 1),
                            int(r.get("ranks") or 1), int(r.get("nodes") or 1), memory)
    if short:
        out.append("not an MLPerf-sized run: " + "; ".join(short))
    same = r.get("_apart") or ""
    if same:
        out.append(f"results on the storage under test: the {same} on the datasets' file system (a hard link into "
                   "it was made; MLPerf Storage keeps records, logs and results on another)")
    return out


def verdicts(points: pd.DataFrame, memory_bytes: dict[str, float] | None = None,
             apart: dict[str, dict] | None = None) -> pd.DataFrame:
    """Per point of ``points`` (same index): ``validity`` (valid | invalid) and ``invalid_reasons`` ("; "-joined,
    "" when valid). ``memory_bytes`` maps an environment id to its node's memory in bytes (unknown: not cited);
    ``apart`` an environment id to its probe of MLPerf's results-apart rule (:func:`ddlio.mlperf.results_apart`)."""
    if points.empty:
        return pd.DataFrame({"validity": pd.Series(dtype=object), "invalid_reasons": pd.Series(dtype=object)})
    memory_bytes = memory_bytes or {}
    if "config_key" in points.columns and "bandwidth_mib_s" in points.columns:
        bw = points["bandwidth_mib_s"].astype(float)
        g = bw.groupby(points["config_key"])
        cv = (g.transform("std") / g.transform("mean")).to_numpy()
    else:
        cv = np.full(len(points), np.nan)
    # the reasons are a function of a few columns: worked out once per distinct combination of them, not per point
    cols = [c for c in _INPUTS if c in points.columns]
    facts = points[cols].reset_index(drop=True).assign(_cv=cv)
    if "env_id" in facts.columns:
        env, envs = pd.factorize(facts["env_id"], use_na_sentinel=False)  # a lookup per environment, not per point
        facts["_mem"] = np.array([float(memory_bytes.get(e, float("nan"))) for e in envs], dtype=float)[env]
        facts["_apart"] = np.array([apart_shortfall((apart or {}).get(e)) for e in envs], dtype=object)[env]
        facts = facts.drop(columns="env_id")
    else:
        facts["_mem"] = float(memory_bytes.get(None, float("nan")))
        facts["_apart"] = apart_shortfall((apart or {}).get(None))
    if "io_time_slowest_s" in facts.columns:  # only whether it is short matters, and by how much (0.1 ms steps)
        io = pd.to_numeric(facts["io_time_slowest_s"], errors="coerce").astype(float)
        facts["io_time_slowest_s"] = io.where(io < MIN_IO_S).round(4)
    codes, uniques = _factorize(facts)
    # _reasons reads its inputs by name: the row's _cv and _mem are passed beside it, not dropped from it (slow)
    texts = np.array(["; ".join(_reasons(r, float(r["_cv"]), float(r["_mem"]))) for _, r in uniques.iterrows()],
                     dtype=object)
    out = pd.DataFrame({"invalid_reasons": texts[codes] if len(codes) else []}, index=points.index)
    out.insert(0, "validity", np.where(out["invalid_reasons"] == "", "valid", "invalid"))
    return out


#: the columns :func:`_reasons` reads (besides the CV and the node memory)
_INPUTS = ["cache_policy", "cache", "samples", "sample_size", "first_read", "ranks", "batch_size", "epochs",
           "stripe_count", "stripe_size", "striping_applicable", "fs_type", "env_id", "io_time_slowest_s",
           "workload", "nodes"]


def _factorize(facts: pd.DataFrame) -> tuple[np.ndarray, pd.DataFrame]:
    """(each row's code, the distinct rows in order of first appearance); missing values are values too."""
    if facts.empty:
        return np.zeros(0, dtype=np.int64), facts
    codes = row_codes(facts[c] for c in facts.columns)
    first = np.unique(codes, return_index=True)[1]
    return codes, facts.iloc[first].reset_index(drop=True)


def is_valid(points: pd.DataFrame) -> np.ndarray:
    """Per point of ``points``: whether its verdict is valid (every point, for a frame without verdicts)."""
    if "validity" not in points.columns:
        return np.ones(len(points), dtype=bool)
    return (points["validity"] == "valid").to_numpy(dtype=bool)


def valid_only(points: pd.DataFrame) -> tuple[pd.DataFrame, str]:
    """(the valid points, a note saying how many were left out and why; "" when none)."""
    ok = is_valid(points)
    if points.empty or ok.all():
        return points, ""
    return points[ok], left_out_note(points[~ok], len(points))


def left_out_note(bad: pd.DataFrame, total: int) -> str:
    """``"3 of 12 points left out as invalid: 2x cache not verified cold, 1x first read after generation"``."""
    kinds = bad["invalid_reasons"].str.split("; ").explode().str.split(r" \(|:| CV|,", regex=True).str[0]
    counts = kinds.value_counts()
    return (f"{len(bad)} of {total} points left out as invalid: "
            + ", ".join(f"{n}x {k.strip()}" for k, n in counts.items()))


def fed_columns(df: pd.DataFrame) -> tuple[pd.Series, pd.Series]:
    """Each point's AU floor (its stored ``au_floor``, 0-1; :data:`~ddlio.evidence.AU_FLOOR` where it was stored
    before the knob, or is not given) and its verdict ``fed`` / ``starved`` by its AU against it: None for a point
    with no compute time (its AU is 0 by construction) or not completed. ``df``: a frame with ``config`` (the stored
    form as JSON text), ``au``, ``compute_time_s`` and ``status``."""
    import json  # lazy: only here

    def floor(text: object) -> float:
        try:
            value = json.loads(text).get("au_floor", AU_FLOOR) if isinstance(text, str) else AU_FLOOR
            return float(value)
        except (ValueError, TypeError, AttributeError):
            return AU_FLOOR

    floors = df["config"].map(floor) if "config" in df else pd.Series(AU_FLOOR, index=df.index)
    au = pd.to_numeric(df.get("au"), errors="coerce")
    step = pd.to_numeric(df.get("compute_time_s"), errors="coerce").fillna(0.0)
    judged = (df["status"] == "completed") & (step > 0) & au.notna()
    words = pd.Series(np.where(au >= floors, "fed", "starved"), index=df.index, dtype=object).where(judged, None)
    return floors.astype(float), words
