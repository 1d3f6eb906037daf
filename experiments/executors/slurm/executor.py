"""Slurm jobs through submitit: the executor for points that share resources, its parameters (a point's nodes ×
ppn, time limit and site settings), and cancelling jobs.

One job runs one *driver* process on the first node of its allocation (submitit with ``use_srun=False``); the
driver starts dataset generation and the kernel as MPI steps with the cluster's launch line (``srun ...``)
inside the allocation. Points with the same resources go out as one job array.
"""

from __future__ import annotations

import math
import subprocess
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from experiments.config import SlurmCluster
from experiments.executors.entry import job_python


def site_options(cluster: Any) -> dict[str, Any]:
    """A cluster's site settings for an sbatch header: a Slurm cluster's partition, account, qos, constraint, extra
    sbatch options and setup lines (a local cluster has none: its reproducer asks for the site's defaults)."""
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


def executor_parameters(spec: Any, per_task: int = 1) -> dict[str, Any]:
    """submitit SlurmExecutor parameters for a Slurm point: its nodes × ppn, time limit (``per_task`` points' limits
    when one array task measures that many in turn), and site settings."""
    c = spec.cluster
    params: dict[str, Any] = {
        "nodes": spec.nodes,
        "ntasks_per_node": spec.ppn,
        "cpus_per_task": 1,
        "time": max(1, math.ceil(float(c.timeout_min) * max(1, per_task))),
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


def make_executor(specs: list[Any], folder: Path, per_task: int = 1, python: str = sys.executable) -> Any:
    """A submitit SlurmExecutor for points that share resources (``per_task`` of them in each array task), whose
    jobs run ``python`` (this interpreter)."""
    import submitit  # lazy: submitit takes ~0.3 s to import; --help stays fast

    ex = submitit.SlurmExecutor(folder=folder, max_num_timeout=0, python=job_python(python))
    ex.update_parameters(**executor_parameters(specs[0], per_task))
    return ex


def cancel(job_ids: Iterable[str]) -> None:
    """Ask Slurm to cancel these jobs (``scancel``; array tasks as ``123_4``); its answer is not checked."""
    ids = list(job_ids)
    if ids:
        subprocess.run(["scancel", *ids], capture_output=True, timeout=30, check=False)
