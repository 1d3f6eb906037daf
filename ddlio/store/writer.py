"""The store opened for writing: :class:`Store` (sweeps, submissions; claims, outcomes and observed runs come
from its parts in :mod:`ddlio.store.claims`, :mod:`ddlio.store.outcomes` and :mod:`ddlio.store.darshan`) and
:func:`open_store_for_writing`."""

from __future__ import annotations

import socket
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from ddlio.secrets import mask
from ddlio.store.claims import ClaimsMixin
from ddlio.store.darshan import ObservedMixin
from ddlio.store.engine import _db_errors, _engine, _parse, default_db
from ddlio.store.models import SCHEMA_VERSION, Point, Sweep, SweepPoint, _now
from ddlio.store.outcomes import OutcomesMixin
from ddlio.store.reader import StoreReader
from ddlio.store.rows import _chunks
from ddlio.store.schema import check_store, upgrade_schema


class Store(ClaimsMixin, OutcomesMixin, ObservedMixin, StoreReader):
    """The results store opened for writing: sweeps, ``analysis ingest`` and ``analysis import-darshan``. Opening it
    creates the store, or upgrades one written by an older ddlio; it is also the :class:`experiments.run.Tracker`
    the driver hands to ``launch``."""

    read_only = False

    def __init__(self, db: str) -> None:
        """Open the store ``db`` (a SQLite path or a SQLAlchemy URL) for writing: everything is checked first
        (:func:`check_store`), then the store is created or upgraded; problems raise :class:`StoreError`."""
        self.version = check_store(db, write=True)
        url = _parse(db)
        self.url = url
        if url.get_backend_name() == "sqlite" and url.database and url.database != ":memory:":
            Path(url.database).parent.mkdir(parents=True, exist_ok=True)
        self.engine = _engine(url, read_only=False)
        with _db_errors(url):
            upgrade_schema(self.engine)
        self.version = SCHEMA_VERSION
        self.sweep_id: str | None = None

    # ------------------------------------------------------------------------------------------- sweeps
    def begin_sweep(self, sweep_id: str, argv: list[str], points: list[dict[str, Any]], skip: set[str]) -> None:
        with _db_errors(self.url), Session(self.engine) as s, s.begin():
            s.add(Sweep(id=sweep_id, argv=[mask(a) for a in argv], host=socket.gethostname(), n_points=len(points),
                        n_skipped=len(skip)))
            s.flush()
            for p in points:
                key = p["point_key"]
                s.merge(SweepPoint(sweep_id=sweep_id, point_key=key, action="skip" if key in skip else "measure"))
        self.sweep_id = sweep_id

    def end_sweep(self, completed: int, failed: int) -> None:
        with _db_errors(self.url), Session(self.engine) as s, s.begin():
            sw = s.get(Sweep, self.sweep_id)
            if sw is not None:
                sw.finished_utc, sw.n_completed, sw.n_failed = _now(), completed, failed

    def record_submitted(self, point: dict[str, Any], job_id: str, run_dir: str) -> None:
        """A point has been handed to the scheduler as job ``job_id`` (its run folder ``run_dir``)."""
        self.record_submitted_many([(point, job_id, run_dir)])

    def record_submitted_many(self, items: Sequence[tuple[dict[str, Any], str, str]]) -> None:
        """:meth:`record_submitted` for several ``(point, job_id, run_dir)`` (one sbatch's points), in one
        transaction."""
        if not items:
            return
        self._ensure_points([p for p, _, _ in items], "submitted")
        with _db_errors(self.url), Session(self.engine) as s, s.begin():
            keys = list(dict.fromkeys(p["point_key"] for p, _, _ in items))
            rows = {r.point_key: r for chunk in _chunks(keys)
                    for r in s.scalars(select(Point).where(Point.point_key.in_(chunk)))}  # a query per 500
            for point, job_id, run_dir in items:
                row = self._point_row(s, point, rows.get(point["point_key"]))
                rows[row.point_key] = row
                if row.status != "completed":
                    row.status = "submitted"
                row.job_id, row.run_dir, row.job_state = job_id, run_dir, "SUBMITTED"
                row.pending = True
                row.attempts = (row.attempts or 0) + 1
                row.submitted_utc = _now()
                row.sweep_id = self.sweep_id or row.sweep_id


def open_store_for_writing(db: str | None = None) -> Store:
    """Open the store named by ``db`` (or :func:`default_db`) for a writer (:class:`Store`: creates the store or
    upgrades an older one)."""
    return Store(db or default_db())
