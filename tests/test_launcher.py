"""ddlio as a Hydra launcher: any Hydra sweeper drives it (the grid by default, Optuna for an adaptive search);
each point returns its objective; point keys stay those of the same measurement before the launcher existed."""

from __future__ import annotations

import dataclasses
import json
import os
import re
import sqlite3

import pytest
from test_config import spec

from conftest import ROOT

#: keys main computed before ddlio became a launcher (and before the objective knob), for fixed configs: a store
#: measured then keeps its points
GOLDEN = [
    ((), "de1bfea6d0a94d691847", "acdd409146348e2db1f2"),
    (("format=tfrecord", "workload=tiny", "workload.read_threads=2", "workload.shuffle=sample", "repeat=1"),
     "b243b7c77dbe07fbefee", "36a3533ed1fbfbf98e89"),
]


@pytest.mark.parametrize(("overrides", "dataset_key", "point_key"), GOLDEN)
@pytest.mark.parametrize("objective", ["auto", "bandwidth_mib_s", "samples_per_s", "au"])
def test_point_keys_are_unchanged_whatever_the_objective(tmp_path, overrides, dataset_key, point_key, objective):
    s = spec(tmp_path, *overrides, f"objective={objective}")
    # the keys hash data_root and, on Lustre only, the striping: pin what depends on this machine
    s = dataclasses.replace(s, data_root="/ddlio/data", db="/ddlio/r.db",
                            layout=dataclasses.replace(s.layout, fs_type="ext4", striping_applicable=False))
    assert (s.dataset_key, s.point_key) == (dataset_key, point_key)


def test_an_unknown_objective_names_the_choices(sweep, tmp_path):
    p = sweep("objective=speed", timeout=120)
    assert p.returncode == 2, p.stdout + p.stderr
    assert "objective='speed' is unknown: choose one of auto, bandwidth_mib_s, samples_per_s, au, iops" in p.stderr
    assert "Traceback" not in p.stdout + p.stderr
    assert not (tmp_path / "r.db").exists()


#: a workload whose timed I/O is long enough to be recommended from (512 MiB: 0.2-0.9 s cold here, over
#: ddlio.evidence.MIN_IO_S): "best" leaves out points measured for less (workload=tiny's 1 MiB, a few ms)
MEASURABLE = ("workload=tiny", "workload.samples=512", "workload.sample_size=1MiB", "workload.samples_per_file=32")


def _completed(db) -> list[tuple]:
    with sqlite3.connect(db) as c:
        return c.execute("SELECT format, status FROM points ORDER BY format").fetchall()


def test_a_grid_prints_its_best_point_and_a_rerun_answers_from_the_store(sweep, tmp_path):
    args = ("-m", "format=hdf5,npz", *MEASURABLE, "workload.epochs=1", "repeat=0,1")
    p = sweep(*args, "objective=samples_per_s")
    assert p.returncode == 0, p.stdout + p.stderr
    assert _completed(tmp_path / "r.db") == [("hdf5", "completed")] * 2 + [("npz", "completed")] * 2
    # two configurations of two repetitions each; the best by the mean of its repetitions, not its luckiest run
    best = re.search(r"best of 2 configurations by samples_per_s \(maximised\): (\S+) = mean of 2 repetitions, "
                     r"95% bootstrap interval \[\S+, \S+\]\n  format=(\w+) ", p.stdout)
    assert best, p.stdout
    with sqlite3.connect(tmp_path / "r.db") as c:
        top = c.execute("SELECT format, AVG(samples_per_s) AS m FROM points GROUP BY format ORDER BY m DESC").fetchone()
    assert best.group(2) == top[0] and float(best.group(1)) == pytest.approx(top[1], rel=1e-3)
    assert "repeat=" not in best.group(0)

    again = sweep(*args, "objective=samples_per_s")
    assert again.returncode == 0 and "4 of 4 points already measured: skipped" in again.stdout
    assert "[1/" not in again.stdout and best.group(0) in again.stdout  # the same answer, from the store


def test_a_failed_point_makes_the_status_1_and_the_grid_goes_on(sweep, tmp_path):
    p = sweep("-m", "workload=tiny", "workload.epochs=1", "cluster.launch='/bin/false -n 1','mpiexec -n 1'",
              timeout=300)
    assert p.returncode == 1, p.stdout + p.stderr
    assert "1 point(s) failed" in p.stderr and "Traceback" not in p.stdout + p.stderr
    with sqlite3.connect(tmp_path / "r.db") as c:
        assert sorted(r[0] for r in c.execute("SELECT status FROM points")) == ["completed", "failed"]


