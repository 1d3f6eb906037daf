"""Claims: which driver holds a point (a token per driver process, its host and PID, and when it last said it was
alive), taken and given back by one conditional UPDATE each, atomic on every database."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import select, update

from ddlio.store.engine import _db_errors
from ddlio.store.models import Point, _now
from ddlio.store.rows import RowWriter, _chunks


class ClaimsMixin(RowWriter):
    """The writer's claims (see :meth:`claim`), one at a time or a sweep's worth in one transaction
    (:meth:`claim_many`, :meth:`release_many`, :meth:`record_submitted_many`)."""

    def claim(self, point: dict[str, Any], token: str, host: str, pid: int, takeover: str | None = None) -> bool:
        """Take ``point`` for the driver ``token`` (running on ``host`` as ``pid``): True when this driver now
        holds it. One conditional UPDATE, atomic on every database: it succeeds only while no driver holds the
        point (or, with ``takeover``, while the dead driver ``takeover`` still does). The point's row is created
        first if it does not exist yet (status ``claimed``)."""
        self._ensure_point(point, status="claimed")
        held = Point.claim_token.is_(None) if takeover is None else Point.claim_token == takeover
        with _db_errors(self.url), self.engine.begin() as conn:
            n = conn.execute(update(Point).where(Point.point_key == point["point_key"], held).values(
                claim_token=token, claim_host=host, claim_pid=pid, claim_utc=_now())).rowcount
        return n == 1

    def heartbeat(self, token: str) -> None:
        """The driver ``token`` is alive: refresh the time of every claim it holds."""
        with _db_errors(self.url), self.engine.begin() as conn:
            conn.execute(update(Point).where(Point.claim_token == token).values(claim_utc=_now()))

    def release(self, token: str, point_key: str | None = None) -> None:
        """The driver ``token`` lets go of ``point_key`` (of every point it holds, without one)."""
        cond = [Point.claim_token == token] + ([Point.point_key == point_key] if point_key else [])
        with _db_errors(self.url), self.engine.begin() as conn:
            conn.execute(update(Point).where(*cond).values(
                claim_token=None, claim_host=None, claim_pid=None, claim_utc=None))

    # ------------------------------------------------------------------------ a sweep's worth at once
    def claim_many(self, points: Sequence[dict[str, Any]], token: str, host: str, pid: int) -> set[str]:
        """:meth:`claim` for many points in one transaction: the keys this driver now holds (those no driver
        held, and those it held already). Each row is taken by the same conditional UPDATE as :meth:`claim`."""
        if not points:
            return set()
        self._ensure_points(points, "claimed")
        keys = list(dict.fromkeys(p["point_key"] for p in points))
        got: set[str] = set()
        with _db_errors(self.url), self.engine.begin() as conn:
            for chunk in _chunks(keys):
                conn.execute(update(Point).where(Point.point_key.in_(chunk), Point.claim_token.is_(None)).values(
                    claim_token=token, claim_host=host, claim_pid=pid, claim_utc=_now()))
                got.update(conn.execute(select(Point.point_key).where(
                    Point.point_key.in_(chunk), Point.claim_token == token)).scalars())
        return got

    def release_many(self, token: str, point_keys: Sequence[str]) -> None:
        """:meth:`release` of several points in one transaction."""
        if not point_keys:
            return
        with _db_errors(self.url), self.engine.begin() as conn:
            for chunk in _chunks(list(point_keys)):
                conn.execute(update(Point).where(Point.claim_token == token, Point.point_key.in_(chunk)).values(
                    claim_token=None, claim_host=None, claim_pid=None, claim_utc=None))
