"""A kernel step started ahead: the job starts its ranks while the dataset is made ready, and they wait, asleep,
at a gate (``ddlio.mpistep.wait_for_gate``) until the job opens it. Real MPI ranks throughout."""

from __future__ import annotations

import json
import os
import re
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ddlio.mpistep import GATE_OWNER_ENV, gate_env, phase_path
from ddlio.runpaths import RunPaths
from experiments.run.mpirun import launch_argv, run_step
from helpers import point

PROBE = "experiments.run.mpirun"  # the smallest MPI step: announce, wait at the gate, say so, end


def _tree(root: int) -> list[int]:
    """``root`` and its live descendants (zombies left out): MPICH's mpiexec, its proxy and the ranks each start
    a session of their own, so the step is followed by parentage."""
    parent, state = {}, {}
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                fields = Path(f"/proc/{d}/stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            parent[int(d)], state[int(d)] = int(fields[1]), fields[0]
    out, todo = [], [root]
    while todo:
        pid = todo.pop()
        if pid in state and state[pid] != "Z":
            out.append(pid)
        todo.extend(c for c, p in parent.items() if p == pid)
    return out


def _state(pid: int) -> str:
    """The process's state letter ("Z": a zombie), or "" when it no longer exists."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return ""


def _gone(pids: list[int], timeout_s: float = 10) -> bool:
    """True once none of ``pids`` lives (zombies count as gone)."""
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout_s:
        if not [pid for pid in pids if _state(pid) not in ("", "Z")]:
            return True
        time.sleep(0.05)
    return False


def _cpu_s(pids: list[int]) -> float:
    """CPU seconds (user + system) the processes ``pids`` have used so far."""
    tick = os.sysconf("SC_CLK_TCK")
    total = 0
    for pid in pids:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += int(fields[11]) + int(fields[12])
    return total / tick


def _wait_for(path: Path, timeout_s: float = 60) -> None:
    t0 = time.monotonic()
    while not path.exists():
        assert time.monotonic() - t0 < timeout_s, f"{path} never appeared"
        time.sleep(0.02)


def test_ranks_started_ahead_wait_asleep_until_the_gate_opens(tmp_path):
    from experiments.run.job import step_runner

    spec = point(tmp_path, "ppn=2")
    step = step_runner(spec, tmp_path)
    ahead = step.ahead(PROBE, [], 2, "probe")
    try:
        _wait_for(RunPaths(tmp_path).started("probe"))  # both ranks are through MPI start-up ...
        ranks = _tree(ahead.running.proc.pid)
        before = _cpu_s(ranks)
        time.sleep(1.0)
        assert ahead.running.proc.poll() is None  # ... and wait at the gate
        # asleep, not spinning in an MPI call: the whole step used well under a core's tenth in that second
        assert _cpu_s(ranks) - before < 0.1
        assert not RunPaths(tmp_path).gate("probe").exists()
        ahead.go()
    finally:
        ahead.kill()
    out = RunPaths(tmp_path).logs("probe")[0].read_text()
    said = re.findall(r"rank (\d+) through the gate after ([0-9.]+) s", out)  # the ranks' lines may interleave
    assert sorted(r for r, _ in said) == ["0", "1"], out
    waited = [float(w) for _, w in said]
    assert min(waited) >= 0.9  # they waited for the gate, not for nothing


def test_a_step_started_ahead_of_a_failure_leaves_no_process(tmp_path):
    from experiments.run.job import step_runner

    ahead = step_runner(point(tmp_path, "ppn=2"), tmp_path).ahead(PROBE, [], 2, "probe")
    _wait_for(RunPaths(tmp_path).started("probe"))
    step = _tree(ahead.running.proc.pid)
    assert len(step) >= 4  # mpiexec, its proxy, two ranks
    ahead.kill()
    assert _gone(step)


def _probe_with(tmp_path: Path, env: dict[str, str]) -> subprocess.CompletedProcess | object:
    argv = launch_argv("mpiexec -n {ranks}", 2, 1, 2, PROBE, [])
    return run_step(argv, 120, env=env, logs=(tmp_path / "o", tmp_path / "e"))


def test_ranks_stop_waiting_when_the_job_that_would_open_the_gate_is_gone(tmp_path):
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    env = gate_env(tmp_path / "never.go", time.time() + 600)
    host, ns, _ = env[GATE_OWNER_ENV].split("|")
    env[GATE_OWNER_ENV] = f"{host}|{ns}|{gone.pid}"
    t0 = time.monotonic()
    res = _probe_with(tmp_path, env)
    assert res.returncode != 0 and time.monotonic() - t0 < 60
    assert f"the job process {gone.pid} that was to open its gate" in res.stderr_tail


def test_ranks_stop_waiting_at_the_point_s_time_limit(tmp_path):
    res = _probe_with(tmp_path, gate_env(tmp_path / "never.go", time.time() + 1.0))
    assert res.returncode != 0
    assert "did not open within the point's time limit" in res.stderr_tail


def test_an_owner_seen_from_elsewhere_is_not_checked(tmp_path):
    """A rank on another host (or in another pid namespace) cannot see the job's pid: it waits for the gate (or
    the time limit) instead of taking a pid of its own namespace for the job's."""
    from ddlio.mpistep import _owner

    env = gate_env(tmp_path / "g", time.time() + 5)
    host, ns, pid = env[GATE_OWNER_ENV].split("|")
    assert _owner(env[GATE_OWNER_ENV]) == os.getpid()
    assert _owner(f"elsewhere|{ns}|{pid}") is None
    assert _owner(f"{host}|pid:[1]|{pid}") is None
    assert _owner("") is None and _owner("garbage") is None


