"""bench/vs_dlio.py's parsing (strace, /proc, DLIO's log) and its two command lines, without DLIO's venv."""

from __future__ import annotations

import contextlib
import os
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import load_bench


@pytest.fixture(scope="module")
def vs() -> object:
    return load_bench("vs_dlio")


STRACE = """\
101 read(3</usr/lib/python3.11/os.py>, ""..., 4096) = 4096
101 read(7</d/data/train/img_1_of_64.npz>, ""..., 22) = 22
102 pread64(8</d/data/train/img_2_of_64.npz>, ""..., 262144, 128) = 262144
101 read(7</d/data/train/img_1_of_64.npz>, <unfinished ...>
102 write(9</d/data/train/img_3_of_64.npz>, ""..., 262272) = 262272
101 <... read resumed>""..., 262144) = 262000
103 read(4</d/data/train/img_4_of_64.npz>, ""..., 10) = -1 EINTR (Interrupted system call)
103 read(4</d/data/train/img_4_of_64.npz>, ""..., 10) = 0
103 read(5</d/data/train/img_4_of_64.npz.tmp>, ""..., 10) = 10
104 read(5</elsewhere/x.npz>, ""..., 10) = 10
"""


def test_strace_counts_only_the_datasets_files(vs: object) -> None:
    tot = vs.parse_strace(STRACE.splitlines(True), "/d/data")
    assert tot.read_bytes == 22 + 262144 + 262000
    assert tot.read_calls == 3
    assert tot.write_bytes == 262272
    assert tot.files_read == {"/d/data/train/img_1_of_64.npz", "/d/data/train/img_2_of_64.npz"}


def test_smaps_rollup_and_stat(vs: object) -> None:
    text = "55d0-7ffd ---p 00000000 00:00 0 [rollup]\nRss:   2048 kB\nPss:   1000 kB\nPss_Anon:  900 kB\n"
    assert vs.parse_smaps_rollup(text) == (2048 * 1024, 1000 * 1024)
    assert vs.parse_stat_ppid("42 (a (b) c) S 7 42 42 0 -1") == 7
    own = Path(f"/proc/{os.getpid()}/smaps_rollup")
    if own.exists():
        rss, pss = vs.memory_now([os.getpid()])
        assert rss >= pss > 0
        assert os.getpid() in vs.descendants(os.getpid())


def test_dlio_log(vs: object) -> None:
    log = ("[INFO] x Ending epoch 1 - 8 steps completed in 0.30 s [a.py:225]\n"
           "[INFO] x Ending epoch 2 - 8 steps completed in 0.22 s [a.py:225]\n"
           "[METRIC] Training Accelerator Utilization [AU] (%): 34.2079 (5.4206)\n"
           "[METRIC] Training Throughput (samples/second): 164.2451 (143.7225)\n"
           "[METRIC] Training I/O Throughput (MB/second): 41.0613 (35.9306)\n")
    assert vs.parse_dlio_log(log) == {"epochs": 2, "steps": [8, 8], "train_au_pct": 34.2079,
                                      "samples_per_s": 164.2451, "io_mib_s": 41.0613}
    assert vs.parse_dlio_log("nothing") == {}


def test_the_two_commands_name_the_same_workload(vs: object, tmp_path: Path) -> None:
    wl = vs.Workload()
    dlio = vs.dlio_command(tmp_path / "venv", "/usr/bin/mpirun", wl, tmp_path)
    assert dlio[dlio.index("-np") + 1] == "2"
    for key in ("num_files_train=64", "record_length=262144", "batch_size=4", "epochs=2",
                "computation_time=0.01", "format=npz", "generate_data=True", "num_samples_per_file=1"):
        assert any(a.endswith(key) for a in dlio), key
    ddlio = vs.ddlio_command(wl, tmp_path)
    for key in ("ppn=2", "workload.samples=64", "workload.sample_size=262144", "workload.sample_shape=[512,512]",
                "workload.batch_size=4", "workload.epochs=2", "workload.compute_time=0.01", "format=npz",
                "format.load=whole", "format.layout=array", "workload.samples_per_file=1"):
        assert key in ddlio, key


def test_bad_size_is_one_message(vs: object) -> None:
    with pytest.raises(SystemExit, match="not a square"):
        _ = vs.Workload(sample_size=1000).side


def test_the_floor_runs_ddlios_process_structure_with_libraries_only(vs: object, tmp_path: Path) -> None:
    """The floor, run and sampled as the bench does: its four Python processes are all alive at the peak, the
    driver having composed a config and committed its row, the ranks with numpy, the job process without it (as
    experiments.executors.entry starts it)."""
    cmd = vs.floor_command(vs.Workload(), tmp_path)
    seen: dict[int, str] = {}
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parent.parent))
    proc = subprocess.Popen(cmd, cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 120
    while proc.poll() is None and time.monotonic() < deadline:
        for pid in vs.descendants(proc.pid):
            with contextlib.suppress(OSError):  # gone meanwhile
                text = Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace")
                if text:  # an exited, not yet reaped process (a zombie) reads empty: keep what it was
                    seen[pid] = text
        time.sleep(0.05)
    out = proc.communicate(timeout=60)[0].decode(errors="replace")
    assert proc.returncode == 0, out
    lines = list(seen.values())
    assert sum("floor_driver.py" in c for c in lines) == 1  # the driver
    assert sum("submitit.core.submission" in c and "floor_driver" not in c for c in lines) == 1  # the job
    ranks = [c for c in lines if c.startswith(sys.executable) and "mpi4py" in c and "submitit" not in c]
    assert len(ranks) == 2, lines
    assert len(lines) == 6, lines  # and mpiexec and its proxy: no other process
    with sqlite3.connect(tmp_path / "floor.db") as c:
        assert c.execute("select format, ranks from points").fetchall() == [("npz", 2)]  # composed, then stored


def test_a_timed_run_is_watched_by_nothing_and_keeps_its_output(vs: object, tmp_path: Path) -> None:
    wall, rc, log = vs.timed("t", ["sh", "-c", "echo said; exit 3"], tmp_path, dict(os.environ), 30)
    assert rc == 3 and log == "said\n" and 0 < wall < 30
    wall, rc, _ = vs.timed("t", ["sleep", "5"], tmp_path, dict(os.environ), 0.2)
    assert rc == -9 and wall < 5  # past its timeout: killed, and said so


def test_the_peak_is_broken_down_by_process(vs: object, tmp_path: Path) -> None:
    parts: dict[int, int] = {}
    rss, pss = vs.memory_now([os.getpid()], parts)
    assert parts == {os.getpid(): pss} and pss > 0
    sleeper = [sys.executable, "-u", "-m", "timeit", "-n", "1", "-r", "1", "import time; time.sleep(30)"]
    child = subprocess.Popen(sleeper, stdout=subprocess.DEVNULL)
    try:
        time.sleep(0.3)
        assert vs.process_name(child.pid) == f"{Path(sys.executable).name} -m timeit"
    finally:
        child.kill()
        child.wait(timeout=30)
    assert vs.process_name(os.getpid()).startswith(Path(sys.executable).name)
