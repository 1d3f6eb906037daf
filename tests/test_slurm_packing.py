"""Several points per array task on a real Slurm (tests/cluster/slurm.sh start): each point keeps its own record,
a crashing point fails alone, the task asks for each point's time limit, and a rerun submits nothing."""

from __future__ import annotations

import io
import sqlite3
import subprocess
import time

import pandas as pd
import pytest

pytestmark = pytest.mark.slurm


def test_packed_points_are_each_measured_once_and_fail_alone(slurm_cluster, sweep, analysis, tmp_path):
    args = ("-m", "cluster=slurm", "format=hdf5,npz", "repeat=0,1", "ppn=2", "workload=tiny",
            "cluster.points_per_task=3", "cluster.timeout_min=5", "+cluster.env.DDLIO_FAULT=crash@1:npz")
    p = sweep(*args, timeout=600)
    assert p.returncode == 1, p.stdout + p.stderr
    assert "3 point(s) per array task" in p.stdout
    s = analysis("summary", "--db", str(tmp_path / "r.db"), "--format", "csv")
    df = pd.read_csv(io.StringIO(s.stdout))
    assert len(df) == 4
    assert sorted(df[df.format == "hdf5"].status) == ["completed", "completed"]
    assert sorted(df[df.format == "npz"].status) == ["failed", "failed"]
    assert df[df.format == "npz"].error.str.contains("crashing on purpose").all()
    with sqlite3.connect(tmp_path / "r.db") as c:
        jobs = [j for (j,) in c.execute("select job_id from points order by job_id")]
        assert c.execute("select count(*) from measurements").fetchone() == (4,)
    assert len(set(jobs)) == 2 and sorted(jobs.count(j) for j in set(jobs)) == [1, 3]  # tasks of 3 and 1
    base = jobs[0].split("_")[0]
    limit: list[str] = []
    deadline = time.monotonic() + 60  # slurmdbd writes the job's record after slurmctld ran it: not at once
    while not limit and time.monotonic() < deadline:
        limit = subprocess.run(["sacct", "-n", "-X", "-P", "-o", "Timelimit", "-j", base], capture_output=True,
                               text=True, timeout=30, check=True).stdout.split()
        time.sleep(0 if limit else 1)
    assert limit and set(limit) == {"00:15:00"}  # 3 points x 5 min
    again = sweep(*args, "retry_failed=false", timeout=300)
    assert again.returncode == 1 and "submitted" not in again.stdout  # nothing went to Slurm again
    with sqlite3.connect(tmp_path / "r.db") as c:
        assert c.execute("select count(*) from measurements").fetchone() == (4,)
