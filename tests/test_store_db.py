"""The store's database: URLs, the checks made before anything is written, schema versions, read-only readers and
concurrent creation, on real SQLite files and (marked ``postgres``) the real test server of tests/cluster/postgres.sh.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import json
import shutil
import sqlite3
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from sqlalchemy import create_engine, inspect, text
from sqlalchemy.engine import make_url
from test_store import fake_result

from conftest import cli_env
from ddlio.store import SCHEMA_VERSION, Base, Store, StoreError, check_store, db_url, open_store_for_reading
from helpers import point


def _short_error(p: subprocess.CompletedProcess, *needles: str) -> str:
    """The sweep failed as bad input: exit 2, one message of at most 12 lines holding ``needles``, no traceback."""
    err = p.stderr.strip()
    assert p.returncode == 2, p.stdout + p.stderr
    assert "Traceback" not in p.stdout + p.stderr
    assert len(err.splitlines()) <= 12, err
    for n in needles:
        assert n in err, err
    return err


def _nothing_written(tmp_path: Path) -> None:
    assert not (tmp_path / "data").exists()  # no data_root, so no dataset and no run folder
    assert not (tmp_path / "r.db").exists()


def _chattr_immutable(path: Path) -> None:
    if shutil.which("chattr") is None or subprocess.run(["chattr", "+i", str(path)],
                                                       capture_output=True).returncode != 0:
        pytest.skip("chattr +i is not available here (needs root and a file system with immutable files)")


def _unlock(path: Path) -> None:
    subprocess.run(["chattr", "-i", str(path)], capture_output=True)


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _set_version(db: str, version: int) -> None:
    engine = create_engine(db_url(db))
    with engine.begin() as c:
        c.execute(text("UPDATE ddlio_meta SET value = :v WHERE key = 'schema_version'"), {"v": str(version)})
    engine.dispose()


def _make_v1(db: Path) -> None:
    """A store as ddlio wrote it before versions were recorded: the same tables, no ddlio_meta."""
    engine = create_engine(f"sqlite:///{db}")
    Base.metadata.create_all(engine, tables=[t for t in Base.metadata.sorted_tables if t.name != "ddlio_meta"])
    engine.dispose()


# ------------------------------------------------------------------------------------------------------ URLs
def test_a_bare_postgresql_url_means_psycopg_3_whatever_sqlalchemy_defaults_to():
    for given in ("postgresql://u@db.example:5432/ddlio", "postgres://u@db.example:5432/ddlio"):
        url = make_url(db_url(given))
        assert (url.drivername, url.host, url.port, url.database) == ("postgresql+psycopg", "db.example", 5432,
                                                                      "ddlio")
    assert db_url("postgresql+psycopg2://u@h/d") == "postgresql+psycopg2://u@h/d"  # an explicit driver is kept
    assert db_url("sqlite:////x/r.db") == "sqlite:////x/r.db"
    assert db_url("r.db") == f"sqlite:///{Path('r.db').resolve()}"


def test_a_missing_postgresql_driver_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "psycopg", None)  # stands in for an environment without psycopg: import fails
    with pytest.raises(StoreError, match=r"psycopg 3, which is not installed: pip install -e '\.\[postgres\]'"):
        check_store("postgresql://u@127.0.0.1:1/x", write=True)


# ---------------------------------------------------------------------- bad stores, through sweep.py itself
def test_an_unknown_dialect_lists_the_supported_ones(sweep, tmp_path):
    err = _short_error(sweep("workload=tiny", "db=nosuchdialect://x/y"), "no database dialect 'nosuchdialect'",
                       "sqlite:", "postgresql:", "SQLAlchemy driver")
    assert "nosuchdialect://x/y" in err
    _nothing_written(tmp_path)


def test_an_unreachable_server_is_named_and_its_password_is_not(sweep, tmp_path):
    # without the postgres extra the driver is missing, which is said first (with how to install it)
    said = ("is the server running" if importlib.util.find_spec("psycopg") else
            "needs the PostgreSQL driver psycopg 3, which is not installed: pip install -e '.[postgres]'")
    err = _short_error(sweep("workload=tiny", "db=postgresql://u:s3cr3tpw@127.0.0.1:1/x"), "127.0.0.1:1", said)
    assert "s3cr3tpw" not in err
    _nothing_written(tmp_path)


def test_a_file_that_is_not_sqlite(sweep, tmp_path):
    (tmp_path / "notes.txt").write_text("not a database, but precious\n" * 100)
    before = _digest(tmp_path / "notes.txt")
    _short_error(sweep("workload=tiny", f"db={tmp_path / 'notes.txt'}"), "is not a SQLite database")
    assert _digest(tmp_path / "notes.txt") == before
    _nothing_written(tmp_path)


def test_a_sqlite_url_naming_a_directory(sweep, tmp_path):
    (tmp_path / "somedir").mkdir()
    _short_error(sweep("workload=tiny", f"db=sqlite:///{tmp_path / 'somedir'}"), "is a directory")
    assert list((tmp_path / "somedir").iterdir()) == []
    _nothing_written(tmp_path)


def test_an_immutable_store_is_refused_by_writers_and_read_by_readers(sweep, analysis, tmp_path):
    db = tmp_path / "ro.db"
    Store(str(db)).record(fake_result(point(tmp_path)))
    before = _digest(db)
    _chattr_immutable(db)
    try:
        _short_error(sweep("workload=tiny", f"db={db}"), "is read-only", str(db))
        p = analysis("summary", "--db", str(db))
        assert p.returncode == 0 and "1 points: 1 completed" in p.stdout, p.stderr
    finally:
        _unlock(db)
    assert _digest(db) == before
    assert not (tmp_path / "data").exists()


def test_a_store_newer_than_this_ddlio_is_refused_naming_both_versions(sweep, analysis, tmp_path):
    db = tmp_path / "new.db"
    Store(str(db))
    _set_version(str(db), SCHEMA_VERSION + 7)
    before = _digest(db)
    _short_error(sweep("workload=tiny", f"db={db}"), f"schema version {SCHEMA_VERSION + 7}",
                 f"this ddlio's ({SCHEMA_VERSION})")
    for command in (["summary"], ["status"], ["export"], ["query", "SELECT 1"]):
        p = analysis(*command, "--db", str(db))
        assert p.returncode == 2 and f"schema version {SCHEMA_VERSION + 7}" in p.stderr, (command, p.stderr)
        assert "Traceback" not in p.stderr
    assert _digest(db) == before
    _nothing_written(tmp_path)


def test_a_store_missing_a_not_null_column(sweep, analysis, tmp_path):
    db = tmp_path / "old.db"
    Store(str(db))
    with sqlite3.connect(db) as c:
        c.execute("ALTER TABLE points DROP COLUMN format")
    _short_error(sweep("workload=tiny", f"db={db}"), "NOT NULL", "points.format", "ingest")
    p = analysis("summary", "--db", str(db))
    assert p.returncode == 2 and "points.format" in p.stderr and "Traceback" not in p.stderr
    _nothing_written(tmp_path)


@contextlib.contextmanager
def _tiny_file_system(path: Path, size: str = "4m"):
    """A real tmpfs of ``size`` mounted at ``path`` (skips where mounting is not allowed)."""
    path.mkdir()
    p = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)], capture_output=True,
                       text=True)
    if p.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {p.stderr.strip()}")
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], capture_output=True)


def _fill(directory: Path) -> None:
    """Fill the file system of ``directory`` to the last byte."""
    import os

    fd = os.open(directory / "filler", os.O_WRONLY | os.O_CREAT, 0o600)
    try:
        for chunk in (1 << 16, 4096, 512, 1):
            with contextlib.suppress(OSError):
                while True:
                    os.write(fd, b"\0" * chunk)
    finally:
        os.close(fd)


def test_a_full_disk_under_the_store(sweep, tmp_path):
    with _tiny_file_system(tmp_path / "small") as small:
        db = small / "r.db"
        store = Store(str(db))
        _fill(small)
        with pytest.raises(StoreError, match="disk under the results store is full"):
            check_store(str(db), write=True)
        with pytest.raises(StoreError, match="disk under the results store is full"):
            for i in range(50):  # a result is a few KiB: the disk fills within a few
                store.record(fake_result(point(tmp_path, f"repeat={i}")))
        store.engine.dispose()
        _short_error(sweep("workload=tiny", f"db={db}"), "disk under the results store is full")
    assert not (tmp_path / "data").exists()


def test_ingest_of_a_missing_directory_creates_no_store(analysis, tmp_path):
    p = analysis("ingest", str(tmp_path / "nonexistent"), "--db", str(tmp_path / "r.db"))
    assert p.returncode == 2 and "does not exist" in p.stderr and "Traceback" not in p.stderr
    assert not (tmp_path / "r.db").exists()


def test_passwords_are_masked_in_urls_command_lines_and_hydra_overrides():
    from ddlio.secrets import mask

    assert mask("db=postgresql://u:s3cret@h:5432/d x") == "db=postgresql://u:***@h:5432/d x"
    assert mask(r"db=postgresql\://u\:s3cret@h\:5432/d") == r"db=postgresql\://u\:***@h\:5432/d"  # as Hydra escapes
    assert mask("postgresql://u@h/d") == "postgresql://u@h/d"  # nothing to mask: PGPASSWORD or ~/.pgpass
    assert mask("sqlite:////data/a:b@c.db") == "sqlite:////data/a:b@c.db"  # a path, not a password


def test_the_point_keys_do_not_depend_on_the_store(tmp_path):
    """db is not part of what is measured: a password (masked in the point) or another store changes no key."""
    a = point(tmp_path, "db=postgresql://u:first-secret@h:5432/d")
    b = point(tmp_path, "db=postgresql://u:other-secret@h:5432/d")
    c = point(tmp_path)
    assert a.point_key == b.point_key == c.point_key and a.dataset_key == c.dataset_key
    assert a.db == "postgresql://u:***@h:5432/d"
    assert "first-secret" not in json.dumps(a.to_dict())


# ------------------------------------------------------------------------------------------------ versions
def test_a_store_from_before_versions_is_version_1_read_as_is_and_upgraded_by_a_writer(analysis, tmp_path):
    db = tmp_path / "v1.db"
    _make_v1(db)
    with sqlite3.connect(db) as c:
        c.execute("ALTER TABLE points DROP COLUMN max_rss_kib")  # an older store that lacks a later column
    before = _digest(db)
    p = analysis("summary", "--db", str(db))
    assert p.returncode == 2 and "schema version 1" in p.stderr and "upgrade it by running a writer" in p.stderr
    assert len(p.stderr.strip().splitlines()) == 1
    assert _digest(db) == before  # a reader never changes the schema
    store = Store(str(db))  # a writer upgrades
    assert store.record(fake_result(point(tmp_path)))
    with sqlite3.connect(db) as c:
        assert c.execute("select value from ddlio_meta where key = 'schema_version'").fetchone() == (
            str(SCHEMA_VERSION),)
        assert "max_rss_kib" in [r[1] for r in c.execute("pragma table_info(points)")]
    assert open_store_for_reading(str(db)).version == SCHEMA_VERSION


def _digests(db: str) -> list[tuple[str, str | None, dict]]:
    engine = create_engine(db_url(db))
    with engine.connect() as c:
        rows = c.execute(text("SELECT point_key, config_digest, CAST(config AS TEXT) FROM points "
                              "ORDER BY point_key")).all()
    engine.dispose()
    return [(k, d, json.loads(t)) for k, d, t in rows]


def _fills_digests_on_upgrade(db: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """``db``: a version-3 store (no ``points.config_digest``) with points; a writer upgrades it to this version
    and fills each existing row's digest with what the writer stores for a new point (in rounds of 2 points here)."""
    from ddlio.identity import config_digest
    from ddlio.store import schema

    monkeypatch.setattr(schema, "_FILL_ROWS", 2)
    Store(db).engine.dispose()  # a writer upgrades
    rows = _digests(db)
    assert rows and all(d == config_digest(c) for _, d, c in rows), rows
    assert len({d for _, d, _ in rows}) == len({json.dumps({k: v for k, v in c.items() if k not in
                                                            ("repeat", "point_key", "dataset_key", "overrides")},
                                                           sort_keys=True) for _, _, c in rows})
    assert open_store_for_reading(db).version == SCHEMA_VERSION


