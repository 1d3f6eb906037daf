"""Executors: where a point's job runs. The registry (:data:`EXECUTORS`) maps ``cluster.executor``'s name to the
executor's class (:class:`~experiments.executors.base.Executor`); the driver asks it, never a name."""

from __future__ import annotations

from experiments.executors.base import (
    Executor,
    Harvest,
    Harvested,
    Host,
    JobFunction,
    Pending,
    Submitted,
    Tally,
)
from experiments.executors.local import LocalExecutor
from experiments.executors.slurm.wait import SlurmExecutor

#: cluster.executor -> the executor's class (one instance per sweep round: it may keep what the round learnt)
EXECUTORS: dict[str, type[Executor]] = {"local": LocalExecutor, "slurm": SlurmExecutor}


def executor_for(name: str) -> Executor:
    """A fresh executor for ``cluster.executor=name`` (KeyError for a name no executor has)."""
    return EXECUTORS[name]()


__all__ = ["EXECUTORS", "Executor", "Harvest", "Harvested", "Host", "JobFunction", "LocalExecutor", "Pending",
           "SlurmExecutor", "Submitted", "Tally", "executor_for"]
