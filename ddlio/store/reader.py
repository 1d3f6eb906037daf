"""The store opened for reading: :class:`StoreReader` and :func:`open_store_for_reading`."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import select
from sqlalchemy.engine import URL, Engine
from sqlalchemy.orm import Session

from ddlio.store.engine import _engine, _parse, _url_id, default_db
from ddlio.store.models import Measurement, Point
from ddlio.store.schema import check_store

#: what :meth:`StoreReader.lookup` answers of a point
_LOOKUP_COLUMNS = (Point.status, Point.job_id, Point.run_dir, Point.pending, Point.attempts, Point.finished_utc,
                   Point.error, Point.job_state, Point.outcome, Point.bandwidth_mib_s, Point.iops, Point.cache,
                   Point.claim_token, Point.claim_host, Point.claim_pid, Point.claim_utc)


class StoreReader:
    """The results store opened for reading: what every ``python -m analysis`` command but ``ingest`` and
    ``import-darshan`` opens. SQLite is opened ``mode=ro`` with ``query_only``, PostgreSQL sessions are READ ONLY;
    it never creates, upgrades or writes the store, and has no method that would. A store it cannot read as it is
    (none yet, an older schema version, a newer one) is refused by :func:`check_store` with one
    :class:`StoreError` that says what to do. :class:`Store` is the writer."""

    read_only = True

    def __init__(self, db: str) -> None:
        """Open the store ``db`` (a SQLite path or a SQLAlchemy URL) read-only, after :func:`check_store` found it
        readable as it is."""
        self.version = check_store(db, write=False)
        self.url: URL = _parse(db)
        self.engine: Engine = _engine(self.url, read_only=True)

    def close(self) -> None:
        """Close the store's connections (a server sees them end now, not when the process does); a later call
        opens new ones."""
        self.engine.dispose()

    @property
    def store_id(self) -> str:
        """A short id of this store (see :func:`store_id`): its run folders live under ``data_root/runs/<id>/``."""
        return _url_id(self.url)

    def lookup(self, point_key: str) -> dict[str, Any] | None:
        """The stored state of a point, or None: ``status``, ``job_id``, ``run_dir``, ``pending`` (a job went out
        and its outcome is not stored yet), ``attempts``, ``finished_utc``, ``error``, ``job_state``, ``outcome``,
        the totals a progress line shows (``bandwidth_mib_s``, ``iops``, ``cache``) and the claim (``claim_token``,
        ``claim_host``, ``claim_pid``, ``claim_utc``)."""
        return self.lookup_many([point_key]).get(point_key)

    def lookup_many(self, point_keys: Sequence[str]) -> dict[str, dict[str, Any]]:
        """:meth:`lookup` of many points in a few queries: point key -> stored state (points not stored are
        absent)."""
        keys = list(dict.fromkeys(point_keys))
        out: dict[str, dict[str, Any]] = {}
        with Session(self.engine) as s:
            for i in range(0, len(keys), 500):  # below SQLite's oldest limit of 999 bound variables
                q = select(Point.point_key, *_LOOKUP_COLUMNS).where(Point.point_key.in_(keys[i:i + 500]))
                for row in s.execute(q).mappings():
                    d = dict(row)
                    out[d.pop("point_key")] = {**d, "pending": bool(d["pending"])}
        return out

    def totals(self, point_keys: set[str], columns: set[str]) -> dict[str, tuple[str, dict[str, Any]]]:
        """``{point_key: (status, {column: value})}`` for the points of ``point_keys`` the store holds (``columns``:
        names of the points table's stored totals, e.g. ``bandwidth_mib_s``)."""
        cols = sorted(columns)
        with Session(self.engine) as s:
            rows = s.execute(select(Point.point_key, Point.status, *(getattr(Point, c) for c in cols))
                             .where(Point.point_key.in_(sorted(point_keys)))).all()
        return {r[0]: (r[1], dict(zip(cols, r[2:], strict=True))) for r in rows}

    def is_done(self, point_key: str) -> bool:
        with Session(self.engine) as s:
            return s.scalar(select(Point.status).where(Point.point_key == point_key)) == "completed"

    def history(self, point_key: str) -> list[dict[str, Any]]:
        """Every outcome stored for a point, oldest first (``measurements`` rows without their full record)."""
        cols = [c for c in Measurement.__table__.columns if c.name != "record"]
        with Session(self.engine) as s:
            rows = s.execute(select(*cols).where(Measurement.point_key == point_key)
                             .order_by(Measurement.id)).mappings().all()
        return [dict(r) for r in rows]

    def session(self) -> Session:
        return Session(self.engine)


def open_store_for_reading(db: str | None = None) -> StoreReader:
    """Open the store named by ``db`` (or :func:`default_db`) for a command that only reads it
    (:class:`StoreReader`: never creates or alters a schema)."""
    return StoreReader(db or default_db())
