"""What every figure module shares: the figure (Agg canvas, fixed margins), error bars, the job a figure
module plans (:class:`FigureJob`), a drawn figure (:class:`Drawn`) and the inputs a plan reads
(:class:`Inputs`)."""

from __future__ import annotations

import textwrap
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
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


#: distinguishable colours (Paul Tol's "bright" and "muted" schemes), assigned to series names in sorted order
PALETTE = ("#4477aa", "#ee6677", "#228833", "#ccbb44", "#66ccee", "#aa3377", "#332288", "#999933", "#882255",
           "#44aa99", "#bbbbbb", "#117733", "#cc6677", "#88ccee", "#ddcc77", "#000000")


def colour_map(names: Iterable[str]) -> dict[str, str]:
    """One colour per series name, keyed by the name (sorted, then :data:`PALETTE` in turn, cycling past 16): every
    panel of a figure, and every figure built from the same names, draws a series in the same colour."""
    return {n: PALETTE[i % len(PALETTE)] for i, n in enumerate(sorted({str(n) for n in names}))}


def _chars(width_in: float, fontsize: float) -> int:
    """How many characters of ``fontsize`` points fit in ``width_in`` inches (a character ≈ 0.6 em)."""
    return max(20, int(width_in * 72 / (0.6 * fontsize)))


def wrap(text: str, width_in: float, fontsize: float = 12.0) -> str:
    """``text`` wrapped (:mod:`textwrap`, at spaces) to fit ``width_in`` inches at ``fontsize`` points."""
    return "\n".join(textwrap.wrap(text, _chars(width_in, fontsize), break_on_hyphens=False)) or text


def title(fig: Figure, text: str, fontsize: float = 12.0) -> None:
    """``fig``'s title, wrapped to the figure's width; the axes move down to make room for its lines."""
    width, height = fig.get_size_inches()
    lines = wrap(text, width - 0.4, fontsize)
    fig.suptitle(lines, fontsize=fontsize, y=1 - 0.12 / height, va="top")
    need = (lines.count("\n") + 1) * fontsize * 1.3 / 72 + 0.35  # inches above the top axes
    if any(ax.get_title() for ax in fig.axes):  # the panels' own titles sit above them
        need += 0.3
    if fig.subplotpars.top > 1 - need / height:
        fig.subplots_adjust(top=1 - need / height)


def legend_width(names: Iterable[str], fontsize: float = 8.0) -> float:
    """Inches a legend of ``names`` needs at the right of a figure (text, handle and padding)."""
    longest = max((len(str(n)) for n in names), default=4)
    return 0.75 + longest * 0.6 * fontsize / 72


def legend(fig: Figure, colours: dict[str, str], names: Iterable[str], kind: str = "patch", title: str = "",
           fontsize: float = 8.0) -> None:
    """One legend for the whole figure, at its right (in the margin :func:`legend_width` reserved), an entry per
    series of ``names`` in its :func:`colour_map` colour; ``kind`` is ``patch`` (bars), ``line`` (with markers)
    or ``step`` (lines without markers)."""
    from matplotlib.lines import Line2D  # lazy: matplotlib is heavy; --help stays fast
    from matplotlib.patches import Patch  # lazy: matplotlib is heavy; --help stays fast

    names = list(dict.fromkeys(str(n) for n in names))
    marker = "o" if kind == "line" else None
    handles = [Patch(color=colours[n]) if kind == "patch" else Line2D([], [], color=colours[n], marker=marker)
               for n in names]
    right = fig.subplotpars.right
    fig.legend(handles, names, loc="upper left", bbox_to_anchor=(right + 0.01, fig.subplotpars.top),
               fontsize=fontsize, title=title or None, title_fontsize=fontsize, frameon=False)


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
    their latency histograms (``keys``/``hists``, :func:`analysis.query.hist_frame`), whether to draw access
    patterns (``traces``) and the checkpoint points (``checkpoints``); the per-configuration frames are computed
    once, when a plan first asks."""

    points: pd.DataFrame
    keys: pd.Series
    hists: np.ndarray
    traces: bool = True
    #: the checkpoint points (:func:`analysis.checkpoint.checkpoint_frame`; empty: none), the checkpoint figures'
    checkpoints: pd.DataFrame = field(default_factory=pd.DataFrame)

    @cached_property
    def cfg(self) -> pd.DataFrame:
        """One row per configuration (:func:`analysis.frames.configs`)."""
        return F.configs(self.points)

    @cached_property
    def best(self) -> pd.DataFrame:
        """The best stripe layout of each node count (:func:`analysis.frames.best_per_scale`)."""
        return F.best_per_scale(self.cfg)
