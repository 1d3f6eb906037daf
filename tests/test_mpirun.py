"""What ended a failed MPI step, named on the failure's first line: found anywhere in its output."""

from __future__ import annotations

import os
import shutil
import sqlite3
import sys
import time
from pathlib import Path

import pytest

from ddlio.errors import StartTimeoutError
from experiments.run.mpirun import STARTED_ENV, failure_cause, launch_argv, run_step

# what the mpich wheel's mpiexec printed on stdout when a rank was killed by SIGKILL (captured here)
MPICH_KILLED = """
===================================================================================
=   BAD TERMINATION OF ONE OF YOUR APPLICATION PROCESSES
=   PID 20315 RUNNING AT vm
=   EXIT CODE: 9
=   CLEANING UP REMAINING PROCESSES
=   YOU CAN IGNORE THE BELOW CLEANUP MESSAGES
===================================================================================
YOUR APPLICATION TERMINATED WITH THE EXIT STRING: Killed (signal 9)
This typically refers to a problem with your application.
Please see the FAQ page for debugging suggestions
"""


@pytest.mark.parametrize("text, cause", [
    (MPICH_KILLED, "killed by SIGKILL"),
    ("mpirun noticed that process rank 1 with PID 0 on node n1 exited on signal 11 (Segmentation fault).",
     "killed by SIGSEGV"),
    ("srun: error: n1: task 1: Killed\nsrun: Terminating StepId=12.0", "killed by SIGKILL"),
    ("slurmstepd: error: *** STEP 12.0 ON n1 CANCELLED AT 2026-11-30T10:00:00 DUE TO TIME LIMIT ***",
     "time limit reached"),
    # a disk-full generation: the cause is in the middle, the last line says something else
    ("rank 0 writing part-00003\nTraceback (most recent call last):\n  File \"x.py\", line 1\n"
     "OSError: [Errno 28] No space left on device\n" + "cleanup\n" * 40 + "has not produced any output",
     "No space left on device"),
    ("everything fine\nValueError: bad\n", None),
])
def test_failure_cause_is_found_anywhere(text, cause):
    assert failure_cause("", text) == cause


def test_a_launcher_killed_by_a_signal_names_it():
    assert failure_cause("no clue here", returncode=-15) == "killed by SIGTERM"
    assert failure_cause("no clue here", returncode=3) is None


# --- the start-up watchdog: a step whose ranks hang in MPI start-up is killed, not left to the time limit -------
def _python(code: str) -> list[str]:
    return [sys.executable, "-c", code]


def test_a_step_that_never_starts_is_killed_after_the_start_timeout(tmp_path):
    started = tmp_path / "kernel.started"
    t0 = time.monotonic()
    with pytest.raises(StartTimeoutError, match="not all through MPI start-up"):
        run_step(_python("import time; time.sleep(60)"), 60, started=started, start_timeout_s=1.0,
                 logs=(tmp_path / "o", tmp_path / "e"))
    assert time.monotonic() - t0 < 30  # killed at the start timeout, not at the step's 60 s limit
    assert not started.exists()


def test_a_step_that_announces_its_start_runs_past_the_start_timeout(tmp_path):
    started = tmp_path / "kernel.started"
    started.write_text("an earlier attempt's mark\n")  # removed before the step starts: it proves nothing
    code = (f"import os, time; time.sleep(0.3); open(os.environ[{STARTED_ENV!r}], 'w').close(); time.sleep(2); "
            "print('done')")
    res = run_step(_python(code), 60, started=started, start_timeout_s=1.0, logs=(tmp_path / "o", tmp_path / "e"))
    assert res.returncode == 0 and res.stdout_tail == "done" and res.seconds > 1.0
    # a step that ends (even badly) before announcing is not a start-up hang: its exit is returned
    res = run_step(_python("raise SystemExit(3)"), 60, started=tmp_path / "x.started", start_timeout_s=1.0)
    assert res.returncode == 3


def test_real_mpi_ranks_announce_their_start(tmp_path):
    started = tmp_path / "k.started"
    argv = launch_argv("mpiexec -n {ranks}", 2, 1, 2, "experiments.run.mpirun", [])
    # the module run as a step: python -m experiments.run.mpirun announces and exits (see its __main__)
    res = run_step(argv, 120, started=started, start_timeout_s=60, logs=(tmp_path / "o", tmp_path / "e"))
    assert res.returncode == 0, res.stderr_tail
    assert started.exists()


def test_a_hung_start_is_started_once_more_then_the_point_is_measured(sweep, tmp_path):
    """A launch line that hangs on its first start (as MPICH's PMI-2 client did under Slurm 22.05 under load):
    the kernel step is killed after cluster.hang_timeout_s, started again, and the point is measured."""
    mark = tmp_path / "hung-once"
    script = tmp_path / "flaky-mpiexec"
    script.write_text(f"#!/bin/sh\nif [ ! -e {mark} ]; then touch {mark}; exec sleep 300; fi\n"
                      f"exec {shutil.which('mpiexec', path=os.path.dirname(sys.executable))} \"$@\"\n")
    script.chmod(0o755)
    p = sweep("workload=tiny", "workload.epochs=1", f"cluster.launch='{script} -n {{ranks}}'",
              "cluster.hang_timeout_s=3", timeout=200)
    assert p.returncode == 0, p.stdout + p.stderr
    assert mark.exists()
    with sqlite3.connect(tmp_path / "r.db") as c:
        assert c.execute("select status from points").fetchall() == [("completed",)]