def test_an_upgrade_to_version_4_gives_every_stored_point_its_config_digest(tmp_path, monkeypatch):
    """A store written by f89f3ac (version 3, six points): upgraded, each point's digest is the writer's own."""
    db = tmp_path / "old.db"
    shutil.copyfile(Path(__file__).parent / "fixtures" / "stores" / "store-f89f3ac.db", db)
    with sqlite3.connect(db) as c:
        assert "config_digest" not in [r[1] for r in c.execute("pragma table_info(points)")]
    p = subprocess.run([sys.executable, "-m", "analysis", "summary", "--db", str(db)], capture_output=True,
                       text=True, env=cli_env(tmp_path))
    assert p.returncode == 2 and "schema version 3" in p.stderr  # a reader asks for the upgrade, touches nothing
    _fills_digests_on_upgrade(str(db), monkeypatch)


@pytest.mark.postgres
def test_a_postgresql_upgrade_to_version_4_fills_config_digests(pg_url, tmp_path, monkeypatch):
    store = Store(pg_url)
    for r in range(3):
        assert store.record(fake_result(point(tmp_path, f"repeat={r}")))
    store.engine.dispose()
    engine = create_engine(db_url(pg_url))
    with engine.begin() as c:
        c.execute(text("ALTER TABLE points DROP COLUMN config_digest"))
    engine.dispose()
    _set_version(pg_url, 3)
    _fills_digests_on_upgrade(pg_url, monkeypatch)


