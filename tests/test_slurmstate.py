"""Reading Slurm: job states from squeue and sacct (array notation, suffixes, requeue, preemption, node failure,
timeout, cancellation), the pending-reason table, partitions and limits. The outputs are real: captured from the
one-box test cluster by tests/fixtures/slurm/capture.sh (see the README there). No Slurm needed to run these."""

from __future__ import annotations

import subprocess
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from ddlio.jobstates import (
    HELD,
    LIMIT,
    NEVER,
    RUNNING,
    STARTING,
    STATES,
    TERMINAL,
    VANISHED,
    WAITING,
    WAITS,
    JobState,
    JobWatcher,
    Kind,
    expand_job_id,
    normalize_state,
    parse_sacct,
    parse_squeue,
    reason_kind,
    state_kind,
)
from experiments.config import SlurmCluster
from experiments.executors.slurm import (
    SiteInfo,
    is_submit_limit,
    max_array_size,
    parse_config,
    parse_limits,
    parse_minutes,
    parse_partitions,
    point_problems,
    unrunnable,
)

FIX = Path(__file__).resolve().parent / "fixtures" / "slurm"


def text(name: str) -> str:
    return (FIX / name).read_text()


@pytest.fixture(scope="module")
def jobs() -> dict[str, str]:
    """What each captured job was made to do -> its id (tests/fixtures/slurm/jobs.txt)."""
    return dict(line.split() for line in text("jobs.txt").splitlines() if line.strip())


@pytest.mark.parametrize(("field", "ids"), [
    ("123", ["123"]),
    ("123_7", ["123_7"]),
    ("123_[1,3-5]", ["123_1", "123_3", "123_4", "123_5"]),
    ("123_[2-4%1]", ["123_2", "123_3", "123_4"]),
    ("123.batch", ["123"]),
    ("123_[0-8:4]", ["123_0", "123_4", "123_8"]),
])
def test_array_notation_expands_to_tasks(field, ids):
    assert expand_job_id(field) == ids


def test_a_wide_throttled_range_expands_to_each_task():
    ids = expand_job_id("123_[4-35%4]")
    assert len(ids) == 32 and ids[0] == "123_4" and ids[-1] == "123_35"


@pytest.mark.parametrize(("raw", "state"), [("CANCELLED by 0", "CANCELLED"), ("COMPLETED+", "COMPLETED"),
                                            ("RUNNING", "RUNNING"), ("  NODE_FAIL ", "NODE_FAIL")])
def test_states_lose_their_suffixes(raw, state):
    assert normalize_state(raw) == state


def test_squeue_lists_a_throttled_array_as_one_line_and_each_task_is_pending(jobs):
    a = jobs["array"]
    compact = parse_squeue(text("squeue-live.txt"))
    assert {compact[f"{a}_{i}"] for i in (2, 3, 4)} == {JobState("PENDING", "JobArrayTaskLimit", "squeue")}
    assert compact[f"{a}_1"].state == "RUNNING"
    assert compact[jobs["running"]].state == "RUNNING"
    assert compact[jobs["never"]] == JobState("PENDING", "PartitionNodeLimit", "squeue")
    # squeue -r (one line per task) says the same
    per_task = parse_squeue(text("squeue-live-r.txt"))
    assert {k: v for k, v in per_task.items() if k in compact} == compact


def test_sacct_final_states_of_every_kind_of_job(jobs):
    got = {k: v.state for k, v in parse_sacct(text("sacct-final.txt")).items()}
    assert got[jobs["completed"]] == "COMPLETED"
    assert got[jobs["failed"]] == "FAILED"
    assert got[jobs["cancelled"]] == "CANCELLED"  # "CANCELLED by 0"
    assert got[jobs["preempted"]] == "PREEMPTED"
    assert got[jobs["nodefail"]] == "NODE_FAIL"
    assert got[jobs["timeout"]] == "TIMEOUT"
    assert got[jobs["requeued"]] == "CANCELLED"  # requeued, then cancelled while it waited again
    assert {got[f"{jobs['array']}_{i}"] for i in (1, 2, 3, 4)} == {"CANCELLED"}  # tasks 2-4 as one range line


