"""Two drivers at once on one store and data_root (two terminals): every point is measured exactly once, both
commands exit 0 and report every point, and no traceback. Real subprocesses of sweep.py, real SQLite (and the real
PostgreSQL test server, tests/cluster/postgres.sh)."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import SWEEP, cli_env


def _start(tmp_path: Path, *overrides: str) -> subprocess.Popen:
    args = [sys.executable, str(SWEEP), *overrides, f"data_root={tmp_path / 'data'}"]
    if not any(o.startswith("db=") for o in overrides):
        args.append(f"db={tmp_path / 'r.db'}")
    return subprocess.Popen(args, cwd=tmp_path, env=cli_env(tmp_path), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def _both(tmp_path: Path, a: list[str], b: list[str], timeout: float = 300) -> list[tuple[int, str, str]]:
    procs = [_start(tmp_path, *a), _start(tmp_path, *b)]
    out = []
    for p in procs:
        try:
            stdout, stderr = p.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            p.kill()
            stdout, stderr = p.communicate()
        out.append((p.returncode, stdout, stderr))
    return out


def _measured_once(tmp_path: Path, n: int, db: str = "") -> None:
    """Each point: completed once (one attempt), one submitit job in its run folder, and that job's id is the
    store's; one kernel result, no archived earlier attempt."""
    from sqlalchemy import create_engine, text

    from ddlio.store import db_url

    engine = create_engine(db_url(db or str(tmp_path / "r.db")))
    with engine.connect() as c:
        rows = c.execute(text("select point_key, status, attempts, job_id, run_dir, claim_token from points")).all()
    engine.dispose()
    assert len(rows) == n
    for key, status, attempts, job_id, run_dir, claim in rows:
        assert (status, attempts, claim) == ("completed", 1, None), key
        rd = Path(run_dir)
        jobs = {p.name.split("_")[0] for p in (rd / "job").glob("*_log.out")}
        assert jobs == {job_id}, (key, jobs, job_id)
        assert (rd / "kernel-result.json").is_file() and (rd / "result.json").is_file()
        assert not (rd / "attempts").exists()


def _clean(results: list[tuple[int, str, str]]) -> None:
    for rc, stdout, stderr in results:
        assert rc == 0, stdout + stderr
        assert "Traceback" not in stderr + stdout


def test_two_sweeps_at_once_with_the_same_points_measure_each_once(tmp_path):
    args = ["-m", "workload=tiny", "workload.epochs=1", "format=hdf5,npz"]
    results = _both(tmp_path, args, args)
    _clean(results)
    _measured_once(tmp_path, 2)
    for _, stdout, _ in results:  # each command reports both points, measured by itself or by the other
        assert stdout.count("MiB/s") == 2, stdout
    assert sum(stdout.count("(measured by another driver)") for _, stdout, _ in results) == 2, results


@pytest.mark.postgres
def test_two_sweeps_at_once_on_postgresql(pg_url, tmp_path):
    args = ["-m", "workload=tiny", "workload.epochs=1", "format=hdf5,npz", f"db={pg_url}"]
    _clean(_both(tmp_path, args, args))
    _measured_once(tmp_path, 2, pg_url)


def test_two_sweeps_at_once_with_overlapping_points(tmp_path):
    a = ["-m", "workload=tiny", "workload.epochs=1", "format=hdf5,npz"]
    b = ["-m", "workload=tiny", "workload.epochs=1", "format=npz,tfrecord"]
    results = _both(tmp_path, a, b)
    _clean(results)
    _measured_once(tmp_path, 3)
    for _, stdout, _ in results:
        assert stdout.count("MiB/s") == 2, stdout


def test_a_claim_left_by_a_dead_driver_is_taken_over(sweep, tmp_path):
    """A driver that claimed a point and died before submitting its job: the next driver takes the point over
    and measures it (a PID that no longer runs, on this host)."""
    import socket

    from ddlio.store import Store
    from helpers import point

    spec = point(tmp_path, "workload.epochs=1")
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    store = Store(str(tmp_path / "r.db"))
    assert store.claim(spec.to_dict(), "d" * 32, socket.gethostname(), int(gone.stdout))
    p = sweep("workload=tiny", "workload.epochs=1")
    assert p.returncode == 0, p.stdout + p.stderr
    assert "taking over from a driver that is gone" in p.stdout
    _measured_once(tmp_path, 1)


@pytest.mark.slurm
def test_two_slurm_sweeps_at_once_submit_each_point_once(slurm_cluster, tmp_path):
    """The same on the one-box Slurm: each point goes out as one array task, whose id the store holds."""
    args = ["-m", "cluster=slurm", "workload=tiny", "workload.epochs=1", "repeat=0,1,2"]
    _clean(_both(tmp_path, args, args, timeout=600))
    with sqlite3.connect(tmp_path / "r.db") as c:
        rows = c.execute("select status, attempts, job_id, run_dir from points").fetchall()
    assert [r[:2] for r in rows] == [("completed", 1)] * 3
    logs = (tmp_path / "data" / "runs" / "_slurm").glob("*_log.out")  # <job id>_<task>_log.out
    tasks = {p.name.split("_log")[0].rsplit("_", 1)[0] for p in logs}
    assert tasks == {r[2] for r in rows}  # Slurm ran exactly the jobs the store holds, one per point
    for _, _, job_id, run_dir in rows:
        assert json.loads(Path(run_dir, "job.json").read_text())["job_id"] == job_id
        assert not Path(run_dir, "attempts").exists()
