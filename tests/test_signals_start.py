"""Signals and failures as a point starts (issue 37): the signal that stopped a sweep is the one stored and said
(SIGTERM, SIGHUP: handled as Ctrl-C is), a rerun after ``kill -9`` of the sweep meets the orphaned job in one line,
and a resource that runs out as a point starts (space, inodes, quota) is stored as a failed point in one sentence."""

from __future__ import annotations

import contextlib
import errno
import os
import signal
import sqlite3
import subprocess
import sys
import time

import pytest

from conftest import SWEEP, cli_env
from helpers import kernel_pids


def _point_rows(db) -> list[tuple]:
    with sqlite3.connect(db) as c:
        return c.execute("SELECT status, job_state, error FROM points").fetchall()


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def _start_sweep(tmp_path, epochs: int = 6) -> subprocess.Popen:
    args = [sys.executable, str(SWEEP), "workload=tiny", "workload.compute_time=0.5", f"workload.epochs={epochs}",
            f"data_root={tmp_path / 'data'}", f"db={tmp_path / 'r.db'}"]
    return subprocess.Popen(args, cwd=tmp_path, env=cli_env(tmp_path), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)


def _wait_for_kernel(proc: subprocess.Popen, tmp_path) -> list[int]:
    end = time.monotonic() + 120
    while not kernel_pids(tmp_path / "data") and time.monotonic() < end and proc.poll() is None:
        time.sleep(0.2)
    kernels = kernel_pids(tmp_path / "data")
    assert kernels and proc.poll() is None, proc.communicate()
    return kernels


@pytest.mark.parametrize(("sig", "code"), [(signal.SIGTERM, 143), (signal.SIGHUP, 129)])
def test_the_signal_that_came_is_the_one_stored_and_said(tmp_path, sig, code):
    proc = _start_sweep(tmp_path)
    try:
        kernels = _wait_for_kernel(proc, tmp_path)
        proc.send_signal(sig)  # the driver only, as kill or a closed SSH session does
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    name = signal.Signals(sig).name
    assert proc.returncode == code, out + err
    assert err.splitlines() == [f"interrupted ({name}): what finished is stored; run the same command again to "
                                "resume"], err
    end = time.monotonic() + 10
    while any(_alive(p) for p in kernels) and time.monotonic() < end:
        time.sleep(0.1)
    assert not [p for p in kernels if _alive(p)], "the MPI step outlived the driver"
    [(status, state, error)] = _point_rows(tmp_path / "r.db")
    assert (status, state) == ("failed", "INTERRUPTED"), error
    assert f"interrupted ({name}" in error and "SIGINT" not in error, error


def test_a_hangup_ignored_by_nohup_stays_ignored():
    from ddlio.signals import terminate_as_interrupt

    before = signal.signal(signal.SIGHUP, signal.SIG_IGN)
    try:
        with terminate_as_interrupt():
            assert signal.getsignal(signal.SIGHUP) == signal.SIG_IGN
            os.kill(os.getpid(), signal.SIGHUP)  # ignored: nothing raised
        with pytest.raises(KeyboardInterrupt, match="SIGHUP"):
            signal.signal(signal.SIGHUP, signal.SIG_DFL)
            with terminate_as_interrupt():
                os.kill(os.getpid(), signal.SIGHUP)
                time.sleep(1)
    finally:
        signal.signal(signal.SIGHUP, before)


