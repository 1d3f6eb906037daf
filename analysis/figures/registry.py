"""The figures, in report order: each entry is a module with ``plan(inputs) -> list[FigureJob]`` (and its
``draw_*`` function). A new figure is a module in this package and an entry here: in :data:`FIGURES` for train's
points, in :data:`CHECKPOINT_FIGURES` for checkpoint points (planned only when there are some)."""

from __future__ import annotations

from collections.abc import Callable

from analysis.figures import access_pattern, amplification, checkpoint, config_bars, heatmap, latency, scaling, stripe
from analysis.figures.base import FigureJob, Inputs

#: every figure kind's ``plan``, in the order the report shows them
FIGURES: list[Callable[[Inputs], list[FigureJob]]] = [
    config_bars.plan,
    stripe.plan,
    scaling.plan,
    heatmap.plan,
    amplification.plan,
    latency.plan,
    access_pattern.plan,
]
#: the checkpoint figures' ``plan``, after train's (each plans nothing without checkpoint points)
CHECKPOINT_FIGURES: list[Callable[[Inputs], list[FigureJob]]] = [
    checkpoint.plan,
]
