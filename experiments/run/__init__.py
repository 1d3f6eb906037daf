"""Running a sweep: the driver (:func:`launch`, :func:`dry_run`), the job side (:func:`run_point`), run folders,
MPI steps and each point's life cycle. Importers write ``from experiments.run import launch``."""

from __future__ import annotations

from experiments.run.driver import Driver, Tracker, launch, new_sweep_id
from experiments.run.job import failure_record, generation_runner, run_point, step_runner
from experiments.run.plan import dry_run
from experiments.run.progress import SweepReport
from experiments.run.records import private_dir, run_dir_for

__all__ = ["Driver", "SweepReport", "Tracker", "dry_run", "failure_record", "generation_runner", "launch",
           "new_sweep_id", "private_dir", "run_dir_for", "run_point", "step_runner"]
