"""``python -m analysis query "SELECT ..."``: read-only SQL over the store.

Writes are refused twice over: the statement must start with SELECT, WITH, VALUES or EXPLAIN (a clear message
otherwise), and the database is opened read-only (SQLite: a ``file:...?mode=ro`` URI plus ``PRAGMA query_only``;
other databases: a READ ONLY transaction that is rolled back), so ``WITH x AS (...) DELETE ...`` fails too.
"""

from __future__ import annotations

import argparse
import re
import sqlite3
import sys
from pathlib import Path
from urllib.parse import quote

import pandas as pd
from sqlalchemy import text
from sqlalchemy.engine import make_url
from sqlalchemy.exc import SQLAlchemyError

from ddlio.errors import DdlioError
from ddlio.store import check_store, db_url, default_db, open_store_for_reading

READ_KEYWORDS = ("select", "with", "values", "explain")


class ReadOnlyError(DdlioError):
    """A statement that would change the store was refused."""


def _first_keyword(sql: str) -> str:
    stripped = re.sub(r"--[^\n]*|/\*.*?\*/", " ", sql, flags=re.S).strip().lstrip("(").strip()
    m = re.match(r"[A-Za-z]+", stripped)
    return m.group(0).lower() if m else ""


def check_read_only(sql: str) -> None:
    """Raise :class:`ReadOnlyError` unless ``sql`` starts like a query (SELECT, WITH, VALUES, EXPLAIN)."""
    kw = _first_keyword(sql)
    if kw not in READ_KEYWORDS:
        raise ReadOnlyError(
            f"query is read-only: {kw.upper() or 'an empty statement'} is refused; write one statement starting "
            f"with {', '.join(k.upper() for k in READ_KEYWORDS)} (the store changes only through sweep.py and "
            "`python -m analysis ingest`)"
        )


def _sqlite_path(db: str) -> Path | None:
    url = make_url(db_url(db))
    if url.get_backend_name() != "sqlite" or not url.database or url.database == ":memory:":
        return None
    return Path(url.database)


def run_query(db: str, sql: str) -> pd.DataFrame:
    """The result of one read-only statement ``sql`` on the store ``db`` (a SQLite path or SQLAlchemy URL)."""
    check_read_only(sql)
    path = _sqlite_path(db)
    if path is not None:
        check_store(db, write=False)  # a store that exists, is SQLite and has a schema this ddlio reads
        conn = sqlite3.connect(f"file:{quote(str(path))}?mode=ro", uri=True)
        try:
            conn.execute("PRAGMA query_only = ON")
            cur = conn.execute(sql)
            cols = [d[0] for d in cur.description or []]
            return pd.DataFrame(cur.fetchall(), columns=cols)
        except (sqlite3.OperationalError, sqlite3.ProgrammingError) as e:
            msg = str(e)
            if "readonly" in msg or "query_only" in msg or "read-only" in msg:
                raise ReadOnlyError(f"query is read-only: the statement tried to write ({msg})") from e
            raise DdlioError(f"SQL error: {msg}; tables: sweeps, sweep_points, points, epochs, environments") from e
        finally:
            conn.close()
    engine = open_store_for_reading(db).engine  # checked, and opened read-only
    try:
        with engine.connect() as conn:
            if engine.dialect.name in ("postgresql", "mysql", "mariadb"):
                conn.execute(text("SET TRANSACTION READ ONLY"))
            res = conn.execute(text(sql))
            df = pd.DataFrame(res.fetchall(), columns=list(res.keys()))
            conn.rollback()
            return df
    except SQLAlchemyError as e:
        raise DdlioError(f"SQL error: {e.__class__.__name__}: {e.orig if hasattr(e, 'orig') else e}") from e


def setup_parser(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("sql", help="one read-only statement, e.g. \"SELECT format, avg(bandwidth_mib_s) FROM points "
                                    "GROUP BY format\"")
    parser.add_argument("--db", help="SQLite file or SQLAlchemy URL (default: $DDLIO_DB or ./results.db)")
    parser.add_argument("--format", choices=("table", "csv", "json"), default="table", help="output format")


def main(args: argparse.Namespace) -> int:
    df = run_query(args.db or default_db(), args.sql)
    if args.format == "csv":
        df.to_csv(sys.stdout, index=False)
    elif args.format == "json":
        sys.stdout.write(df.to_json(orient="records", indent=1) + "\n")
    elif df.empty:
        print(f"no rows ({', '.join(map(str, df.columns))})")
    else:
        print(df.to_string(index=False, max_colwidth=60))
    return 0
