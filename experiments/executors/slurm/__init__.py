"""Slurm: submitit executors with a point's own resources, the site's limits checked before submitting, and the
standalone reproducer. What Slurm says of its jobs (states, pending reasons, squeue/sacct) is :mod:`ddlio.jobstates`,
re-exported here.

- :mod:`.executor`: submitit's executor and its parameters, :func:`resources` (which points share an array),
  :func:`cancel`;
- :mod:`.site`: partitions, configuration and the user's limits (:func:`ask_site`);
- :mod:`.checks`: points that can never start here (:func:`check_runnable`), sbatch's "later" refusals;
- :mod:`.reproducer`: the batch script submitit writes (:func:`job_script`) and the plain-sbatch reproducer
  (:func:`render_sbatch`).
"""

from __future__ import annotations

from ddlio.lazy import lazy_exports

_EXPORTS = {
    **dict.fromkeys(("HELD", "LIMIT", "NEVER", "REASONS", "RUNNING", "SACCT_FIELDS", "SQUEUE_FORMAT", "STARTING",
                     "STATES", "TERMINAL", "UNKNOWN", "VANISHED", "WAITING", "WAITS", "JobState", "JobWatcher", "Kind",
                     "Runner", "expand_job_id", "fmt_duration", "job_states", "normalize_state", "parse_sacct",
                     "parse_squeue", "reason_kind", "run_command", "state_kind", "states_of"), "ddlio.jobstates"),
    **dict.fromkeys(("check_available", "check_runnable", "is_submit_limit", "point_problems", "unrunnable"),
                    ".checks"),
    **dict.fromkeys(("cancel", "executor_parameters", "make_executor", "resources", "site_options"), ".executor"),
    **dict.fromkeys(("TEMPLATES", "job_script", "render_sbatch", "submission_text"), ".reproducer"),
    **dict.fromkeys(("Limits", "Partition", "SiteInfo", "ask_limits", "ask_site", "max_array_size", "parse_config",
                     "parse_limits", "parse_minutes", "parse_partitions", "site_answer"), ".site"),
}
#: each name is imported from its module on first use (a local sweep that asks for ``resources`` does not import
#: the site's queries or the reproducer's templates)
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)

__all__ = sorted(_EXPORTS, key=str.casefold)
