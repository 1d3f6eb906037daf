"""The local executor starts each point's job process itself (no submitit controller): the job id is the job
process's PID, its logs and result carry submitit's names, and the driver keeps the backstop time limit."""

from __future__ import annotations

import contextlib
import os
import signal
import sqlite3
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from conftest import ROOT
from ddlio.records import FailureRecord, Record
from experiments.executors import local
from experiments.executors.local import LocalExecutor, local_job_alive, start_task, task_env
from helpers import point


def _tree(root: int) -> list[int]:
    """``root``'s descendants, from /proc."""
    children: dict[int, list[int]] = {}
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            with contextlib.suppress(OSError, ValueError, IndexError):
                ppid = int((d / "stat").read_text().rsplit(")", 1)[1].split()[1])
                children.setdefault(ppid, []).append(int(d.name))
    out, todo = [], [root]
    while todo:
        pid = todo.pop()
        out += children.get(pid, [])
        todo += children.get(pid, [])
    return out


def test_a_local_point_runs_its_job_as_the_drivers_child_with_its_pid_as_job_id(tmp_path):
    """No ``submitit.local._local`` anywhere in a real sweep; the job process is the driver's child and the store's
    job id is its PID; submitit's files of the job are named after it."""
    from conftest import SWEEP, cli_env

    args = [sys.executable, str(SWEEP), "workload=tiny", "ppn=2", f"data_root={tmp_path / 'data'}",
            f"db={tmp_path / 'r.db'}"]
    proc = subprocess.Popen(args, cwd=tmp_path, env=cli_env(tmp_path), stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT)
    seen: dict[int, tuple[int, str]] = {}
    deadline = time.monotonic() + 240
    while proc.poll() is None and time.monotonic() < deadline:
        for pid in _tree(proc.pid):
            with contextlib.suppress(OSError, ValueError, IndexError):
                cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
                ppid = int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
                if cmd:
                    seen[pid] = (ppid, cmd)
        time.sleep(0.01)
    out = proc.communicate(timeout=60)[0].decode(errors="replace")
    assert proc.returncode == 0, out
    assert not [c for _, c in seen.values() if "submitit.local" in c], seen
    jobs = {pid: (ppid, c) for pid, (ppid, c) in seen.items() if "experiments.executors.entry" in c}
    assert len(jobs) == 1, seen
    (job_pid, (parent, _)), = jobs.items()
    assert parent == proc.pid  # started by the driver itself
    with sqlite3.connect(tmp_path / "r.db") as c:
        ((job_id, run_dir),) = c.execute("select job_id, run_dir from points").fetchall()
    assert job_id == str(job_pid)
    names = {p.name for p in (Path(run_dir) / "job").iterdir()}
    assert {f"{job_pid}_0_log.out", f"{job_pid}_0_log.err", f"{job_pid}_submitted.pkl",
            f"{job_pid}_0_result.pkl"} <= names
    assert not [n for n in names if n.startswith(".starting-")]


def test_a_task_writes_its_first_bytes_into_logs_named_after_its_pid(tmp_path):
    cmd = f"{sys.executable} -c \"import sys; print('to out'); print('to err', file=sys.stderr)\""
    process = start_task(tmp_path / "job", cmd, {"X": "1"})
    assert process.wait(timeout=60) == 0
    logs = sorted(p.name for p in (tmp_path / "job").iterdir())
    assert logs == [f"{process.pid}_0_log.err", f"{process.pid}_0_log.out"]
    assert (tmp_path / "job" / f"{process.pid}_0_log.out").read_text() == "to out\n"
    assert (tmp_path / "job" / f"{process.pid}_0_log.err").read_text() == "to err\n"


def test_a_task_that_cannot_start_leaves_no_log_behind(tmp_path):
    with pytest.raises(FileNotFoundError):
        start_task(tmp_path / "job", str(tmp_path / "no-such-program"), {})
    assert list((tmp_path / "job").iterdir()) == []


def test_the_task_environment_is_the_one_submitits_controller_gives():
    """submitit's controller sets these for its task (``submitit.local.local``); the job id is the task's own."""
    import submitit.local.local as sl

    env = task_env(2.5, 30)
    assert env["SUBMITIT_LOCAL_JOB_ID"] == "self" and env["SUBMITIT_LOCAL_TIMEOUT_S"] == "150"
    # every variable submitit's local job environment reads is set
    assert set(sl.LocalJobEnvironment._env.values()) <= set(env)
    assert env["SUBMITIT_EXECUTOR"] == "local"


