"""ddlio against the real PostgreSQL test server (tests/cluster/postgres.sh): a sweep, the rerun that skips, every
analysis command, the same rows as on SQLite, and a password that ends up nowhere but in the driver's connection."""

from __future__ import annotations

import json
import os
import stat
import uuid

import pandas as pd
import pytest
from sqlalchemy import create_engine, inspect, text
from sqlalchemy.engine import make_url

from conftest import run_cli
from ddlio.store import db_url

pytestmark = pytest.mark.postgres

#: summary columns that are measured (or name a job or a time): they differ between two runs of the same sweep
MEASURED = ["io_time_slowest_s", "bandwidth_mib_s", "iops", "wall_time_s", "samples_per_s", "au", "lat_p50_us",
            "lat_p99_us", "job_id", "finished_utc", "overlapping"]
SWEEP = ["-m", "workload=tiny", "format=hdf5,npz"]


@pytest.fixture(scope="session")
def pg_role(pg_server: str):
    """``pg_role()`` -> (name, password): a new login role, its name and password unique to this test session (two
    sessions on one server never share one); every role made is dropped when the session ends."""
    import psycopg

    made: list[str] = []

    def make() -> tuple[str, str]:
        name, password = f"ddlio_role_{uuid.uuid4().hex[:12]}", f"pw-{uuid.uuid4().hex}"
        with psycopg.connect(pg_server, autocommit=True, connect_timeout=3) as conn:
            conn.execute(f"CREATE ROLE {name} LOGIN PASSWORD '{password}'")
        made.append(name)
        return name, password

    yield make
    with psycopg.connect(pg_server, autocommit=True, connect_timeout=3) as conn:
        for name in made:  # their databases are gone (pg_url drops each after its test)
            conn.execute(f"DROP ROLE IF EXISTS {name}")


@pytest.fixture
def secret_url(pg_url: str, pg_server: str, pg_role) -> str:
    """``postgresql://ROLE:PASSWORD@host:port/DB``: the test's database, owned by a role of its own."""
    import psycopg

    name, password = pg_role()
    db = make_url(pg_url).database
    with psycopg.connect(pg_server, autocommit=True, connect_timeout=3) as conn:
        conn.execute(f'ALTER DATABASE "{db}" OWNER TO {name}')
    return make_url(pg_url).set(username=name, password=password).render_as_string(hide_password=False)


def _ok(p) -> str:
    assert p.returncode == 0, p.stdout + p.stderr
    assert "Traceback" not in p.stderr
    return p.stdout + p.stderr


def _summary(analysis, db: str) -> pd.DataFrame:
    out = _ok(analysis("summary", "--db", db, "--format", "json"))
    return pd.DataFrame(json.loads(out[: out.rindex("]") + 1])).sort_values("point_key").reset_index(drop=True)


def _dump(url: str) -> str:
    """Every table of the store as text."""
    engine = create_engine(db_url(url))
    parts = []
    with engine.connect() as c:
        for table in inspect(c).get_table_names():
            parts += [str(r) for r in c.execute(text(f'SELECT t::text FROM "{table}" t'))]
    engine.dispose()
    return "\n".join(parts)


def test_a_sweep_on_postgresql_matches_sqlite_and_every_command_reads_it(sweep, analysis, secret_url, tmp_path):
    password = make_url(secret_url).password
    outputs = [_ok(sweep(*SWEEP, f"db={secret_url}"))]
    assert "2 measured" in outputs[0]
    outputs.append(_ok(sweep(*SWEEP, f"db={secret_url}")))
    assert "2 of 2 points already measured" in outputs[-1]  # the rerun finds both points in PostgreSQL
    _ok(sweep(*SWEEP, f"db={tmp_path / 'r.db'}"))

    pg, lite = _summary(analysis, secret_url), _summary(analysis, str(tmp_path / "r.db"))
    assert len(pg) == 2 and (pg.status == "completed").all()
    for df in (pg, lite):  # a reason quotes what was measured ("timed I/O too short (3.4 ms < 0.1 s)")
        df["invalid_reasons"] = df["invalid_reasons"].str.replace(r"\([^)]*\)", "(...)", regex=True)
    pd.testing.assert_frame_equal(pg.drop(columns=MEASURED), lite.drop(columns=MEASURED))

    commands = [
        ["summary"], ["status"], ["figures", "--out", str(tmp_path / "figs")],
        ["guidelines", "--bootstrap", "200"], ["report", "--out", str(tmp_path / "report.html")],
        ["query", "SELECT format, bytes_read FROM points ORDER BY format"], ["export", "--table", "epochs"],
        ["ingest", str(tmp_path / "data" / "runs")],
    ]
    for command in commands:
        p = analysis(*command, "--db", secret_url)
        assert p.returncode in ((0, 1) if command[0] == "guidelines" else (0,)), (command, p.stderr)
        assert "Traceback" not in p.stderr and (p.stdout + p.stderr).strip(), command
        outputs.append(p.stdout + p.stderr)
    assert "hdf5" in outputs[-3] and "npz" in outputs[-3]  # query
    assert "2 already in the store" in outputs[-1]  # ingest: the PostgreSQL sweep's results (+ the SQLite run's)
    assert list((tmp_path / "figs").glob("*.png"))

    # the password: nowhere in the store, the report, the output, or any file the sweep wrote
    assert password not in _dump(secret_url)
    report = (tmp_path / "report.html").read_text()
    assert password not in report and "PostgreSQL server" in report
    assert not [o for o in outputs if password in o]
    leaks = [f for f in (tmp_path / "data").rglob("*") if f.is_file() and password.encode() in f.read_bytes()]
    assert leaks == []
    assert list((tmp_path / "data" / "runs").rglob("*.pkl"))  # submitit's pickles were among the files checked
    # Hydra saves a multirun's overrides as given (multirun.yaml) in its scratch directory: private to the user
    scratch = tmp_path / "tmp" / f"ddlio-hydra-{os.getuid()}"
    assert (scratch / "multirun.yaml").exists() and stat.S_IMODE(scratch.stat().st_mode) == 0o700


