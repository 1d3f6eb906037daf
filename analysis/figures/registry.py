"""The figures, in report order: each entry is a module with ``plan(inputs) -> list[FigureJob]`` (and its
``draw_*`` function). A new figure is a module in this package and an entry here."""

from __future__ import annotations

from collections.abc import Callable

from analysis.figures import access_pattern, amplification, config_bars, heatmap, latency, scaling, stripe
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
