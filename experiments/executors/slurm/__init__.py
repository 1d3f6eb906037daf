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

from ddlio.jobstates import (
    HELD,
    LIMIT,
    NEVER,
    REASONS,
    RUNNING,
    SACCT_FIELDS,
    SQUEUE_FORMAT,
    STARTING,
    STATES,
    TERMINAL,
    UNKNOWN,
    VANISHED,
    WAITING,
    WAITS,
    JobState,
    JobWatcher,
    Kind,
    Runner,
    expand_job_id,
    fmt_duration,
    job_states,
    normalize_state,
    parse_sacct,
    parse_squeue,
    reason_kind,
    run_command,
    state_kind,
    states_of,
)
from experiments.executors.slurm.checks import (
    check_available,
    check_runnable,
    is_submit_limit,
    point_problems,
    unrunnable,
)
from experiments.executors.slurm.executor import cancel, executor_parameters, make_executor, resources, site_options
from experiments.executors.slurm.reproducer import TEMPLATES, job_script, render_sbatch
from experiments.executors.slurm.site import (
    Limits,
    Partition,
    SiteInfo,
    ask_limits,
    ask_site,
    max_array_size,
    parse_config,
    parse_limits,
    parse_minutes,
    parse_partitions,
)

__all__ = [
    "HELD", "LIMIT", "NEVER", "REASONS", "RUNNING", "SACCT_FIELDS", "SQUEUE_FORMAT", "STARTING", "STATES",
    "TEMPLATES", "TERMINAL", "UNKNOWN", "VANISHED", "WAITING", "WAITS", "JobState", "JobWatcher", "Kind", "Limits",
    "Partition", "Runner", "SiteInfo", "ask_limits", "ask_site", "cancel", "check_available", "check_runnable",
    "executor_parameters", "expand_job_id", "fmt_duration", "is_submit_limit", "job_script", "job_states",
    "make_executor", "max_array_size", "normalize_state", "parse_config", "parse_limits", "parse_minutes",
    "parse_partitions", "parse_sacct", "parse_squeue", "point_problems", "reason_kind", "render_sbatch",
    "resources", "run_command", "site_options", "state_kind", "states_of", "unrunnable",
]