def test_a_requeued_job_waits_again_and_sacct_keeps_its_earlier_record(jobs):
    rq = jobs["requeued"]
    assert parse_squeue(text("squeue-live.txt"))[rq] == JobState("PENDING", "BeginTime", "squeue")
    assert parse_sacct(text("sacct-live.txt"))[rq].state == "PENDING"
    first, last = text("sacct-requeued-duplicates.txt").splitlines()  # sacct -D: every record of the job
    assert parse_sacct(first)[rq].state == "REQUEUED" and parse_sacct(last)[rq].state == "CANCELLED"
    assert parse_sacct(first + "\n" + last)[rq].state == "CANCELLED"  # the newer record wins


def test_a_task_of_its_own_line_beats_a_range_that_names_it():
    got = parse_sacct("7_1|COMPLETED|0:0|None\n7_[1-3%1]|PENDING|0:0|JobArrayTaskLimit\n")
    assert got["7_1"].state == "COMPLETED" and got["7_3"] == JobState("PENDING", "JobArrayTaskLimit", "sacct")


@pytest.mark.parametrize(("reason", "kind"), [
    ("Priority", WAITS), ("Resources", WAITS), ("JobArrayTaskLimit", WAITS), ("BeginTime", WAITS),
    ("ReqNodeNotAvail, UnavailableNodes:n2", WAITS), ("SomethingSlurmAddsLater", WAITS),
    ("QOSMaxJobsPerUserLimit", LIMIT), ("AssocMaxJobsLimit", LIMIT), ("AssocGrpCpuLimit", LIMIT),
    ("QOSMaxSubmitJobPerUserLimit", LIMIT),
    ("PartitionNodeLimit", NEVER), ("PartitionTimeLimit", NEVER), ("AssocMaxNodesPerJobLimit", NEVER),
    ("QOSMaxNodePerJobLimit", NEVER), ("QOSMaxCpuPerJobLimit", NEVER), ("InvalidAccount", NEVER),
    ("InvalidQOS", NEVER), ("QOSMaxWallDurationPerJobLimit", NEVER),
    ("JobHeldUser", HELD), ("JobHeldAdmin", HELD),
])
def test_one_table_says_what_a_pending_reason_means(reason, kind):
    assert reason_kind(reason) == kind


def test_captured_pending_reasons_are_classified(jobs):
    got = parse_squeue(text("squeue-live.txt"))
    assert got[f"{jobs['array']}_2"].kind == WAITS
    assert got[jobs["never"]].kind == NEVER
    assert got[jobs["running"]].kind == ""  # not pending


# ------------------------------------------------------------------------------ the one table of job states
#: every job state squeue/sacct print (squeue(1), JOB STATE CODES) and its kind: a new state is a line here and
#: one in ddlio.jobstates.STATES
SLURM_STATES = {
    "PENDING": Kind.WAITING, "REQUEUED": Kind.WAITING, "REQUEUE_HOLD": Kind.WAITING, "REQUEUE_FED": Kind.WAITING,
    "RESV_DEL_HOLD": Kind.WAITING, "RESIZING": Kind.WAITING, "SUSPENDED": Kind.WAITING,
    "CONFIGURING": Kind.STARTING,
    "RUNNING": Kind.RUNNING, "STOPPED": Kind.RUNNING, "SIGNALING": Kind.RUNNING, "STAGE_OUT": Kind.RUNNING,
    "COMPLETING": Kind.RUNNING,
    "COMPLETED": Kind.TERMINAL, "FAILED": Kind.TERMINAL, "TIMEOUT": Kind.TERMINAL, "CANCELLED": Kind.TERMINAL,
    "PREEMPTED": Kind.TERMINAL, "NODE_FAIL": Kind.TERMINAL, "OUT_OF_MEMORY": Kind.TERMINAL,
    "BOOT_FAIL": Kind.TERMINAL, "DEADLINE": Kind.TERMINAL, "REVOKED": Kind.TERMINAL, "SPECIAL_EXIT": Kind.TERMINAL,
}


