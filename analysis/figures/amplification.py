"""Amplification: what the file system served per byte the reader returned, per format, access and layout."""

from __future__ import annotations

from functools import partial
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from analysis import frames as F
from analysis.figures.base import FigureJob, Inputs, _figure, _yerr, colour_map, legend, legend_width, title

if TYPE_CHECKING:
    from matplotlib.figure import Figure


def draw_amplification(frame: pd.DataFrame) -> Figure:
    """Amplification per format × access × configuration (horizontal bars, mean of repetitions ±1 std), with the
    line at 1 where the file system served exactly the bytes the reader returned; ``frame`` from
    :func:`analysis.frames.amplification_frame`."""
    n = len(frame)
    names = (frame["format"] + "/" + frame["access"] + " " + frame["label"]).tolist()
    series = (frame["format"] + "/" + frame["access"]).astype(str)
    colours = colour_map(series)
    right = legend_width(colours) + 0.2
    fig, axes = _figure(8.0 + right, max(2.5, 0.28 * n + 1.6), left=0.4 + 0.075 * max(len(t) for t in names),
                        right=right)
    ax = axes[0, 0]
    y = np.arange(n)
    rep = frame["n"].to_numpy() > 1 if "n" in frame.columns else np.zeros(n, dtype=bool)
    ax.barh(y, frame["mean"].to_numpy(dtype=float), color=series.map(colours).tolist())
    if rep.any():
        ax.errorbar(frame["mean"].to_numpy(dtype=float)[rep], y[rep], xerr=_yerr(frame["std"])[rep], fmt="none",
                    ecolor="#222222", capsize=2 if n <= 40 else 0)
    ax.axvline(1.0, color="#222222", linewidth=1, linestyle="--")
    ax.set_yticks(y, names, fontsize=8)
    ax.invert_yaxis()
    ax.set_xlim(0, max(1.1, float(np.nanmax(frame["mean"].to_numpy(dtype=float))) * 1.1))
    ax.set_xlabel(F.METRICS["amplification"][0])
    ax.grid(axis="x", alpha=0.3)
    legend(fig, colours, list(colours), title="format/access")
    title(fig, "what the file system served per byte returned (mean of repetitions, ±1 std where repeated; "
          "1 = no amplification)")
    return fig


#: most configurations the figure draws (a bar each): beyond, those furthest from 1 (the caption says so)
MAX_BARS = 60


def furthest_from_one(amp: pd.DataFrame, most: int = MAX_BARS) -> pd.DataFrame:
    """The ``most`` rows of ``amp`` (:func:`analysis.frames.amplification_frame`) whose mean amplification is
    furthest from 1, in their order in ``amp`` (all of them when there are no more)."""
    if len(amp) <= most:
        return amp
    far = (amp["mean"].astype(float) - 1).abs().to_numpy()
    keep = np.sort(np.argsort(-far, kind="stable")[:most])
    return amp.iloc[keep].reset_index(drop=True)


def plan(inp: Inputs) -> list[FigureJob]:
    """The amplification figure, or why there is none (no file-system layer stored)."""
    amp = F.amplification_frame(inp.cfg)
    if amp.empty:
        return [FigureJob("amplification", "amplification per format and layout",
                          skipped="no file-system layer stored (points measured before it existed)")]
    shown = furthest_from_one(amp)
    of = (f"; the {len(shown)} of {len(amp)} configurations furthest from 1 (python -m analysis export has "
          "them all)") if len(shown) < len(amp) else ""
    return [FigureJob("amplification", "amplification per format and layout (file-system bytes / bytes "
                      f"returned{of})", partial(draw_amplification, shown))]
