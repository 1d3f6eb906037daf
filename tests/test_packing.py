"""Several points per Slurm array task (cluster.points_per_task): how many, the task's time limit, the task's loop
(a failing point does not sink the others, an interrupted one ends the task), keys unchanged by the knob, and the
store's batched claims and submissions. No Slurm needed (tests/test_slurm_packing.py runs it on the cluster)."""

from __future__ import annotations

import dataclasses

from ddlio.records import FailureRecord
from ddlio.store import open_store_for_writing
from experiments.executors.base import run_pack
from experiments.executors.slurm import executor_parameters
from experiments.executors.slurm.packing import MAX_AUTO, packs, points_per_task
from helpers import point


def test_auto_packs_only_sweeps_big_enough_to_gain(tmp_path):
    spec = point(tmp_path, "cluster=slurm", "cluster.array_parallelism=8", "cluster.timeout_min=30")
    assert points_per_task([spec] * 4) == 1  # a few points: one per task, as before
    assert points_per_task([spec] * 100) == 3  # 8 slots x 4 rounds
    assert points_per_task([spec] * 1000) == MAX_AUTO
    assert points_per_task([spec] * 1000, max_time_min=60) == 2  # the partition's MaxTime bounds the task
    long = dataclasses.replace(spec, cluster=dataclasses.replace(spec.cluster, timeout_min=240.0))
    assert points_per_task([long] * 1000) == 2  # a task asks for at most 8 h


def test_a_set_points_per_task_is_kept_within_the_sweep_and_maxtime(tmp_path):
    spec = point(tmp_path, "cluster=slurm", "cluster.points_per_task=5", "cluster.timeout_min=10")
    assert points_per_task([spec] * 3) == 3
    assert points_per_task([spec] * 50) == 5
    assert points_per_task([spec] * 50, max_time_min=30) == 3
    assert executor_parameters(spec, 5)["time"] == 50  # each point keeps its own limit inside the task
    assert executor_parameters(spec)["time"] == 10
    assert [list(r) for r in packs(5, 2)] == [[0, 1], [2, 3], [4]]


def test_points_per_task_enters_no_key(tmp_path):
    a = point(tmp_path, "cluster=slurm")
    b = point(tmp_path, "cluster=slurm", "cluster.points_per_task=7")
    assert (a.point_key, a.dataset_key) == (b.point_key, b.dataset_key)


def test_the_local_executor_refuses_points_per_task(sweep):
    p = sweep("cluster.points_per_task=3", "dry_run=true")
    assert p.returncode == 2 and "cluster.points_per_task=3 applies to Slurm only" in p.stderr
    p = sweep("-m", "cluster=slurm", "cluster.points_per_task=-1", "dry_run=true")
    assert p.returncode == 2 and "cluster.points_per_task=-1" in p.stderr


def test_a_task_runs_every_point_even_after_a_failure_and_stops_when_interrupted(tmp_path):
    spec = point(tmp_path)
    ran: list[str] = []

    def job(p: dict, run_dir: str) -> FailureRecord:
        ran.append(run_dir)
        state = "INTERRUPTED" if run_dir == "c" else "FAILED"
        return FailureRecord.of(p, f"failed {run_dir}", job_state=state, run_dir=run_dir)

    items = [(spec.to_dict(), d) for d in ("a", "b", "c", "d")]
    out = run_pack(job, items)
    assert ran == ["a", "b", "c"]  # b ran after a failed; d was never started after c was interrupted
    assert [r.run_dir for r in out] == ["a", "b", "c"]


def test_batched_claims_submissions_and_releases(tmp_path):
    specs = [point(tmp_path, f"repeat={i}") for i in range(3)]
    store = open_store_for_writing(str(tmp_path / "r.db"))
    assert store.claim(specs[0].to_dict(), "other", "h", 1)
    got = store.claim_many([s.to_dict() for s in specs], "me", "h", 2)
    assert got == {specs[1].point_key, specs[2].point_key}  # the first is another driver's
    assert store.lookup(specs[0].point_key)["claim_token"] == "other"
    store.record_submitted_many([(s.to_dict(), f"7_{i}", f"/runs/{i}") for i, s in enumerate(specs[1:])])
    rows = store.lookup_many([s.point_key for s in specs])
    assert [rows[s.point_key]["job_id"] for s in specs[1:]] == ["7_0", "7_1"]
    assert all(rows[s.point_key]["pending"] and rows[s.point_key]["attempts"] == 1 for s in specs[1:])
    store.release_many("me", [s.point_key for s in specs])
    rows = store.lookup_many([s.point_key for s in specs])
    assert [rows[s.point_key]["claim_token"] for s in specs] == ["other", None, None]
    fails = [FailureRecord.of(s.to_dict(), "boom", run_dir=f"/runs/{i}").to_dict() for i, s in enumerate(specs)]
    assert store.record_many(fails) == [True, True, True]
    assert store.record_many(fails) == [False, False, False]  # stored once
    assert {r["status"] for r in store.lookup_many([s.point_key for s in specs]).values()} == {"failed"}


def test_progress_counts_a_packed_task_as_one_running_point(tmp_path):
    """The points of a running array task are measured one at a time: one counts as running, the others as next
    in their task; queued ones stay queued."""
    from types import SimpleNamespace

    from experiments.executors.base import Pending
    from experiments.executors.slurm.wait import progress

    spec = point(tmp_path, "cluster=slurm")
    live = [Pending(spec, "7_0", tmp_path, state="RUNNING"), Pending(spec, "7_0", tmp_path, state="RUNNING"),
            Pending(spec, "7_0", tmp_path, state="RUNNING"), Pending(spec, "7_1", tmp_path, state="RUNNING"),
            Pending(spec, "7_2", tmp_path, state="PENDING", reason="JobArrayTaskLimit")]
    host = SimpleNamespace(report=SimpleNamespace(completed=4, failed=0))
    line = progress(live, [], "", host, now=10.0)
    assert line.startswith("2 running, 2 next in a running task, 1 queued (1 JobArrayTaskLimit: waits"), line
    assert line.endswith("4 done, 0 failed")
    assert progress(live[3:], [], "", host, now=10.0).startswith("1 running, 1 queued")