#: every command that only reads the store, with the arguments it needs (its outputs under the test's tmp_path)
READERS = {"summary": [], "status": [], "figures": ["--out", "figs"], "guidelines": [], "report": ["--out", "r.html"],
           "query": ["SELECT count(*) FROM points"], "export": ["--out", "points.csv"], "diagnose": [],
           "predict": ["--at", "ppn=8"]}


def _source(module: str) -> str:
    """The source of a command's module, or of every module of its package."""
    spec = importlib.util.find_spec(module)
    if spec.submodule_search_locations:
        return "\n".join(f.read_text() for d in spec.submodule_search_locations for f in sorted(Path(d).rglob("*.py")))
    return Path(spec.origin).read_text()


def test_every_command_but_the_writers_only_reads():
    from analysis.__main__ import COMMANDS, WRITERS

    assert sorted(READERS) == sorted(set(COMMANDS) - set(WRITERS))
    for name, (module, _) in COMMANDS.items():
        text = _source(module)
        assert ("open_store_for_writing" in text) == (name in WRITERS), name
        assert "Store(" not in text, name  # a reader opens the store through open_store_for_reading only


@pytest.mark.parametrize("command", sorted(READERS))
def test_a_read_command_leaves_an_older_store_as_it_is_and_says_what_to_do(analysis, tmp_path, command):
    db = tmp_path / "v1.db"
    _make_v1(db)
    with sqlite3.connect(db) as c:
        c.execute("ALTER TABLE points DROP COLUMN max_rss_kib")  # a column added after version 1
    before = _digest(db)
    (tmp_path / "tmp").mkdir()  # the subprocess's TMPDIR (conftest.cli_env)
    listing = sorted(p.name for p in tmp_path.iterdir())
    p = analysis(command, *READERS[command], "--db", str(db))
    assert p.returncode == 2, p.stdout + p.stderr
    assert p.stderr.strip().splitlines() == [p.stderr.strip()]  # one line
    assert "has schema version 1; this ddlio reads version" in p.stderr
    assert "upgrade it by running a writer on it once (python -m analysis ingest" in p.stderr
    assert _digest(db) == before
    assert sorted(x.name for x in tmp_path.iterdir()) == listing  # nothing written


