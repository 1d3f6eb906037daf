"""The Slurm concern: the keys only a Slurm cluster has are left at their defaults on the local executor; the
sbatch options and the vanish time (seconds) are valid."""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from ddlio.shell import SBATCH_OPTION
from experiments.config.point import SLURM_ONLY
from experiments.config.schema import MAX_TIMEOUT_MIN, SlurmClusterConf
from experiments.config.validate.values import int_range, positive


def with_defaults(cl: dict[str, Any]) -> dict[str, Any]:
    """``cl`` (a composed cluster: ``cluster=local`` has no Slurm key, ``cluster=slurm`` has them all) with every key
    of :class:`SlurmClusterConf` it lacks at its default, as the specs and the stored form hold them."""
    return {**asdict(SlurmClusterConf()), **cl}


def check_slurm_only(problems: list[str], cl: dict[str, Any], executor: str) -> None:
    """On the local executor, every key of SLURM_ONLY at its default (``cluster=local`` has none of them: this
    holds a stored point, or ``cluster.executor=local`` over ``cluster=slurm``, to it)."""
    if executor != "local":
        return
    unset = SlurmClusterConf()
    problems += [f"cluster.{k}={cl[k]!r} applies to Slurm only (the local executor runs every point on this "
                 "host): drop it, or use cluster=slurm" for k in SLURM_ONLY if cl[k] != getattr(unset, k)]


def check_slurm(problems: list[str], cl: dict[str, Any]) -> None:
    """``cluster.sbatch``'s options, ``cluster.vanish_after_s`` and ``cluster.points_per_task``."""
    for k, v in cl["sbatch"].items():
        if not SBATCH_OPTION.match(str(k)):
            problems.append(f"cluster.sbatch: {k!r} is not an sbatch option name (e.g. exclusive, mem, mail_type)")
        if isinstance(v, (dict, list)) or v is None:
            problems.append(f"cluster.sbatch.{k} must be a single value (a string, number or true), not {v!r}")
    positive(problems, "cluster.vanish_after_s", cl["vanish_after_s"], "seconds", MAX_TIMEOUT_MIN * 60)
    int_range(problems, "cluster.points_per_task", cl["points_per_task"], 0, 10000,
              " (points one array task measures in turn; 0 = chosen from the sweep's size)")
