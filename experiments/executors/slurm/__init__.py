"""Slurm: submitit executors with a point's own resources, job-state queries, and the standalone reproducer.

One job runs one *driver* process on the first node of its allocation (submitit with ``use_srun=False``); the
driver starts dataset generation and the kernel as MPI steps with the cluster's launch line (``srun ...``)
inside the allocation. Points with the same resources go out as one job array.
"""

from __future__ import annotations

import math
import shutil
import string
import subprocess
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from ddlio.env import PROJECT_DIR
from ddlio.errors import LaunchError
from ddlio.runpaths import RunPaths
from ddlio.shell import export_line, quote, sbatch_flag
from experiments.executors.slurm.state import (  # noqa: F401  (job states live there)
    NEVER,
    TERMINAL,
    VANISHED,
    WAITING,
    JobWatcher,
    ask_site,
    fmt_duration,
    is_submit_limit,
    job_states,
    reason_kind,
)

TEMPLATES = PROJECT_DIR / "slurm_templates"


def site_options(cluster: Any) -> dict[str, Any]:
    """A cluster's site settings for an sbatch header: a Slurm cluster's partition, account, qos, constraint, extra
    sbatch options and setup lines (a local cluster has none: its reproducer asks for the site's defaults)."""
    from experiments.config import SlurmCluster

    if not isinstance(cluster, SlurmCluster):
        return {}
    return {"partition": cluster.partition, "account": cluster.account, "qos": cluster.qos,
            "constraint": cluster.constraint, "sbatch": dict(cluster.sbatch), "setup": list(cluster.setup)}


def resources(spec: Any) -> tuple:
    """What makes two points' jobs interchangeable (same sbatch header): they may share one job array."""
    site = site_options(spec.cluster)
    return (spec.nodes, spec.ppn, math.ceil(float(spec.cluster.timeout_min)),
            *(tuple(sorted(v.items())) if isinstance(v, dict) else tuple(v) if isinstance(v, list) else v
              for v in site.values()))


def executor_parameters(spec: Any) -> dict[str, Any]:
    """submitit SlurmExecutor parameters for a Slurm point: its nodes × ppn, time limit, and site settings."""
    c = spec.cluster
    params: dict[str, Any] = {
        "nodes": spec.nodes,
        "ntasks_per_node": spec.ppn,
        "cpus_per_task": 1,
        "time": max(1, math.ceil(float(c.timeout_min))),
        "job_name": "ddlio",
        "use_srun": False,  # one driver process on the first node; it runs the MPI steps itself
        "array_parallelism": int(c.array_parallelism),
        "setup": list(c.setup),
        "signal_delay_s": 30,
    }
    for key in ("partition", "account", "qos", "constraint"):
        if getattr(c, key):
            params[key] = getattr(c, key)
    # a preempted or failed job must not be requeued into a run folder the driver has already judged
    params["additional_parameters"] = {"no_requeue": True, **{str(k): v for k, v in c.sbatch.items()}}
    return params


def job_script(specs: list[Any], folder: Path, python: str = sys.executable) -> str:
    """The batch script submitit writes and sbatch receives for these points (one job, or an array when there
    are several), rendered by submitit's own function with the same parameters and command as
    :func:`make_executor`'s executor: what ``dry_run`` shows is what would be submitted."""
    from submitit.slurm.slurm import _make_sbatch_string

    params = executor_parameters(specs[0])
    params["map_count"] = len(specs) if len(specs) > 1 else None
    command = " ".join([quote(python), "-u -m submitit.core._submit", quote(str(folder))])
    return _make_sbatch_string(command=command, folder=str(folder), **params)


def make_executor(specs: list[Any], folder: Path) -> Any:
    """A submitit SlurmExecutor for points that share resources."""
    import submitit

    ex = submitit.SlurmExecutor(folder=folder, max_num_timeout=0, python=quote(sys.executable))
    ex.update_parameters(**executor_parameters(specs[0]))
    return ex


def cancel(job_ids: Iterable[str]) -> None:
    ids = list(job_ids)
    if ids:
        subprocess.run(["scancel", *ids], capture_output=True, timeout=30, check=False)


