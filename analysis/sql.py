"""``python -m analysis query "SELECT ..."``: read-only SQL over the store.

Writes are refused twice over: the statement must start with SELECT, WITH, VALUES or EXPLAIN (a clear message
otherwise), and the database is opened read-only (SQLite: a ``file:...?mode=ro`` URI plus ``PRAGMA query_only``;
other databases: a READ ONLY transaction that is rolled back), so ``WITH x AS (...) DELETE ...`` fails too.

Queries are bounded: a time limit (``--timeout``, default a minute; SQLite's progress handler, PostgreSQL's
``statement_timeout``), Ctrl-C stops one at once, and at most ``--max-rows`` rows are fetched and shown.
"""

from __future__ import annotations

import argparse
import contextlib
import math
import os
import re
import signal
import sqlite3
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pandas as pd
from sqlalchemy import text
from sqlalchemy.engine import make_url
from sqlalchemy.exc import SQLAlchemyError

from ddlio.errors import DdlioError
from ddlio.signals import signal_interrupt
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


#: default time limit of a query, seconds (``--timeout``; the setting ``DDLIO_QUERY_TIMEOUT_S``)
DEFAULT_TIMEOUT_S = 60.0
#: default bound on the rows shown (``--max-rows``)
DEFAULT_MAX_ROWS = 10_000
#: SQLite calls the progress handler every this many virtual-machine instructions (a few ms)
_PROGRESS_EVERY = 20_000


class QueryTimeout(DdlioError):
    """The query ran past its time limit and was stopped."""


def _too_long(timeout_s: float) -> QueryTimeout:
    return QueryTimeout(f"query stopped after its time limit of {timeout_s:g} s (--timeout SECONDS, or the setting "
                        "DDLIO_QUERY_TIMEOUT_S; a recursive CTE without an end never finishes)")


def _fetch(cur: Any, max_rows: int) -> tuple[list[Any], bool]:
    """At most ``max_rows`` rows of the cursor ``cur``, and whether there were more (one row more is fetched)."""
    rows = list(cur.fetchmany(max_rows + 1))
    return rows[:max_rows], len(rows) > max_rows