def test_a_bad_value_in_any_point_stops_the_batch_before_anything_runs(sweep, tmp_path):
    p = sweep("-m", "format=hdf5,npz", "workload.read_threads=1,-1", "workload=tiny", timeout=120)
    assert p.returncode == 2, p.stdout + p.stderr
    assert p.stderr.count("workload.read_threads=-1 is out of range") == 1
    assert re.search(r"\[in: format=hdf5 workload.read_threads=-1 [^;]*; format=npz workload.read_threads=-1 ",
                     p.stderr)
    assert not (tmp_path / "r.db").exists() and not (tmp_path / "data").exists()


def test_another_launcher_runs_each_point_as_a_batch_of_one(sweep, tmp_path):
    # Hydra's basic launcher calls the task once per point: the task measures it through the same path
    p = sweep("-m", "hydra/launcher=basic", "format=hdf5,npz", "workload=tiny", "workload.epochs=1")
    assert p.returncode == 0, p.stdout + p.stderr
    assert p.stdout.count("ddlio: 1 point ->") == 2
    assert _completed(tmp_path / "r.db") == [("hdf5", "completed"), ("npz", "completed")]


# ------------------------------------------------------------------------------------------ adaptive search
OPTUNA = ("-m", "hydra/sweeper=optuna", "hydra.sweeper.n_trials=6", "hydra.sweeper.sampler.seed=7",
          "format=choice(hdf5,tfrecord,npz)", "workload.read_threads=range(0,3)", *MEASURABLE, "workload.epochs=1")


@pytest.fixture
def optuna_installed() -> None:
    pytest.importorskip("hydra_plugins.hydra_optuna_sweeper", reason="pip install -e '.[tune]'")


def test_optuna_searches_through_the_launcher_and_a_rerun_measures_nothing(sweep, tmp_path, optuna_installed):
    p = sweep(*OPTUNA, timeout=600)
    assert p.returncode == 0, p.stdout + p.stderr
    with sqlite3.connect(tmp_path / "r.db") as c:
        rows = c.execute("SELECT point_key, status, bandwidth_mib_s, config FROM points").fetchall()
        best = c.execute("SELECT format, bandwidth_mib_s FROM points ORDER BY bandwidth_mib_s DESC").fetchone()
    assert 1 <= len(rows) <= 6 and {r[1] for r in rows} == {"completed"}
    assert len(re.findall(r"^\[\d/\d\] \w+/shared", p.stdout, re.M)) == len(rows)  # each measured once
    m = re.search(rf"best of {len(rows)} configurations by bandwidth_mib_s \(maximised\): (\S+) = mean of 1 "
                  r"repetition .*\n"
                  r"  format=(\w+) workload.read_threads=(\d)", p.stdout)
    assert m, p.stdout
    assert m.group(2) == best[0] and float(m.group(1)) == pytest.approx(best[1], rel=1e-3)
    assert "Traceback" not in p.stderr and "A new study created" not in p.stderr

    again = sweep(*OPTUNA, timeout=600)
    assert again.returncode == 0, again.stdout + again.stderr
    assert "[1/" not in again.stdout  # every trial answered from the store
    assert "2 of 2 points already measured: skipped" in again.stdout
    assert m.group(0) in again.stdout
    with sqlite3.connect(tmp_path / "r.db") as c:
        assert c.execute("SELECT count(*) FROM points").fetchone() == (len(rows),)


def test_a_failed_trial_does_not_stop_the_search(sweep, tmp_path, optuna_installed):
    # /bin/false in place of mpiexec fails the point; seed 8 proposes it first, then mpiexec three times
    p = sweep("-m", "hydra/sweeper=optuna", "hydra.sweeper.n_trials=4", "hydra.sweeper.n_jobs=1",
              "hydra.sweeper.sampler.seed=8", "cluster.launch=choice('mpiexec -n 1','/bin/false -n 1')",
              "workload=tiny", "workload.epochs=1", timeout=600)
    with sqlite3.connect(tmp_path / "r.db") as c:
        rows = sorted(c.execute("SELECT status, attempts FROM points").fetchall())
    assert rows == [("completed", 1), ("failed", 1)], p.stdout + p.stderr  # measured once each, not retried
    assert p.stdout.count("[1/1] hdf5/shared 1N-1P-1OST: FAILED: LaunchError") == 1
    assert p.stdout.count("ddlio: 1 point ->") == 2 and "already tried in this run" in p.stdout
    assert p.returncode == 1 and "1 point(s) failed" in p.stderr  # the search went on to its end
    assert "best of 1 configurations" not in p.stdout and "Traceback" not in p.stdout + p.stderr
    assert "Traceback" not in p.stdout + p.stderr


def test_a_search_whose_every_trial_fails_says_so_in_one_line(sweep, tmp_path, optuna_installed):
    p = sweep("-m", "hydra/sweeper=optuna", "hydra.sweeper.n_trials=2", "hydra.sweeper.n_jobs=1",
              "format=choice(hdf5,npz)", "cluster.launch=/bin/false", "workload=tiny", timeout=300)
    assert p.returncode == 1, p.stdout + p.stderr
    assert "error: every trial of the search failed, so there is no best configuration" in p.stderr
    assert "Traceback" not in p.stdout + p.stderr and "No trials are completed" not in p.stderr


