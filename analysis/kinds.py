"""Which stored points an analysis takes: those of the workload kinds whose declaration
(:attr:`experiments.kinds.base.WorkloadKind.analyses`, read through :func:`experiments.registry.kinds_for`) names it.
The figures, the guidelines and the diagnosis read the train kind's wide row; a point of a kind they do not apply to
(its results are rows of ``point_metrics``) is left out here, in one place, and nowhere else."""

from __future__ import annotations

from sqlalchemy import ColumnElement, or_, select

from ddlio.store import Point, StoreReader
from experiments.registry import ANALYSES, kinds_for

#: the kind of a point whose ``points.kind`` is NULL (every point stored before kinds existed, and train's since)
TRAIN = "train"


def applies(store: StoreReader, analysis: str) -> ColumnElement[bool]:
    """A condition on ``points`` that keeps the points of the kinds ``analysis`` (one of
    :data:`experiments.registry.ANALYSES`) applies to."""
    if analysis not in ANALYSES:
        raise ValueError(f"unknown analysis {analysis!r}: one of {', '.join(ANALYSES)}")
    with store.session() as s:
        stored = {k for k in s.scalars(select(Point.kind).distinct()) if k is not None}
    keep = kinds_for(analysis, sorted(stored | {TRAIN}))
    cond = Point.kind.in_(keep)
    return or_(Point.kind.is_(None), cond) if TRAIN in keep else cond
