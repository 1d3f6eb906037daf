"""The protocol every workload kind follows (:class:`WorkloadKind`): its name, its metric set, its label, its job
phases and the MPI program they run (:meth:`WorkloadKind.run`), its rows in the store and the analyses that apply
to it. :class:`JobContext` is what the job (:mod:`experiments.run.job`) hands a kind's :meth:`~WorkloadKind.run`.

A kind beyond ``train`` reports its results as ``metrics`` of its record (:meth:`WorkloadKind.record`): the store
keeps them as rows of its long ``point_metrics`` table (point, kind, metric, value, unit), so a new kind adds rows,
never columns. ``train`` keeps its wide row of read columns (``points``, ``epochs``) as before.
"""

from __future__ import annotations

import socket
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, NamedTuple, Protocol

from ddlio.records import ResultRecord
from ddlio.runpaths import RunPaths
from experiments.config import PointSpec


class Steps(Protocol):
    """The job's MPI step runner (:class:`experiments.run.job.StepRunner`): ``steps(module, args, ranks, name)``
    runs ``python -m module args`` on ``ranks`` ranks with the point's launch line, to its end, within what is left
    of the point's time limit; :meth:`ahead` starts one whose ranks wait at a gate."""

    def __call__(self, module: str, args: list[str], ranks: int, name: str) -> None: ...

    def ahead(self, module: str, args: list[str], ranks: int, name: str) -> Any: ...


@dataclass(frozen=True)
class JobContext:
    """What the job hands a kind's :meth:`WorkloadKind.run`.

    ``point`` is the point's stored form, ``spec`` the same as a :class:`~experiments.config.PointSpec`;
    ``run_dir`` and ``paths`` its run folder; ``deadline`` the end of its time limit (``time.monotonic`` clock,
    seconds); ``steps`` the MPI step runner; ``ensure(plan, layout, run_generation, ranks)`` makes a dataset ready
    (:func:`experiments.dataset.ensure_dataset`, looked up through the job at call time)."""

    point: dict[str, Any]
    spec: PointSpec
    run_dir: Path
    paths: RunPaths
    deadline: float
    steps: Steps
    ensure: Callable[..., Any]

    def left_s(self) -> float:
        """Seconds left of the point's time limit (0 when none are)."""
        return max(0.0, self.deadline - time.monotonic())


class Metric(NamedTuple):
    """One metric a kind reports: its name, its unit (``"MiB/s"``, ``"s"``, ``"bytes"``; ``""`` for a count or a
    ratio) and what it measures."""

    name: str
    unit: str
    doc: str = ""


class Measured(NamedTuple):
    """What :meth:`WorkloadKind.run` returns: the point's record with the kind's own facts (the job adds the point,
    the run folder, the job state and the point's seconds) and the environment (versions, host) it ran in."""

    record: ResultRecord
    env: dict[str, Any]


class WorkloadKind:
    """A workload kind: what a point measures, and how. A subclass sets :attr:`name` and :attr:`metrics` and
    implements :meth:`run`; the rest has defaults. Registered in :data:`experiments.registry.KINDS` (a plug-in
    through an entry point of group ``ddlio.kinds``)."""

    #: the name points give as ``kind=`` (its key in :data:`experiments.registry.KINDS`)
    name: ClassVar[str] = ""
    #: the metrics the kind reports (``train``'s are the columns of its wide row; another kind's become rows of
    #: ``point_metrics``)
    metrics: ClassVar[tuple[Metric, ...]] = ()
    #: the analyses that apply to the kind's points, of :data:`experiments.registry.ANALYSES` (the figures, the
    #: guideline scenarios, the diagnose findings); ``None``: all of them; none by default
    analyses: ClassVar[frozenset[str] | None] = frozenset()

    def label(self, spec: PointSpec) -> str:
        """A short human label of the point: the kind's name before the configuration's label (as the store's
        ``points.label`` and :func:`ddlio.identity.paper_label` write it from the stored form)."""
        return f"{self.name} {spec.label}"

    def describe(self, spec: PointSpec) -> str:
        """What the point will do, in one line, for the dry run ("" by default: the step line says it)."""
        return ""

    def run(self, ctx: JobContext) -> Measured:
        """The kind's job phases and the MPI program they run: the point's record and environment. Raises
        :class:`~ddlio.errors.DdlioError` for a measurement problem (the job stores it as the point's failure)."""
        raise NotImplementedError(f"workload kind {self.name!r} does not implement run()")

    def record(self, ctx: JobContext, values: dict[str, float], started_unix: float, finished_unix: float,
               **facts: Any) -> ResultRecord:
        """The point's record for a kind beyond ``train``: ``values`` (metric name -> value, in the unit
        :attr:`metrics` gives) as its ``metrics``, its measuring window (``started_unix``, ``finished_unix``: seconds
        since the epoch) and ``facts`` (more keys of the record). A metric not in :attr:`metrics` is refused."""
        units = {m.name: m.unit for m in self.metrics}
        unknown = sorted(set(values) - set(units))
        if unknown:
            raise ValueError(f"kind {self.name!r} reports metrics it does not declare: {', '.join(unknown)} "
                             f"(declared: {', '.join(units) or 'none'})")
        rows = [{"name": k, "value": float(v), "unit": units[k]} for k, v in values.items()]
        fields = {"metrics": rows, "epochs": [], "nodes": [socket.gethostname()],
                  "started_unix": started_unix, "finished_unix": finished_unix, **facts}
        return ResultRecord(ctx.spec.point_key, {}, fields)

