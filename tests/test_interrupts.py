"""Time limits and interrupts are named as such, never shown as tracebacks, and lose nothing: a rerun resumes."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import time

import pytest

import sweep as sweep_module
from conftest import SWEEP, cli_env
from ddlio.signals import Terminated
from helpers import kernel_pids


def _point_rows(db) -> list[tuple]:
    with sqlite3.connect(db) as c:
        return c.execute("SELECT status, job_state, error FROM points").fetchall()


def test_a_local_time_limit_is_named_and_kept(sweep, tmp_path):
    # a rank that hangs (its compute would fit: the up-front check passes) meets the time limit before the
    # progress guard (cluster.hang_timeout_s, 600 s) speaks
    p = sweep("workload=tiny", "+cluster.env.DDLIO_FAULT=hang@0", "cluster.timeout_min=0.02", timeout=120)
    assert p.returncode == 1, p.stdout + p.stderr
    assert "Traceback" not in p.stdout + p.stderr
    assert "time limit reached: the point's cluster.timeout_min=0.02 (1.2 s) ran out" in p.stdout
    [(status, _, error)] = _point_rows(tmp_path / "r.db")
    assert status == "failed" and error.startswith("TimeLimitError: time limit reached")


def test_ctrl_c_stops_the_sweep_quietly_and_a_rerun_resumes(sweep, tmp_path):
    args = [sys.executable, str(SWEEP), "workload=tiny", "workload.compute_time=0.5", "workload.epochs=4",
            f"data_root={tmp_path / 'data'}", f"db={tmp_path / 'r.db'}"]
    proc = subprocess.Popen(args, cwd=tmp_path, env=cli_env(tmp_path), stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, start_new_session=True)
    try:
        end = time.monotonic() + 120
        while not list((tmp_path / "data" / "runs").rglob("kernel.json")) and time.monotonic() < end:
            time.sleep(0.2)  # the point is running: its kernel spec is written
        assert proc.poll() is None, proc.communicate()[0]
        os.killpg(proc.pid, signal.SIGINT)  # what Ctrl-C in a terminal does: the whole foreground group
        out, _ = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode == 130, out
    assert "Traceback" not in out and "KeyboardInterrupt" not in out
    assert "interrupted" in out
    [(status, state, error)] = _point_rows(tmp_path / "r.db")
    assert (status, state) == ("failed", "INTERRUPTED") and "interrupted" in error
    again = sweep("workload=tiny", "workload.compute_time=0.5", "workload.epochs=4", timeout=300)
    assert again.returncode == 0, again.stdout + again.stderr
    assert [r[0] for r in _point_rows(tmp_path / "r.db")] == ["completed"]


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    with open(f"/proc/{pid}/stat") as f:
        return f.read().rsplit(")", 1)[1].split()[0] != "Z"


def test_sigterm_stops_the_point_and_its_job_and_exits_143(sweep, tmp_path):
    """kill PID (SIGTERM) of the driver alone, as a scheduler or a user's kill does: the local job and its MPI step
    stop too, the point is stored interrupted, one line says so, exit 143; a rerun resumes."""
    args = [sys.executable, str(SWEEP), "workload=tiny", "workload.compute_time=0.5", "workload.epochs=6",
            f"data_root={tmp_path / 'data'}", f"db={tmp_path / 'r.db'}"]
    proc = subprocess.Popen(args, cwd=tmp_path, env=cli_env(tmp_path), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        end = time.monotonic() + 120
        while not kernel_pids(tmp_path / "data") and time.monotonic() < end:
            time.sleep(0.2)
        kernels = kernel_pids(tmp_path / "data")
        assert kernels and proc.poll() is None, proc.communicate()
        proc.send_signal(signal.SIGTERM)  # the driver only, not its group
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode == 143, out + err
    assert "Traceback" not in out + err
    assert err.splitlines() == ["interrupted (SIGTERM): what finished is stored; run the same command again to "
                                "resume"]
    end = time.monotonic() + 10
    while any(_alive(p) for p in kernels) and time.monotonic() < end:
        time.sleep(0.1)
    assert not [p for p in kernels if _alive(p)], "the MPI step outlived the driver"
    [(status, state, error)] = _point_rows(tmp_path / "r.db")
    assert (status, state) == ("failed", "INTERRUPTED") and "interrupted" in error
    again = sweep("workload=tiny", "workload.compute_time=0.5", "workload.epochs=6", timeout=300)
    assert again.returncode == 0, again.stdout + again.stderr
    assert [r[0] for r in _point_rows(tmp_path / "r.db")] == ["completed"]


@pytest.mark.parametrize(("exc", "code", "lines"), [
    (RuntimeError("boom\nsecond line"), 1, [
        "error: RuntimeError: boom", "(an unexpected error in ddlio; set DDLIO_TRACEBACK=1 to see the traceback)"]),
    (KeyboardInterrupt(), 130, ["interrupted"]),
    (Terminated(), 143, ["interrupted (SIGTERM)"]),
])
def test_what_escapes_is_one_line(monkeypatch, capsys, exc, code, lines):
    def main() -> int:
        raise exc

    monkeypatch.setattr(sweep_module, "main", main)
    monkeypatch.delenv("DDLIO_TRACEBACK", raising=False)
    assert sweep_module.run() == code
    assert capsys.readouterr().err.splitlines() == lines


def test_the_traceback_switch(monkeypatch):
    def main() -> int:
        raise RuntimeError("boom")

    monkeypatch.setattr(sweep_module, "main", main)
    monkeypatch.setenv("DDLIO_TRACEBACK", "1")
    with pytest.raises(RuntimeError, match="boom"):
        sweep_module.run()


def test_run_folders_are_private(sweep, tmp_path):
    (tmp_path / "data" / "runs").mkdir(parents=True, mode=0o755)
    os.chmod(tmp_path / "data" / "runs", 0o755)  # there before ddlio (no mark of its): never changed by it
    p = sweep("workload=tiny", timeout=300)
    assert p.returncode == 0, p.stdout + p.stderr
    assert (tmp_path / "data" / "runs").stat().st_mode & 0o777 == 0o755
    stores = [d for d in (tmp_path / "data" / "runs").iterdir() if d.is_dir() and d.name != "_slurm"]
    assert stores and all(d.stat().st_mode & 0o777 == 0o700 for d in stores)  # the store's run folders: private
