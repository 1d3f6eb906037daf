"""Queues, pending reasons, points that can never start, and site limits, on the real one-box Slurm
(tests/cluster/slurm.sh start: partitions debug (default, 2 nodes x 4 CPUs), short (MaxTime 5 min), urgent;
accounting enforces limits and QOS). Limits a test needs are its own QOS, removed in a finally."""

from __future__ import annotations

import io
import os
import re
import sqlite3
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

pytestmark = pytest.mark.slurm


def summary(analysis, tmp_path) -> pd.DataFrame:
    p = analysis("summary", "--db", str(tmp_path / "r.db"), "--format", "csv")
    assert p.returncode == 0, p.stderr
    return pd.read_csv(io.StringIO(p.stdout))


def sacctmgr(*args: str) -> None:
    p = subprocess.run(["sacctmgr", "-i", *args], capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stdout + p.stderr


@pytest.fixture
def own_qos(slurm_cluster) -> Iterator[Any]:
    """``own_qos(**limits)``: a QOS of this test that user root may use, with these limits; removed afterwards."""
    made: list[str] = []

    def make(**limits: str) -> str:
        name = f"ddlio_t{os.getpid()}_{len(made)}"
        sacctmgr("add", "qos", name, *(f"{k}={v}" for k, v in limits.items()))
        made.append(name)
        sacctmgr("modify", "user", "root", "set", f"qos+={name}")
        return name

    try:
        yield make
    finally:
        for name in made:
            subprocess.run(["sacctmgr", "-i", "modify", "user", "root", "set", f"qos-={name}"],
                           capture_output=True, timeout=60)
            subprocess.run(["sacctmgr", "-i", "delete", "qos", name], capture_output=True, timeout=60)


# -------------------------------------------------------------------------------------- refused at once
def refused(p: subprocess.CompletedProcess, tmp_path: Path, message: str) -> None:
    assert p.returncode == 2, p.stdout + p.stderr
    assert message in p.stderr and "nothing was submitted" in p.stderr
    assert "Traceback" not in p.stderr and len(p.stderr.strip().splitlines()) <= 12
    assert not (tmp_path / "data" / "runs").exists()  # no run folder, no job
    assert not (tmp_path / "r.db").exists()


def test_more_nodes_than_the_partition_is_refused_before_anything_is_submitted(slurm_cluster, sweep, tmp_path):
    p = sweep("cluster=slurm", "nodes=4", "workload=tiny", timeout=120)
    refused(p, tmp_path, f"nodes=4 but partition {slurm_cluster.partition} has 2 nodes")


def test_more_ranks_per_node_than_cpus_is_refused(slurm_cluster, sweep, tmp_path):
    ppn = slurm_cluster.cpus_per_node + 1
    p = sweep("cluster=slurm", f"ppn={ppn}", "workload=tiny", timeout=120)
    refused(p, tmp_path, f"ppn={ppn} (1 CPU per rank) but the nodes of partition {slurm_cluster.partition} have "
                         f"at most {slurm_cluster.cpus_per_node} CPUs")


def test_a_time_limit_above_the_partitions_maxtime_is_refused(slurm_cluster, sweep, tmp_path):
    p = sweep("cluster=slurm", "cluster.partition=short", "cluster.timeout_min=10", "workload=tiny", timeout=120)
    refused(p, tmp_path, "cluster.timeout_min=10 but partition short allows at most 5 min (MaxTime)")


def test_an_account_the_user_has_not_and_a_missing_feature_are_refused(slurm_cluster, sweep, tmp_path):
    p = sweep("cluster=slurm", "workload=tiny", "cluster.account=nobody_here", "cluster.constraint=gpu", timeout=120)
    refused(p, tmp_path, "account=nobody_here but user root may use only: root")
    assert f"constraint=gpu but no node(s) of partition {slurm_cluster.partition} have gpu" in p.stderr


def test_dry_run_runs_the_same_check(slurm_cluster, sweep, tmp_path):
    p = sweep("cluster=slurm", "nodes=4", "workload=tiny", "dry_run=true", timeout=120)
    refused(p, tmp_path, "has 2 nodes")
    assert "dry run: 1 point(s)" in p.stdout  # the plan is shown too
    ok = sweep("cluster=slurm", "nodes=2", "workload=tiny", "dry_run=true", timeout=120)
    assert ok.returncode == 0, ok.stderr
    assert f"every point fits partition {slurm_cluster.partition} (2 nodes" in ok.stdout


# ------------------------------------------------------------------------------------- queued, and waiting
def test_a_throttled_task_pending_longer_than_the_vanish_window_ends_completed(slurm_cluster, sweep, tmp_path):
    """Issue 8: a queued array task is not taken for gone however long it waits (the window is shortened to 3 s;
    the third task really waits behind the first two), and the wait shows its reason in the progress lines."""
    args = ("-m", "cluster=slurm", "workload=tiny", "workload.epochs=1", "workload.compute_time=1",
            "repeat=0,1,2", "cluster.array_parallelism=1", "cluster.vanish_after_s=3")
    p = sweep(*args, timeout=600)
    assert p.returncode == 0, p.stdout + p.stderr
    assert re.search(r"\d queued \(\d JobArrayTaskLimit: waits", p.stdout), p.stdout
    with sqlite3.connect(tmp_path / "r.db") as c:
        rows = c.execute("select status, job_id from points order by repeat").fetchall()
    assert [r[0] for r in rows] == ["completed"] * 3
    last = rows[-1][1]
    # the last task's real pending time (sacct Submit -> Start) exceeded the vanish window
    out = subprocess.run(["sacct", "-n", "-P", "-X", "-j", last.split("_")[0], "-o", "JobID,Submit,Start"],
                         capture_output=True, text=True, timeout=30).stdout
    times = {r.split("|")[0]: r.split("|")[1:] for r in out.splitlines()}
    submit, start = (pd.Timestamp(t) for t in times[last])
    assert (start - submit).total_seconds() > 3
    assert set(times) == {f"{last.split('_')[0]}_{i}" for i in range(3)}  # exactly 3 tasks for the sweep
    again = sweep(*args, timeout=120)
    assert again.returncode == 0 and "submitted" not in again.stdout
    assert "3 of 3 points already measured" in again.stdout



def test_a_point_pending_for_an_admin_only_reason_is_cancelled_and_stored_failed(slurm_cluster, sweep, analysis,
                                                                                 tmp_path, own_qos):
    """A QOS allowing 1 CPU per job: a 2-rank point pends with QOSMaxCpuPerJobLimit for good (the check before
    submitting does not cover per-job CPU limits; Slurm's own pending reason is the backstop)."""
    qos = own_qos(MaxTRESPerJob="cpu=1")
    p = sweep("cluster=slurm", "workload=tiny", "ppn=2", f"cluster.qos={qos}", timeout=300)
    assert p.returncode == 1, p.stdout + p.stderr
    assert "QOSMaxCpuPerJobLimit: never (admin only)" in p.stdout
    ((status, state, error),) = summary(analysis, tmp_path)[["status", "job_state", "error"]].itertuples(index=False)
    assert (status, state) == ("failed", "CANCELLED")
    assert "pending for QOSMaxCpuPerJobLimit, which only an administrator can clear" in error


def test_cancel_unrunnable_false_keeps_waiting(slurm_cluster, sweep, analysis, tmp_path, own_qos):
    qos = own_qos(MaxTRESPerJob="cpu=1")
    p = sweep("cluster=slurm", "workload=tiny", "ppn=2", f"cluster.qos={qos}", "cluster.cancel_unrunnable=false",
              "wait=false", timeout=300)
    assert p.returncode == 0, p.stdout + p.stderr
    want = "PENDING, QOSMaxCpuPerJobLimit (never (admin only))"
    deadline = time.monotonic() + 60  # a job just submitted has no reason until slurmctld's next scheduling pass
    st = analysis("status", "--db", str(tmp_path / "r.db"))
    while want not in st.stdout and "no reason given" in st.stdout and time.monotonic() < deadline:
        time.sleep(1)
        st = analysis("status", "--db", str(tmp_path / "r.db"))
    assert want in st.stdout, st.stdout
    with sqlite3.connect(tmp_path / "r.db") as c:
        ((job_id,),) = c.execute("select job_id from points").fetchall()
    subprocess.run(["scancel", job_id], timeout=30, check=True)


# ---------------------------------------------------------------------------------- limits that clear
def test_a_submit_limit_below_one_job_fails_the_point_instead_of_waiting_forever(slurm_cluster, sweep, analysis,
                                                                                tmp_path, own_qos):
    qos = own_qos(MaxSubmitJobsPerUser="0")
    p = sweep("cluster=slurm", "workload=tiny", f"cluster.qos={qos}", timeout=300)
    assert p.returncode == 1, p.stdout + p.stderr
    ((status, error),) = summary(analysis, tmp_path)[["status", "error"]].itertuples(index=False)
    assert status == "failed" and "cannot clear by waiting" in error and "QOSMaxSubmitJobPerUserLimit" in error


def test_points_refused_by_a_submit_limit_wait_and_all_complete(slurm_cluster, sweep, analysis, tmp_path, own_qos):
    """Issue 8: a QOS allowing 2 submitted jobs per user; a 4-point sweep goes out 2 at a time as jobs end."""
    qos = own_qos(MaxSubmitJobsPerUser="2")
    p = sweep("-m", "cluster=slurm", "workload=tiny", "workload.epochs=1", "repeat=0,1,2,3", f"cluster.qos={qos}",
              timeout=600)
    assert p.returncode == 0, p.stdout + p.stderr
    assert "held by a site limit (QOSMaxSubmitJobPerUserLimit)" in p.stdout
    assert "held by a limit" in p.stdout  # in the progress lines
    df = summary(analysis, tmp_path)
    assert len(df) == 4 and set(df.status) == {"completed"}
    with sqlite3.connect(tmp_path / "r.db") as c:
        assert c.execute("select distinct attempts from points").fetchall() == [(1,)]