def check_available() -> None:
    """Raise a LaunchError naming what is missing when this machine cannot submit Slurm jobs."""
    missing = [c for c in ("sbatch", "sacct", "scancel") if shutil.which(c) is None]
    if "sbatch" in missing:
        raise LaunchError(
            "cluster=slurm needs Slurm's commands, but 'sbatch' is not on PATH: run the sweep on a cluster's login "
            "node (or load the site's slurm module); for a test cluster on this machine: tests/cluster/slurm.sh start"
        )


def check_runnable(specs: list[Any], echo: Any = print, dry_run: bool = False) -> str:
    """Refuse, before anything is submitted, Slurm points whose job could never start here: more nodes than the
    partition has, more ranks per node than its nodes' CPUs, a time limit above its MaxTime, a partition, account
    or QOS the user may not use, a per-job limit of the user's association or QOS. Raises one LaunchError naming
    each point, its request and the limit (with ``dry_run``, returns its message instead, so the plan is still
    shown). Where Slurm cannot be asked, says so and checks nothing."""
    from experiments.executors.slurm.state import unrunnable

    slurm = [s for s in specs if s.cluster.executor == "slurm"]
    if not slurm:
        return ""
    site = ask_site()
    if site.error:
        echo(f"note: could not ask Slurm ({site.error}): the points were not checked against the partition's "
             "limits")
        return ""
    problems = unrunnable(slurm, site)
    if problems:
        shown = problems[:9] + ([f"... and {len(problems) - 9} more"] if len(problems) > 9 else [])
        message = ("some points can never start on this cluster; nothing was submitted:\n"
                   + "\n".join(f"  - {p}" for p in shown)
                   + "\nlower nodes, ppn or cluster.timeout_min, or choose another cluster.partition "
                   "(sinfo lists them)")
        if dry_run:
            return message
        raise LaunchError(message)
    if dry_run:
        names = sorted({s.cluster.partition for s in slurm})
        parts = [site.partition(n) for n in names]
        echo("Slurm: every point fits " + ", ".join(
            f"partition {p.name} ({p.total_nodes} nodes, {max(p.cpus_per_node, default=0)} CPUs per node, "
            f"MaxTime {'unlimited' if p.max_time_min is None else f'{p.max_time_min:g} min'}, {p.state})"
            for p in parts if p is not None) + f"; arrays split below MaxArraySize {site.max_array_size}")
    return ""


# --------------------------------------------------------------------------------------------- reproducer
def render_sbatch(
    *,
    label: str,
    run_dir: str,
    nodes: int,
    ppn: int,
    time_min: int,
    launch: str,
    python: str,
    project_dir: str,
    kernel_spec: str,
    partition: str = "",
    account: str = "",
    qos: str = "",
    constraint: str = "",
    sbatch: dict[str, Any] | None = None,
    setup: list[str] | None = None,
    env: dict[str, str] | None = None,
) -> str:
    """A standalone batch script that reruns one point's kernel with plain ``sbatch`` (no ddlio driver).

    The keyword arguments are the schema; ``slurm_templates/point.sbatch`` is the template. Every value is
    quoted through :mod:`ddlio.shell` (a control character raises ValueError); ``setup`` lines and the
    ``launch`` template are the user's own shell and pass as written.
    """
    ranks = nodes * ppn
    options: list[tuple[str, Any]] = [
        ("job_name", "ddlio-repro"), ("nodes", nodes), ("ntasks_per_node", ppn), ("time", time_min),
        ("output", RunPaths(Path(run_dir)).repro_output), ("partition", partition), ("account", account), ("qos", qos),
        ("constraint", constraint), *sorted((sbatch or {}).items()),
    ]
    directives = [sbatch_flag(k, v) for k, v in options if v is not None and v is not False and v != ""]
    exports = [export_line(k, v) for k, v in sorted((env or {}).items())]
    step = launch.format(ranks=ranks, nodes=nodes, ppn=ppn)
    template = string.Template((TEMPLATES / "point.sbatch").read_text())
    return template.substitute(
        label=label,
        directives="\n".join(directives),
        setup="\n".join(setup or []) or "# (no setup lines)",
        exports="\n".join(exports) or "# (no extra environment)",
        project_dir=quote(project_dir),
        step=step,
        python=quote(python),
        kernel_spec=quote(kernel_spec),
        result=quote(RunPaths(Path(run_dir)).repro_result_prefix),
    )