def test_a_start_that_always_hangs_fails_the_point_with_one_line(sweep, tmp_path):
    script = tmp_path / "hung-mpiexec"
    script.write_text("#!/bin/sh\nexec sleep 300\n")
    script.chmod(0o755)
    p = sweep("workload=tiny", "workload.epochs=1", f"cluster.launch='{script} -n {{ranks}}'",
              "cluster.hang_timeout_s=2", timeout=200)
    assert p.returncode == 1
    (line,) = [ln for ln in p.stdout.splitlines() if "FAILED" in ln]
    assert "kernel step failed" in line and "MPI start-up" in line, p.stdout


def test_a_rank_s_last_words_survive_a_launcher_that_lost_its_output(tmp_path):
    """MPI_Abort can end mpiexec before it passed on what the aborting rank printed (seen under load: a step
    failed with exit code 5 and an empty stderr): the rank's last words, also written to the step's last-words
    file, are in the step's stderr tail and name its failure."""
    code = ("import os; os.close(2); from ddlio.mpistep import last_words; "
            "last_words('ddlio kernel: rank 1 made no progress for 3 s in epoch 0; aborting the step'); os._exit(5)")
    res = run_step(_python(code), 60, logs=(tmp_path / "o", tmp_path / "e"))
    assert res.returncode == 5
    assert (tmp_path / "e").read_text() == ""  # nothing came through the step's own stderr
    said = "ddlio kernel: rank 1 made no progress for 3 s in epoch 0; aborting the step"
    assert res.stderr_tail.splitlines()[0] == said
    res = run_step(_python("import os; os._exit(3)"), 60, logs=(tmp_path / "o", tmp_path / "e"))
    assert res.returncode == 3 and res.stderr_tail == ""  # an earlier attempt's last words are not this one's


def _dies_in_start_up_once(marker: Path) -> list[str]:
    """A step whose first start aborts before it announces its start (as an MPI start-up that garbles its PMI-2
    exchange does) and whose second announces it and ends well."""
    return _python(
        "import os, pathlib\n"
        f"m = pathlib.Path({str(marker)!r})\n"
        "if not m.exists():\n"
        "    m.write_text('1')\n"
        "    os.abort()\n"
        "from ddlio.mpistep import STARTED_ENV\n"
        "pathlib.Path(os.environ[STARTED_ENV]).write_text('0')\n")


def test_a_step_that_dies_in_start_up_is_started_once_more(tmp_path, capsys):
    from ddlio.runpaths import RunPaths
    from experiments.run.job import _start_twice

    paths = RunPaths(tmp_path)
    res = _start_twice(_dies_in_start_up_once(tmp_path / "m"), time.monotonic() + 60, {}, paths, "kernel", 30.0)
    assert res.returncode == 0 and paths.started("kernel").exists()
    assert "kernel step: the ranks ended (exit code" in capsys.readouterr().err


def test_a_step_that_dies_in_start_up_twice_fails_as_it_says(tmp_path):
    from ddlio.runpaths import RunPaths
    from experiments.run.job import _start_twice

    marker = tmp_path / "m"
    res = _start_twice(_python("import sys; sys.exit('no such module: kernal')"), time.monotonic() + 60, {},
                       RunPaths(tmp_path), "kernel", 30.0)
    assert res.returncode == 1 and "no such module: kernal" in res.stderr_tail  # the program's own words
    # a step that got through start-up and failed after is not started again
    marker.write_text("1")
    code = ("import os, pathlib, sys\nfrom ddlio.mpistep import STARTED_ENV\n"
            "pathlib.Path(os.environ[STARTED_ENV]).write_text('0')\n"
            f"n = pathlib.Path({str(marker)!r}); n.write_text(n.read_text() + '1'); sys.exit(3)\n")
    res = _start_twice(_python(code), time.monotonic() + 60, {}, RunPaths(tmp_path), "kernel", 30.0)
    assert res.returncode == 3 and marker.read_text() == "11"


def test_a_step_that_says_nothing_on_stderr_fails_with_what_the_launcher_printed_on_stdout():
    """Hydra prints a rank's abort ("BAD TERMINATION ...") on stdout: where stderr is empty, the point's error
    names that line and carries that tail, not "(no output)"."""
    from types import SimpleNamespace

    from ddlio.errors import LaunchError
    from experiments.run.job import StepRunner
    from experiments.run.mpirun import StepResult

    out = "===\n=   BAD TERMINATION OF ONE OF YOUR APPLICATION PROCESSES\n=   EXIT CODE: 2\n===\n"
    res = StepResult(["mpiexec"], 1, 0.1, out, "")
    with pytest.raises(LaunchError) as e:
        StepRunner.check(SimpleNamespace(), "generate", ["mpiexec"], lambda: res)
    first = str(e.value).splitlines()[0]
    assert "(no output)" not in first and "=" in first, first
    assert "BAD TERMINATION" in str(e.value)