def test_readers_read_a_complete_version_1_store_without_changing_it(analysis, tmp_path):
    db = tmp_path / "v1.db"
    _make_v1(db)
    before = _digest(db)
    for command in (["summary"], ["status"], ["export"], ["query", "SELECT count(*) AS n FROM points"]):
        p = analysis(*command, "--db", str(db))
        assert p.returncode == 0, (command, p.stderr)
    assert _digest(db) == before
    assert "ddlio_meta" not in inspect(create_engine(f"sqlite:///{db}")).get_table_names()


def test_a_reader_opens_sqlite_read_only(tmp_path):
    db = tmp_path / "r.db"
    Store(str(db))
    store = open_store_for_reading(str(db))
    assert store.read_only
    with pytest.raises(Exception, match="readonly|read-only|query_only"), store.engine.begin() as c:
        c.execute(text("DELETE FROM points"))


# ---------------------------------------------------------------------- concurrent creation, real processes
CREATE = textwrap.dedent("""
    import sys, time
    from pathlib import Path
    from ddlio.store import _engine, _parse, upgrade_schema
    engine = _engine(_parse(sys.argv[1]), read_only=False)
    engine.connect().close()  # connected and warm: the processes then race on the schema alone
    go = Path(sys.argv[2])
    while not go.exists():
        time.sleep(0.001)
    upgrade_schema(engine)
    print("ok")
""")