def test_every_slurm_state_has_exactly_one_kind():
    assert STATES == SLURM_STATES
    assert all(isinstance(k, Kind) for k in STATES.values())
    for state in STATES:
        lists = [name for name, states in (("TERMINAL", TERMINAL), ("STARTING", STARTING), ("RUNNING", RUNNING),
                                           ("WAITING", WAITING - STARTING)) if state in states]
        assert len(lists) == 1, (state, lists)
        assert state_kind(state) is STATES[state]
    assert set(STATES) == TERMINAL | WAITING | RUNNING
    assert STARTING <= WAITING and sorted(STARTING) == ["CONFIGURING"]  # not started yet: counted once, as waiting
    assert state_kind(VANISHED) is None and state_kind("UNKNOWN") is None  # ddlio's own words, not Slurm's


def test_every_captured_state_is_in_the_table():
    seen = set()
    for name in ("squeue-live.txt", "squeue-live-r.txt", "squeue-final.txt"):
        seen |= {js.state for js in parse_squeue(text(name)).values()}
    for name in ("sacct-live.txt", "sacct-final.txt", "sacct-requeued-duplicates.txt"):
        seen |= {js.state for js in parse_sacct(text(name)).values()}
    assert seen and seen <= set(STATES)


def test_a_starting_job_has_no_pending_reason_kind_but_waits():
    assert JobState("CONFIGURING").kind == WAITS
    assert JobState("RUNNING").kind == "" and JobState("COMPLETED").kind == ""


# --------------------------------------------------------------------------------- the watcher, over time
class FakeSlurm:
    """A fake at the process boundary: answers squeue/sacct argv with captured outputs and counts the calls."""

    def __init__(self, squeue: str, sacct: str, squeue_rc: int = 0, squeue_err: str = "") -> None:
        self.squeue, self.sacct, self.squeue_rc, self.squeue_err = squeue, sacct, squeue_rc, squeue_err
        self.argvs: list[list[str]] = []

    def __call__(self, argv: list[str], timeout_s: float) -> subprocess.CompletedProcess[str]:
        self.argvs.append(argv)
        if argv[0] == "squeue":
            return subprocess.CompletedProcess(argv, self.squeue_rc, self.squeue, self.squeue_err)
        if "--array" in argv:  # Slurm 22.05's sacct, as captured: it has no --array
            return subprocess.CompletedProcess(argv, 1, "", "sacct: unrecognized option '--array'\n")
        return subprocess.CompletedProcess(argv, 0, self.sacct, "")


class Clock:
    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t


def test_a_throttled_task_stays_pending_however_long_it_waits(jobs):
    clock, slurm = Clock(), FakeSlurm(text("squeue-live.txt"), text("sacct-live.txt"))
    w = JobWatcher(vanish_after_s=120, run=slurm, clock=clock)
    task = f"{jobs['array']}_4"
    for hour in range(5):
        clock.t = hour * 3600.0
        assert w.poll([task, jobs["running"]])[task] == JobState("PENDING", "JobArrayTaskLimit", "squeue")


def test_gone_needs_both_sources_to_deny_for_the_window(jobs):
    clock = Clock()
    slurm = FakeSlurm("", "")  # squeue and sacct both answer, without the job
    w = JobWatcher(vanish_after_s=120, run=slurm, clock=clock)
    w.last["42"] = JobState("RUNNING", "", "squeue")
    assert w.poll(["42"])["42"].state == "RUNNING"  # denied since now: it keeps its last state
    clock.t = 119.0
    assert w.poll(["42"])["42"].state == "RUNNING"
    clock.t = 120.0
    assert w.poll(["42"])["42"].state == VANISHED


def test_sacct_alone_keeps_an_ended_job_known(jobs):
    clock, slurm = Clock(), FakeSlurm("", text("sacct-final.txt"))
    w = JobWatcher(vanish_after_s=1, run=slurm, clock=clock)
    clock.t = 1000.0
    assert w.poll([jobs["timeout"]])[jobs["timeout"]] == JobState("TIMEOUT", "", "sacct")


