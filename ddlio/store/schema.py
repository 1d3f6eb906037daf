"""The store's schema version: :func:`check_store` (can this ddlio read, or write, the store as it is?) and
:func:`upgrade_schema` (create the tables, or bring an older store up to :data:`SCHEMA_VERSION`)."""

from __future__ import annotations

import os
from pathlib import Path

from sqlalchemy import delete, func, insert, inspect, select, text
from sqlalchemy.engine import URL, Connection, Engine, Inspector

from ddlio.identity import config_digest
from ddlio.store.engine import MIN_FREE_BYTES, StoreError, _db_errors, _engine, _load_driver, _parse, describe
from ddlio.store.models import SCHEMA_VERSION, Base, Meta
from ddlio.units import format_size

#: pg_advisory_xact_lock key serialising schema creation and upgrades ("ddlio" + version-independent)
_PG_SCHEMA_LOCK = 0x64646C696F


def _inspect(conn: Connection) -> tuple[int, list[str], list[str]]:
    """(schema version, missing nullable columns, missing NOT NULL columns) of the store behind ``conn``.
    Version 0: no table at all (a new or empty database); 1: the tables written before versions were recorded (no
    schema version row, and no table but ddlio's). A database holding other tables and no ddlio schema version is
    someone else's: :class:`StoreError` (see :func:`_version`)."""
    insp = inspect(conn)
    tables = set(insp.get_table_names())
    version = _version(conn, insp, tables)
    if version == 0:
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
    if required and Meta.__tablename__ not in tables:
        raise _not_ours(conn, tables)  # no mark, and not even the shape of an unversioned store: someone else's
    return version, nullable, required


def _version(conn: Connection, insp: Inspector, tables: set[str]) -> int:
    """The schema version of the store whose tables are ``tables``, proven by ddlio's own mark: the
    ``schema_version`` row of its ``ddlio_meta`` table. Without that row it is 0 for a database without tables, 1
    for a store of the ddlio that wrote no version (its ``points`` table, no table that is not ddlio's, and, checked
    by :func:`_inspect`, every NOT NULL column of ddlio's tables); any other database is refused, before anything
    is added to it."""
    if Meta.__tablename__ in tables and {"key", "value"} <= {c["name"] for c in insp.get_columns(Meta.__tablename__)}:
        value = conn.execute(select(Meta.value).where(Meta.key == "schema_version")).scalar()
        if value is not None and str(value).isdigit():
            return int(value)
    if not tables:
        return 0
    foreign = sorted(tables - set(Base.metadata.tables))
    if "points" in tables and not foreign:
        return 1
    raise _not_ours(conn, tables)


def _not_ours(conn: Connection, tables: set[str]) -> StoreError:
    """The message for a database that holds ``tables`` and no ddlio schema version."""
    foreign = sorted(tables - set(Base.metadata.tables)) or sorted(tables)
    shown = ", ".join(foreign[:4]) + (" ..." if len(foreign) > 4 else "")
    other = ("another database (CREATE DATABASE ddlio, then db=postgresql://USER@HOST/ddlio)"
             if conn.dialect.name == "postgresql" else "a new file name")
    return StoreError(f"db={describe(conn.engine.url)} is not a ddlio results store: it holds tables of its own "
                     f"({shown}) and no ddlio schema version (table {Meta.__tablename__}); ddlio creates its tables "
                     f"only in an empty database and writes only to its own stores: give {other}, or the store you "
                     "meant")


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
    if "points.config_digest" in added and "points" not in added:
        _fill_config_digests(conn)
    if version != SCHEMA_VERSION:
        conn.execute(delete(Meta).where(Meta.key == "schema_version"))
        conn.execute(insert(Meta).values(key="schema_version", value=str(SCHEMA_VERSION)))
    return added


#: points per round of :func:`_fill_config_digests`
_FILL_ROWS = 2000


def _fill_config_digests(conn: Connection) -> int:
    """Fill ``points.config_digest`` (:func:`ddlio.identity.config_digest`) for the rows written before it existed,
    in rounds of :data:`_FILL_ROWS` points in key order (each stored config parsed once); a row whose config is
    not an object keeps NULL (readers treat it as a configuration of its own). Returns the rows filled."""
    points = Base.metadata.tables["points"]
    last, filled = "", 0
    while True:
        rows = conn.execute(select(points.c.point_key, points.c.config)
                            .where(points.c.point_key > last, points.c.config_digest.is_(None))
                            .order_by(points.c.point_key).limit(_FILL_ROWS)).all()
        if not rows:
            return filled
        last = rows[-1][0]
        todo = [{"k": k, "d": config_digest(c)} for k, c in rows if isinstance(c, dict)]
        if todo:
            conn.execute(text("UPDATE points SET config_digest = :d WHERE point_key = :k"), todo)
            filled += len(todo)

