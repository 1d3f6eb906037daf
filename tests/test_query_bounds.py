"""Queries are bounded (analysis/sql.py): a time limit (--timeout, default a minute, or DDLIO_QUERY_TIMEOUT_S),
Ctrl-C and SIGTERM stop a running query at once, and --max-rows cuts the rows shown with a line saying so; on
SQLite and on the real PostgreSQL test server (tests/cluster/postgres.sh)."""

from __future__ import annotations

import signal
import subprocess
import sys
import time

import pytest

from analysis.__main__ import main as analysis_main
from conftest import cli_env
from ddlio.store import open_store_for_writing

ENDLESS = "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x+1 FROM c) SELECT count(*) FROM c"
HUNDRED = "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x+1 FROM c WHERE x < 100) SELECT x FROM c"


@pytest.fixture
def sqlite_store(tmp_path) -> str:
    db = str(tmp_path / "r.db")
    open_store_for_writing(db)  # an empty store of this version's schema
    return db


@pytest.fixture
def query(capsys, monkeypatch, tmp_path):
    """``query(db, *args, **env)``: ``python -m analysis query --db DB ARGS`` run in this process (its main)."""
    monkeypatch.chdir(tmp_path)

    def _run(db: str, *args: str, **env: str) -> subprocess.CompletedProcess:
        monkeypatch.delenv("DDLIO_QUERY_TIMEOUT_S", raising=False)
        for k, v in env.items():
            monkeypatch.setenv(k, v)
        capsys.readouterr()
        code = analysis_main(["query", "--db", db, *args])
        out, err = capsys.readouterr()
        return subprocess.CompletedProcess(args, code, out, err)

    return _run


def check_time_limit(query, db: str) -> None:
    p = query(db, "--timeout", "1", ENDLESS)
    assert p.returncode == 2, p.stdout + p.stderr
    assert p.stderr.splitlines() == [
        "error: query stopped after its time limit of 1 s (--timeout SECONDS, or the setting DDLIO_QUERY_TIMEOUT_S; "
        "a recursive CTE without an end never finishes)"]
    p = query(db, ENDLESS, DDLIO_QUERY_TIMEOUT_S="1.5")
    assert p.returncode == 2 and "time limit of 1.5 s" in p.stderr, p.stderr


def check_rows_cut(query, db: str) -> None:
    p = query(db, "--max-rows", "7", "--format", "csv", HUNDRED)
    assert p.returncode == 0, p.stderr
    assert p.stdout.split() == ["x", *map(str, range(1, 8))]
    assert p.stderr.splitlines() == ["(rows cut: only the first 7 are shown; --max-rows N shows more, or add "
                                     "LIMIT/WHERE)"]
    p = query(db, "--max-rows", "100", "--format", "csv", HUNDRED)
    assert p.returncode == 0 and len(p.stdout.split()) == 101 and p.stderr == ""


def check_interrupt(tmp_path, db: str, sig: int, code: int, line: str) -> None:
    """The query is running (given 60 s), then ``sig`` arrives: it stops at once and says so in one line."""
    proc = subprocess.Popen([sys.executable, "-m", "analysis", "query", "--db", db, "--timeout", "600", ENDLESS],
                            cwd=tmp_path, env=cli_env(tmp_path), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    try:
        time.sleep(4)  # start-up (pandas, SQLAlchemy) and into the query
        assert proc.poll() is None, proc.communicate()
        proc.send_signal(sig)
        out, err = proc.communicate(timeout=30)  # not 600 s: it stopped when told
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == code, err
    assert err.splitlines() == [line]


@pytest.mark.parametrize("bad", ["0", "-1", "nan", "inf", "soon"])
def test_a_time_limit_that_is_not_one_is_refused(query, sqlite_store, bad):
    with pytest.raises(SystemExit) as e:  # argparse's refusal, as the command line gets it
        query(sqlite_store, f"--timeout={bad}", "SELECT 1")
    assert e.value.code == 2
    p = query(sqlite_store, "SELECT 1", DDLIO_QUERY_TIMEOUT_S=bad)
    assert p.stderr.startswith(f"error: DDLIO_QUERY_TIMEOUT_S='{bad}' is not a time limit: give seconds > 0"), p.stderr


def test_sqlite_queries_are_bounded(query, sqlite_store):
    check_time_limit(query, sqlite_store)
    check_rows_cut(query, sqlite_store)


@pytest.mark.parametrize(("sig", "code", "line"), [(signal.SIGINT, 130, "interrupted"),
                                                   (signal.SIGTERM, 143, "interrupted (SIGTERM)")])
def test_ctrl_c_and_sigterm_stop_a_sqlite_query_at_once(tmp_path, sqlite_store, sig, code, line):
    check_interrupt(tmp_path, sqlite_store, sig, code, line)


@pytest.mark.postgres
def test_postgres_queries_are_bounded_and_ctrl_c_cancels_them(tmp_path, query, pg_url):
    open_store_for_writing(pg_url).engine.dispose()
    check_time_limit(query, pg_url)
    check_rows_cut(query, pg_url)
    check_interrupt(tmp_path, pg_url, signal.SIGINT, 130, "interrupted")
