"""The store's tables as SQLAlchemy models: ``ddlio_meta``, ``sweeps``, ``sweep_points``, ``environments``,
``points``, ``epochs``, ``point_metrics`` and ``measurements`` (see :mod:`ddlio.store`)."""

from __future__ import annotations

import datetime as dt

from sqlalchemy import JSON, BigInteger, Boolean, DateTime, Float, ForeignKey, Integer, String, Text
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column, relationship

#: version of the store's tables, recorded in its ``ddlio_meta`` table. 1: the tables as written before versions were
#: recorded (no meta table); 2: + ``ddlio_meta``; 3: + ``points.agg_perf_by_slowest_mib_s`` (imported Darshan
#: logs; the file-system layer's columns came with 2); 4: + ``points.config_digest`` (filled for the existing
#: rows by the upgrade); 5: + ``points.kind`` (NULL: train, the kind of every earlier point), the table
#: ``point_metrics`` (a workload kind's results beyond train's wide row) and ``points.outcome`` and
#: ``measurements.outcome`` (a failure's :class:`~ddlio.records.Outcome`, failed or lost; NULL for rows stored before,
#: read from their error text). A change to the tables bumps it; writers
#: (sweep.py, ``analysis ingest``) upgrade an older store (new tables, new nullable columns), readers refuse a store
#: newer than this.
SCHEMA_VERSION = 5


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
    # a failure's outcome (ddlio.records.Outcome): failed (the job's own) or lost (the job left no record); NULL for
    # a completed point, and for a failure stored before outcomes were (its error text tells)
    outcome: Mapped[str | None] = mapped_column(String(16))
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
    # ddlio.identity.config_digest(config): one value per configuration as stored (repeat and keys aside), so a
    # reader of a million points parses one config per value (NULL only for rows a writer has not upgraded yet)
    config_digest: Mapped[str | None] = mapped_column(String(64))
    # the workload kind (experiments.registry.KINDS) when not train: NULL is train, the kind of every earlier point
    kind: Mapped[str | None] = mapped_column(String(64))
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
    metric_rows: Mapped[list[PointMetric]] = relationship(back_populates="point", cascade="all, delete-orphan")


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


class PointMetric(Base):
    """A completed point's result as a workload kind beyond train reports it (train's are the wide row of
    ``points`` and ``epochs``): one row per point and metric, so a new kind adds rows, never columns. The point's
    current measurement only; a replaced one keeps its metrics in its ``measurements.record``."""

    __tablename__ = "point_metrics"
    point_key: Mapped[str] = mapped_column(ForeignKey("points.point_key"), primary_key=True)
    metric: Mapped[str] = mapped_column(String(64), primary_key=True)
    # the point's kind (as points.kind, never NULL here), so a kind's metrics are read without a join
    kind: Mapped[str] = mapped_column(String(64), index=True)
    value: Mapped[float | None] = mapped_column(Float)
    # the value's unit as the kind declares it: "MiB/s", "s", "bytes"; "" for a count or a ratio
    unit: Mapped[str] = mapped_column(String(32), default="")

    point: Mapped[Point] = relationship(back_populates="metric_rows")


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
    # a failure's outcome, as points.outcome
    outcome: Mapped[str | None] = mapped_column(String(16))
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
