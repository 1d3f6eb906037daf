"""The read-latency distribution per series, from the stored histograms."""

from __future__ import annotations

from functools import partial
from typing import TYPE_CHECKING

import pandas as pd

from analysis import frames as F
from analysis.figures.base import FigureJob, Inputs, _figure, colour_map, legend, legend_width, title

if TYPE_CHECKING:
    from matplotlib.figure import Figure


def draw_latency(frame: pd.DataFrame) -> Figure:
    """Cumulative distribution of read latency (x: µs, log scale) per series, from the stored histograms (exact at
    each bucket's upper edge, 4 buckets per octave); ``frame`` from :func:`analysis.frames.latency_frame`."""
    reads = frame.groupby("series", sort=True)["reads"].sum()
    names = [f"{series} ({int(n)} reads)" for series, n in reads.items()]
    colours = colour_map(names)
    right = legend_width(names) + 0.2
    fig, axes = _figure(7.0 + right, 4.5, right=right)
    ax = axes[0, 0]
    for (_, s), name in zip(frame.groupby("series", sort=True), names, strict=True):
        ax.step(s["upper_us"], s["cdf"], where="post", label=name, color=colours[name])
    ax.set_xscale("log")
    ax.set_ylim(0, 1.02)
    ax.set_xlabel("read latency (µs)")
    ax.set_ylabel("fraction of reads ≤ latency")
    ax.grid(alpha=0.3, which="both")
    legend(fig, colours, names, kind="step", title="series")
    title(fig, "read-latency distribution (all epochs and repetitions)")
    return fig


def plan(inp: Inputs) -> list[FigureJob]:
    """The latency figure, or why there is none (no histograms stored)."""
    lat = F.latency_frame(inp.points, inp.keys, inp.hists)
    if lat.empty:
        return [FigureJob("latency", "read-latency distribution", skipped="no latency histograms stored")]
    return [FigureJob("latency", "read-latency distribution", partial(draw_latency, lat))]
