"""What ddlio may create, extend or replace (issue 37): a store only where none exists or where ddlio's own schema
version marks it; no in-memory or misnamed store; outputs, dataset files, run folders and flush files replaced or
changed only where ddlio proves it wrote them (a marker or manifest it keeps), never by a column name."""

from __future__ import annotations

import hashlib
import sqlite3
from pathlib import Path

import pytest
from test_store import fake_result

from ddlio.store import Store, StoreError, check_store, open_store_for_reading, store_id
from helpers import point


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _one_line(p, *needles: str) -> str:
    err = p.stderr.strip()
    assert p.returncode == 2, p.stdout + p.stderr
    assert "Traceback" not in p.stdout + p.stderr
    assert len(err.splitlines()) == 1, err
    for n in needles:
        assert n in err, err
    return err


def _foreign_db(path: Path) -> None:
    """A user's SQLite file with a ``points`` table that even has a ``point_key`` column."""
    with sqlite3.connect(path) as c:
        c.execute("CREATE TABLE points (point_key TEXT, score REAL)")
        c.execute("CREATE TABLE notes (body TEXT)")
        c.execute("INSERT INTO points VALUES ('a', 1.0)")


# ------------------------------------------------------------------------------------------------------ stores
def test_a_sqlite_file_that_is_not_a_ddlio_store_is_refused_before_any_job(sweep, tmp_path):
    db = tmp_path / "mine.db"
    _foreign_db(db)
    before = _digest(db)
    p = sweep("workload=tiny", f"db={db}")
    _one_line(p, "not a ddlio results store", "notes", "new file name")
    assert _digest(db) == before
    assert not (tmp_path / "data").exists()  # no dataset, no run folder


@pytest.mark.parametrize("tables", [["points"], ["points", "notes"], ["ddlio_meta"], ["results"]])
def test_writers_and_readers_refuse_a_database_without_ddlios_mark(tmp_path, tables):
    db = tmp_path / "mine.db"
    with sqlite3.connect(db) as c:
        for t in tables:  # a points table made by someone else: same name, other columns, and a foreign table
            c.execute(f"CREATE TABLE {t} (point_key TEXT, other TEXT)")
    before = _digest(db)
    with pytest.raises(StoreError, match="not a ddlio results store"):
        Store(str(db))
    with pytest.raises(StoreError, match="not a ddlio results store"):
        open_store_for_reading(str(db))
    assert _digest(db) == before


def test_a_new_or_empty_sqlite_file_becomes_a_store_and_stays_one(tmp_path):
    empty = tmp_path / "empty.db"
    empty.touch()
    no_tables = tmp_path / "no-tables.db"
    sqlite3.connect(no_tables).close()
    for db in (empty, no_tables, tmp_path / "new.db"):
        Store(str(db)).engine.dispose()
        assert check_store(str(db), write=True) > 0  # marked now: extended again, read as ddlio's
        assert open_store_for_reading(str(db)).version > 0


@pytest.mark.postgres
def test_a_postgresql_database_with_other_tables_and_no_ddlio_mark_is_refused(pg_url):
    from sqlalchemy import create_engine, inspect, text

    engine = create_engine(pg_url.replace("postgresql://", "postgresql+psycopg://", 1))
    with engine.begin() as c:
        c.execute(text("CREATE TABLE invoices (id int)"))
    with pytest.raises(StoreError, match=r"not a ddlio results store.*invoices.*CREATE DATABASE"):
        Store(pg_url)
    with engine.connect() as c:
        assert inspect(c).get_table_names() == ["invoices"]  # nothing added
        c.execute(text("DROP TABLE invoices"))
        c.commit()
    engine.dispose()
    Store(pg_url).engine.dispose()  # empty now: becomes a store
    assert open_store_for_reading(pg_url).version > 0


@pytest.mark.parametrize("db", ["sqlite://", "sqlite:///:memory:", "sqlite:///file:x?mode=memory&uri=true"])
def test_an_in_memory_store_is_refused(db):
    for write in (True, False):
        with pytest.raises(StoreError, match="in-memory SQLite database, which keeps nothing"):
            check_store(db, write=write)


def test_an_in_memory_store_is_refused_by_a_sweep_in_one_line(sweep, tmp_path):
    _one_line(sweep("workload=tiny", "db=sqlite://"), "in-memory", "keeps nothing")
    assert not (tmp_path / "data").exists()


