"""Scaling: bandwidth, IOPS, I/O time and runtime against node count, each node count at its best layout."""

from __future__ import annotations

from functools import partial
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from analysis import frames as F
from analysis.figures.base import FigureJob, Inputs, _figure, _yerr, colour_map, legend, legend_width, title

if TYPE_CHECKING:
    from matplotlib.figure import Figure


def draw_scaling(best: pd.DataFrame, band: pd.DataFrame | None = None) -> Figure:
    """Each of bandwidth, IOPS, I/O time and runtime against node count, a line per format × access, at the best
    stripe layout of each node count (annotated); ``best`` from :func:`analysis.frames.best_per_scale`. ``band``
    (:func:`analysis.predict.band` along nodes): each configuration's predicted bandwidth beyond its largest
    measured node count, drawn on the bandwidth panel as a grey band (95% prediction interval) about a dashed line."""
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
        ticks = set(best["nodes"].unique())
        if metric == "bandwidth_mib_s" and band is not None and len(band):
            _draw_band(ax, band)
            ticks |= set(band["nodes"].unique())
        ax.set_xlabel("nodes")
        ax.set_xticks(sorted(ticks))
        ax.set_ylabel(F.METRICS[metric][0])
        ax.grid(alpha=0.3)
    legend(fig, colours, names, kind="line", title="series")
    title(fig, "scaling: each node count at its best stripe layout (by bandwidth; mean of repetitions, ±1 std where "
          "repeated)")
    return fig


def _draw_band(ax: Any, band: pd.DataFrame) -> None:
    """Each configuration's prediction: a dashed line, its interval shaded, its label at the far end."""
    for _, b in band.groupby("key", sort=True):
        b = b.sort_values("nodes")
        ax.plot(b["nodes"], b["value"], linestyle="--", color="0.4", linewidth=1)
        ax.fill_between(b["nodes"], b["lo"], b["hi"], color="0.6", alpha=0.3, linewidth=0)
        ax.annotate(f"predicted: {b['label'].iloc[-1]}", (b["nodes"].iloc[-1], b["value"].iloc[-1]),
                    textcoords="offset points", xytext=(-3, 6), fontsize=6, ha="right", color="0.3")


def _predicted(points: pd.DataFrame, best: pd.DataFrame) -> Figure:
    """The figure with the prediction band of :func:`analysis.predict.band` (configurations measured at three node
    counts or more whose held-out check passes)."""
    from analysis.predict import band  # lazy: the model's module, only when the figure is drawn

    return draw_scaling(best, band(points, "nodes"))


def plan(inp: Inputs) -> list[FigureJob]:
    """The scaling figure, or why there is none (one node count measured)."""
    best = inp.best
    if best["nodes"].nunique() > 1:
        return [FigureJob("scaling", "scaling with node count, best layout at each scale, predicted beyond it",
                          partial(_predicted, inp.points, best))]
    return [FigureJob("scaling", "scaling with node count",
                      skipped=f"one node count measured ({int(best['nodes'].iloc[0])}): nothing to scale")]
