"""The results store: SQLAlchemy models and the engine (a SQLite file by default, any SQLAlchemy URL).

Tables: ``sweeps`` (one per ``sweep.py`` call), ``sweep_points`` (which points a sweep asked for and what it did
with each), ``points`` (one per point key: config as columns, status, error, job, and the run's Darshan-style
totals, and the claim of the driver that holds it), ``epochs`` (per-epoch measurements with latency histograms and
per-rank figures), ``environments`` (versions, host, git commit; shared by the points measured in the same
environment) and ``measurements`` (every outcome of every point: its history).

Ingest is idempotent: a point is keyed by its point key; storing the same record twice changes nothing. Every
outcome is kept in ``measurements`` (the point's history); the newest is the point's current state, a failed
re-measure included.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import hashlib
import json
import os
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    DateTime,
    Float,
    ForeignKey,
    Integer,
    String,
    Text,
    create_engine,
    event,
    func,
    select,
)
from sqlalchemy.engine import URL, Connection, Engine, make_url
from sqlalchemy.orm import DeclarativeBase, Mapped, Session, mapped_column, relationship

from ddlio.errors import DdlioError
from ddlio.records import Outcome
from ddlio.secrets import mask, mask_any, read_db_url_file

#: version of the store's tables, recorded in its ``ddlio_meta`` table. 1: the tables as written before versions were
#: recorded (no meta table); 2: + ``ddlio_meta``; 3: + ``points.agg_perf_by_slowest_mib_s`` (imported Darshan
#: logs; the file-system layer's columns came with 2). A change to the tables bumps it; writers (sweep.py, ``analysis
#: ingest``) upgrade an older store (new tables, new nullable columns), readers refuse a store newer than this.
SCHEMA_VERSION = 3


class Base(DeclarativeBase):
    pass


def _now() -> dt.datetime:
    return dt.datetime.now(dt.timezone.utc).replace(tzinfo=None)


def _parse_utc(text: str | None) -> dt.datetime | None:
    if not text:
        return None
    return dt.datetime.strptime(text, "%Y-%m-%dT%H:%M:%SZ")


class Meta(Base):
    """Facts about the store itself: ``schema_version``."""

    __tablename__ = "ddlio_meta"
    key: Mapped[str] = mapped_column(String(64), primary_key=True)
    value: Mapped[str] = mapped_column(Text)


class Sweep(Base):
    __tablename__ = "sweeps"
    id: Mapped[str] = mapped_column(String(64), primary_key=True)
    started_utc: Mapped[dt.datetime] = mapped_column(DateTime, default=_now)
    finished_utc: Mapped[dt.datetime | None] = mapped_column(DateTime)
    argv: Mapped[list] = mapped_column(JSON, default=list)
    host: Mapped[str] = mapped_column(String(255), default="")
    n_points: Mapped[int] = mapped_column(Integer, default=0)
    n_skipped: Mapped[int] = mapped_column(Integer, default=0)
    n_completed: Mapped[int] = mapped_column(Integer, default=0)
    n_failed: Mapped[int] = mapped_column(Integer, default=0)


class SweepPoint(Base):
    __tablename__ = "sweep_points"
    sweep_id: Mapped[str] = mapped_column(ForeignKey("sweeps.id"), primary_key=True)
    point_key: Mapped[str] = mapped_column(String(64), primary_key=True)
    # measure | skip
    action: Mapped[str] = mapped_column(String(16))


class Environment(Base):
    __tablename__ = "environments"
    id: Mapped[str] = mapped_column(String(64), primary_key=True)
    host: Mapped[str] = mapped_column(String(255))
    os: Mapped[str] = mapped_column(String(255))
    git_commit: Mapped[str | None] = mapped_column(String(64))
    git_dirty: Mapped[bool] = mapped_column(Boolean, default=False)
    packages: Mapped[dict] = mapped_column(JSON)
    raw: Mapped[dict] = mapped_column(JSON)


class Point(Base):
    __tablename__ = "points"
    point_key: Mapped[str] = mapped_column(String(64), primary_key=True)
    dataset_key: Mapped[str] = mapped_column(String(64), index=True)
    sweep_id: Mapped[str | None] = mapped_column(ForeignKey("sweeps.id"))
    label: Mapped[str] = mapped_column(String(255))
    # claimed (by a driver, no job yet) | submitted | completed | failed
    status: Mapped[str] = mapped_column(String(16), index=True)
    error: Mapped[str | None] = mapped_column(Text)
    job_id: Mapped[str | None] = mapped_column(String(64))
    job_state: Mapped[str | None] = mapped_column(String(32))
    run_dir: Mapped[str | None] = mapped_column(Text)
    attempts: Mapped[int] = mapped_column(Integer, default=0)
    # a job went out for this point and its outcome has not been stored yet (harvest or re-attach, never resubmit)
    pending: Mapped[bool | None] = mapped_column(Boolean)
    # the current outcome's row in ``measurements`` (the point's history); NULL in stores older than that table
    measurement_id: Mapped[int | None] = mapped_column(Integer)
    # the stored measurement's own id (from the kernel), for idempotent ingest
    result_id: Mapped[str | None] = mapped_column(String(64))
    # when the kernel measured (seconds since the epoch), and how many other points of the same sweep were
    # being measured at the same time (contention: 0 locally, up to the array parallelism on Slurm)
    started_unix: Mapped[float | None] = mapped_column(Float)
    finished_unix: Mapped[float | None] = mapped_column(Float)
    overlapping: Mapped[int | None] = mapped_column(Integer)
    submitted_utc: Mapped[dt.datetime | None] = mapped_column(DateTime)
    finished_utc: Mapped[dt.datetime | None] = mapped_column(DateTime)
    # --- the driver that owns the point now (see Store.claim): a token per driver process, its host and PID, and
    # when it last said it was alive (UTC); NULL when no driver holds the point
    claim_token: Mapped[str | None] = mapped_column(String(64))
    claim_host: Mapped[str | None] = mapped_column(String(255))
    claim_pid: Mapped[int | None] = mapped_column(Integer)
    claim_utc: Mapped[dt.datetime | None] = mapped_column(DateTime)
    # --- configuration
    format: Mapped[str] = mapped_column(String(32))
    format_options: Mapped[dict] = mapped_column(JSON)
    access: Mapped[str] = mapped_column(String(16))
    stripe_count: Mapped[int] = mapped_column(Integer)
    stripe_size: Mapped[int] = mapped_column(BigInteger)
    nodes: Mapped[int] = mapped_column(Integer)
    ppn: Mapped[int] = mapped_column(Integer)
    ranks: Mapped[int] = mapped_column(Integer)
    repeat: Mapped[int] = mapped_column(Integer)
    seed: Mapped[int] = mapped_column(BigInteger)
    workload: Mapped[str] = mapped_column(String(64))
    samples: Mapped[int] = mapped_column(BigInteger)
    sample_size: Mapped[int] = mapped_column(BigInteger)
    sample_size_stdev: Mapped[int] = mapped_column(BigInteger)
    samples_per_file: Mapped[int] = mapped_column(Integer)
    num_files: Mapped[int] = mapped_column(Integer)
    batch_size: Mapped[int] = mapped_column(Integer)
    epochs: Mapped[int] = mapped_column(Integer)
    compute_time_s: Mapped[float] = mapped_column(Float)
    cache_policy: Mapped[str] = mapped_column(String(16))
    cluster: Mapped[str] = mapped_column(String(64))
    data_root: Mapped[str] = mapped_column(Text)
    config: Mapped[dict] = mapped_column(JSON)
    # --- measurement (whole run; NULL until completed)
    hosts: Mapped[int | None] = mapped_column(Integer)
    host_names: Mapped[list | None] = mapped_column(JSON)
    bytes_read: Mapped[int | None] = mapped_column(BigInteger)
    bytes_planned: Mapped[int | None] = mapped_column(BigInteger)
    os_read_bytes: Mapped[int | None] = mapped_column(BigInteger)
    io_time_slowest_s: Mapped[float | None] = mapped_column(Float)
    bandwidth_mib_s: Mapped[float | None] = mapped_column(Float)
    iops: Mapped[float | None] = mapped_column(Float)
    wall_time_s: Mapped[float | None] = mapped_column(Float)
    samples_per_s: Mapped[float | None] = mapped_column(Float)
    au: Mapped[float | None] = mapped_column(Float)
    lat_p50_us: Mapped[float | None] = mapped_column(Float)
    lat_p90_us: Mapped[float | None] = mapped_column(Float)
    lat_p99_us: Mapped[float | None] = mapped_column(Float)
    cache: Mapped[str | None] = mapped_column(String(16))
    # cache=cold: a freshly generated dataset was read once, untimed, before the first measured epoch of any point
    settle: Mapped[bool | None] = mapped_column(Boolean)
    # one of the point's epochs was its dataset's first read since generation (NULL: unknown)
    first_read: Mapped[bool | None] = mapped_column(Boolean)
    max_rss_kib: Mapped[int | None] = mapped_column(BigInteger)
    fs_type: Mapped[str | None] = mapped_column(String(32))
    striping_applicable: Mapped[bool | None] = mapped_column(Boolean)
    layout: Mapped[dict | None] = mapped_column(JSON)
    mpi_library: Mapped[str | None] = mapped_column(String(255))
    env_id: Mapped[str | None] = mapped_column(ForeignKey("environments.id"))
    # --- the file-system layer (read calls the ranks issued, see experiments.kernel.posix; NULL in older stores):
    # calls, bytes they returned, the slowest rank's time in them (s), calls per Darshan POSIX_SIZE_READ_* bin,
    # and amplification = posix_bytes_read / bytes_read
    posix_reads: Mapped[int | None] = mapped_column(BigInteger)
    posix_bytes_read: Mapped[int | None] = mapped_column(BigInteger)
    posix_read_time_s: Mapped[float | None] = mapped_column(Float)
    posix_size_hist: Mapped[list | None] = mapped_column(JSON)
    amplification: Mapped[float | None] = mapped_column(Float)
    # where the measurement comes from: ddlio (a point of a sweep; NULL in older stores) | darshan (an imported log)
    source: Mapped[str | None] = mapped_column(String(16))
    # an imported Darshan log: Darshan's own derived agg_perf_by_slowest (read and written bytes), MiB/s
    agg_perf_by_slowest_mib_s: Mapped[float | None] = mapped_column(Float)
    result: Mapped[dict | None] = mapped_column(JSON)

    epoch_rows: Mapped[list[Epoch]] = relationship(back_populates="point", cascade="all, delete-orphan")


class Epoch(Base):
    __tablename__ = "epochs"
    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    point_key: Mapped[str] = mapped_column(ForeignKey("points.point_key"), index=True)
    epoch: Mapped[int] = mapped_column(Integer)
    samples: Mapped[int] = mapped_column(BigInteger)
    bytes_read: Mapped[int] = mapped_column(BigInteger)
    bytes_planned: Mapped[int] = mapped_column(BigInteger)
    read_ops: Mapped[int] = mapped_column(Integer)
    meta_ops: Mapped[int] = mapped_column(Integer)
    os_read_bytes: Mapped[int | None] = mapped_column(BigInteger)
    io_time_slowest_s: Mapped[float | None] = mapped_column(Float)
    io_time_mean_s: Mapped[float | None] = mapped_column(Float)
    bandwidth_mib_s: Mapped[float | None] = mapped_column(Float)
    iops: Mapped[float | None] = mapped_column(Float)
    wall_time_s: Mapped[float | None] = mapped_column(Float)
    compute_time_s: Mapped[float | None] = mapped_column(Float)
    samples_per_s: Mapped[float | None] = mapped_column(Float)
    au: Mapped[float | None] = mapped_column(Float)
    lat_p50_us: Mapped[float | None] = mapped_column(Float)
    lat_p90_us: Mapped[float | None] = mapped_column(Float)
    lat_p99_us: Mapped[float | None] = mapped_column(Float)
    cache: Mapped[str] = mapped_column(String(16))
    residency_before: Mapped[float | None] = mapped_column(Float)
    residency_after: Mapped[float | None] = mapped_column(Float)
    cache_note: Mapped[str | None] = mapped_column(Text)
    # the first read of the dataset since it was generated (served by the device, not by a cache below the client);
    # NULL: unknown (a dataset generated before reads were tracked)
    first_read: Mapped[bool | None] = mapped_column(Boolean)
    # seconds between the dataset's generation and this epoch's start
    since_generation_s: Mapped[float | None] = mapped_column(Float)
    # cache=storage_cold: the untimed flush read before the epoch, MiB/s of the slowest node
    flush_mib_s: Mapped[float | None] = mapped_column(Float)
    hist: Mapped[list] = mapped_column(JSON)
    rank_rows: Mapped[list] = mapped_column(JSON)
    posix_reads: Mapped[int | None] = mapped_column(BigInteger)
    posix_bytes_read: Mapped[int | None] = mapped_column(BigInteger)
    posix_read_time_s: Mapped[float | None] = mapped_column(Float)
    posix_size_hist: Mapped[list | None] = mapped_column(JSON)
    amplification: Mapped[float | None] = mapped_column(Float)

    point: Mapped[Point] = relationship(back_populates="epoch_rows")


class Measurement(Base):
    """The point's history: one row per outcome ever stored for it (completed or failed), oldest first. The point's
    row holds the current one (``points.measurement_id``) in full; a completed measurement that a later outcome
    replaced keeps its whole record here (``record``: totals, result and epochs with their histograms)."""

    __tablename__ = "measurements"
    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    point_key: Mapped[str] = mapped_column(ForeignKey("points.point_key"), index=True)
    # completed | failed
    status: Mapped[str] = mapped_column(String(16))
    result_id: Mapped[str | None] = mapped_column(String(64))
    error: Mapped[str | None] = mapped_column(Text)
    job_id: Mapped[str | None] = mapped_column(String(64))
    job_state: Mapped[str | None] = mapped_column(String(32))
    run_dir: Mapped[str | None] = mapped_column(Text)
    finished_utc: Mapped[dt.datetime | None] = mapped_column(DateTime)
    recorded_utc: Mapped[dt.datetime] = mapped_column(DateTime, default=_now)
    # the whole-run figures of a completed measurement (MiB/s, ops/s, seconds)
    bandwidth_mib_s: Mapped[float | None] = mapped_column(Float)
    iops: Mapped[float | None] = mapped_column(Float)
    io_time_slowest_s: Mapped[float | None] = mapped_column(Float)
    wall_time_s: Mapped[float | None] = mapped_column(Float)
    cache: Mapped[str | None] = mapped_column(String(16))
    record: Mapped[dict | None] = mapped_column(JSON)


_CONFIG_COLUMNS = {
    "format": "format", "format_options": "format_options", "access": "access", "stripe_count": "stripe_count",
    "stripe_size": "stripe_size", "nodes": "nodes", "ppn": "ppn", "ranks": "ranks", "repeat": "repeat",
    "seed": "seed", "workload": "workload_name", "samples": "samples", "sample_size": "sample_size",
    "sample_size_stdev": "sample_size_stdev", "samples_per_file": "samples_per_file", "num_files": "num_files",
    "batch_size": "batch_size", "epochs": "epochs", "compute_time_s": "compute_time", "cache_policy": "cache",
    "data_root": "data_root", "dataset_key": "dataset_key", "label": None, "cluster": None,
}
_TOTAL_COLUMNS = ("bytes_read", "bytes_planned", "os_read_bytes", "io_time_slowest_s", "bandwidth_mib_s", "iops",
                  "wall_time_s", "samples_per_s", "au", "lat_p50_us", "lat_p90_us", "lat_p99_us", "cache",
                  "max_rss_kib", "posix_reads", "posix_bytes_read", "posix_read_time_s", "posix_size_hist",
                  "amplification")
_EPOCH_COLUMNS = ("samples", "bytes_read", "bytes_planned", "read_ops", "meta_ops", "os_read_bytes",
                  "io_time_slowest_s", "io_time_mean_s", "bandwidth_mib_s", "iops", "wall_time_s", "compute_time_s",
                  "samples_per_s",
                  "au", "lat_p50_us", "lat_p90_us", "lat_p99_us", "cache", "residency_before", "residency_after",
                  "cache_note", "first_read", "since_generation_s", "flush_mib_s", "posix_reads", "posix_bytes_read",
                  "posix_read_time_s", "posix_size_hist", "amplification")


def _label(p: dict[str, Any]) -> str:
    return f"{p['format']}/{p['access']} {p['nodes']}N-{p['ranks']}P-{p['stripe_count']}OST"


def _nan_to_none(v: Any) -> Any:
    return None if isinstance(v, float) and v != v else v


def _json_safe(obj: Any) -> Any:
    """``obj`` with NaN and infinities replaced by None at any depth (strict JSON: PostgreSQL refuses NaN)."""
    if isinstance(obj, float):
        return obj if obj == obj and obj not in (float("inf"), float("-inf")) else None
    if isinstance(obj, dict):
        return {k: _json_safe(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_json_safe(v) for v in obj]
    return obj


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

    @property
    def store_id(self) -> str:
        """A short id of this store (see :func:`store_id`): its run folders live under ``data_root/runs/<id>/``."""
        return _url_id(self.url)

    def lookup(self, point_key: str) -> dict[str, Any] | None:
        """The stored state of a point, or None: ``status``, ``job_id``, ``run_dir``, ``pending`` (a job went out
        and its outcome is not stored yet), ``attempts``, ``finished_utc``, ``error``, ``job_state``, the totals
        a progress line shows (``bandwidth_mib_s``, ``iops``, ``cache``) and the claim (``claim_token``,
        ``claim_host``, ``claim_pid``, ``claim_utc``)."""
        cols = (Point.status, Point.job_id, Point.run_dir, Point.pending, Point.attempts, Point.finished_utc,
                Point.error, Point.job_state, Point.bandwidth_mib_s, Point.iops, Point.cache, Point.claim_token,
                Point.claim_host, Point.claim_pid, Point.claim_utc)
        with Session(self.engine) as s:
            row = s.execute(select(*cols).where(Point.point_key == point_key)).mappings().first()
        if row is None:
            return None
        return {**row, "pending": bool(row["pending"])}

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


class Store(StoreReader):
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
        import socket

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

    # ------------------------------------------------------------------------------------------- claims
    def claim(self, point: dict[str, Any], token: str, host: str, pid: int, takeover: str | None = None) -> bool:
        """Take ``point`` for the driver ``token`` (running on ``host`` as ``pid``): True when this driver now
        holds it. One conditional UPDATE, atomic on every database: it succeeds only while no driver holds the
        point (or, with ``takeover``, while the dead driver ``takeover`` still does). The point's row is created
        first if it does not exist yet (status ``claimed``)."""
        from sqlalchemy import update

        self._ensure_point(point, status="claimed")
        held = Point.claim_token.is_(None) if takeover is None else Point.claim_token == takeover
        with _db_errors(self.url), self.engine.begin() as conn:
            n = conn.execute(update(Point).where(Point.point_key == point["point_key"], held).values(
                claim_token=token, claim_host=host, claim_pid=pid, claim_utc=_now())).rowcount
        return n == 1

    def heartbeat(self, token: str) -> None:
        """The driver ``token`` is alive: refresh the time of every claim it holds."""
        from sqlalchemy import update

        with _db_errors(self.url), self.engine.begin() as conn:
            conn.execute(update(Point).where(Point.claim_token == token).values(claim_utc=_now()))

    def release(self, token: str, point_key: str | None = None) -> None:
        """The driver ``token`` lets go of ``point_key`` (of every point it holds, without one)."""
        from sqlalchemy import update

        cond = [Point.claim_token == token] + ([Point.point_key == point_key] if point_key else [])
        with _db_errors(self.url), self.engine.begin() as conn:
            conn.execute(update(Point).where(*cond).values(
                claim_token=None, claim_host=None, claim_pid=None, claim_utc=None))

    def _ensure_point(self, p: dict[str, Any], status: str) -> None:
        """Create the point's row if it does not exist, in its own transaction: two drivers creating it at the
        same moment both succeed (the second finds the first's row)."""
        from sqlalchemy.exc import IntegrityError

        with Session(self.engine) as s:
            if s.scalar(select(Point.point_key).where(Point.point_key == p["point_key"])) is not None:
                return
        try:
            with Session(self.engine) as s, s.begin():
                self._point_row(s, p).status = status
        except IntegrityError:
            pass

    def _ensure_environment(self, env: dict[str, Any]) -> str:
        """The id of ``env``'s row, created if needed in its own transaction (safe against a concurrent driver)."""
        from sqlalchemy.exc import IntegrityError

        env_id = hashlib.sha256(json.dumps(env, sort_keys=True, default=str).encode()).hexdigest()[:20]
        with Session(self.engine) as s:
            if s.get(Environment, env_id) is not None:
                return env_id
        git = env.get("git") or {}
        try:
            with Session(self.engine) as s, s.begin():
                s.add(Environment(
                    id=env_id, host=env.get("host", ""), os=env.get("os", ""),
                    git_commit=git.get("commit"), git_dirty=bool(git.get("dirty")),
                    packages=env.get("packages", {}), raw=env,
                ))
        except IntegrityError:
            pass
        return env_id

    def _point_row(self, s: Session, p: dict[str, Any]) -> Point:
        row = s.get(Point, p["point_key"])
        if row is None:
            row = Point(point_key=p["point_key"], status="submitted", attempts=0)
            s.add(row)
        for col, key in _CONFIG_COLUMNS.items():
            if key is not None:
                setattr(row, col, p[key])
        row.label = _label(p)
        row.source = "ddlio"
        row.cluster = str(p["cluster"]["name"])  # every stored form of a point has its cluster's name
        row.config = mask_any(p)  # a point written by an older ddlio may carry a db password: never stored
        return row

    def record_submitted(self, point: dict[str, Any], job_id: str, run_dir: str) -> None:
        with _db_errors(self.url):
            self._ensure_point(point, status="submitted")
        with _db_errors(self.url), Session(self.engine) as s, s.begin():
            row = self._point_row(s, point)
            if row.status != "completed":
                row.status = "submitted"
            row.job_id, row.run_dir, row.job_state = job_id, run_dir, "SUBMITTED"
            row.pending = True
            row.attempts = (row.attempts or 0) + 1
            row.submitted_utc = _now()
            row.sweep_id = self.sweep_id or row.sweep_id

    def record(self, record: dict[str, Any]) -> bool:
        """Store a result or failure record. Returns False when it changed nothing (already stored).

        Every outcome joins the point's history (``measurements``); it also becomes the point's current state
        unless the current one is newer: a failed re-measure is current (with its error) and the completed
        measurement it replaced stays in the history. A result always replaces a failure the driver only inferred
        (a job that ended without leaving one, :attr:`Outcome.LOST`): it is that job's outcome, found late."""
        with _db_errors(self.url):
            self._ensure_point(record["point"], status="submitted")
            env_id = self._ensure_environment(record["env"]) if record["kind"] == "ddlio.result" and \
                record.get("env") else None
        with _db_errors(self.url), Session(self.engine) as s, s.begin():
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
        if record["kind"] == "ddlio.result" and Outcome.of_stored(row.status, row.error) is Outcome.LOST:
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
        row.finished_utc = finished
        row.run_dir = record.get("run_dir") or row.run_dir
        for col in (*_TOTAL_COLUMNS, "hosts", "host_names", "fs_type", "striping_applicable", "layout",
                    "mpi_library", "env_id", "result", "result_id", "started_unix", "finished_unix", "overlapping"):
            setattr(row, col, None)
        row.epoch_rows.clear()

    def _store_result(self, s: Session, row: Point, rec: dict[str, Any], finished: dt.datetime | None,
                      env_id: str | None) -> None:
        totals = rec["totals"]
        row.status, row.error, row.job_state = "completed", None, rec.get("job_state", "COMPLETED")
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

    def record_observed(self, obs: dict[str, Any]) -> bool:
        """Store an observed run (a Darshan log read by :mod:`analysis.darshan_log`) as a completed point with
        ``source = darshan``, keyed by the log's content: importing the same log again changes nothing. Returns
        whether it was new. Config columns a log cannot tell are 0 / ``observed``."""
        key = "darshan-" + obs["log_sha256"][:20]
        with Session(self.engine) as s, s.begin():
            if s.get(Point, key) is not None:
                return False
            nbytes = obs.get("posix_bytes_read")
            app = obs.get("mpiio_bytes_read") or None
            reads = obs.get("posix_reads")
            files = len(obs.get("files", []))
            name = obs.get("exe") or Path(obs["log"]).name
            end = obs.get("end_unix")
            row = Point(
                point_key=key, dataset_key="darshan", status="completed", source="darshan", attempts=0,
                label=f"observed: {name} job {obs.get('job_id') or '?'} ({obs.get('ranks', 0)} ranks)",
                job_id=obs.get("job_id") or None, job_state="OBSERVED", run_dir=obs["log"],
                format=obs.get("format", "other"), format_options={}, access=obs.get("access", "unknown"),
                stripe_count=int(obs.get("stripe_count", 0)), stripe_size=int(obs.get("stripe_size", 0)), nodes=0,
                ppn=0, ranks=int(obs.get("ranks", 0)), repeat=0, seed=0, workload=f"darshan:{name}"[:64],
                samples=int(reads or 0), sample_size=round(nbytes / reads) if reads else 0, sample_size_stdev=0,
                samples_per_file=round(reads / files) if reads and files else 0, num_files=files,
                batch_size=0, epochs=1, compute_time_s=0.0, cache_policy="observed", cluster="darshan",
                data_root=obs.get("data_root", ""), config=_json_safe(obs),
                bytes_read=app if app else nbytes, posix_reads=reads, posix_bytes_read=nbytes,
                posix_read_time_s=obs.get("posix_read_time_s"), posix_size_hist=obs.get("posix_size_hist"),
                amplification=nbytes / app if app and nbytes is not None else None,
                io_time_slowest_s=obs.get("agg_time_by_slowest_s"),
                bandwidth_mib_s=obs.get("agg_perf_by_slowest_mib_s"),
                agg_perf_by_slowest_mib_s=obs.get("agg_perf_by_slowest_mib_s"),
                wall_time_s=obs.get("run_time_s"), cache="observed",
                started_unix=obs.get("start_unix"), finished_unix=end,
                finished_utc=dt.datetime.fromtimestamp(end, dt.timezone.utc).replace(tzinfo=None) if end else None,
                submitted_utc=_now(), result=_json_safe(obs),
            )
            s.add(row)
        return True

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


# ------------------------------------------------------------------------------------- the store's URL
#: the databases ddlio supports, as "what to write" for the message that lists them
SUPPORTED = {
    "sqlite": "a file path (results.db) or sqlite:///ABSOLUTE/PATH",
    "postgresql": "postgresql://user@host:5432/db (driver: pip install -e '.[postgres]')",
}
POSTGRES_INSTALL = "pip install -e '.[postgres]'"
#: how long to wait for a database server to answer, in seconds
CONNECT_TIMEOUT_S = 5
#: free space (bytes) a SQLite store's file system must have before a writer starts
MIN_FREE_BYTES = 1 << 20
#: pg_advisory_xact_lock key serialising schema creation and upgrades ("ddlio" + version-independent)
_PG_SCHEMA_LOCK = 0x64646C696F


class StoreError(DdlioError):
    """The results store cannot be used as asked; the message names the store and what to do."""


def db_url(db: str) -> str:
    """A SQLAlchemy URL for ``db``: a path becomes ``sqlite:///<absolute path>``; a bare ``postgresql://`` or
    ``postgres://`` becomes ``postgresql+psycopg://`` (psycopg 3, the driver of the ``postgres`` extra: SQLAlchemy
    2.0 would pick psycopg2, 2.1 psycopg 3); any other URL is kept."""
    if "://" not in db:
        return f"sqlite:///{Path(db).expanduser().resolve()}"
    scheme, rest = db.split("://", 1)
    if scheme in ("postgresql", "postgres"):
        return f"postgresql+psycopg://{rest}"
    return db


def _parse(db: str) -> URL:
    from sqlalchemy.exc import ArgumentError

    try:
        return make_url(db_url(db))
    except (ArgumentError, ValueError) as e:
        raise StoreError(f"db={mask(db)} is not a database URL ({e}): give a SQLite file path or one of: "
                         + "; ".join(SUPPORTED.values())) from None


def describe(url: URL) -> str:
    """The store as a message names it, password never included: a SQLite path, or ``host:port/db``."""
    if url.get_backend_name() == "sqlite":
        return url.database or ":memory:"
    host = url.host or url.query.get("host") or "localhost"
    port = url.port or (5432 if url.get_backend_name() == "postgresql" else "")
    server = "PostgreSQL" if url.get_backend_name() == "postgresql" else url.get_backend_name()
    return f"{server} server {host}:{port}, database {url.database or '(default)'}"


def _load_driver(url: URL, db: str) -> None:
    """Raise a StoreError unless the dialect is known and its driver imports."""
    from sqlalchemy.exc import NoSuchModuleError

    name = url.get_backend_name()
    try:
        dialect = url.get_dialect()
    except NoSuchModuleError:
        raise StoreError(
            f"db={mask(db)}: no database dialect {url.drivername!r}. Supported:\n"
            + "\n".join(f"  {k}: {v}" for k, v in SUPPORTED.items())
            + "\nOther databases need their SQLAlchemy driver installed (see SQLAlchemy's dialects)."
        ) from None
    try:
        dialect.import_dbapi()
    except ImportError as e:
        if name == "postgresql":
            raise StoreError(f"db={mask(db)} needs the PostgreSQL driver psycopg 3, which is not installed: "
                             f"{POSTGRES_INSTALL}") from None
        raise StoreError(f"db={mask(db)} needs the driver of {url.drivername}, which is not installed ({e})") from None


def _engine(url: URL, read_only: bool) -> Engine:
    """An engine for ``url``; read-only: SQLite opened with ``mode=ro`` and ``query_only``, PostgreSQL sessions
    whose transactions are READ ONLY."""
    name = url.get_backend_name()
    if name == "sqlite":
        path = url.database
        if read_only and path and path != ":memory:":
            uri = f"file:{quote(path)}?mode=ro"
            engine = create_engine(url, creator=lambda: sqlite3.connect(uri, uri=True, check_same_thread=False))
            event.listen(engine, "connect", _sqlite_read_only)
        else:
            engine = create_engine(url)
            event.listen(engine, "connect", _sqlite_pragmas)
        return engine
    args: dict[str, Any] = {}
    if name == "postgresql":
        args["connect_timeout"] = CONNECT_TIMEOUT_S
        if read_only:
            args["options"] = "-c default_transaction_read_only=on"
    return create_engine(url, connect_args=args, pool_pre_ping=True)


def _failure(url: URL, e: BaseException) -> StoreError:
    """One message for a database error raised while opening or writing the store at ``url``."""
    orig = getattr(e, "orig", None) or e
    text = mask(str(orig).strip().splitlines()[0] if str(orig).strip() else type(orig).__name__)
    where = describe(url)
    low = text.lower()
    if "file is not a database" in low:
        return StoreError(f"db={where} is not a SQLite database (SQLite: {text}): give another file name, or the "
                          "URL of the store you meant")
    if "disk is full" in low or "no space left" in low or "could not extend file" in low:
        return StoreError(f"the disk under the results store is full ({where}): {text}. Free space there, or use "
                          "another db=")
    if "readonly database" in low or "read-only" in low or "permission denied" in low:
        return StoreError(f"the results store {where} is not writable ({text}): fix its permissions (or chattr -i), "
                          "or use another db=")
    if url.get_backend_name() == "postgresql":
        hint = ""
        if "refused" in low or "timeout" in low or "timed out" in low or "could not translate host" in low:
            hint = f"; is the server running, and is {url.host or 'localhost'}:{url.port or 5432} its address?"
        return StoreError(f"cannot use the results store on the {where} as user {url.username or '(default)'}: "
                          f"{text}{hint}")
    return StoreError(f"the results store {where} failed: {type(orig).__name__}: {text}")


@contextlib.contextmanager
def _db_errors(url: URL) -> Iterator[None]:
    """Database errors become one StoreError message naming the store (never the password)."""
    from sqlalchemy.exc import DBAPIError, OperationalError

    try:
        yield
    except (OperationalError, DBAPIError, sqlite3.Error) as e:
        raise _failure(url, e) from None


# ------------------------------------------------------------------------------------- versions and checks
def _inspect(conn: Connection) -> tuple[int, list[str], list[str]]:
    """(schema version, missing nullable columns, missing NOT NULL columns) of the store behind ``conn``.
    Version 0: no ddlio table yet; 1: the tables written before versions were recorded (no meta table)."""
    from sqlalchemy import inspect

    insp = inspect(conn)
    tables = set(insp.get_table_names())
    if Meta.__tablename__ in tables:
        value = conn.execute(select(Meta.value).where(Meta.key == "schema_version")).scalar()
        version = int(value) if value and str(value).isdigit() else 1
    elif "points" in tables:
        version = 1
    else:
        return 0, [], []
    nullable, required = [], []
    for table in Base.metadata.sorted_tables:
        if table.name == Meta.__tablename__:
            continue  # readers do without it (version 1); writers create it
        if table.name not in tables:
            nullable.append(table.name)  # a new table: created by a writer
            continue
        have = {c["name"] for c in insp.get_columns(table.name)}
        for col in table.columns:
            if col.name not in have:
                (nullable if col.nullable else required).append(f"{table.name}.{col.name}")
    return version, nullable, required


def _check_sqlite_path(url: URL, db: str, write: bool) -> bool:
    """Checks of a SQLite store's path before anything opens it; returns whether the file exists."""
    path = Path(url.database or "")
    if not url.database or url.database == ":memory:":
        return False
    if path.is_dir():
        raise StoreError(f"db={path} is a directory: give a file path inside it (e.g. {path / 'results.db'})")
    if not path.exists():
        if not write:
            raise StoreError(f"no results store at {path}: run a sweep first, or pass --db PATH")
        anc = path.parent
        while not anc.exists():
            anc = anc.parent
        if not anc.is_dir():
            raise StoreError(f"db={path}: {anc} is a file, so the store cannot be created there")
        if not os.access(anc, os.W_OK | os.X_OK):
            raise StoreError(f"db={path} cannot be created: {anc} is not writable; give a directory you can write")
        return False
    if write:
        for p, what in ((path, "file"), (path.parent, "directory (SQLite writes its journal beside the file)")):
            if not os.access(p, os.W_OK):
                raise StoreError(f"the results store {path} is read-only: its {what} {p} denies writing (permissions, "
                                 "chattr +i or a read-only mount); fix that, or use another db=")
    return True


def _check_free_space(path: Path) -> None:
    from ddlio.units import format_size

    anc = path.parent
    while not anc.exists():
        anc = anc.parent
    st = os.statvfs(anc)
    free = st.f_bavail * st.f_frsize
    if free < MIN_FREE_BYTES:
        raise StoreError(f"the disk under the results store is full: {format_size(free)} free at {anc} (the store "
                         f"needs {format_size(MIN_FREE_BYTES)} to grow); free space there, or use another db=")


def check_store(db: str, write: bool) -> int:
    """Check the store ``db`` (a SQLite path or a SQLAlchemy URL) without writing anything: the dialect is known,
    its driver installed, the server answers (within CONNECT_TIMEOUT_S seconds), the store is writable (``write``)
    and its schema version one this ddlio can read (and, ``write``, upgrade). Returns the store's schema version
    (0: no store yet). Raises :class:`StoreError` with one message otherwise."""
    url = _parse(db)
    _load_driver(url, db)
    name = url.get_backend_name()
    if name == "sqlite":
        exists = _check_sqlite_path(url, db, write)
        if write and url.database and url.database != ":memory:":
            _check_free_space(Path(url.database))
        if not exists:
            return 0
    engine = _engine(url, read_only=True)
    try:
        with _db_errors(url), engine.connect() as conn:
            version, nullable, required = _inspect(conn)
            if write and name == "postgresql":
                _check_pg_writable(conn, url, version)
            conn.rollback()
    finally:
        engine.dispose()
    where = describe(url)
    if version > SCHEMA_VERSION:
        raise StoreError(f"the results store {where} has schema version {version}, newer than this ddlio's "
                         f"({SCHEMA_VERSION}): update ddlio (git pull && pip install -e .), or use another db")
    if required:
        raise StoreError(
            f"the results store {where} lacks the NOT NULL column(s) {', '.join(required[:4])}, which cannot be added "
            "to its existing rows: use a new db= and ingest the old run folders into it "
            "(python -m analysis ingest DATA_ROOT/runs --db NEW)"
        )
    if not write and version == 0:
        raise StoreError(f"no ddlio tables in {where}: run a sweep first, or pass --db")
    if not write and nullable:
        raise StoreError(
            f"the results store {where} has schema version {version}; this ddlio reads version {SCHEMA_VERSION}: "
            "upgrade it by running a writer on it once (python -m analysis ingest DATA_ROOT/runs --db ..., "
            "or a sweep with db=...)"
        )
    return version


def _check_pg_writable(conn: Connection, url: URL, version: int) -> None:
    from sqlalchemy import text

    where = describe(url)
    if conn.execute(text("SELECT pg_is_in_recovery()")).scalar():
        raise StoreError(f"the PostgreSQL server {where} is a read-only standby: give the primary's URL")
    if version == 0:
        ok = conn.execute(text("SELECT has_schema_privilege(current_schema(), 'CREATE')")).scalar()
        what = "create tables in its schema"
    else:
        ok = conn.execute(text("SELECT has_table_privilege('points', 'INSERT, UPDATE')")).scalar()
        what = "write its points table"
    if not ok:
        raise StoreError(f"the results store {where} is read-only for user {url.username or '(default)'}: it may "
                         f"not {what}; grant it, or use another db=")


def upgrade_schema(engine: Engine) -> list[str]:
    """Create the store's tables, or bring a store written by an older ddlio up to this version (new tables, new
    nullable columns: old rows simply have no value there), and record the version. Serialised across processes:
    PostgreSQL by a transaction-scoped advisory lock, SQLite by an exclusive transaction, so writers that start
    together on an empty store do not collide. Returns what was added."""
    if engine.dialect.name == "sqlite":
        with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
            conn.exec_driver_sql("BEGIN EXCLUSIVE")
            try:
                added = _upgrade(conn)
            except BaseException:
                conn.exec_driver_sql("ROLLBACK")
                raise
            conn.exec_driver_sql("COMMIT")
            return added
    with engine.begin() as conn:
        if engine.dialect.name == "postgresql":
            conn.execute(select(func.pg_advisory_xact_lock(_PG_SCHEMA_LOCK)))
        return _upgrade(conn)


def _upgrade(conn: Connection) -> list[str]:
    from sqlalchemy import delete, insert, text

    version, nullable, required = _inspect(conn)
    if version > SCHEMA_VERSION:
        raise StoreError(f"the results store has schema version {version}, newer than this ddlio's "
                         f"({SCHEMA_VERSION}): update ddlio (git pull && pip install -e .)")
    if required:
        raise StoreError(f"the results store lacks the NOT NULL column(s) {', '.join(required[:4])}, which cannot "
                         "be added to its existing rows: use a new db= and ingest the old run folders into it")
    tables = set(Base.metadata.tables)
    Base.metadata.create_all(conn)
    added = []
    for item in nullable:
        if item in tables:
            added.append(item)
            continue
        table_name, col_name = item.split(".")
        col = Base.metadata.tables[table_name].columns[col_name]
        ddl = col.type.compile(dialect=conn.dialect)
        conn.execute(text(f'ALTER TABLE {table_name} ADD COLUMN "{col_name}" {ddl}'))
        added.append(item)
    if version != SCHEMA_VERSION:
        conn.execute(delete(Meta).where(Meta.key == "schema_version"))
        conn.execute(insert(Meta).values(key="schema_version", value=str(SCHEMA_VERSION)))
    return added


def _url_id(url: Any) -> str:
    return hashlib.sha256(url.render_as_string(hide_password=True).encode()).hexdigest()[:12]


def store_id(db: str) -> str:
    """A short id of the store ``db`` names (12 hex digits of a SHA-256 of its URL, the password left out: no
    secret enters a path), without opening it. Run folders live under ``data_root/runs/<id>/``, so stores that
    share a data_root never share a run folder."""
    return _url_id(make_url(db_url(db)))


def _sqlite_pragmas(dbapi_conn: Any, _record: Any) -> None:
    cur = dbapi_conn.cursor()
    cur.execute("PRAGMA foreign_keys=ON")
    cur.execute("PRAGMA busy_timeout=30000")
    cur.close()


def _sqlite_read_only(dbapi_conn: Any, _record: Any) -> None:
    cur = dbapi_conn.cursor()
    cur.execute("PRAGMA query_only=ON")
    cur.execute("PRAGMA busy_timeout=30000")
    cur.close()


def default_db() -> str:
    """The store the analysis commands read when no --db is given: $DDLIO_DB, else the URL in the file named by
    $DDLIO_DB_URL_FILE (mode 600), else ./results.db."""
    if os.environ.get("DDLIO_DB"):
        return os.environ["DDLIO_DB"]
    if os.environ.get("DDLIO_DB_URL_FILE"):
        return read_db_url_file(os.environ["DDLIO_DB_URL_FILE"])
    return "results.db"


def open_store_for_reading(db: str | None = None) -> StoreReader:
    """Open the store named by ``db`` (or :func:`default_db`) for a command that only reads it
    (:class:`StoreReader`: never creates or alters a schema)."""
    return StoreReader(db or default_db())


def open_store_for_writing(db: str | None = None) -> Store:
    """Open the store named by ``db`` (or :func:`default_db`) for a writer (:class:`Store`: creates the store or
    upgrades an older one)."""
    return Store(db or default_db())