def test_a_source_that_fails_denies_nothing():
    clock = Clock()
    w = JobWatcher(vanish_after_s=10, run=FakeSlurm("", "", squeue_rc=1, squeue_err="slurm_load_jobs error: "
                                                    "Socket timed out on send/recv operation"), clock=clock)
    for t in (0.0, 100.0, 1000.0):
        clock.t = t
        assert w.poll(["42"])["42"].state == "UNKNOWN"


def test_squeue_refusing_one_unknown_id_is_an_answer_that_denies_it():
    err = text("squeue-unknown.txt").splitlines()[0]  # captured: squeue -j <one unknown id> exits 1
    clock = Clock()
    w = JobWatcher(vanish_after_s=10, run=FakeSlurm("", "", squeue_rc=1, squeue_err=err), clock=clock)
    w.poll(["42"])
    clock.t = 10.0
    assert w.poll(["42"])["42"].state == VANISHED


def test_a_requeued_record_sacct_keeps_for_a_job_squeue_dropped_is_gone_after_the_window(jobs):
    clock = Clock()
    slurm = FakeSlurm("", text("sacct-requeued-duplicates.txt").splitlines()[0])  # sacct stuck at REQUEUED
    w = JobWatcher(vanish_after_s=60, run=slurm, clock=clock)
    rq = jobs["requeued"]
    assert w.poll([rq])[rq].state == "REQUEUED"
    clock.t = 60.0
    assert w.poll([rq])[rq].state == VANISHED


def test_calls_are_bounded_per_poll_whatever_the_number_of_jobs(jobs):
    slurm = FakeSlurm(text("squeue-live.txt"), text("sacct-final.txt"))
    w = JobWatcher(run=slurm, clock=Clock())
    ids = [f"{jobs['array']}_{i}" for i in range(1, 5)] + [jobs[k] for k in ("completed", "failed", "timeout")]
    w.poll(ids)  # the first poll learns that this sacct has no --array: one extra call, once
    n = len(slurm.argvs)
    for _ in range(3):
        w.poll(ids)
    assert len(slurm.argvs) - n == 3 * 2  # one squeue and one sacct per poll
    ended = ",".join(sorted(jobs[k] for k in ("completed", "failed", "timeout")))
    for a in slurm.argvs[n:]:  # squeue is asked about every job; sacct only about those squeue no longer lists
        assert a[-1] == (",".join(sorted({i.split("_")[0] for i in ids})) if a[0] == "squeue" else ended)


# ------------------------------------------------------------------------------------ partitions and limits
@pytest.mark.parametrize(("raw", "minutes"), [("5", 5.0), ("UNLIMITED", None), ("30:00", 30.0), ("1:00:00", 60.0),
                                              ("2-00:00:00", 2880.0), ("1-12", 2160.0), ("", None)])
def test_slurm_time_limits_in_minutes(raw, minutes):
    assert parse_minutes(raw) == minutes


def test_partitions_as_the_cluster_reports_them():
    parts = parse_partitions(text("scontrol-show-partition.txt"), text("sinfo-nodes.txt"))
    debug, short = parts["debug"], parts["short"]
    assert debug.default and not short.default
    assert (debug.total_nodes, debug.cpus_per_node, debug.max_time_min, debug.state) == (2, (4, 4), None, "UP")
    assert short.max_time_min == 5.0 and short.max_nodes is None


def test_max_array_size_from_the_configuration():
    config = parse_config(text("scontrol-show-config.txt"))
    assert max_array_size(config) == 1001
    assert config["AccountingStorageEnforce"] == "associations,limits,qos"
    assert max_array_size({}) == 1001


def test_sbatch_refusal_for_a_submit_limit_is_recognised():
    assert is_submit_limit(text("sbatch-refused-maxsubmit.txt"))
    assert not is_submit_limit("sbatch: error: Batch job submission failed: Invalid account or account/partition "
                               "combination specified")


