"""End to end through the command line: Hydra overrides -> submitit local jobs -> MPI kernel -> SQLite."""

from __future__ import annotations

import io
import json
import sqlite3
from pathlib import Path

import pandas as pd


def summary(analysis, tmp_path) -> pd.DataFrame:
    p = analysis("summary", "--db", str(tmp_path / "r.db"), "--format", "csv")
    assert p.returncode == 0, p.stderr
    return pd.read_csv(io.StringIO(p.stdout))


def test_six_point_sweep_then_a_rerun_measures_nothing(sweep, analysis, tmp_path):
    p = sweep("-m", "format=hdf5,tfrecord,npz", "access=shared,fpp", "workload=tiny")
    assert p.returncode == 0, p.stderr + p.stdout
    df = summary(analysis, tmp_path)
    assert len(df) == 6 and set(df.status) == {"completed"}
    assert set(zip(df.format, df.access, strict=True)) == {
        (f, a) for f in ("hdf5", "tfrecord", "npz") for a in ("shared", "fpp")
    }
    assert (df.bytes_read == df.bytes_planned).all() and (df.bytes_read > 0).all()
    assert (df.bandwidth_mib_s > 0).all() and (df.iops > 0).all() and (df.io_time_slowest_s > 0).all()
    assert set(df.cache) == {"cold"} and (df.hosts == 1).all() and (df.ranks == 1).all()
    assert (df.overlapping == 0).all()  # locally, one measurement at a time

    again = sweep("-m", "format=hdf5,tfrecord,npz", "access=shared,fpp", "workload=tiny")
    assert again.returncode == 0
    assert "6 of 6 points already measured: skipped" in again.stdout
    assert "[1/" not in again.stdout
    with sqlite3.connect(tmp_path / "r.db") as c:
        assert c.execute("select count(*) from points").fetchone() == (6,)
        assert c.execute("select count(*) from sweeps").fetchone() == (2,)
        assert c.execute("select count(*) from sweep_points where action='skip'").fetchone() == (6,)


def test_two_ranks_and_force(sweep, analysis, tmp_path):
    assert sweep("workload=tiny", "ppn=2").returncode == 0
    df = summary(analysis, tmp_path)
    assert df.ranks.tolist() == [2] and df.ppn.tolist() == [2]
    p = sweep("workload=tiny", "ppn=2", "force=true")
    assert p.returncode == 0 and "[1/1]" in p.stdout
    assert len(summary(analysis, tmp_path)) == 1


def test_a_failing_point_is_recorded_and_the_sweep_goes_on(sweep, analysis, tmp_path):
    # build the tfrecord dataset, then damage a record in place (same size: the manifest still matches)
    assert sweep("workload=tiny", "format=tfrecord").returncode == 0
    (ds,) = (tmp_path / "data" / "datasets").glob("tfrecord-*")
    with open(ds / "part-00000.tfrecord", "r+b") as f:
        f.seek(3000)
        f.write(b"\xff" * 8)
    p = sweep("-m", "workload=tiny", "format=tfrecord,npz", "force=true")
    assert p.returncode == 1
    assert "FAILED" in p.stdout and "checksum mismatch" in p.stdout
    df = summary(analysis, tmp_path).set_index("format")
    # the failed re-measure is the point's current state, with its error; the earlier measurement is history
    assert df.loc["tfrecord", "status"] == "failed" and "checksum mismatch" in df.loc["tfrecord", "error"]
    assert pd.isna(df.loc["tfrecord", "bandwidth_mib_s"])
    assert df.loc["npz", "status"] == "completed"
    status = analysis("status", "--db", str(tmp_path / "r.db"))
    assert "failed" in status.stdout and "FormatError" in status.stdout
    with sqlite3.connect(tmp_path / "r.db") as c:
        key, attempts, current = c.execute(
            "select point_key, attempts, measurement_id from points where format='tfrecord'").fetchone()
        history = c.execute("select id, status, bandwidth_mib_s, record from measurements where point_key=? "
                            "order by id", (key,)).fetchall()
    assert attempts == 2
    assert [h[1] for h in history] == ["completed", "failed"] and current == history[1][0]
    assert history[0][2] > 0 and len(json.loads(history[0][3])["epochs"]) == 2  # the old numbers, kept whole
    runs = list((tmp_path / "data" / "runs").glob("*/*/failure.json"))
    assert len(runs) == 1 and "checksum mismatch" in json.loads(runs[0].read_text())["error"]
    # the damaged dataset was invalidated: a plain rerun rebuilds it and measures the point
    assert not (ds / "manifest.json").exists() and list(ds.glob("manifest.json.invalid-*"))
    again = sweep("workload=tiny", "format=tfrecord")
    assert again.returncode == 0, again.stdout + again.stderr
    assert summary(analysis, tmp_path).set_index("format").loc["tfrecord", "status"] == "completed"
    # every attempt keeps its own logs
    rd = runs[0].parent
    assert "checksum mismatch" in (rd / "attempts" / "001" / "kernel.err").read_text()
    assert "checksum mismatch" not in (rd / "kernel.err").read_text()


