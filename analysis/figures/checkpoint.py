"""Checkpoint figures: the paper's per-configuration bars for checkpoints (write and restore bandwidth over the
configurations ``1N-2P-4OST …``, a bar per access × layout) and the stripe figure for checkpoints (write or restore
bandwidth against stripe count, a line per layout, a panel per access mode and node count). Drawn only when the
store holds checkpoint points (:attr:`~analysis.figures.base.Inputs.checkpoints`)."""

from __future__ import annotations

from functools import partial
from typing import TYPE_CHECKING

import pandas as pd

from analysis import checkpoint as C
from analysis.figures.base import FigureJob, Inputs, _figure, colour_map, legend, legend_width, title
from analysis.figures.config_bars import _bars, _n_range
from analysis.figures.stripe import draw_stripe

if TYPE_CHECKING:
    from matplotlib.figure import Figure

#: the panels of the bars, top to bottom: each phase's bandwidth (MiB/s)
PANELS = ("write_bandwidth_mib_s", "read_bandwidth_mib_s")


def draw_checkpoint_bars(frame: pd.DataFrame, colours: dict[str, str] | None = None) -> Figure:
    """Write and restore bandwidth (MiB/s) per configuration (x: the paper's ``1N-2P-4OST``, shared by the two
    stacked panels), grouped bars = mean over repetitions (a bar per access × layout, one colour per series in both
    panels, one legend), error bars ±1 std where repeated, ``n=1`` where not; ``frame`` from
    :func:`analysis.checkpoint.bars_frame`."""
    xs = list(dict.fromkeys(frame["x"].astype(str)))
    series = sorted(frame["series"].astype(str).unique())
    colours = colours or colour_map(series)
    longest = max((len(x) for x in xs), default=10)
    bottom = 0.75 + longest * 8 * 0.62 / 72
    right = legend_width(series) + 0.2
    fig, axes = _figure(min(30.0, max(7.0, 0.22 * len(xs) * max(1, len(series)) + 1.5 + right)), 5.0 + bottom,
                        len(PANELS), 1, sharex=True, bottom=bottom, right=right, hspace=0.15)
    for ax, metric in zip(axes[:, 0], PANELS, strict=True):
        _bars(ax, frame, metric, colours, xs, series)
        ax.set_ylabel(C.METRICS[metric][0].replace(", Darshan's slowest rank", ""), fontsize=8)
    axes[-1, 0].set_xticks(range(len(xs)), xs, rotation=90, fontsize=8)
    axes[-1, 0].set_xlabel("configuration (nodes-ranks-stripe count)")
    n = frame["n"] if len(frame) else pd.Series([0])
    title(fig, f"checkpoints: write and restore bandwidth per configuration, mean of repetitions (n = {_n_range(n)}), "
          "error bars ±1 std where repeated, n=1 marked where measured once (no restore: no bar)")
    legend(fig, colours, series, title="access layout")
    return fig


def plan(inp: Inputs) -> list[FigureJob]:
    """The bars, then the stripe figure of each phase (or why it is skipped: no stripe count applied); nothing
    without checkpoint points."""
    if inp.checkpoints.empty:
        return []
    cfg = C.checkpoint_configs(inp.checkpoints, list(PANELS))
    bars = C.bars_frame(cfg)
    jobs = [FigureJob("checkpoint_config", "checkpoints: write and restore bandwidth per configuration",
                      partial(draw_checkpoint_bars, bars, colour_map(bars["series"])))]
    stripes = {phase: C.stripe_frame(cfg, metric) for phase, metric in C.PHASES.items()}
    colours = colour_map(s for fr in stripes.values() for s in fr["series"].astype(str))
    for phase in C.PHASES:
        name, caption = f"checkpoint_stripe_{phase}", f"checkpoints: {phase} bandwidth against stripe count"
        if stripes[phase].empty:
            jobs.append(FigureJob(name, caption, skipped=f"no {phase} measured where a stripe count was applied"))
            continue
        jobs.append(FigureJob(name, caption, partial(draw_checkpoint_stripe, stripes[phase], phase, colours)))
    return jobs


def draw_checkpoint_stripe(frame: pd.DataFrame, phase: str, colours: dict[str, str] | None = None) -> Figure:
    """The ``phase``'s bandwidth (MiB/s) against stripe count as :func:`analysis.figures.stripe.draw_stripe` draws
    train's: a line per layout, a panel per access mode and node count; ``frame`` from
    :func:`analysis.checkpoint.stripe_frame`."""
    fig = draw_stripe(frame, "bandwidth_mib_s", colours)
    for ax in fig.axes:
        ax.set_ylabel(f"{phase} bandwidth (MiB/s)")
    title(fig, f"checkpoint {phase} bandwidth against stripe count (mean of repetitions, ±1 std where repeated)")
    return fig
