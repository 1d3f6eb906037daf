"""The cluster concern: the executor, the resources a point asks for (nodes, ranks per node), its time limits,
the ranks' environment and the MPI launch line. Times in seconds unless named in minutes."""

from __future__ import annotations

import shlex
from typing import Any

from ddlio.shell import ENV_NAME, resolve_command
from experiments.config.schema import EXECUTORS, MAX_TIMEOUT_MIN
from experiments.config.validate.values import choice, int_range, positive


def check_executor(problems: list[str], cl: dict[str, Any]) -> str:
    """``cluster.executor``: one of EXECUTORS."""
    return choice(problems, "cluster.executor", cl["executor"], EXECUTORS)


def check_resources(problems: list[str], cfg: dict[str, Any], executor: str) -> dict[str, Any]:
    """The PointSpec's ``nodes`` and ``ppn`` (ranks per node); the local executor runs one host, in the
    foreground."""
    nodes = int_range(problems, "nodes", cfg["nodes"], 1)
    ppn = int_range(problems, "ppn", cfg["ppn"], 1, 1024)
    if executor == "local" and isinstance(nodes, int) and nodes > 1:
        problems.append(
            f"nodes={nodes} needs a cluster: the local executor runs on this one host; use cluster=slurm, "
            f"or nodes=1 ppn={nodes * max(ppn, 1)} to run as many ranks here"
        )
    if not cfg.get("wait", True) and executor == "local":
        problems.append("wait=false needs cluster=slurm: local points run one at a time in the foreground")
    return {"nodes": nodes, "ppn": ppn}


def check_limits(problems: list[str], cl: dict[str, Any]) -> None:
    """``cluster.hang_timeout_s`` (seconds) and ``cluster.timeout_min`` (minutes): finite, > 0, at most a year;
    ``cluster.array_parallelism`` (points of a job array at once) >= 1."""
    positive(problems, "cluster.hang_timeout_s", cl["hang_timeout_s"], "seconds", MAX_TIMEOUT_MIN * 60)
    int_range(problems, "cluster.array_parallelism", cl["array_parallelism"], 1)
    positive(problems, "cluster.timeout_min", cl["timeout_min"], "minutes", MAX_TIMEOUT_MIN)


def check_env(problems: list[str], cl: dict[str, Any]) -> None:
    """``cluster.env``: environment variable names, each to a single value."""
    for k, v in cl["env"].items():
        if not ENV_NAME.match(str(k)):
            problems.append(f"cluster.env: {k!r} is not an environment variable name: use letters, digits and _, "
                            "not starting with a digit (e.g. MPI4PY_LIBMPI)")
        if isinstance(v, (dict, list)):
            problems.append(f"cluster.env.{k} must be a single value, not {type(v).__name__}")


def check_launch(problems: list[str], cl: dict[str, Any], executor: str) -> None:
    """``cluster.launch``: a launch line with only the {ranks} {nodes} {ppn} placeholders, whose command (run
    here by the local executor) is installed."""
    launch = str(cl["launch"])
    if not launch.strip():
        problems.append("cluster.launch is empty: give the MPI launch line, e.g. 'mpiexec -n {ranks}' (local) or "
                        "'srun --mpi=pmi2' (Slurm)")
        return
    try:
        words = shlex.split(launch.format(ranks=1, nodes=1, ppn=1))
    except (ValueError, KeyError, IndexError) as e:
        problems.append(
            f"cluster.launch={launch!r} is not a valid launch line ({e}); placeholders: {{ranks}} {{nodes}} {{ppn}}"
        )
        words = []
    if words and executor == "local" and resolve_command(words[0]) is None:
        problems.append(
            f"cluster.launch: '{words[0]}' not found: install an MPI (pip install mpich, or apt-get install "
            "mpich / openmpi-bin) or set cluster.launch to your MPI's launch line"
        )
