"""What ended a failed MPI step, named on the failure's first line: found anywhere in its output."""

from __future__ import annotations

import pytest

from experiments.mpirun import failure_cause

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
