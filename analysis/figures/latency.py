"""The read-latency distribution per series, from the stored histograms."""

from __future__ import annotations

from functools import partial
from typing import TYPE_CHECKING

import pandas as pd

from analysis import frames as F
from analysis.figures.base import FigureJob, Inputs, _figure

if TYPE_CHECKING:
    from matplotlib.figure import Figure


def draw_latency(frame: pd.DataFrame) -> Figure:
    """Cumulative distribution of read latency (x: µs, log scale) per series, from the stored histograms (exact at
    each bucket's upper edge, 4 buckets per octave); ``frame`` from :func:`analysis.frames.latency_frame`."""
    fig, axes = _figure(7.0, 4.5)
    ax = axes[0, 0]
    for series, s in frame.groupby("series", sort=True):
        ax.step(s["upper_us"], s["cdf"], where="post", label=f"{series} ({int(s['reads'].sum())} reads)")
    ax.set_xscale("log")
    ax.set_ylim(0, 1.02)
    ax.set_xlabel("read latency (µs)")
    ax.set_ylabel("fraction of reads ≤ latency")
    ax.grid(alpha=0.3, which="both")
    if len(frame):
        ax.legend(fontsize=8)
    ax.set_title("read-latency distribution (all epochs and repetitions)")
    return fig


def plan(inp: Inputs) -> list[FigureJob]:
    """The latency figure, or why there is none (no histograms stored)."""
    lat = F.latency_frame(inp.points, inp.keys, inp.hists)
    if lat.empty:
        return [FigureJob("latency", "read-latency distribution", skipped="no latency histograms stored")]
    return [FigureJob("latency", "read-latency distribution", partial(draw_latency, lat))]
