"""The job process's entry: submitit's own (``submitit.core._submit``), without the numpy it imports first.

submitit's job entry imports numpy before it loads the pickle ("to avoid unexpected interactions"); a ddlio job
process handles no array (its MPI ranks read and write the data), and numpy there is 8-9 MiB of memory held for the
whole point beside the ranks. The executors start jobs with :func:`job_python` (``python -u -m
experiments.executors.entry``), to which submitit appends its own ``-u -m submitit.core._submit FOLDER``: this module
loads submitit's entry with numpy held off, lets numpy import normally again (before the pickle is loaded: the
job's function imports it where it needs it), and runs submitit's ``submitit_main`` on FOLDER.
"""

from __future__ import annotations

import sys

from ddlio.shell import quote

SUBMITIT_ENTRY = "submitit.core._submit"
ENTRY = "experiments.executors.entry"


def job_python(python: str = sys.executable) -> str:
    """What a submitit executor is given as its ``python``: the job's interpreter running this entry (quoted for a
    shell: the Slurm script runs it through one), ahead of submitit's own ``-u -m submitit.core._submit FOLDER``."""
    return f"{quote(python)} -u -m {ENTRY}"


def main(argv: list[str]) -> None:
    """Run submitit's job entry on the folder ``argv`` ends with (``... -m submitit.core._submit FOLDER``)."""
    if len(argv) < 3 or argv[-3:-1] != ["-m", SUBMITIT_ENTRY]:
        raise SystemExit(f"usage: python -m {ENTRY} [-u] -m {SUBMITIT_ENTRY} FOLDER (got {argv})")
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