# ------------------------------------------------------------------------------------ resources as a point starts
@pytest.fixture
def tiny_fs(tmp_path):
    """``tiny_fs(options)``: a tmpfs mounted under tmp_path with mount ``options`` (size, nr_inodes), unmounted
    after the test; skipped where this process may not mount (not root, no CAP_SYS_ADMIN)."""
    mounted = []

    def _mount(options: str):
        where = tmp_path / f"fs{len(mounted)}"
        where.mkdir()
        r = subprocess.run(["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(where)], capture_output=True,
                           text=True)
        if r.returncode != 0:
            pytest.skip(f"cannot mount a tmpfs here: {r.stderr.strip()}")
        mounted.append(where)
        return where

    yield _mount
    for where in mounted:
        for _ in range(50):  # the job's last processes may hold it a moment after the sweep returns
            if subprocess.run(["umount", str(where)], capture_output=True).returncode == 0:
                break
            time.sleep(0.2)
        else:
            subprocess.run(["umount", "-l", str(where)], capture_output=True)


def _sweep_on(tmp_path, data_root) -> tuple[subprocess.CompletedProcess, str]:
    r = subprocess.run([sys.executable, str(SWEEP), "workload=tiny", f"data_root={data_root}",
                        f"db={tmp_path / 'r.db'}"], cwd=tmp_path, env=cli_env(tmp_path), capture_output=True,
                       text=True, timeout=300)
    [(status, _, error)] = _point_rows(tmp_path / "r.db")
    assert status == "failed", (status, error)
    assert r.returncode == 1 and "Traceback" not in r.stdout + r.stderr + error, r.stdout + r.stderr + error
    assert "\n" not in error.strip(), error  # one sentence: no log tails, no traceback
    return r, error


@pytest.mark.parametrize(("options", "words"), [
    ("size=16m,nr_inodes=4", ["the point could not start: no free inodes (files) on the file system at", "all 4"]),
    ("size=16m,nr_inodes=12", ["no free inodes (files) on the file system at", "all 12 are used"]),
    ("size=1100k", ["no space left on the device at", "free of 1.1 MiB"]),
])
def test_running_out_as_a_point_starts_is_a_failed_point_in_one_sentence(tmp_path, tiny_fs, options, words):
    """Inodes out before the job starts (the driver's run folder), inodes out inside the job (its record cannot
    be written either), space out in the dataset's generation (not even a log line can be written)."""
    root = tiny_fs(options)
    _, error = _sweep_on(tmp_path, root)
    for w in words:
        assert w in error, error
    assert str(root) in error, error


def test_a_quota_inside_the_job_is_one_sentence_with_what_was_needed(tmp_path, monkeypatch):
    """At the boundary: the dataset's write fails with EDQUOT; the stored error names the resource, the path and
    the dataset's size; a failure record that cannot be written (ENOSPC) still comes back to the driver."""
    from experiments.run import job
    from helpers import point

    spec = point(tmp_path, "workload=tiny")
    target = os.path.join(spec.data_root, "datasets", "x", "f0.h5")

    def quota(*a, **k):
        raise OSError(errno.EDQUOT, os.strerror(errno.EDQUOT), target)

    monkeypatch.setattr(job, "_measure", quota)
    rd = tmp_path / "run"
    record = job.run_point(spec.to_dict(), str(rd))
    assert record.error.startswith(f"OSError: disk quota exceeded at {target}"), record.error
    assert "the step needed 1.0 MiB" in record.error and "Traceback" not in record.error
    assert (rd / "failure.json").is_file()

    def full(*a, **k):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(job, "write_json_atomic", full)
    record = job.run_point(spec.to_dict(), str(rd))  # neither the record nor the log could be written: no raise
    assert record.error.startswith("OSError: disk quota exceeded"), record.error


def test_a_step_that_ran_out_of_space_is_one_sentence_naming_the_step(tmp_path, monkeypatch):
    from ddlio.errors import LaunchError
    from experiments.run import job
    from helpers import point

    spec = point(tmp_path, "workload=tiny")

    def step_failed(*a, **k):
        raise LaunchError("generate step failed: No space left on device; rank 0: OSError: [Errno 28] No space "
                          "left on device\nTraceback (most recent call last):\n  File ...")

    monkeypatch.setattr(job, "_measure", step_failed)
    record = job.run_point(spec.to_dict(), str(tmp_path / "run"))
    assert record.error.startswith(f"LaunchError: generate step failed: no space left on the device at "
                                   f"{spec.data_root}"), record.error
    assert "the step needed 1.0 MiB" in record.error and "\n" not in record.error


# ------------------------------------------------------------------------------------ orphans of a killed sweep
def _orphan(rd, module: str = "experiments.kernel", name: str = "kernel.json") -> subprocess.Popen:
    """A process that names a file in the run folder ``rd`` on its command line, as an MPI step does (its module
    among its words: ``python -m experiments.kernel <rd>/kernel.json``)."""
    return subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)", module, str(rd / name)],
                            start_new_session=True)


