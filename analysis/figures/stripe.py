"""Bandwidth and IOPS against stripe count: a line per series, a panel per access mode and node count."""

from __future__ import annotations

from functools import partial
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from analysis import frames as F
from analysis.figures.base import FigureJob, Inputs, _figure, _yerr, colour_map, legend, legend_width, title

if TYPE_CHECKING:
    from matplotlib.figure import Figure

#: the metrics drawn against stripe count, a figure each
METRICS = ("bandwidth_mib_s", "iops")


def _stripe_ticks(values: list[int]) -> tuple[dict[int, int], list[str]]:
    order = sorted(values, key=lambda v: (v > 0, v if v > 0 else -v))  # default, all, then 1, 2, 4 ...
    return {v: i for i, v in enumerate(order)}, [F.stripe_name(v).replace("OST", "") for v in order]


def draw_stripe(frame: pd.DataFrame, metric: str, colours: dict[str, str] | None = None) -> Figure:
    """``metric`` against stripe count: a line per series (format ...) in one colour in every panel
    (``colours``, default :func:`~analysis.figures.base.colour_map` of the series), a panel per access mode (rows)
    and node count (columns), one legend; error bars ±1 std where repeated; ``frame`` from
    :func:`analysis.frames.stripe_frame`."""
    accesses = sorted(frame["access"].unique())
    nodes = sorted(frame["nodes"].unique())
    names = sorted(frame["series"].astype(str).unique())
    colours = colours or colour_map(names)
    right = legend_width(names) + 0.2
    fig, axes = _figure(max(5.0, 3.6 * len(nodes)) + right, 3.2 * max(1, len(accesses)) + 0.4,
                        max(1, len(accesses)), max(1, len(nodes)), sharey="row", hspace=0.45, right=right)
    pos, ticks = _stripe_ticks(sorted(frame["stripe_count"].unique()))
    for i, access in enumerate(accesses):
        for j, n in enumerate(nodes):
            ax = axes[i, j]
            sel = frame[(frame["access"] == access) & (frame["nodes"] == n)]
            for series, s in sel.groupby("series", sort=True):
                rep = s["n"].to_numpy() > 1
                ax.errorbar(s["stripe_count"].map(pos), s["mean"], yerr=np.where(rep, _yerr(s["std"]), np.nan),
                            marker="o", capsize=3, label=series, color=colours[str(series)])
            ax.set_xticks(range(len(ticks)), ticks)
            ax.set_title(f"{access}, {n} node{'s' if n > 1 else ''}")
            ax.set_xlabel("stripe count (OSTs)")
            ax.set_ylabel(F.METRICS[metric][0])
            ax.grid(alpha=0.3)
    legend(fig, colours, names, kind="line", title="series")  # one legend: same series, same colour everywhere
    title(fig, f"{F.METRICS[metric][0].split(' (')[0]} against stripe count (mean of repetitions, ±1 std where "
          "repeated)")
    return fig


def plan(inp: Inputs) -> list[FigureJob]:
    """A figure per metric of :data:`METRICS`, of the configurations whose stripe layout was applied; none when
    fewer than two stripe counts were (one stripe count, or a file system that does not stripe, has no curve)."""
    cfg = inp.cfg
    if cfg.empty or "stripe_count" not in cfg.columns:
        return []
    if "striping_applicable" in cfg.columns:
        cfg = cfg[cfg["striping_applicable"].fillna(False).astype(bool)]
    if cfg["stripe_count"].nunique() < 2:
        return []
    frames = {m: F.stripe_frame(cfg, m) for m in METRICS}
    colours = colour_map(s for fr in frames.values() for s in fr["series"].astype(str))
    return [FigureJob(f"stripe_{metric}", f"{F.METRICS[metric][0]} against stripe count",
                      partial(draw_stripe, frames[metric], metric, colours)) for metric in METRICS]
