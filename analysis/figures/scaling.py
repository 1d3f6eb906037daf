"""Scaling: bandwidth, IOPS, I/O time and runtime against node count, each node count at its best layout."""

from __future__ import annotations

from functools import partial
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from analysis import frames as F
from analysis.figures.base import FigureJob, Inputs, _figure, _yerr, colour_map, legend, legend_width, title

if TYPE_CHECKING:
    from matplotlib.figure import Figure


def draw_scaling(best: pd.DataFrame) -> Figure:
    """Each of bandwidth, IOPS, I/O time and runtime against node count, a line per format × access, at the best
    stripe layout of each node count (annotated); ``best`` from :func:`analysis.frames.best_per_scale`."""
    names = sorted(best["series"].astype(str).unique())
    colours = colour_map(names)
    right = legend_width(names) + 0.2
    fig, axes = _figure(11.0 + right, 7.5, 2, 2, hspace=0.3, wspace=0.3, right=right)
    for ax, metric in zip(axes.flat, F.CONFIG_PANELS, strict=True):
        for series, s in best.groupby("series", sort=True):
            rep = s["n"].to_numpy() > 1
            ax.errorbar(s["nodes"], s[f"{metric}_mean"], yerr=np.where(rep, _yerr(s[f"{metric}_std"]), np.nan),
                        marker="o", capsize=3, label=series, color=colours[str(series)])
            if metric == "bandwidth_mib_s":
                for x, y, lay in zip(s["nodes"], s[f"{metric}_mean"], s["layout"], strict=True):
                    ax.annotate(lay, (x, y), textcoords="offset points", xytext=(3, 4), fontsize=7)
        ax.set_xlabel("nodes")
        ax.set_xticks(sorted(best["nodes"].unique()))
        ax.set_ylabel(F.METRICS[metric][0])
        ax.grid(alpha=0.3)
    legend(fig, colours, names, kind="line", title="series")
    title(fig, "scaling: each node count at its best stripe layout (by bandwidth; mean of repetitions, ±1 std where "
          "repeated)")
    return fig


def plan(inp: Inputs) -> list[FigureJob]:
    """The scaling figure, or why there is none (one node count measured)."""
    best = inp.best
    if best["nodes"].nunique() > 1:
        return [FigureJob("scaling", "scaling with node count, best layout at each scale",
                          partial(draw_scaling, best))]
    return [FigureJob("scaling", "scaling with node count",
                      skipped=f"one node count measured ({int(best['nodes'].iloc[0])}): nothing to scale")]