def test_an_earlier_attempts_process_in_the_run_folder_is_stopped_in_one_line(tmp_path):
    from experiments.run.records import stop_orphans

    rd = tmp_path / "runs" / "s" / "p"
    rd.mkdir(parents=True)
    other = _orphan(tmp_path / "runs" / "s" / "p2")  # another point's: left alone
    viewer = _orphan(rd, "tail", "kernel.log")  # a user's process reading a log there: not ddlio's, left alone
    orphan = _orphan(rd)
    lines: list[str] = []
    try:
        time.sleep(0.3)
        assert stop_orphans(rd, lines.append) == [orphan.pid]
        assert orphan.wait(timeout=10) is not None and other.poll() is None and viewer.poll() is None
        assert len(lines) == 1 and lines[0].startswith(f"ddlio: stopped 1 process(es) an earlier attempt of this "
                                                       f"point left running in {rd}: {orphan.pid} (")
        assert stop_orphans(rd, lines.append) == [] and len(lines) == 1
    finally:
        for p in (orphan, other, viewer):
            p.kill()
            p.wait()


def test_a_process_that_cannot_be_stopped_is_named_with_how_to_stop_it(tmp_path, monkeypatch):
    from experiments.run import records

    rd = tmp_path / "runs" / "s" / "p"
    rd.mkdir(parents=True)
    orphan = _orphan(rd)
    try:
        time.sleep(0.3)
        monkeypatch.setattr(records, "ORPHAN_GRACE_S", (0.1, 0.1))
        monkeypatch.setattr(records.os, "kill", lambda pid, sig: None)  # as for another user's process
        with pytest.raises(records.OrphanError, match=rf"still run in {rd} and could not be stopped: "
                                                      rf"{orphan.pid}; stop them \(kill -9 {orphan.pid}\)"):
            records.stop_orphans(rd)
    finally:
        monkeypatch.undo()  # os.kill back, or the orphan outlives the test
        orphan.kill()
        orphan.wait()


def _wait_for_gate(proc: subprocess.Popen, tmp_path) -> None:
    """Until the job has opened its kernel's gate (``kernel.go`` in the run folder): the ranks are measuring. A step
    still at its gate ends on its own within 50 ms of its job's death (``ddlio.mpistep.wait_for_gate``), so a
    kill -9 before then leaves no orphan to stop."""
    end = time.monotonic() + 120
    while not list((tmp_path / "data").rglob("kernel.go")) and time.monotonic() < end and proc.poll() is None:
        time.sleep(0.05)
    assert list((tmp_path / "data").rglob("kernel.go")) and proc.poll() is None, proc.communicate()


def test_a_rerun_after_kill_9_of_the_sweep_stops_the_orphaned_step_and_measures(tmp_path):
    proc = _start_sweep(tmp_path, epochs=4)
    try:
        kernels = _wait_for_kernel(proc, tmp_path)
        _wait_for_gate(proc, tmp_path)  # past it, the orphan measures for ~16 s (4 epochs of 8 batches of 0.5 s)
        os.killpg(proc.pid, signal.SIGKILL)  # driver and job: the MPI step, in its own session, goes on
        proc.communicate(timeout=30)
        assert all(_alive(p) for p in kernels)
        r = subprocess.run([sys.executable, str(SWEEP), "workload=tiny", "workload.compute_time=0.5",
                            "workload.epochs=4", f"data_root={tmp_path / 'data'}", f"db={tmp_path / 'r.db'}"],
                           cwd=tmp_path, env=cli_env(tmp_path), capture_output=True, text=True, timeout=300)
    finally:
        for p in kernel_pids(tmp_path / "data"):
            with contextlib.suppress(OSError):
                os.kill(p, signal.SIGKILL)
    assert "Traceback" not in r.stdout + r.stderr and "Directory not empty" not in r.stdout + r.stderr
    assert [ln for ln in r.stderr.splitlines() if "earlier attempt" in ln], r.stderr
    assert not [p for p in kernels if _alive(p)], "the orphaned MPI step still runs"
    assert r.returncode == 0 and [row[0] for row in _point_rows(tmp_path / "r.db")] == ["completed"], r.stdout
