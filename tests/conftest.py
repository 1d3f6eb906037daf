"""Shared fixtures. Tests use real files, real MPI ranks (mpiexec from the mpich wheel), a real SQLite file and
real subprocesses of ``sweep.py``; everything they write stays under ``tmp_path``."""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent
SWEEP = ROOT / "sweep.py"


def load_bench(name: str) -> ModuleType:
    """``bench/<name>.py`` as the module ``name`` (the benches are scripts, not a package)."""
    spec = importlib.util.spec_from_file_location(name, ROOT / "bench" / f"{name}.py")
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


def cli_env(tmp_path: Path, **extra: str) -> dict[str, str]:
    """Environment for a ddlio subprocess whose scratch files (Hydra's, MPI's) land under tmp_path."""
    tmp = tmp_path / "tmp"
    tmp.mkdir(exist_ok=True)
    env = dict(os.environ)
    env.pop("DDLIO_TRACEBACK", None)  # tests see what a user sees; a test that wants the traceback passes it
    env.update(TMPDIR=str(tmp), PYTHONPATH=str(ROOT), HYDRA_FULL_ERROR="0")
    env.update(extra)  # a test may set any of them (PYTHONPATH with a module of its own, before ROOT)
    env.pop("DDLIO_DB", None)
    return env


def run_cli(
    args: list[str], cwd: Path, tmp_path: Path, timeout: float = 300, **env: str
) -> subprocess.CompletedProcess:
    """Run ``python <args>`` (``sweep.py ...`` or ``-m analysis ...``) in ``cwd``; time-boxed."""
    return subprocess.run(
        [sys.executable, *args], cwd=cwd, env=cli_env(tmp_path, **env), capture_output=True, text=True,
        timeout=timeout,
    )


@pytest.fixture
def sweep(tmp_path: Path) -> Any:
    """``sweep(*overrides)``: run sweep.py in tmp_path with data_root and db under it."""

    def _run(*overrides: str, timeout: float = 300, **env: str) -> subprocess.CompletedProcess:
        args = [str(SWEEP), *overrides]
        if not any(o.startswith("data_root=") for o in overrides):
            args.append(f"data_root={tmp_path / 'data'}")
        if not any(o.startswith("db=") for o in overrides):
            args.append(f"db={tmp_path / 'r.db'}")
        if "cluster=slurm" in overrides and not any(o.startswith("cluster.hang_timeout_s=") for o in overrides):
            # the mpich wheel's PMI-2 client and Slurm 22.05 hang now and then in MPI start-up under load: a
            # step whose ranks are not all started within a minute is killed and started once more
            args.append("cluster.hang_timeout_s=60")
        return run_cli(args, tmp_path, tmp_path, timeout=timeout, **env)

    return _run


@pytest.fixture
def analysis(tmp_path: Path) -> Any:
    """``analysis(*args)``: run ``python -m analysis ...`` in tmp_path."""

    def _run(*args: str, timeout: float = 120) -> subprocess.CompletedProcess:
        return run_cli(["-m", "analysis", *args], tmp_path, tmp_path, timeout=timeout)

    return _run


# --- Slurm test cluster (tests/cluster/slurm.sh) -------------------------------------------------------------------

SLURM_UP_STATES = ("idle", "mixed", "allocated")


@dataclass(frozen=True)
class SlurmCluster:
    """A running Slurm cluster as ``sinfo`` reports it: its default partition and its usable nodes."""

    partition: str
    nodes: tuple[str, ...]
    cpus_per_node: int


#: the first line tests/cluster/slurm.sh writes into the slurm.conf it generates, and the cluster name it gives
OWN_SLURM_MARK = "# written by ddlio tests/cluster/slurm.sh"
OWN_SLURM_NAME = "ci"
#: names the one other Slurm cluster the tests may submit to (its ClusterName), where the user says so
SLURM_ENV = "DDLIO_TEST_SLURM_CLUSTER"


