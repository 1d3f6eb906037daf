"""Bandwidth and IOPS against stripe count: a line per series, a panel per access mode and node count."""

from __future__ import annotations

from functools import partial
from typing import TYPE_CHECKING

import pandas as pd

from analysis import frames as F
from analysis.figures.base import FigureJob, Inputs, _figure, _yerr

if TYPE_CHECKING:
    from matplotlib.figure import Figure

#: the metrics drawn against stripe count, a figure each
METRICS = ("bandwidth_mib_s", "iops")


def _stripe_ticks(values: list[int]) -> tuple[dict[int, int], list[str]]:
    order = sorted(values, key=lambda v: (v > 0, v if v > 0 else -v))  # default, all, then 1, 2, 4 ...
    return {v: i for i, v in enumerate(order)}, [F.stripe_name(v).replace("OST", "") for v in order]


def draw_stripe(frame: pd.DataFrame, metric: str) -> Figure:
    """``metric`` against stripe count: a line per series (format ...), a panel per access mode (rows) and node
    count (columns); ``frame`` from :func:`analysis.frames.stripe_frame`."""
    accesses = sorted(frame["access"].unique())
    nodes = sorted(frame["nodes"].unique())
    fig, axes = _figure(max(5.0, 3.6 * len(nodes)), 3.2 * max(1, len(accesses)) + 0.4, max(1, len(accesses)),
                        max(1, len(nodes)), sharey="row", hspace=0.45)
    pos, ticks = _stripe_ticks(sorted(frame["stripe_count"].unique()))
    for i, access in enumerate(accesses):
        for j, n in enumerate(nodes):
            ax = axes[i, j]
            sel = frame[(frame["access"] == access) & (frame["nodes"] == n)]
            for series, s in sel.groupby("series", sort=True):
                ax.errorbar(s["stripe_count"].map(pos), s["mean"], yerr=_yerr(s["std"]), marker="o", capsize=3,
                            label=series)
            ax.set_xticks(range(len(ticks)), ticks)
            ax.set_title(f"{access}, {n} node{'s' if n > 1 else ''}")
            ax.set_xlabel("stripe count (OSTs)")
            ax.set_ylabel(F.METRICS[metric][0])
            ax.grid(alpha=0.3)
    if len(frame):  # one legend: every panel draws the same series in the same colours
        axes[0, 0].legend(fontsize=7)
    fig.suptitle(f"{F.METRICS[metric][0].split(' (')[0]} against stripe count (mean of repetitions, ±1 std)")
    return fig


def plan(inp: Inputs) -> list[FigureJob]:
    """A figure per metric of :data:`METRICS`."""
    return [FigureJob(f"stripe_{metric}", f"{F.METRICS[metric][0]} against stripe count",
                      partial(draw_stripe, F.stripe_frame(inp.cfg, metric), metric)) for metric in METRICS]
