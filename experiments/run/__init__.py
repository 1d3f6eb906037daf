"""Running a sweep: the driver (:func:`launch`, :func:`dry_run`), the job side (:func:`run_point`), run folders,
MPI steps and each point's life cycle. Importers write ``from experiments.run import launch``.

The names load on first use: every MPI rank of a kernel or generation step imports :mod:`experiments.run.mpirun`
(through this package), and should not pay for the driver's imports (~0.1 s)."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # what type checkers and readers see; at run time __getattr__ loads them
    from experiments.run.driver import Driver, Tracker, launch, new_sweep_id
    from experiments.run.job import failure_record, generation_runner, run_point, step_runner
    from experiments.run.plan import dry_run
    from experiments.run.progress import SweepReport
    from experiments.run.records import private_dir, run_dir_for

#: name -> the module of this package that defines it
_WHERE = {
    "Driver": "driver", "Tracker": "driver", "launch": "driver", "new_sweep_id": "driver",
    "failure_record": "job", "generation_runner": "job", "run_point": "job", "step_runner": "job",
    "dry_run": "plan", "SweepReport": "progress", "private_dir": "records", "run_dir_for": "records",
}

__all__ = ["Driver", "SweepReport", "Tracker", "dry_run", "failure_record", "generation_runner", "launch",
           "new_sweep_id", "private_dir", "run_dir_for", "run_point", "step_runner"]


def __getattr__(name: str) -> Any:
    if name not in _WHERE:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    module = importlib.import_module(f"{__name__}.{_WHERE[name]}")  # lazy: start-up of MPI ranks (see above)
    return getattr(module, name)
