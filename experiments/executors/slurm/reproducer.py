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
from experiments.executors.slurm.executor import make_executor
from experiments.executors.slurm.packing import packs

TEMPLATES = PROJECT_DIR / "slurm_templates"


def job_script(specs: list[Any], folder: Path, python: str = sys.executable, per_task: int = 1) -> str:
    """The batch script sbatch receives when these points go out as one submission, ``per_task`` of them measured
    in turn by each array task: the executor the submission uses (:func:`make_executor`, same arguments) writes it
    with submitit's own method (:func:`submission_text`), so what ``dry_run`` shows is what is submitted
    (tests/test_dry_run_plan.py compares it with what a stand-in sbatch receives)."""
    executor = make_executor(list(specs), folder, per_task, python)
    return submission_text(executor, len(packs(len(specs), per_task)))


def submission_text(executor: Any, tasks: int) -> str:
    """The batch script ``executor`` hands sbatch when ``tasks`` jobs go out in one ``executor.batch()``: its
    ``_make_submission_file_text`` (what submitit's submission writes), on the array copy submitit's
    ``SlurmExecutor._internal_process_submissions`` makes for several (``map_count``: an array of ``tasks``)."""
    if tasks > 1:
        import submitit  # lazy: as make_executor

        array = submitit.SlurmExecutor(executor.folder, executor.max_num_timeout)
        array.update_parameters(**executor.parameters)
        array.parameters["map_count"] = tasks
        return array._make_submission_file_text(executor._submitit_command_str, "")
    return executor._make_submission_file_text(executor._submitit_command_str, "")


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
