"""Executors: where a point's job runs. The registry (:data:`EXECUTORS`) maps ``cluster.executor``'s name to the
executor's class (:class:`~experiments.executors.base.Executor`); the driver asks it, never a name."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ddlio.lazy import LazyRegistry, lazy_exports

if TYPE_CHECKING:
    from experiments.executors.base import Executor

#: ``cluster.executor`` -> the executor's class, imported when first asked for (a local sweep never imports the
#: Slurm side)
EXECUTORS: LazyRegistry = LazyRegistry({"local": "experiments.executors.local:LocalExecutor",
                                        "slurm": "experiments.executors.slurm.wait:SlurmExecutor"})


def executor_for(name: str) -> Executor:
    """A fresh executor for ``cluster.executor=name`` (KeyError for a name no executor has)."""
    return EXECUTORS[name]()


_EXPORTS = {
    **dict.fromkeys(("Executor", "Harvest", "Harvested", "Host", "JobFunction", "Pending", "Submitted", "Tally"),
                    ".base"),
    "LocalExecutor": ".local",
    "SlurmExecutor": ".slurm.wait",
}
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)

__all__ = sorted([*_EXPORTS, "EXECUTORS", "executor_for"], key=str.casefold)
