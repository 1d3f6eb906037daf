"""Running a sweep: the driver (:func:`launch`, :func:`dry_run`), the job side (:func:`run_point`), run folders,
MPI steps and each point's life cycle. Importers write ``from experiments.run import launch``."""

from __future__ import annotations

from ddlio.lazy import lazy_exports

_EXPORTS = {
    **dict.fromkeys(("Driver", "Tracker", "launch", "new_sweep_id"), ".driver"),
    **dict.fromkeys(("failure_record", "generation_runner", "run_point", "step_runner"), ".job"),
    "dry_run": ".plan",
    "SweepReport": ".progress",
    **dict.fromkeys(("private_dir", "run_dir_for"), ".records"),
}
#: each name is imported from its module on first use: the job process, which unpickles ``run_point``, does not
#: import the driver's side
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)

__all__ = sorted(_EXPORTS, key=str.casefold)