@pytest.mark.parametrize("name", ["a?b.db", "a#b.db", "a%41b.db", "100%.db", "a?mode=ro.db"])
def test_a_file_name_with_url_characters_is_the_store_written(tmp_path, name):
    store = Store(str(tmp_path / name))
    store.engine.dispose()
    assert sorted(p.name for p in tmp_path.iterdir() if not p.name.endswith(("-wal", "-shm", "-journal"))) == [name]
    assert open_store_for_reading(str(tmp_path / name)).version > 0


def test_a_plain_path_keeps_its_store_id(tmp_path):
    """Run folders are named by the store id: a path without URL characters keeps the id it always had."""
    path = tmp_path / "plain results.db"
    assert store_id(str(path)) == hashlib.sha256(f"sqlite:///{path}".encode()).hexdigest()[:12]


# ----------------------------------------------------------------------------------------------------- outputs
@pytest.fixture
def small_store(tmp_path) -> Path:
    """A store with one stored point (no sweep: written through the store's own writer)."""
    db = tmp_path / "s.db"
    store = Store(str(db))
    assert store.record(fake_result(point(tmp_path)))
    store.engine.dispose()
    return db


def _export(*args: str) -> int:
    from analysis.__main__ import main as analysis_main

    return analysis_main(["export", *args])


def test_export_keeps_a_users_csv_whose_header_names_point_key(small_store, tmp_path, capsys):
    mine = tmp_path / "mine.csv"
    mine.write_text("point_key,score\nmy-run,0.5\n")
    assert _export("--db", str(small_store), "--out", str(mine)) == 2
    err = capsys.readouterr().err
    assert "was not written by ddlio" in err and "--force" in err and len(err.strip().splitlines()) == 1
    assert mine.read_text() == "point_key,score\nmy-run,0.5\n"


def test_export_replaces_its_own_csv_until_someone_changes_it(small_store, tmp_path, capsys):
    out = tmp_path / "e.csv"
    assert _export("--db", str(small_store), "--out", str(out)) == 0
    assert "point_key" in out.read_text().splitlines()[0]
    assert _export("--db", str(small_store), "--out", str(out)) == 0  # its own, byte for byte: replaced
    out.write_text(out.read_text() + "a row of mine\n")  # now the user's
    assert _export("--db", str(small_store), "--out", str(out)) == 2
    assert out.read_text().endswith("a row of mine\n")
    capsys.readouterr()
    assert _export("--db", str(small_store), "--out", str(tmp_path / ".ddlio-outputs")) == 2
    assert "manifest" in capsys.readouterr().err


def test_a_figure_is_replaced_only_while_it_holds_what_ddlio_wrote(tmp_path):
    from analysis.outputs import MANIFEST, OutputError, check_dir_names, record_names

    (tmp_path / "a.png").write_bytes(b"ddlio's figure")
    record_names(tmp_path, ["a.png"])
    assert (tmp_path / MANIFEST).read_text() == f"{_digest(tmp_path / 'a.png')}  a.png\n"
    check_dir_names(tmp_path, ["a.png", "b.png"])  # its own, byte for byte; b.png is new
    (tmp_path / "a.png").write_bytes(b"my own drawing, same name")
    with pytest.raises(OutputError, match=r"a.png exist and were not written by ddlio, or were changed since"):
        check_dir_names(tmp_path, ["a.png"])
    check_dir_names(tmp_path, ["a.png"], force=True)
    (tmp_path / MANIFEST).write_text("a.png\n")  # an earlier release's manifest: names only, taken at its word
    check_dir_names(tmp_path, ["a.png"])


def test_an_html_file_is_ddlios_only_by_its_mark(tmp_path):
    from analysis.outputs import HTML_MARK, ours

    page = tmp_path / "p.html"
    page.write_text("<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'><title>mine</title></head></html>")
    assert not ours(page, "html")  # looking like ddlio's report proves nothing
    page.write_text(f"<!DOCTYPE html><html><head>{HTML_MARK}<title>r</title></head></html>")
    assert ours(page, "html")


# ------------------------------------------------------------------------------------------------- run folders
def test_runs_is_created_private_and_marked(tmp_path):
    from experiments.run.records import PRIVATE_MARK, private_dir

    runs = tmp_path / "data" / "runs"
    private_dir(runs)
    assert runs.stat().st_mode & 0o777 == 0o700 and (runs / PRIVATE_MARK).is_file()
    runs.chmod(0o755)
    private_dir(runs)  # ddlio's own, opened since: closed again
    assert runs.stat().st_mode & 0o777 == 0o700