def slurm_conf() -> Path:
    """The slurm.conf the Slurm commands read: $SLURM_CONF, else Debian's and Slurm's default."""
    return Path(os.environ.get("SLURM_CONF") or "/etc/slurm/slurm.conf")


def slurm_refusal() -> str | None:
    """Why the tests must not use the Slurm cluster the commands here would talk to (None: they may).

    A test submits jobs and cancels them, so it runs only against the project's own test cluster, recognised by
    the slurm.conf tests/cluster/slurm.sh wrote (its first line and ``ClusterName=ci``), or against the cluster
    the user names in $DDLIO_TEST_SLURM_CLUSTER (its ``ClusterName``). Whether ``sinfo`` answers says nothing:
    on a login node it answers for the site's cluster."""
    conf = slurm_conf()
    try:
        text = conf.read_text(errors="replace")
    except OSError:
        return f"no Slurm test cluster: {conf} is not readable (run tests/cluster/slurm.sh start)"
    names = [ln.split("=", 1)[1].strip() for ln in text.splitlines()
             if ln.strip().lower().startswith("clustername=")]
    name = names[-1] if names else ""
    wanted = os.environ.get(SLURM_ENV, "").strip()
    if wanted:
        return None if name == wanted else (f"{SLURM_ENV}={wanted}, but {conf} is for cluster {name or '(unnamed)'}"
                                            ": the tests submit to the cluster named there only")
    if text.startswith(OWN_SLURM_MARK) and name == OWN_SLURM_NAME:
        return slurm_owner_refusal(conf)
    return (f"{conf} is not the project's test cluster (tests/cluster/slurm.sh start writes one); "
            f"to test against cluster {name or '(unnamed)'} say so: {SLURM_ENV}={name or 'NAME'}")


def slurm_owner_refusal(conf: Path) -> str | None:
    """Why the project's test cluster is not this checkout's to use (None: it is): tests/cluster/slurm.sh records
    the checkout that started it beside the slurm.conf (``ddlio-owner``), and another checkout's tests (a CI
    clone's) may be running on it; two suites' jobs on its two nodes would share them and slow or starve both."""
    try:
        owner = conf.with_name("ddlio-owner").read_text().strip()
    except OSError:
        return None
    here = str(Path(__file__).resolve().parents[1])
    if owner and owner != here and Path(owner).is_dir():
        return (f"the Slurm test cluster was started from the checkout {owner}, whose tests may be using it; "
                f"stop it there (bash {owner}/tests/cluster/slurm.sh stop) and start this one's")
    return None


@pytest.fixture(autouse=True)
def _cancel_leftover_slurm_jobs(request: pytest.FixtureRequest) -> Iterator[None]:
    """After a test that used the Slurm cluster, cancel the jobs it left (those whose working directory is under
    its tmp_path): a test that fails while its job still runs (a step hung in MPI start-up) must not hold the
    cluster's nodes for the next tests. Only on a cluster the tests may use (:func:`slurm_refusal`)."""
    if "slurm_cluster" not in request.fixturenames or shutil.which("squeue") is None or slurm_refusal():
        yield
        return
    tmp = str(request.getfixturevalue("tmp_path"))
    yield
    try:
        out = subprocess.run(["squeue", "-h", "-o", "%i|%Z"], capture_output=True, text=True, timeout=10).stdout
    except subprocess.TimeoutExpired:
        return
    left = [jid for jid, _, wd in (ln.partition("|") for ln in out.splitlines()) if wd.startswith(tmp)]
    if left:
        subprocess.run(["scancel", *left], capture_output=True, timeout=30, check=False)