def test_pgpassword_pgpass_and_db_url_file_keep_the_password_off_the_command_line(sweep, secret_url, tmp_path):
    url = make_url(secret_url)
    bare = f"postgresql://{url.username}@{url.host}:{url.port}/{url.database}"
    # PGPASSWORD: libpq's variable, honoured by psycopg
    _ok(sweep("workload=tiny", f"db={bare}", PGPASSWORD=url.password))
    p = run_cli(["-m", "analysis", "summary", "--db", bare], tmp_path, tmp_path, PGPASSFILE=str(tmp_path / "none"))
    assert p.returncode == 2 and "password" in p.stderr and "Traceback" not in p.stderr  # without it: one message
    # ~/.pgpass (here through PGPASSFILE, libpq's name for it): host:port:db:user:password, mode 600
    pgpass = tmp_path / "pgpass"
    pgpass.write_text(f"{url.host}:{url.port}:{url.database}:{url.username}:{url.password}\n")
    pgpass.chmod(0o600)
    p = run_cli(["-m", "analysis", "summary", "--db", bare], tmp_path, tmp_path, PGPASSFILE=str(pgpass))
    assert p.returncode == 0 and "1 points: 1 completed" in p.stdout, p.stderr
    # db_url_file: the whole URL in a file only its owner may read
    url_file = tmp_path / "db.url"
    url_file.write_text(secret_url + "\n")
    url_file.chmod(0o644)
    before = sorted((tmp_path / "data").rglob("*"))
    p = sweep("workload=tiny", f"db_url_file={url_file}")
    assert p.returncode == 2 and f"chmod 600 {url_file}" in p.stderr and "Traceback" not in p.stderr
    assert sorted((tmp_path / "data").rglob("*")) == before  # refused before anything was written
    url_file.chmod(0o600)
    out = _ok(sweep("workload=tiny", f"db_url_file={url_file}"))
    assert "1 of 1 points already measured" in out and url.password not in out  # the same store, through the file
    p = run_cli(["-m", "analysis", "summary"], tmp_path, tmp_path, DDLIO_DB_URL_FILE=str(url_file))
    assert p.returncode == 0 and "1 points: 1 completed" in p.stdout, p.stderr



def test_a_role_that_may_only_read_is_refused_by_writers_and_served_to_readers(sweep, analysis, pg_url, pg_server,
                                                                              pg_role, tmp_path):
    import psycopg
    from test_store import fake_result

    from ddlio.store import Store
    from helpers import point

    store = Store(pg_url)
    store.record(fake_result(point(tmp_path)))
    store.engine.dispose()
    name, password = pg_role()
    db = make_url(pg_url).database
    with psycopg.connect(pg_server, autocommit=True, connect_timeout=3) as conn:
        conn.execute(f'GRANT CONNECT ON DATABASE "{db}" TO {name}')
    with psycopg.connect(make_url(pg_server).set(database=db).render_as_string(hide_password=False),
                         autocommit=True, connect_timeout=3) as conn:
        conn.execute(f"GRANT USAGE ON SCHEMA public TO {name}")
        conn.execute(f"GRANT SELECT ON ALL TABLES IN SCHEMA public TO {name}")
    reader = make_url(pg_url).set(username=name, password=password).render_as_string(hide_password=False)
    p = sweep("workload=tiny", f"db={reader}")
    assert p.returncode == 2 and f"is read-only for user {name}" in p.stderr and "Traceback" not in p.stderr
    assert len(p.stderr.strip().splitlines()) <= 12 and password not in p.stderr
    assert not (tmp_path / "data").exists()
    p = analysis("summary", "--db", reader)
    assert p.returncode == 0 and "1 points: 1 completed" in p.stdout, p.stderr