def _create_concurrently(db: str, tmp_path: Path, n: int = 6) -> None:
    """``n`` processes create the same new store's schema at the same moment; all must succeed (without the lock,
    PostgreSQL fails all but one with UniqueViolation on pg_type, SQLite with "table already exists")."""
    go = tmp_path / "go"
    procs = [subprocess.Popen([sys.executable, "-c", CREATE, db, str(go)], cwd=tmp_path, env=cli_env(tmp_path),
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(n)]
    time.sleep(3.0)  # let every process connect and wait at the line; correctness does not depend on it
    go.touch()
    outs = [p.communicate(timeout=120) for p in procs]
    for p, (out, err) in zip(procs, outs, strict=True):
        assert p.returncode == 0 and out.strip() == "ok", err


def test_writers_creating_a_sqlite_store_at_once(tmp_path):
    db = str(tmp_path / "r.db")
    _create_concurrently(db, tmp_path)
    assert open_store_for_reading(db).version == SCHEMA_VERSION


@pytest.mark.postgres
def test_writers_creating_a_postgresql_store_at_once(pg_url, tmp_path):
    _create_concurrently(pg_url, tmp_path)
    store = open_store_for_reading(pg_url)
    assert store.version == SCHEMA_VERSION
    store.engine.dispose()


# ---------------------------------------------------------------------------------------------- PostgreSQL
@pytest.mark.postgres
def test_postgresql_checks(pg_url, tmp_path):
    with pytest.raises(StoreError, match="no ddlio tables"):
        open_store_for_reading(pg_url)  # a reader never creates
    Store(pg_url).engine.dispose()
    reader = open_store_for_reading(pg_url)
    with pytest.raises(Exception, match="read-only transaction"), reader.engine.begin() as c:
        c.execute(text("DELETE FROM points"))
    reader.engine.dispose()
    _set_version(pg_url, SCHEMA_VERSION + 1)
    with pytest.raises(StoreError, match=f"schema version {SCHEMA_VERSION + 1}, newer than this ddlio's"):
        Store(pg_url)
    missing = make_url(pg_url).set(database="ddlio_no_such_db").render_as_string(hide_password=False)
    with pytest.raises(StoreError, match="database \"ddlio_no_such_db\" does not exist") as e:
        check_store(missing, write=True)
    assert make_url(pg_url).password not in str(e.value)