@pytest.mark.parametrize("fmt", ["hdf5", "npz"])
def test_a_point_measures_through_the_gate(sweep, tmp_path, fmt):
    p = sweep("workload=tiny", "ppn=2", f"format={fmt}")
    assert p.returncode == 0, p.stdout + p.stderr
    [rd] = [d for d in (tmp_path / "data" / "runs").glob("*/*") if d.is_dir()]
    paths = RunPaths(rd)
    opened = json.loads(paths.gate("kernel").read_text())["opened"]
    [manifest] = (tmp_path / "data" / "datasets").glob("*/manifest.json")
    assert opened >= manifest.stat().st_mtime - 0.01  # opened once the dataset was ready, not before
    with sqlite3.connect(tmp_path / "r.db") as c:
        assert c.execute("select status from points").fetchall() == [("completed",)]
    # the environment is taken while the ranks start; the HDF5 library's version is added for HDF5 points only
    packages = json.loads(paths.result.read_text())["env"]["packages"]
    assert ("hdf5" in packages) == (fmt == "hdf5") and "numpy" in packages


def test_a_failed_generation_ends_the_kernel_started_ahead(tmp_path, monkeypatch):
    """The kernel's ranks, asked to write the dataset, fail (its plan is broken under them): the point fails with
    the generation's error, no manifest is written and no rank is left."""
    import experiments.run.job as job

    real = job.ensure_dataset

    def broken_plan(plan, layout, run_generation, ranks):
        def run(plan_path: str, n: int) -> None:
            Path(plan_path).write_text("{not a plan")
            run_generation(plan_path, n)
        return real(plan, layout, run, ranks)

    monkeypatch.setattr(job, "ensure_dataset", broken_plan)
    spec = point(tmp_path, "ppn=2")
    rd = tmp_path / "run"
    error = job.run_point(spec.to_dict(), str(rd)).to_dict()["error"]
    assert error.startswith("LaunchError: generate step failed") and "JSONDecodeError" in error, error
    assert not list((tmp_path / "data" / "datasets").glob("*/manifest.json"))
    kernel_json = str(RunPaths(rd).kernel_spec)
    left = [pid for pid in os.listdir("/proc") if pid.isdigit() and _cmdline_has(pid, kernel_json)]
    assert left == []


def _cmdline_has(pid: str, text: str) -> bool:
    try:
        return text in Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace")
    except OSError:
        return False


def test_a_point_s_dataset_is_written_by_its_kernel_s_ranks(sweep, tmp_path):
    """One MPI start a point: the kernel's ranks write the dataset (files r, r+P, ... as the generator's step
    does), then read it; no generation step runs."""
    p = sweep("workload=tiny", "ppn=2", "workload.samples=16", "workload.samples_per_file=1")
    assert p.returncode == 0, p.stdout + p.stderr
    [rd] = [d for d in (tmp_path / "data" / "runs").glob("*/*") if d.is_dir()]
    paths = RunPaths(rd)
    assert json.loads(Path(phase_path(paths.gate("kernel"), "generated")).read_text()) == {"ranks": 2}
    assert not paths.logs("generate")[0].exists()
    [manifest] = (tmp_path / "data" / "datasets").glob("*/manifest.json")
    assert json.loads(manifest.read_text())["generation_ranks"] == 2
    # a second point on the same dataset: nothing to write, the ranks go straight to reading
    p = sweep("workload=tiny", "ppn=2", "workload.samples=16", "workload.samples_per_file=1", "repeat=1")
    assert p.returncode == 0, p.stdout + p.stderr
    [rd2] = [d for d in (tmp_path / "data" / "runs").glob("*/*") if d.is_dir() and d != rd]
    assert not Path(phase_path(RunPaths(rd2).gate("kernel"), "gen")).exists()
    assert RunPaths(rd2).gate("kernel").exists()


def test_a_step_started_ahead_that_dies_in_start_up_is_started_once_more(tmp_path, capsys):
    """Its first start aborts before its ranks are all through MPI start-up (as a garbled PMI-2 exchange does on
    the Slurm test cluster now and then); it is started once more and runs to its end."""
    from experiments.run.job import step_runner

    (tmp_path / "mods").mkdir()
    (tmp_path / "mods" / "dies_once.py").write_text(
        "import os, pathlib, runpy\n"
        f"m = pathlib.Path({str(tmp_path / 'marker')!r})\n"
        "if not m.exists():\n"
        "    m.write_text('1')\n"
        "    os.abort()\n"
        "runpy.run_module('experiments.run.mpirun', run_name='__main__')\n")
    spec = point(tmp_path, f"+cluster.env.PYTHONPATH={tmp_path / 'mods'}")
    ahead = step_runner(spec, tmp_path).ahead("dies_once", [], 1, "probe")
    try:
        ahead.go()
    finally:
        ahead.kill()
    assert ahead.attempts == 2 and RunPaths(tmp_path).started("probe").exists()
    assert "probe step: the ranks ended (exit code" in capsys.readouterr().err