def test_a_lost_point_measured_again_exits_0(sweep, tmp_path):
    """Driver and job both killed: the rerun stores the point as LOST, measures it again, and the command exits
    0 because the point's final state is completed. (The dead job is a PID that no longer runs.)"""
    import subprocess
    import sys

    from ddlio.store import Store
    from experiments.dataset import write_json_atomic
    from experiments.run import run_dir_for
    from helpers import point

    spec = point(tmp_path, "workload.epochs=1")
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    rd = run_dir_for(spec)
    rd.mkdir(parents=True)
    write_json_atomic(rd / "job.json", {"job_id": gone.stdout.strip(), "folder": str(rd / "job"),
                                        "executor": "local"})
    Store(str(tmp_path / "r.db")).record_submitted(spec.to_dict(), gone.stdout.strip(), str(rd))
    p = sweep("workload=tiny", "workload.epochs=1")
    assert p.returncode == 0, p.stdout + p.stderr
    assert "ended LOST" in p.stdout and "MiB/s" in p.stdout
    with sqlite3.connect(tmp_path / "r.db") as c:
        assert c.execute("select status from points").fetchall() == [("completed",)]
        assert [r[0] for r in c.execute("select job_state from measurements order by id")] == ["LOST", "COMPLETED"]


def test_a_failed_point_is_retried_by_a_rerun(sweep, analysis, tmp_path):
    assert sweep("workload=tiny", "format=npz").returncode == 0
    (ds,) = (tmp_path / "data" / "datasets").glob("npz-*")
    (ds / "part-00000.npz").write_bytes(b"")  # wrong size: the dataset is rebuilt, the point succeeds
    p = sweep("workload=tiny", "format=npz", "workload.epochs=1")
    assert p.returncode == 0, p.stdout + p.stderr
    df = summary(analysis, tmp_path)
    assert len(df) == 2 and set(df.status) == {"completed"}


def test_result_records_full_provenance(sweep, tmp_path):
    assert sweep("workload=tiny").returncode == 0
    with sqlite3.connect(tmp_path / "r.db") as c:
        config, layout, fs, mpi, env = c.execute(
            "select p.config, p.layout, p.fs_type, p.mpi_library, e.raw from points p join environments e "
            "on p.env_id = e.id"
        ).fetchone()
    config, layout, env = json.loads(config), json.loads(layout), json.loads(env)
    assert config["workload_name"] == "tiny" and config["overrides"][0] == "workload=tiny"
    assert layout["applicable"] is False and "not Lustre" in layout["reason"]
    assert fs and "MPICH" in mpi
    assert {"numpy", "h5py", "hdf5", "mpi4py", "python"} <= set(env["packages"])
    assert env["host"] and "commit" in env["git"]


