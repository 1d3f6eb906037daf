"""The job process's entry: submitit's own (``submitit.core._submit``), without the numpy it imports first.

submitit's job entry imports numpy before it loads the pickle ("to avoid unexpected interactions"); a ddlio job
process handles no array (its MPI ranks read and write the data), and numpy there is 8-9 MiB of memory held for the
whole point beside the ranks. The executors start jobs with :func:`job_python` (``python -u -m
experiments.executors.entry``), to which submitit appends its own ``-u -m submitit.core._submit FOLDER``: this module
loads submitit's entry with numpy held off, lets numpy import normally again (before the pickle is loaded: the
job's function imports it where it needs it), and runs submitit's ``submitit_main`` on FOLDER.

A local job started without submitit's controller (:mod:`experiments.executors.local`) is told so by
``SUBMITIT_LOCAL_JOB_ID=self``: its job id is its own PID, set here before submitit reads it, and the entry waits
for the job's pickle, which the executor renames after the job id just after the process started.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

from ddlio.shell import quote

SUBMITIT_ENTRY = "submitit.core._submit"
ENTRY = "experiments.executors.entry"
#: ``SUBMITIT_LOCAL_JOB_ID`` as the local executor sets it for a job started without submitit's controller
#: (:func:`experiments.executors.local.start_task`): the job id is the task's own PID, set here
SELF_JOB_ID = "self"
#: how long a task started directly waits for its pickle, which the executor names after the job id once the
#: task's process exists (seconds), and how often it looks (seconds): submitit's own wait looks once a second
PICKLE_WAIT_S = 60.0
PICKLE_POLL_S = 0.002


def job_python(python: str = sys.executable) -> str:
    """What a submitit executor is given as its ``python``: the job's interpreter running this entry (quoted for a
    shell: the Slurm script runs it through one), ahead of submitit's own ``-u -m submitit.core._submit FOLDER``."""
    return f"{quote(python)} -u -m {ENTRY}"


def wait_for(path: Path, timeout_s: float = PICKLE_WAIT_S) -> None:
    """Wait until ``path`` exists (submitit's entry then finds it at its first look instead of a second later)."""
    end = time.monotonic() + timeout_s
    while not path.exists() and time.monotonic() < end:
        time.sleep(PICKLE_POLL_S)


def main(argv: list[str]) -> None:
    """Run submitit's job entry on the folder ``argv`` ends with (``... -m submitit.core._submit FOLDER``)."""
    if len(argv) < 3 or argv[-3:-1] != ["-m", SUBMITIT_ENTRY]:
        raise SystemExit(f"usage: python -m {ENTRY} [-u] -m {SUBMITIT_ENTRY} FOLDER (got {argv})")
    if os.environ.get("SUBMITIT_LOCAL_JOB_ID") == SELF_JOB_ID:
        job_id = str(os.getpid())
        os.environ["SUBMITIT_LOCAL_JOB_ID"] = job_id
        wait_for(Path(argv[-1]) / f"{job_id}_submitted.pkl")
    held = "numpy" not in sys.modules
    if held:
        sys.modules["numpy"] = None  # type: ignore[assignment]  # "import numpy" raises ImportError: skipped
    try:
        from submitit.core.submission import submitit_main  # lazy: under the hold on numpy
    finally:
        if held and sys.modules.get("numpy", 0) is None:
            del sys.modules["numpy"]
    sys.argv = [SUBMITIT_ENTRY, argv[-1]]
    submitit_main()


if __name__ == "__main__":
    main(sys.argv[1:])
