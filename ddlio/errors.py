"""The small exception hierarchy of ddlio.

Every error a user can cause (a bad override, a missing command, an unwritable path) is a :class:`DdlioError`
whose message says what was wrong and what would be right; the command-line entry points print it without a
traceback. Errors from outside tools (``lfs``, ``mpiexec``, ``sbatch``) are wrapped with what the tool said.
"""

from __future__ import annotations


class DdlioError(Exception):
    """Base class: a problem the user can fix, with a message that says how."""


class ConfigError(DdlioError, ValueError):
    """One or more invalid configuration values; the message lists every problem at once."""

    def __init__(self, problems: list[str] | str):
        self.problems = [problems] if isinstance(problems, str) else list(problems)
        if len(self.problems) == 1:
            msg = self.problems[0]
        else:
            msg = f"{len(self.problems)} problems in the configuration:\n" + "\n".join(
                f"  - {p}" for p in self.problems
            )
        super().__init__(msg)


class FormatError(DdlioError):
    """A data file is truncated, corrupt, or not of the format it claims to be."""


class DatasetError(DdlioError):
    """A dataset could not be generated or failed verification."""


class LayoutError(DdlioError):
    """Lustre striping could not be applied or read back (wraps what ``lfs`` said)."""


class LaunchError(DdlioError):
    """A job or an MPI step could not be started, or ended badly (wraps what the launcher said)."""


class StartTimeoutError(LaunchError):
    """An MPI step's ranks did not all get through MPI start-up (``MPI_Init`` and a first barrier) in time; the
    step was killed before it did anything."""


class TimeLimitError(LaunchError):
    """A point ran out of its time limit (``cluster.timeout_min``); the step that was running was killed."""


class KernelError(DdlioError):
    """The reader kernel measured something it cannot vouch for (e.g. bytes read differ from the plan)."""