def test_a_runs_folder_ddlio_did_not_create_keeps_its_mode(tmp_path):
    from experiments.run.records import PRIVATE_MARK, private_dir

    mine = tmp_path / "shared-with-my-group"
    mine.mkdir()
    mine.chmod(0o750)
    data = tmp_path / "data"
    data.mkdir()
    (data / "runs").symlink_to(mine)  # runs/ links to a user's folder
    private_dir(data / "runs")
    assert mine.stat().st_mode & 0o777 == 0o750 and not (mine / PRIVATE_MARK).exists()
    (mine / PRIVATE_MARK).touch()  # even a mark seen through a link: the folder is not ddlio's to change
    private_dir(data / "runs")
    assert mine.stat().st_mode & 0o777 == 0o750
    plain = tmp_path / "other" / "runs"
    plain.mkdir(parents=True)
    plain.chmod(0o755)  # a runs/ that was there before ddlio, without its mark
    private_dir(plain)
    assert plain.stat().st_mode & 0o777 == 0o755


# ------------------------------------------------------------------------------------------------- flush files
def test_a_flush_file_ddlio_did_not_write_is_never_replaced(tmp_path):
    from experiments.kernel import cache as pagecache

    path = tmp_path / "flush" / "flush-1048576.bin"
    path.parent.mkdir()
    path.write_bytes(b"my own data" * 100)
    with pytest.raises(FileExistsError, match="was not written by ddlio"):
        pagecache.ensure_flush_file(path, 1 << 20, block=1 << 18)
    assert path.read_bytes() == b"my own data" * 100
    path.unlink()
    path.symlink_to(tmp_path / "elsewhere")  # a link, dangling: not a plain file, left alone
    with pytest.raises(FileExistsError, match="not a plain file"):
        pagecache.ensure_flush_file(path, 1 << 20)
    assert path.is_symlink()


def test_ddlios_own_flush_file_is_marked_reused_and_replaced(tmp_path):
    from experiments.kernel import cache as pagecache

    path = tmp_path / "flush" / "f.bin"
    assert pagecache.ensure_flush_file(path, 1 << 20, block=1 << 18) is True
    assert path.read_bytes().startswith(pagecache.FLUSH_MARK)
    assert pagecache.flush_file_problem(path, 2 << 20) is None  # ddlio's own, of another size: may be replaced
    assert pagecache.ensure_flush_file(path, 2 << 20, block=1 << 18) is True
    assert path.stat().st_size == 2 << 20
    mine = tmp_path / "flush" / "g.bin"
    mine.write_bytes(b"x" * 100)
    assert pagecache.ensure_flush_file(mine, 100) is False  # the size asked for: read through, never written
    assert mine.read_bytes() == b"x" * 100


def test_a_sweep_refuses_a_foreign_flush_file_before_any_job(tmp_path):
    from ddlio.errors import ConfigError
    from experiments.run.batch import check_free_space

    spec = point(tmp_path, "workload.cache=storage_cold", "workload.flush_size=64MiB")
    flush = tmp_path / "data" / "flush" / f"flush-{64 << 20}.bin"
    flush.parent.mkdir(parents=True)
    flush.write_text("notes\n")
    with pytest.raises(ConfigError, match="never replaces it"):
        check_free_space([spec])
    assert flush.read_text() == "notes\n"


# ---------------------------------------------------------------------------------------------------- datasets
def test_a_dataset_rebuild_removes_only_the_files_ddlio_wrote(tmp_path):
    from experiments.dataset import DatasetPlan, ensure_dataset, generate_here, invalidate_dataset, load_manifest
    from lustre import Layout

    spec = point(tmp_path, "format=bin")
    plan = DatasetPlan.from_point(spec)
    build = lambda plan_path, ranks: generate_here(plan_path)  # noqa: E731 - one process writes every file
    ensure_dataset(plan, Layout(), build, 1)
    d = Path(plan.directory)
    made = sorted(p.name for p in d.iterdir())
    assert "part-00000.bin.idx" in made  # a sidecar: ddlio's too
    (d / "my-notes.txt").write_text("keep me")  # a user's file in ddlio's folder
    (d / "mine").mkdir()
    (d / "mine" / "x").write_text("and me")
    invalidate_dataset(plan, "a checksum failed")  # the next run rebuilds it
    (d / "plan.json.tmp.4242").write_text("{")  # a temporary a killed writer left
    info = ensure_dataset(plan, Layout(), build, 1)
    assert info.generated and load_manifest(plan) is not None
    assert (d / "my-notes.txt").read_text() == "keep me" and (d / "mine" / "x").read_text() == "and me"
    assert sorted(p.name for p in d.iterdir()) == sorted([*made, "my-notes.txt", "mine"])  # nothing else left
