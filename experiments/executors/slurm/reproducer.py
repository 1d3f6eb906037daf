"""What a Slurm submission looks like as a script: the batch script submitit hands sbatch (:func:`job_script`, what
``dry_run`` shows) and the standalone reproducer that reruns one point's kernel with plain ``sbatch``
(:func:`render_sbatch`, from ``slurm_templates/point.sbatch``)."""

from __future__ import annotations

import string
import sys
from pathlib import Path
from typing import Any

from ddlio.env import PROJECT_DIR
from ddlio.runpaths import RunPaths
from ddlio.shell import export_line, quote, sbatch_flag
from experiments.executors.entry import job_python
from experiments.executors.slurm.executor import executor_parameters

TEMPLATES = PROJECT_DIR / "slurm_templates"


def job_script(specs: list[Any], folder: Path, python: str = sys.executable) -> str:
    """The batch script submitit writes and sbatch receives for these points (one job, or an array when there
    are several), rendered by submitit's own function with the same parameters and command as
    :func:`make_executor`'s executor: what ``dry_run`` shows is what would be submitted."""
    from submitit.slurm.slurm import _make_sbatch_string  # lazy: submitit takes ~0.3 s to import

    params = executor_parameters(specs[0])
    params["map_count"] = len(specs) if len(specs) > 1 else None
    command = " ".join([job_python(python), "-u -m submitit.core._submit", quote(str(folder))])
    return _make_sbatch_string(command=command, folder=str(folder), **params)


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