def sleeps_past_its_limit(point: dict[str, Any], run_dir: str) -> Record:
    """A job that ignores Ctrl-C and its time limit (for the backstop test; runs in the job process)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    Path(run_dir, "started").write_text("")
    time.sleep(600)
    raise AssertionError("not stopped")


@dataclass
class _Report:
    submitted: int = 0
    completed: int = 0
    failed: int = 0


@dataclass
class _Host:
    """The driver, as the local executor sees it (experiments.executors.base.Host), keeping what it is told."""

    root: Path
    job: Any = sleeps_past_its_limit
    t0: float = field(default_factory=time.perf_counter)
    report: _Report = field(default_factory=_Report)
    outcomes: list[Record] = field(default_factory=list)
    job_ids: list[str] = field(default_factory=list)

    def echo(self, line: str) -> None:
        pass

    def heartbeat(self) -> None:
        pass

    def observe(self, spec: Any, scheduler_state: str) -> None:
        pass

    def prepare(self, spec: Any) -> Path:
        rd = self.root / "run"
        rd.mkdir(parents=True, exist_ok=True)
        return rd

    def submitted(self, spec: Any, job_id: str, run_dir: Path, folder: Path, executor: str) -> None:
        self.job_ids.append(job_id)

    def finish(self, spec: Any, record: Record, seconds: float | None = None, keep: bool = False) -> None:
        self.outcomes.append(record)

    def lost(self, spec: Any, job_id: str, state: str, run_dir: Path, detail: str = "",
             job_state: str | None = None) -> FailureRecord:
        return FailureRecord.of(spec.to_dict(), f"lost: {state} {detail}", job_state=job_state or state)


def test_the_driver_stops_a_job_that_outlives_its_time_limit(tmp_path, monkeypatch):
    """The backstop submitit's controller kept: past the point's limit (and the backstop's margin) the job is
    interrupted, then killed when it ignores that, and the point is recorded as timed out."""
    monkeypatch.setattr(local, "LOCAL_BACKSTOP_MIN", 0.0)
    monkeypatch.setattr(local, "INTERRUPT_GRACE_S", 0.5)
    monkeypatch.setenv("PYTHONPATH", f"{Path(__file__).parent}{os.pathsep}{ROOT}")  # the job imports this module
    spec = point(tmp_path, "cluster.timeout_min=0.05")  # 3 s
    host = _Host(tmp_path)
    t0 = time.monotonic()
    LocalExecutor().submit([spec], [], host)
    took = time.monotonic() - t0
    (record,) = host.outcomes
    assert isinstance(record, FailureRecord) and record.job_state == "TIMEOUT", record
    assert "time limit (0.05 min)" in record.error and "had not stopped" in record.error
    assert (tmp_path / "run" / "started").exists()  # it did run, and was stopped
    assert 3 <= took < 60
    (job_id,) = host.job_ids
    assert not local_job_alive(job_id)
    with contextlib.suppress(ChildProcessError):
        os.waitpid(int(job_id), os.WNOHANG)
    assert not Path(f"/proc/{job_id}").exists() or "State:\tZ" in Path(f"/proc/{job_id}/status").read_text()


def test_a_reattached_job_past_its_time_limit_is_stopped_by_the_driver_that_waits_for_it(tmp_path, monkeypatch):
    """A driver that re-attaches to a local job an earlier driver started keeps the job's backstop too, counted
    from the job process's start (/proc), and stops it past the limit: SIGINT, then SIGKILL when it is ignored."""
    from experiments.executors.base import Pending

    monkeypatch.setattr(local, "LOCAL_BACKSTOP_MIN", 0.0)
    monkeypatch.setattr(local, "INTERRUPT_GRACE_S", 0.5)
    monkeypatch.setattr(local, "FILE_POLL_S", 0.05)
    spec = point(tmp_path, "cluster.timeout_min=0.05")  # 3 s
    # a stand-in for the earlier driver's job: its command line names submitit, as a job's does; it ignores SIGINT
    code = "import signal, time; signal.signal(signal.SIGINT, signal.SIG_IGN); time.sleep(600)"
    job = subprocess.Popen([sys.executable, "-c", code, "submitit.core._submit"])
    try:
        time.sleep(0.3)
        assert local_job_alive(job.pid) and 0 < local.process_age_s(job.pid) < 60
        host = _Host(tmp_path)
        rd = tmp_path / "run"
        rd.mkdir()
        LocalExecutor().wait([Pending(spec, str(job.pid), rd, state="RUNNING")], [], host)
        (record,) = host.outcomes
        assert isinstance(record, FailureRecord) and record.job_state == "TIMEOUT", record
        assert job.wait(timeout=30) == -signal.SIGKILL  # it ignored the SIGINT
    finally:
        job.kill()
        job.wait(timeout=30)
    assert local.process_age_s(job.pid) == 0.0  # gone
