"""Sweeps through a real Slurm cluster (tests/cluster/slurm.sh start): per-point resources, job arrays,
wait=false and harvest, crashes, hangs, cancellations, and a driver killed mid-sweep. Skipped with a reason
where no Slurm runs; .ci/run always starts the cluster."""

from __future__ import annotations

import io
import json
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest

from conftest import SWEEP, cli_env
from experiments.executors.slurm import TERMINAL, job_states

pytestmark = pytest.mark.slurm

SWEEP4 = ("-m", "cluster=slurm", "format=hdf5,npz", "nodes=1,2", "ppn=2", "workload=tiny")


def summary(analysis, tmp_path) -> pd.DataFrame:
    p = analysis("summary", "--db", str(tmp_path / "r.db"), "--format", "csv")
    assert p.returncode == 0, p.stderr
    return pd.read_csv(io.StringIO(p.stdout))


def db_rows(tmp_path, sql: str) -> list[tuple]:
    with sqlite3.connect(tmp_path / "r.db") as c:
        return c.execute(sql).fetchall()


def wait_terminal(job_ids: list[str], timeout_s: float = 180) -> dict[str, str]:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        states = job_states(job_ids)
        if len(states) == len(job_ids) and all(s in TERMINAL for s in states.values()):
            return states
        time.sleep(1)
    raise AssertionError(f"jobs {job_ids} not finished after {timeout_s} s: {job_states(job_ids)}")


def test_one_and_two_node_points(slurm_cluster, sweep, analysis, tmp_path):
    p = sweep(*SWEEP4, timeout=600)
    assert p.returncode == 0, p.stdout + p.stderr
    df = summary(analysis, tmp_path)
    assert len(df) == 4 and set(df.status) == {"completed"}
    assert (df.bytes_read == df.bytes_planned).all()
    two = df[df.nodes == 2]
    assert len(two) == 2 and (two.ranks == 4).all() and (two.hosts == 2).all()  # 4 ranks on 2 Slurm nodes
    assert (df[df.nodes == 1].hosts == 1).all()
    names = {tuple(json.loads(n)) for (n,) in db_rows(tmp_path, "select host_names from points where nodes=2")}
    assert names == {tuple(sorted(slurm_cluster.nodes[:2]))}
    # sacct: one array task per point, each completed
    ids = df.job_id.astype(str).tolist()
    assert len(set(ids)) == 4
    states = wait_terminal(ids)  # sacct may lag a job's end by a moment
    assert list(states.values()) == ["COMPLETED"] * 4
    for run_dir in db_rows(tmp_path, "select run_dir from points"):
        assert Path(run_dir[0], "repro.sbatch").read_text().startswith("#!/bin/bash")


def test_wait_false_returns_then_a_rerun_harvests_without_submitting(slurm_cluster, sweep, analysis, tmp_path):
    p = sweep(*SWEEP4, "wait=false", timeout=120)
    assert p.returncode == 0, p.stdout + p.stderr
    assert "4 job(s) queued or running" in p.stdout
    rows = db_rows(tmp_path, "select status, job_id from points")
    assert [r[0] for r in rows] == ["submitted"] * 4  # the driver did not wait for any of them
    wait_terminal([r[1] for r in rows])
    again = sweep(*SWEEP4, timeout=300)
    assert again.returncode == 0, again.stdout + again.stderr
    assert "submitted" not in again.stdout  # nothing new went to Slurm
    df = summary(analysis, tmp_path)
    assert set(df.status) == {"completed"} and len(df) == 4
    assert db_rows(tmp_path, "select distinct attempts from points") == [(1,)]
    third = sweep(*SWEEP4, timeout=120)
    assert "4 of 4 points already measured" in third.stdout


def test_a_rank_that_crashes_fails_its_point_only(slurm_cluster, sweep, analysis, tmp_path):
    p = sweep("-m", "cluster=slurm", "format=hdf5,npz", "ppn=2", "workload=tiny",
              "+cluster.env.DDLIO_FAULT=crash@1:npz", timeout=600)
    assert p.returncode == 1
    df = summary(analysis, tmp_path).set_index("format")
    assert df.loc["hdf5", "status"] == "completed"
    assert df.loc["npz", "status"] == "failed"
    assert "kernel step failed" in df.loc["npz", "error"] and "crashing on purpose" in df.loc["npz", "error"]


