"""What every figure module shares: the figure (Agg canvas, fixed margins), error bars, the job a figure
module plans (:class:`FigureJob`), a drawn figure (:class:`Drawn`) and the inputs a plan reads
(:class:`Inputs`)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from analysis import frames as F

if TYPE_CHECKING:
    from matplotlib.figure import Figure


def _figure(width: float, height: float, nrows: int = 1, ncols: int = 1, *, left: float = 0.9, right: float = 0.3,
            bottom: float = 0.7, top: float = 0.6, wspace: float = 0.25, hspace: float = 0.3,
            **kw: Any) -> tuple[Figure, np.ndarray]:
    """A figure of ``width`` × ``height`` inches with fixed margins in inches (no layout engine: with hundreds of
    tick labels, constrained layout costs more than drawing)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg  # lazy: matplotlib is heavy; --help stays fast
    from matplotlib.figure import Figure  # lazy: matplotlib is heavy; --help stays fast

    fig = Figure(figsize=(width, height))
    FigureCanvasAgg(fig)
    axes = fig.subplots(nrows, ncols, squeeze=False, **kw)
    fig.subplots_adjust(left=left / width, right=1 - right / width, bottom=bottom / height, top=1 - top / height,
                        wspace=wspace, hspace=hspace)
    return fig, axes


def _yerr(std: pd.Series) -> np.ndarray:
    return std.fillna(0.0).to_numpy(dtype=float)


def _slug(text: str) -> str:
    return "".join(c if c.isalnum() or c in "-_" else "_" for c in text).strip("_")


@dataclass
class Drawn:
    """One figure (or the reason it was skipped): ``name`` is the file stem, ``caption`` says what it shows."""

    name: str
    caption: str
    figure: Figure | None = None
    skipped: str | None = None


@dataclass
class FigureJob:
    """A figure to draw: its frames are computed, the drawing is deferred (``draw()`` returns the Figure), so
    figures can be drawn in worker processes. ``skipped`` says why there is nothing to draw."""

    name: str
    caption: str
    draw: Callable[[], Figure] | None = None
    skipped: str | None = None


@dataclass
class Inputs:
    """What a figure module's ``plan`` reads: the completed ``points`` (from :func:`analysis.query.analysis_frame`),
    their latency histograms (``keys``/``hists``, :func:`analysis.query.hist_frame`) and whether to draw access
    patterns (``traces``); the per-configuration frames are computed once, when a plan first asks."""

    points: pd.DataFrame
    keys: pd.Series
    hists: np.ndarray
    traces: bool = True

    @cached_property
    def cfg(self) -> pd.DataFrame:
        """One row per configuration (:func:`analysis.frames.configs`)."""
        return F.configs(self.points)

    @cached_property
    def best(self) -> pd.DataFrame:
        """The best stripe layout of each node count (:func:`analysis.frames.best_per_scale`)."""
        return F.best_per_scale(self.cfg)
