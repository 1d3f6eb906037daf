"""The store's URL, its database drivers, the engine and the store's error messages: a SQLite path or any
SQLAlchemy URL, opened read-only or for writing; database errors become one :class:`StoreError` naming the store
(never its password)."""

from __future__ import annotations

import contextlib
import hashlib
import os
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

from sqlalchemy import create_engine, event
from sqlalchemy.engine import URL, Engine, make_url
from sqlalchemy.exc import ArgumentError, DBAPIError, NoSuchModuleError, OperationalError

from ddlio.errors import DdlioError
from ddlio.secrets import mask, read_db_url_file

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


class StoreError(DdlioError):
    """The results store cannot be used as asked; the message names the store and what to do."""


def db_url(db: str) -> str:
    """A SQLAlchemy URL for ``db``: a path becomes ``sqlite:///<absolute path>``; a bare ``postgresql://`` or
    ``postgres://`` becomes ``postgresql+psycopg://`` (psycopg 3, the driver of the ``postgres`` extra: SQLAlchemy
    2.0 would pick psycopg2, 2.1 psycopg 3); any other URL is kept."""
    if "://" not in db:
        return f"sqlite:///{_quote_path(str(Path(db).expanduser().resolve()))}"
    scheme, rest = db.split("://", 1)
    if scheme in ("postgresql", "postgres"):
        return f"postgresql+psycopg://{rest}"
    return db


def _quote_path(path: str) -> str:
    """``path`` as the database part of a SQLite URL: the characters a URL parser reads otherwise (``%`` an escape,
    ``?`` the start of a query, ``#`` a fragment) are %-escaped, so the store is the file named and no other; a path
    without them is kept as it is (its store id, and so its run folders, unchanged)."""
    return path.replace("%", "%25").replace("?", "%3F").replace("#", "%23")


def _parse(db: str) -> URL:
    try:
        url = make_url(db_url(db))
    except (ArgumentError, ValueError) as e:
        raise StoreError(f"db={mask(db)} is not a database URL ({e}): give a SQLite file path or one of: "
                         + "; ".join(SUPPORTED.values())) from None
    if url.get_backend_name() == "sqlite" and (not url.database or url.database == ":memory:"
                                               or url.query.get("mode") == "memory"):
        raise StoreError(f"db={mask(db)} is an in-memory SQLite database, which keeps nothing once ddlio exits: "
                         "give a file path (results.db) or sqlite:///ABSOLUTE/PATH")
    return url


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
    try:
        yield
    except (OperationalError, DBAPIError, sqlite3.Error) as e:
        raise _failure(url, e) from None



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
