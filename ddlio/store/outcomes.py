"""A point's outcomes: a result or failure record joins the point's history (``measurements``) and, unless the
current outcome is newer, becomes the point's current state (its totals, epochs and overlaps)."""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from ddlio.records import Outcome
from ddlio.store.engine import _db_errors
from ddlio.store.models import Epoch, Measurement, Point, PointMetric, _now, _parse_utc
from ddlio.store.rows import _EPOCH_COLUMNS, _TOTAL_COLUMNS, RowWriter, _json_safe, _nan_to_none


class OutcomesMixin(RowWriter):
    """The writer's :meth:`record` of results and failures."""

    def record(self, record: dict[str, Any]) -> bool:
        """Store a result or failure record. Returns False when it changed nothing (already stored).

        Every outcome joins the point's history (``measurements``); it also becomes the point's current state
        unless the current one is newer: a failed re-measure is current (with its error) and the completed
        measurement it replaced stays in the history. A result always replaces a failure the driver only inferred
        (a job that ended without leaving one, :attr:`Outcome.LOST`): it is that job's outcome, found late."""
        return self.record_many([record])[0]

    def record_many(self, records: Sequence[dict[str, Any]]) -> list[bool]:
        """Store several records as :meth:`record` does, in one transaction (the outcomes that landed in one look
        at a sweep's run folders); for each, whether it changed anything."""
        if not records:
            return []
        self._ensure_points([r["point"] for r in records], "submitted")
        with _db_errors(self.url):
            env_ids = [self._ensure_environment(r["env"]) if r["kind"] == "ddlio.result" and r.get("env") else None
                       for r in records]
        with _db_errors(self.url), Session(self.engine) as s, s.begin():
            return [self._record_in(s, r, e) for r, e in zip(records, env_ids, strict=True)]

    def _record_in(self, s: Session, record: dict[str, Any], env_id: str | None) -> bool:
        row = self._point_row(s, record["point"])
        finished = _parse_utc(record.get("finished_utc"))
        if self._already_stored(s, row, record, finished):
            return False
        current = self._becomes_current(row, record, finished)
        if current and row.status == "completed":
            self._keep_in_history(s, row)
        failed = record["kind"] == "ddlio.failure"
        totals = {} if failed else record["totals"]
        m = Measurement(
            point_key=row.point_key, status="failed" if failed else "completed",
            result_id=None if failed else record.get("result_id"), error=record["error"] if failed else None,
            job_id=record.get("job_id") or (row.job_id if current else None),
            job_state=record.get("job_state", "FAILED" if failed else "COMPLETED"),
            outcome=_failure_outcome(record) if failed else None,
            run_dir=record.get("run_dir"), finished_utc=finished, recorded_utc=_now(),
            bandwidth_mib_s=_nan_to_none(totals.get("bandwidth_mib_s")), iops=_nan_to_none(totals.get("iops")),
            io_time_slowest_s=_nan_to_none(totals.get("io_time_slowest_s")),
            wall_time_s=_nan_to_none(totals.get("wall_time_s")), cache=totals.get("cache"),
            record=None if current or failed else _json_safe({k: v for k, v in record.items() if k != "point"}),
        )
        s.add(m)
        s.flush()
        if not current:
            return True
        row.pending = False  # this is the outcome of the job that went out
        row.measurement_id = m.id
        if failed:
            self._store_failure(row, record, finished)
        else:
            self._store_result(s, row, record, finished, env_id)
        return True

    @staticmethod
    def _already_stored(s: Session, row: Point, record: dict[str, Any], finished: dt.datetime | None) -> bool:
        failed = record["kind"] == "ddlio.failure"
        rid = None if failed else record.get("result_id")
        q = select(Measurement.id).where(Measurement.point_key == row.point_key,
                                         Measurement.status == ("failed" if failed else "completed"))
        q = q.where(Measurement.result_id == rid) if rid else q.where(Measurement.finished_utc == finished)
        if s.scalar(q.limit(1)) is not None:
            return True
        # a store older than the history table: its current outcome has no history row
        if failed:
            return row.status == "failed" and row.finished_utc == finished and row.measurement_id is None
        if row.status != "completed":
            return False
        return row.result_id == rid if rid else row.finished_utc == finished

    @staticmethod
    def _becomes_current(row: Point, record: dict[str, Any], finished: dt.datetime | None) -> bool:
        if row.status not in ("completed", "failed") or row.finished_utc is None or finished is None:
            return True
        if record["kind"] == "ddlio.result" and Outcome.of_stored(row.status, row.error, row.outcome) is Outcome.LOST:
            return True
        return finished >= row.finished_utc

    def _keep_in_history(self, s: Session, row: Point) -> None:
        """The point's current completed measurement is about to be replaced: its whole record moves into its
        history row (created for a store older than the history table)."""
        m = s.get(Measurement, row.measurement_id) if row.measurement_id is not None else None
        if m is None:
            m = Measurement(point_key=row.point_key, status="completed", result_id=row.result_id,
                            job_id=row.job_id, job_state=row.job_state, run_dir=row.run_dir,
                            finished_utc=row.finished_utc, recorded_utc=_now(), bandwidth_mib_s=row.bandwidth_mib_s,
                            iops=row.iops, io_time_slowest_s=row.io_time_slowest_s, wall_time_s=row.wall_time_s,
                            cache=row.cache)
            s.add(m)
        epochs = [{**{c: getattr(e, c) for c in _EPOCH_COLUMNS}, "epoch": e.epoch, "hist": e.hist,
                   "ranks": e.rank_rows} for e in row.epoch_rows]
        m.record = _json_safe({**(row.result or {}), "totals": {c: getattr(row, c) for c in _TOTAL_COLUMNS},
                               "epochs": epochs})

    @staticmethod
    def _store_failure(row: Point, record: dict[str, Any], finished: dt.datetime | None) -> None:
        """The point's current state becomes this failure: no figures (they belong to the history)."""
        row.status, row.error = "failed", record["error"]
        row.job_state = record.get("job_state", "FAILED")
        row.outcome = _failure_outcome(record)
        row.finished_utc = finished
        row.run_dir = record.get("run_dir") or row.run_dir
        for col in (*_TOTAL_COLUMNS, "hosts", "host_names", "fs_type", "striping_applicable", "layout",
                    "mpi_library", "env_id", "result", "result_id", "started_unix", "finished_unix", "overlapping"):
            setattr(row, col, None)
        row.epoch_rows.clear()
        row.metric_rows.clear()

    def _store_result(self, s: Session, row: Point, rec: dict[str, Any], finished: dt.datetime | None,
                      env_id: str | None) -> None:
        totals = rec["totals"]
        row.status, row.error, row.job_state = "completed", None, rec.get("job_state", "COMPLETED")
        row.outcome = None
        row.finished_utc = finished
        row.run_dir = rec.get("run_dir") or row.run_dir
        for col in _TOTAL_COLUMNS:
            setattr(row, col, _nan_to_none(totals.get(col)))
        row.hosts = len(rec["nodes"])
        row.host_names = rec["nodes"]
        row.fs_type = rec.get("fs", {}).get("type")
        row.layout = rec.get("layout")
        row.striping_applicable = bool(rec.get("layout", {}).get("applicable"))
        row.mpi_library = rec.get("mpi_library")
        row.settle = bool(rec["point"].get("settle")) if rec["point"].get("cache") == "cold" else None
        known = [e.get("first_read") for e in rec["epochs"] if e.get("first_read") is not None]
        row.first_read = any(known) if known else None
        row.result = _json_safe({k: v for k, v in rec.items() if k not in ("epochs", "point")})
        row.result_id = rec.get("result_id")
        self._count_overlaps(s, row, rec.get("started_unix"), rec.get("finished_unix"))
        row.env_id = env_id
        row.epoch_rows.clear()
        s.flush()
        for e in rec["epochs"]:
            row.epoch_rows.append(Epoch(
                epoch=e["epoch"], hist=e["hist"], rank_rows=_json_safe(e.get("ranks", [])),
                **{c: _nan_to_none(e.get(c)) for c in _EPOCH_COLUMNS},
            ))
        if row.metric_rows:  # the replaced measurement's metrics go before this one's (same keys)
            row.metric_rows.clear()
            s.flush()
        for m in rec.get("metrics") or ():  # a workload kind's results beyond train's wide row
            row.metric_rows.append(PointMetric(metric=str(m["name"]), kind=row.kind or "train",
                                               value=_nan_to_none(float(m["value"])), unit=str(m.get("unit", ""))))

    @staticmethod
    def _count_overlaps(s: Session, row: Point, start: float | None, end: float | None) -> None:
        """Record how many completed points of the same sweep were measured while this one was, and count
        this one in theirs."""
        row.started_unix, row.finished_unix = start, end
        row.overlapping = 0
        if start is None or end is None or row.sweep_id is None:
            return
        others = s.scalars(select(Point).where(
            Point.sweep_id == row.sweep_id, Point.point_key != row.point_key, Point.status == "completed",
            Point.started_unix < end, Point.finished_unix > start,
        )).all()
        row.overlapping = len(others)
        for o in others:
            o.overlapping = (o.overlapping or 0) + 1


def _failure_outcome(record: dict[str, Any]) -> str:
    """The outcome a failure record wrote (failed, lost), or the one its error text tells for a record written
    before outcomes were."""
    return Outcome.of_value(record.get("outcome"), record.get("error")).value
