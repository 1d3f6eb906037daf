"""Signals and failures as a point starts (issue 37): the signal that stopped a sweep is the one stored and said
(SIGTERM, SIGHUP: handled as Ctrl-C is), a rerun after ``kill -9`` of the sweep meets the orphaned job in one line,
and a resource that runs out as a point starts (space, inodes, quota) is stored as a failed point in one sentence."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import time

import pytest

from conftest import SWEEP, cli_env


def _point_rows(db) -> list[tuple]:
    with sqlite3.connect(db) as c:
        return c.execute("SELECT status, job_state, error FROM points").fetchall()


def _kernel_pids(root) -> list[int]:
    """The processes whose command line names a kernel spec under ``root`` (the local job's MPI step)."""
    pids = []
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                with open(f"/proc/{d}/cmdline", "rb") as f:
                    cmd = f.read().decode(errors="replace")
            except OSError:
                continue
            if "experiments.kernel" in cmd and str(root) in cmd:
                pids.append(int(d))
    return pids


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
    while not _kernel_pids(tmp_path / "data") and time.monotonic() < end and proc.poll() is None:
        time.sleep(0.2)
    kernels = _kernel_pids(tmp_path / "data")
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