@contextlib.contextmanager
def _signals_noted(stop: list[BaseException]) -> Iterator[None]:
    """While SQLite runs, Ctrl-C, SIGTERM and SIGHUP are noted in ``stop`` (as KeyboardInterrupt / Terminated) for the
    progress handler to act on, instead of raised where they land (main thread only)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    def note(signum: int, frame: Any) -> None:
        stop.append(signal_interrupt(signum))

    sigs = [signal.SIGINT, signal.SIGTERM] + ([signal.SIGHUP] if signal.getsignal(signal.SIGHUP) != signal.SIG_IGN
                                              else [])  # nohup: SIGHUP stays ignored
    before = {sig: signal.signal(sig, note) for sig in sigs}
    try:
        yield
    finally:
        for sig, handler in before.items():
            signal.signal(sig, handler)


def _sqlite_query(path: Path, sql: str, timeout_s: float, max_rows: int) -> tuple[pd.DataFrame, bool]:
    """The statement on the SQLite store at ``path``, opened read-only; a progress handler stops it at the time
    limit, or at once on Ctrl-C / SIGTERM (raised again once SQLite has stopped)."""
    conn = sqlite3.connect(f"file:{quote(str(path))}?mode=ro", uri=True)
    deadline = time.monotonic() + timeout_s
    stop: list[BaseException] = []

    def progress() -> int:
        if not stop and time.monotonic() > deadline:
            stop.append(_too_long(timeout_s))
        return 1 if stop else 0

    try:
        conn.execute("PRAGMA query_only = ON")
        conn.set_progress_handler(progress, _PROGRESS_EVERY)
        with _signals_noted(stop):
            cur = conn.execute(sql)
            cols = [d[0] for d in cur.description or []]
            rows, cut = _fetch(cur, max_rows)
        if stop:
            raise stop[0]
        return pd.DataFrame(rows, columns=cols), cut
    except (sqlite3.OperationalError, sqlite3.ProgrammingError) as e:
        if stop:
            raise stop[0] from None
        msg = str(e)
        if "readonly" in msg or "query_only" in msg or "read-only" in msg:
            raise ReadOnlyError(f"query is read-only: the statement tried to write ({msg})") from e
        raise DdlioError(f"SQL error: {msg}; tables: sweeps, sweep_points, points, epochs, environments") from e
    finally:
        conn.close()


def run_query(db: str, sql: str, timeout_s: float = DEFAULT_TIMEOUT_S,
              max_rows: int = DEFAULT_MAX_ROWS) -> tuple[pd.DataFrame, bool]:
    """The result of one read-only statement ``sql`` on the store ``db`` (a SQLite path or SQLAlchemy URL): at
    most ``max_rows`` rows, and whether more were cut; stopped (:class:`QueryTimeout`) after ``timeout_s``
    seconds. Ctrl-C stops it at once: SQLite through its progress handler, PostgreSQL by cancelling the statement
    (psycopg), which also runs under ``statement_timeout``."""
    check_read_only(sql)
    path = _sqlite_path(db)
    if path is not None:
        check_store(db, write=False)  # a store that exists, is SQLite and has a schema this ddlio reads
        return _sqlite_query(path, sql, timeout_s, max_rows)
    engine = open_store_for_reading(db).engine  # checked, and opened read-only
    try:
        with engine.connect() as conn:
            if engine.dialect.name in ("postgresql", "mysql", "mariadb"):
                conn.execute(text("SET TRANSACTION READ ONLY"))
            if engine.dialect.name == "postgresql":
                conn.execute(text(f"SET LOCAL statement_timeout = {max(1, int(timeout_s * 1000))}"))
            res = conn.execute(text(sql))
            rows, cut = _fetch(res, max_rows)
            df = pd.DataFrame(rows, columns=list(res.keys()))
            conn.rollback()
            return df, cut
    except SQLAlchemyError as e:
        orig = getattr(e, "orig", None)
        if type(orig).__name__ == "QueryCanceled" and "statement timeout" in str(orig):
            raise _too_long(timeout_s) from None
        raise DdlioError(f"SQL error: {e.__class__.__name__}: {orig if orig is not None else e}") from e
    finally:
        engine.dispose()  # the command is done with the store: no pooled connection outlives it


def _timeout_s(value: str) -> float:
    """``--timeout`` (or ``DDLIO_QUERY_TIMEOUT_S``): seconds, finite and > 0."""
    try:
        t = float(value)
    except ValueError:
        t = float("nan")
    if not math.isfinite(t) or t <= 0:
        raise argparse.ArgumentTypeError(f"{value!r} is not a time limit: give seconds > 0, e.g. 60")
    return t


#: the most rows ``--max-rows`` may ask for (they are held in memory; past this, add LIMIT/WHERE or export)
MAX_ROWS_LIMIT = 100_000_000


def _max_rows(value: str) -> int:
    """``--max-rows``: a whole number from 1 to :data:`MAX_ROWS_LIMIT` (``1e6`` is read as 1000000)."""
    try:
        n = int(value)
    except ValueError:
        try:
            f = float(value)
        except ValueError:
            f = 0.0
        n = int(f) if math.isfinite(f) and f.is_integer() else 0
    if not 1 <= n <= MAX_ROWS_LIMIT:
        raise argparse.ArgumentTypeError(f"{value!r} is not a row count: give a whole number from 1 to "
                                         f"{MAX_ROWS_LIMIT} (more rows: `python -m analysis export`)")
    return int(n)


def _blob_text(v: Any) -> Any:
    """A BLOB cell as SQL writes it, ``X'00FF'`` (hex), so every output format can show it; other cells as they are."""
    if isinstance(v, (bytes, bytearray, memoryview)):
        return "X'" + bytes(v).hex().upper() + "'"
    return v


def _unique_columns(df: pd.DataFrame) -> pd.DataFrame:
    """``df`` with a column named as an earlier one renamed ``name_2``, ``name_3`` ...: a JSON object's keys are
    unique (``SELECT 1 AS b, 2 AS b``)."""
    seen: dict[str, int] = {}
    names = []
    for c in map(str, df.columns):
        seen[c] = seen.get(c, 0) + 1
        names.append(c if seen[c] == 1 else f"{c}_{seen[c]}")
    return df.set_axis(names, axis=1)


def _printable(df: pd.DataFrame) -> pd.DataFrame:
    """``df`` with its BLOB cells as :func:`_blob_text` (JSON has no bytes; CSV and tables would show b'...')."""
    out = df.copy()
    for i in range(out.shape[1]):  # by position: a statement may name two columns alike
        if out.dtypes.iloc[i].kind == "O":
            out.iloc[:, i] = out.iloc[:, i].map(_blob_text)
    return out


def setup_parser(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("sql", help="one read-only statement, e.g. \"SELECT format, avg(bandwidth_mib_s) FROM points "
                                    "GROUP BY format\"")
    parser.add_argument("--db", help="SQLite file or SQLAlchemy URL (default: $DDLIO_DB or ./results.db)")
    parser.add_argument("--format", choices=("table", "csv", "json"), default="table", help="output format")
    parser.add_argument("--timeout", type=_timeout_s, metavar="SECONDS",
                        help=f"stop the query after this long (default: $DDLIO_QUERY_TIMEOUT_S or "
                             f"{DEFAULT_TIMEOUT_S:g} s)")
    parser.add_argument("--max-rows", type=_max_rows, default=DEFAULT_MAX_ROWS, metavar="N",
                        help=f"show at most N rows; a line says when more were cut (default: {DEFAULT_MAX_ROWS})")


def main(args: argparse.Namespace) -> int:
    timeout = args.timeout
    if timeout is None:
        env = os.environ.get("DDLIO_QUERY_TIMEOUT_S", "")
        try:
            timeout = _timeout_s(env) if env else DEFAULT_TIMEOUT_S
        except argparse.ArgumentTypeError as e:
            raise DdlioError(f"DDLIO_QUERY_TIMEOUT_S={e}") from None
    df, cut = run_query(args.db or default_db(), args.sql, timeout, args.max_rows)
    df = _printable(df)
    if args.format == "csv":
        df.to_csv(sys.stdout, index=False)
    elif args.format == "json":
        sys.stdout.write(_unique_columns(df).to_json(orient="records", indent=1) + "\n")
    elif df.empty:
        print(f"no rows ({', '.join(map(str, df.columns))})")
    else:
        print(df.to_string(index=False, max_colwidth=60))
    if cut:
        sys.stdout.flush()
        print(f"(rows cut: only the first {args.max_rows} are shown; --max-rows N shows more, or add LIMIT/WHERE)",
              file=sys.stderr)
    return 0
