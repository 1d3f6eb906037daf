"""The results store: SQLAlchemy models and the engine (a SQLite file by default, any SQLAlchemy URL).

Tables: ``sweeps`` (one per ``sweep.py`` call), ``sweep_points`` (which points a sweep asked for and what it did
with each), ``points`` (one per point key: config as columns, status, error, job, and the run's Darshan-style
totals, and the claim of the driver that holds it), ``epochs`` (per-epoch measurements with latency histograms and
per-rank figures), ``point_metrics`` (a workload kind's results beyond train's wide row: point, kind, metric,
value, unit), ``environments`` (versions, host, git commit; shared by the points measured in the same
environment) and ``measurements`` (every outcome of every point: its history).

Ingest is idempotent: a point is keyed by its point key; storing the same record twice changes nothing. Every
outcome is kept in ``measurements`` (the point's history); the newest is the point's current state, a failed
re-measure included.

The package's modules: :mod:`~ddlio.store.models` (the tables), :mod:`~ddlio.store.engine` (URL, drivers, engine,
error messages), :mod:`~ddlio.store.schema` (check and upgrade), :mod:`~ddlio.store.reader` (:class:`StoreReader`),
:mod:`~ddlio.store.writer` (:class:`Store`, made of :mod:`~ddlio.store.rows`, :mod:`~ddlio.store.claims`,
:mod:`~ddlio.store.outcomes` and :mod:`~ddlio.store.darshan`). Importers use the names re-exported here.
"""

from ddlio.store.engine import (
    CONNECT_TIMEOUT_S,
    MIN_FREE_BYTES,
    POSTGRES_INSTALL,
    SUPPORTED,
    StoreError,
    _db_errors,
    _engine,
    _failure,
    _load_driver,
    _parse,
    _url_id,
    db_url,
    default_db,
    describe,
    store_id,
)
from ddlio.store.models import (
    SCHEMA_VERSION,
    Base,
    Environment,
    Epoch,
    Measurement,
    Meta,
    Point,
    PointMetric,
    Sweep,
    SweepPoint,
)
from ddlio.store.reader import StoreReader, open_store_for_reading
from ddlio.store.schema import check_store, upgrade_schema
from ddlio.store.writer import Store, open_store_for_writing

__all__ = [
    "CONNECT_TIMEOUT_S", "MIN_FREE_BYTES", "POSTGRES_INSTALL", "SCHEMA_VERSION", "SUPPORTED", "Base", "Environment",
    "Epoch", "Measurement", "Meta", "Point", "PointMetric", "Store", "StoreError", "StoreReader", "Sweep", "SweepPoint",
    "_db_errors", "_engine", "_failure", "_load_driver", "_parse", "_url_id", "check_store", "db_url", "default_db",
    "describe", "open_store_for_reading", "open_store_for_writing", "store_id", "upgrade_schema",
]