def point(nodes: int = 1, ppn: int = 1, **cluster: Any) -> SimpleNamespace:
    c = SlurmCluster(name="slurm", launch="srun -n {ranks}", **cluster)
    return SimpleNamespace(nodes=nodes, ppn=ppn, cluster=c, overrides=(f"nodes={nodes}", f"ppn={ppn}"), label="p")


@pytest.fixture(scope="module")
def site() -> SiteInfo:
    return SiteInfo(parse_partitions(text("scontrol-show-partition.txt"), text("sinfo-nodes.txt")),
                    parse_config(text("scontrol-show-config.txt")),
                    parse_limits(text("sacctmgr-assoc.txt"), text("sacctmgr-qos.txt"), "root"))


def test_a_point_that_fits_has_no_problem(site):
    assert point_problems(point(2, 4), site) == []


@pytest.mark.parametrize(("spec", "message"), [
    (point(nodes=4), "nodes=4 but partition debug has 2 nodes"),
    (point(ppn=8), "ppn=8 (1 CPU per rank) but the nodes of partition debug have at most 4 CPUs"),
    (point(partition="short", timeout_min=10), "cluster.timeout_min=10 but partition short allows at most 5 min"),
    (point(partition="nope"), "partition nope does not exist (partitions: debug, short, urgent)"),
    (point(account="nobody"), "account=nobody but user"),
    (point(account="ddlio_capture", nodes=2), "nodes=2 but account ddlio_capture allows 1 per job"),
    (point(account="ddlio_capture", timeout_min=20), "but account ddlio_capture allows at most 10 min (MaxWall)"),
    (point(qos="ddlio_capture_q", nodes=2), "but account root may use only: normal"),
])
def test_a_point_that_can_never_start_is_named_with_its_request_and_the_limit(site, spec, message):
    assert any(message in p for p in point_problems(spec, site)), point_problems(spec, site)


def test_a_constraint_no_node_has(site):
    assert point_problems(point(constraint="gpu"), site) == [
        "constraint=gpu but no node(s) of partition debug have gpu (features: none)"]
    assert point_problems(point(constraint="gpu|fat"), site) == []  # Slurm's own syntax beyond AND: not judged


def test_qos_per_job_limits(site):
    spec = point(account="ddlio_capture", qos="ddlio_capture_q", nodes=2, timeout_min=3)
    assert any("QOS ddlio_capture_q allows 1 per job" in p for p in point_problems(spec, site))


def test_unrunnable_lists_each_problem_once_with_its_points(site):
    lines = unrunnable([point(nodes=4), point(nodes=4, ppn=2), point(nodes=1)], site)
    assert lines == ["nodes=4 but partition debug has 2 nodes  [points: nodes=4 ppn=1; nodes=4 ppn=2]"]


def test_a_multi_node_point_on_a_node_local_data_root_is_refused(tmp_path):
    import socket

    from lustre import fs_info

    scontrol = "PartitionName=debug Default=YES State=UP TotalNodes=2 MaxNodes=UNLIMITED MaxTime=UNLIMITED"
    here = socket.gethostname()

    def problems(hosts: tuple[str, str], nodes: int) -> list[str]:
        sinfo = "".join(f"n{i}|debug*|4|idle|(null)|{h}\n" for i, h in enumerate(hosts, 1))
        spec = point(nodes=nodes)
        spec.data_root = str(tmp_path / "data")
        return point_problems(spec, SiteInfo(parse_partitions(scontrol, sinfo), {}, None))

    fs = fs_info(tmp_path)
    if fs.type not in ("ext4", "xfs", "btrfs", "tmpfs", "overlay"):
        pytest.skip(f"tmp_path is on {fs.type}")
    said = problems(("node-a.example", "node-b.example"), 2)
    assert said == [f"nodes=2 but data_root={tmp_path / 'data'} is on {fs.type} at {fs.mount_point}, local to this "
                    "node: the other nodes cannot read it (put data_root on a file system every node mounts: "
                    "Lustre, CephFS, GPFS, NFS)"]
    assert problems(("node-a.example", "node-b.example"), 1) == []  # one node reads its own disk
    assert problems((here, here), 2) == []  # every node is this host (a one-box cluster): the disk is shared