@pytest.mark.parametrize(("ppn", "rank"), [("1", 0), ("2", 1)])
def test_a_hung_rank_cannot_hang_the_sweep(slurm_cluster, sweep, analysis, tmp_path, ppn, rank):
    p = sweep("cluster=slurm", f"ppn={ppn}", "workload=tiny", f"+cluster.env.DDLIO_FAULT=hang@{rank}",
              "cluster.hang_timeout_s=20", timeout=600)
    assert p.returncode == 1
    (error,) = summary(analysis, tmp_path).error
    assert f"rank {rank} made no progress for 20 s in epoch 0" in error
    assert f"it was reading {tmp_path / 'data'}" in error and "at offset" in error


def test_a_cancelled_job_is_stored_failed_with_slurms_state(slurm_cluster, sweep, analysis, tmp_path):
    args = ("cluster=slurm", "workload=tiny", "+cluster.env.DDLIO_FAULT=hang@0")
    assert sweep(*args, "wait=false", timeout=120).returncode == 0
    ((job_id,),) = db_rows(tmp_path, "select job_id from points")
    subprocess.run(["scancel", job_id], check=True, timeout=30)
    assert wait_terminal([job_id])[job_id] == "CANCELLED"
    p = sweep(*args, "retry_failed=false", timeout=120)
    assert p.returncode == 1 and "CANCELLED" in p.stdout
    ((status, state, error),) = db_rows(tmp_path, "select status, job_state, error from points")
    assert (status, state) == ("failed", "CANCELLED") and f"job {job_id} ended CANCELLED" in error


def test_a_driver_killed_mid_sweep_loses_nothing_and_duplicates_nothing(slurm_cluster, sweep, analysis, tmp_path):
    args = [*SWEEP4, "workload.compute_time=0.3", f"data_root={tmp_path / 'data'}", f"db={tmp_path / 'r.db'}"]
    driver = subprocess.Popen([sys.executable, str(SWEEP), *args], cwd=tmp_path, env=cli_env(tmp_path),
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    seen = []
    try:
        for line in driver.stdout:  # wait until both job arrays are out, then kill the driver outright
            seen.append(line)
            if sum("submitted" in s for s in seen) == 2:
                break
        driver.send_signal(signal.SIGKILL)
    finally:
        driver.wait(timeout=60)
        driver.stdout.close()
    assert driver.returncode == -signal.SIGKILL
    again = sweep(*args, timeout=600)
    assert again.returncode == 0, again.stdout + again.stderr
    assert "submitted" not in again.stdout
    df = summary(analysis, tmp_path)
    assert len(df) == 4 and set(df.status) == {"completed"}
    assert db_rows(tmp_path, "select distinct attempts from points") == [(1,)]
    ids = df.job_id.astype(str).tolist()
    assert len(set(ids)) == 4 and len(wait_terminal(ids)) == 4


def test_a_checkpoint_restored_across_nodes(slurm_cluster, sweep, tmp_path):
    """kind=checkpoint on two Slurm nodes, one rank each, the restore shifted by one rank: each rank restores the
    shard the other node wrote."""
    p = sweep("cluster=slurm", "nodes=2", "ppn=1", "kind=checkpoint", "checkpoint.size=8MiB",
              "checkpoint.read_shift=1", timeout=600)
    assert p.returncode == 0, p.stdout + p.stderr
    [(result, hosts)] = db_rows(tmp_path, "select result, host_names from points where kind = 'checkpoint'")
    ranks = json.loads(result)["checkpoints"]["ranks"]
    assert len(set(json.loads(hosts))) == 2
    assert [(r["rank"], r["restored"]) for r in ranks] == [(0, 1), (1, 0)]
    assert all(r["written_on"] != r["host"] for r in ranks), ranks