def test_a_late_result_of_a_failed_point_is_stored_not_remeasured(sweep, analysis, tmp_path):
    """A point recorded as failed whose result file landed later (a slow shared file system, a job Slurm
    reported too early): the rerun stores that result instead of measuring again and deleting it."""
    from ddlio.records import FailureRecord, Outcome
    from ddlio.store import Store

    assert sweep("workload=tiny").returncode == 0
    ((key, run_dir, config),) = sqlite3.connect(tmp_path / "r.db").execute(
        "select point_key, run_dir, config from points").fetchall()
    other = Store(str(tmp_path / "r2.db"))  # a store that gave up on the job: the driver's record of a lost job
    other.record_submitted(json.loads(config), "4242", run_dir)
    other.record(FailureRecord.of(json.loads(config), "job 4242 ended COMPLETED without a result",
                                  job_state="COMPLETED", outcome=Outcome.LOST).to_dict())
    with sqlite3.connect(tmp_path / "r2.db") as c:  # the outcome is stored, not read back from the text
        assert c.execute("select status, outcome from points").fetchone() == ("failed", "lost")
        assert c.execute("select outcome from measurements").fetchall() == [("lost",)]
    p = sweep("workload=tiny", f"db={tmp_path / 'r2.db'}")
    assert p.returncode == 0, p.stdout + p.stderr
    with sqlite3.connect(tmp_path / "r2.db") as c:
        assert c.execute("select status, attempts, error from points").fetchone() == ("completed", 1, None)
    assert len(list(Path(run_dir).glob("attempts/*"))) == 0  # nothing was resubmitted


def test_overrides_that_change_nothing_measure_once(sweep, tmp_path):
    p = sweep("-m", "format=hdf5,hdf5", "workload=tiny", "cluster.timeout_min=10,20")
    assert p.returncode == 0, p.stderr
    assert "is the same measurement as" in p.stderr
    with sqlite3.connect(tmp_path / "r.db") as c:
        assert c.execute("select count(*), sum(attempts) from points").fetchone() == (1, 1)


def test_a_rank_killed_by_a_signal_is_named(sweep, tmp_path):
    p = sweep("workload=tiny", "workload.epochs=1", "+cluster.env.DDLIO_FAULT=kill@0")
    assert p.returncode == 1
    (line,) = [ln for ln in p.stdout.splitlines() if "FAILED" in ln]
    assert "kernel step failed: killed by SIGKILL" in line, p.stdout


def test_two_stores_sharing_a_data_root_keep_their_own_run_folders(sweep, tmp_path):
    """Run folders live under runs/<store id>/: the same point measured for two stores (one data_root) is two
    folders, and neither store's rerun touches the other's."""
    from ddlio.store import store_id

    for db in ("a.db", "b.db"):
        p = sweep("workload=tiny", "workload.epochs=1", f"db={tmp_path / db}")
        assert p.returncode == 0, p.stdout + p.stderr
    dirs = {}
    for db in ("a.db", "b.db"):
        with sqlite3.connect(tmp_path / db) as c:
            ((key, run_dir),) = c.execute("select point_key, run_dir from points").fetchall()
        assert Path(run_dir) == tmp_path / "data" / "runs" / store_id(str(tmp_path / db)) / key
        dirs[db] = Path(run_dir)
    assert dirs["a.db"] != dirs["b.db"] and store_id(str(tmp_path / "a.db")) != store_id(str(tmp_path / "b.db"))
    assert store_id("postgresql://me:secret@db/x") == store_id("postgresql://me:other@db/x")  # no password in it
    p = sweep("workload=tiny", "workload.epochs=1", f"db={tmp_path / 'b.db'}", "force=true")
    assert p.returncode == 0
    assert not (dirs["a.db"] / "attempts").exists() and (dirs["b.db"] / "attempts" / "000").is_dir()
