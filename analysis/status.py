"""``python -m analysis status``: sweeps and their points by state (queued/running jobs, done, failed)."""

from __future__ import annotations

import argparse
import shutil
from typing import Any

from sqlalchemy import select

from analysis.query import summary_frame
from analysis.summary import cut_at_word
from ddlio import phase
from ddlio.jobstates import JobWatcher
from ddlio.store import Point, Sweep, SweepPoint, open_store_for_reading


def setup_parser(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--db", help="SQLite file or SQLAlchemy URL (default: $DDLIO_DB or ./results.db)")
    parser.add_argument("--sweep", help="only this sweep id (default: every sweep, newest last)")
    parser.add_argument("--last", type=int, default=10, help="show the last N sweeps (default 10)")


def main(args: argparse.Namespace) -> int:
    store = open_store_for_reading(args.db)
    with store.session() as s:
        stmt = select(Sweep).order_by(Sweep.started_utc)
        if args.sweep:
            stmt = stmt.where(Sweep.id == args.sweep)
        sweeps = s.scalars(stmt).all()[-args.last :]
        if not sweeps:
            print("no sweeps in the store" + (f" with id {args.sweep}" if args.sweep else ""))
            return 0 if not args.sweep else 2
        slurm = _slurm_states(s, [sw.id for sw in sweeps])
        summary = summary_frame(store)
        label = dict(zip(summary["point_key"], summary["label"], strict=True))
        validity = dict(zip(summary["point_key"], summary["validity"], strict=True))
        reasons = dict(zip(summary["point_key"], summary["invalid_reasons"], strict=True))
        fed = dict(zip(summary["point_key"], summary["fed"], strict=True))
        floors = dict(zip(summary["point_key"], summary["au_floor"], strict=True))
        last = _last_sweep(s)  # per point: the newest sweep that measured it (its job id is that sweep's)
        for sw in sweeps:
            rows = s.execute(
                select(SweepPoint.action, Point.status, Point.label, Point.repeat, Point.job_id, Point.job_state,
                       Point.error, Point.point_key, Point.run_dir)
                .join(Point, Point.point_key == SweepPoint.point_key)
                .where(SweepPoint.sweep_id == sw.id)
                .order_by(Point.label)
            ).all()
            counts: dict[str, int] = {}
            invalid = []
            for r in rows:
                state = "skipped (measured before)" if r.action == "skip" else _state(r.status, r.job_state)
                counts[state] = counts.get(state, 0) + 1
                if validity.get(r.point_key) == "invalid":
                    invalid.append(r)
            ended = sw.finished_utc.strftime("%H:%M:%S") if sw.finished_utc else _unfinished(rows)
            print(f"sweep {sw.id}  started {sw.started_utc:%Y-%m-%d %H:%M:%S} UTC ({ended}), {sw.n_points} points: "
                  + ", ".join(f"{n} {k}" for k, n in sorted(counts.items())))
            n_valid = sum(validity.get(r.point_key) == "valid" for r in rows)
            if n_valid or invalid:
                print(f"  validity: {n_valid} valid, {len(invalid)} invalid")
            judged = [r.point_key for r in rows if isinstance(fed.get(r.point_key), str)]
            if judged:  # points with a compute time: their accelerators fed or starved, against their AU floors
                n_fed = sum(fed[k] == "fed" for k in judged)
                at = sorted({f"{floors[k]:.2f}" for k in judged})
                print(f"  accelerators: {n_fed} point{'s' if n_fed != 1 else ''} fed, {len(judged) - n_fed} starved "
                      f"(AU ≥ {' or '.join(at)}; python -m analysis summary shows each)")
            for r in invalid[:MAX_LISTED]:
                print(f"    invalid    {label.get(r.point_key, r.label)} repeat={r.repeat}: "
                      f"{cut_at_word(reasons[r.point_key] or '', 100)}")
            if len(invalid) > MAX_LISTED:
                print(f"    ... and {len(invalid) - MAX_LISTED} more invalid (python -m analysis summary lists them)")
            for r in rows:
                if r.action == "skip" or r.status == "completed":
                    continue
                job = (r.job_id or "-") if last.get(r.point_key, sw.id) == sw.id else \
                    f"- (measured again by sweep {last[r.point_key]})"
                line = (f"    {_state(r.status, r.job_state):10s} {label.get(r.point_key, r.label)} "
                        f"repeat={r.repeat} job {job}")
                if r.status == "failed" and r.error:
                    line += f": {cut_at_word(r.error, 100)}"
                elif r.status == "submitted" and r.job_id in slurm:
                    line += f": {slurm[r.job_id]}"
                elif r.status == "submitted" and (ph := phase.read(r.run_dir)) is not None:
                    line += f": {phase.describe(ph)}"  # the phase its job or kernel last wrote (ddlio.phase)
                print(line)
    return 0


#: invalid points listed per sweep; the others are counted ("and N more")
MAX_LISTED = 20


def _last_sweep(s: Any) -> dict[str, str]:
    """Point key -> the newest sweep (by start) that measured it rather than skipped it."""
    rows = s.execute(select(SweepPoint.point_key, SweepPoint.sweep_id).join(Sweep, Sweep.id == SweepPoint.sweep_id)
                     .where(SweepPoint.action != "skip").order_by(Sweep.started_utc)).all()
    return {k: sid for k, sid in rows}


def _unfinished(rows: list[Any]) -> str:
    """Why a sweep has no end time: its driver is still running (a point claimed or submitted), or it was
    interrupted (Ctrl-C, a signal, a kill) before it ended."""
    if any(r.status in ("claimed", "submitted") for r in rows):
        return "driver not finished: running, or interrupted with its jobs still going on; rerun the same command"
    return "interrupted before it ended; rerun the same command to finish it"


def _state(status: str, job_state: str | None) -> str:
    if status == "submitted":
        return "submitted (queued or running)"
    return status


def _slurm_states(s: Any, sweep_ids: list[str]) -> dict[str, str]:
    """What Slurm says now about the sweeps' submitted Slurm jobs (one squeue and one sacct call for all):
    job id -> ``PENDING, QOSMaxJobsPerUserLimit (held by a limit)`` / ``RUNNING``. Empty where Slurm is absent."""
    if shutil.which("squeue") is None:
        return {}
    rows = s.execute(
        select(Point.job_id, Point.config).join(SweepPoint, Point.point_key == SweepPoint.point_key)
        .where(SweepPoint.sweep_id.in_(sweep_ids), Point.status == "submitted", Point.job_id.is_not(None))
    ).all()
    ids = {str(r.job_id) for r in rows if ((r.config or {}).get("cluster") or {}).get("executor") == "slurm"}
    out = {}
    for jid, js in JobWatcher(vanish_after_s=float("inf")).poll(ids).items():
        if js.state == "UNKNOWN":
            out[jid] = "unknown to squeue and sacct (ended; rerun the sweep to store what it left)"
        elif js.kind:
            out[jid] = f"{js.state}, {js.reason or 'no reason given'} ({js.kind})"
        else:
            out[jid] = js.state
    return out