def test_a_dry_run_of_a_search_shows_its_first_batch(sweep, tmp_path, optuna_installed):
    p = sweep("-m", "hydra/sweeper=optuna", "hydra.sweeper.n_trials=6", "format=choice(hdf5,npz)", "workload=tiny",
              "dry_run=true", timeout=300)
    assert p.returncode == 0, p.stdout + p.stderr
    assert p.stdout.count("dry run: 2 point(s)") + p.stdout.count("dry run: 1 point(s)") == 1
    assert "its first batch is all a dry run can show" in p.stdout and "Traceback" not in p.stderr
    assert not (tmp_path / "r.db").exists() and not (tmp_path / "data").exists()


def test_bad_input_in_a_search_is_one_message(sweep, tmp_path, optuna_installed):
    p = sweep("-m", "hydra/sweeper=optuna", "hydra.sweeper.n_trials=2", "format=choice(hdf5,npz)", "stripe=-5",
              "workload=tiny", timeout=300)
    assert p.returncode == 2, p.stdout + p.stderr
    assert "stripe=-5 is not a Lustre stripe count" in p.stderr and "Traceback" not in p.stderr
    assert not (tmp_path / "r.db").exists() and not (tmp_path / "data").exists()


@pytest.mark.slurm
def test_each_batch_of_trials_is_one_slurm_array(slurm_cluster, sweep, tmp_path, optuna_installed):
    p = sweep("-m", "hydra/sweeper=optuna", "hydra.sweeper.n_trials=4", "hydra.sweeper.n_jobs=2",
              "hydra.sweeper.sampler.seed=7", "format=choice(hdf5,npz)", "workload.read_threads=range(0,2)",
              "cluster=slurm", *MEASURABLE, "workload.epochs=1", timeout=900)
    assert p.returncode == 0, p.stdout + p.stderr
    with sqlite3.connect(tmp_path / "r.db") as c:
        jobs = [r[0] for r in c.execute("SELECT job_id FROM points WHERE status = 'completed'")]
    assert 1 <= len(jobs) <= 4
    arrays: dict[str, list[str]] = {}
    for j in jobs:
        array, _, task = j.partition("_")
        arrays.setdefault(array, []).append(task)
    # one submission per batch of 2 trials (2 batches): two new points share an array (123_0, 123_1), one alone
    # is a plain job
    assert len(arrays) <= 2 and all(len(t) <= 2 for t in arrays.values()), jobs
    assert len(jobs) - len(arrays) == sum(len(t) == 2 for t in arrays.values()), jobs
    assert all(t == [""] or sorted(t) == ["0", "1"] for t in arrays.values()), jobs
    assert re.search(r"best of \d configurations by bandwidth_mib_s", p.stdout)


def test_a_callback_of_the_users_sees_every_point_composed_as_hydra_composes_it(sweep, tmp_path):
    """With a callback other than ddlio's, the launcher composes each point whole: the callback reads each job's
    config and its JobReturn's cfg as Hydra's launcher would give them; the points and keys are those planned
    without it."""
    (tmp_path / "seen_cb.py").write_text(
        "import json\n"
        "from hydra.experimental.callback import Callback\n"
        "class Seen(Callback):\n"
        "    def on_job_end(self, config, job_return, **kw):\n"
        "        with open(" + repr(str(tmp_path / "seen.jsonl")) + ", 'a') as f:\n"
        "            f.write(json.dumps([config.format.name, job_return.cfg.repeat, 'hydra' in job_return.cfg,\n"
        "                                list(job_return.hydra_cfg.hydra.overrides.task)]) + '\\n')\n")
    args = ["-m", "format=hdf5,npz", "repeat=0,1", "workload=tiny", "dry_run=true"]
    plain = sweep(*args)
    seen = sweep(*args, "+hydra.callbacks.seen._target_=seen_cb.Seen", PYTHONPATH=f"{tmp_path}{os.pathsep}{ROOT}")
    assert plain.returncode == seen.returncode == 0, seen.stderr
    keys = sorted(re.findall(r"key ([0-9a-f]{20})", plain.stdout))
    assert len(keys) == 4 and sorted(re.findall(r"key ([0-9a-f]{20})", seen.stdout)) == keys
    rows = [json.loads(line) for line in (tmp_path / "seen.jsonl").read_text().splitlines()]
    assert sorted((f, r, h) for f, r, h, _ in rows) == [("hdf5", 0, False), ("hdf5", 1, False), ("npz", 0, False),
                                                        ("npz", 1, False)]
    assert all(f"format={f}" in task and f"repeat={r}" in task for f, r, _, task in rows)
