"""End to end through the command line: Hydra overrides -> submitit local jobs -> MPI kernel -> SQLite."""

from __future__ import annotations

import io
import json
import sqlite3

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
    # the old tfrecord measurement is kept (a failure never overwrites one); the npz point completed
    assert df.loc["npz", "status"] == "completed"
    with sqlite3.connect(tmp_path / "r.db") as c:
        (attempts,) = c.execute("select attempts from points where format='tfrecord'").fetchone()
    assert attempts == 2
    runs = list((tmp_path / "data" / "runs").glob("*/failure.json"))
    assert len(runs) == 1 and "checksum mismatch" in json.loads(runs[0].read_text())["error"]


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
    from analysis.store import Store
    from experiments.launch import failure_record

    assert sweep("workload=tiny").returncode == 0
    ((key, run_dir, config),) = sqlite3.connect(tmp_path / "r.db").execute(
        "select point_key, run_dir, config from points").fetchall()
    other = Store(str(tmp_path / "r2.db"))  # a store that gave up on the job
    other.record_submitted(json.loads(config), "4242", run_dir)
    other.record(failure_record(json.loads(config), "job 4242 ended COMPLETED without a result"))
    p = sweep("workload=tiny", f"db={tmp_path / 'r2.db'}")
    assert p.returncode == 0, p.stdout + p.stderr
    with sqlite3.connect(tmp_path / "r2.db") as c:
        assert c.execute("select status, attempts, error from points").fetchone() == ("completed", 1, None)
    assert len(list((tmp_path / "data" / "runs" / key).glob("attempts/*"))) == 0  # nothing was resubmitted


def test_overrides_that_change_nothing_measure_once(sweep, tmp_path):
    p = sweep("-m", "format=hdf5,hdf5", "workload=tiny", "cluster.timeout_min=10,20")
    assert p.returncode == 0, p.stderr
    assert "is the same measurement as" in p.stderr
    with sqlite3.connect(tmp_path / "r.db") as c:
        assert c.execute("select count(*), sum(attempts) from points").fetchone() == (1, 1)