@pytest.fixture(scope="session")
def slurm_cluster() -> Iterator[SlurmCluster]:
    """The project's test Slurm cluster (``tests/cluster/slurm.sh start``: nodes n1, n2), or the one
    $DDLIO_TEST_SLURM_CLUSTER names (:func:`slurm_refusal`).

    Skips, with one line, when it is neither or ``sinfo`` does not answer within a few seconds; fails when it
    answers but no node of the default partition is idle, mixed or allocated (a broken cluster must not pass as
    an absent one)."""
    reason = "no Slurm test cluster"
    if shutil.which("sinfo") is None:
        pytest.skip(f"{reason}: no sinfo on PATH (run tests/cluster/slurm.sh start)")
    refusal = slurm_refusal()
    if refusal:
        pytest.skip(refusal)
    try:
        out = subprocess.run(
            ["sinfo", "-h", "-N", "-o", "%N|%P|%T|%c"], capture_output=True, text=True, timeout=5
        )
    except subprocess.TimeoutExpired:
        pytest.skip(f"{reason}: sinfo did not answer within 5 s (tests/cluster/slurm.sh status)")
    if out.returncode != 0:
        first = (out.stderr.strip().splitlines() or [f"exit {out.returncode}"])[0]
        pytest.skip(f"{reason}: sinfo: {first} (tests/cluster/slurm.sh status)")
    rows = [line.split("|") for line in out.stdout.splitlines() if line.count("|") == 3]
    default = [r for r in rows if r[1].endswith("*")] or rows
    if not default:
        pytest.fail(f"sinfo lists no node; check tests/cluster/slurm.sh status\n{out.stdout}")
    partition = default[0][1].rstrip("*")
    up = [r for r in default if r[1].rstrip("*") == partition and r[2] in SLURM_UP_STATES]
    if not up:
        pytest.fail(f"no node of partition {partition} is {'/'.join(SLURM_UP_STATES)}; "
                    f"check tests/cluster/slurm.sh status\n{out.stdout}")
    yield SlurmCluster(
        partition=partition,
        nodes=tuple(sorted({r[0] for r in up})),
        cpus_per_node=min(int(r[3]) for r in up),
    )


# --- PostgreSQL test server (tests/cluster/postgres.sh) ------------------------------------------------------------

#: the admin URL of the server tests/cluster/postgres.sh runs (a role with CREATEDB); override with DDLIO_TEST_PG_URL
PG_ADMIN_URL = os.environ.get("DDLIO_TEST_PG_URL", "postgresql://ddlio:ddlio-ci@127.0.0.1:55432/postgres")


def service_missing(service: str, reason: str, script: str | None) -> None:
    """Skip, or fail under CI=true: CI starts the project's test services (``script``, None where starting it
    would not help), so a missing one there is a failure, not a skip. One line either way."""
    msg = f"no {service}: {reason}" + (f" (run bash tests/cluster/{script} start)" if script else "")
    if os.environ.get("CI") == "true":
        pytest.fail(msg)
    pytest.skip(msg)


def _pg_missing(reason: str, script: str | None = "postgres.sh") -> None:
    service_missing("PostgreSQL test server", reason, script)


@pytest.fixture(scope="session")
def pg_server() -> str:
    """The admin URL of the running test server; skips (CI: fails) when psycopg or the server is missing."""
    try:
        import psycopg
    except ImportError:
        _pg_missing("psycopg is not installed (pip install -e '.[postgres]')", None)
    try:
        with psycopg.connect(PG_ADMIN_URL, connect_timeout=3) as conn:
            conn.execute("select 1")
    except psycopg.OperationalError as e:
        _pg_missing(str(e).strip().splitlines()[0])
    return PG_ADMIN_URL


@pytest.fixture
def pg_url(pg_server: str) -> Iterator[str]:
    """A fresh, empty database on the test server for this test (``postgresql://user:pw@host:port/NAME``); dropped
    afterwards, whatever connections the test left open."""
    import uuid

    import psycopg
    from sqlalchemy.engine import make_url

    name = f"ddlio_test_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(pg_server, autocommit=True, connect_timeout=3) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    yield make_url(pg_server).set(database=name).render_as_string(hide_password=False)
    with psycopg.connect(pg_server, autocommit=True, connect_timeout=3) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
