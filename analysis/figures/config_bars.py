"""Bandwidth, IOPS, I/O time and runtime per configuration: a figure per format × access."""

from __future__ import annotations

from functools import partial
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from analysis import frames as F
from analysis.figures.base import FigureJob, Inputs, _figure, _slug, _yerr

if TYPE_CHECKING:
    from matplotlib.figure import Figure


def draw_config_bars(frame: pd.DataFrame, title: str) -> Figure:
    """Bandwidth, IOPS, I/O time and runtime per configuration (x: ``1N-4P-1OST`` labels, shared by the four
    stacked panels), bars = mean over repetitions, error bars ±1 std; ``frame`` from
    :func:`analysis.frames.config_bars_frame`."""
    n = len(frame)
    longest = int(frame["label"].str.len().max()) if n else 10
    fontsize = 6 if n > 30 else 8
    bottom = 0.6 + longest * fontsize * 0.62 / 72  # rotated labels: characters × font size (points) in inches
    fig, axes = _figure(min(30.0, max(7.0, 0.16 * n + 2.5)), 8.0 + bottom, 4, 1, sharex=True, bottom=bottom,
                        hspace=0.12)
    x = np.arange(n)
    for ax, metric in zip(axes[:, 0], F.CONFIG_PANELS, strict=True):
        ax.bar(x, frame[f"{metric}_mean"].to_numpy(dtype=float), yerr=_yerr(frame[f"{metric}_std"]),
               capsize=2 if n <= 40 else 0, color="#4477aa", ecolor="#222222")
        ax.set_ylabel(F.METRICS[metric][0], fontsize=8)
        ax.grid(axis="y", alpha=0.3)
    axes[-1, 0].set_xticks(x, frame["label"].tolist(), rotation=90, fontsize=fontsize)
    axes[-1, 0].set_xlabel("configuration (nodes-ranks-stripe count)")
    fig.suptitle(f"{title}: mean of repetitions, error bars ±1 std (n = {int(frame['n'].min())}–"
                 f"{int(frame['n'].max())})" if n else title)
    return fig


def plan(inp: Inputs) -> list[FigureJob]:
    """A figure per format × access measured."""
    cfg = inp.cfg
    return [FigureJob(f"config_{_slug(fmt)}_{_slug(access)}",
                      f"{fmt}, {access}: bandwidth, IOPS, I/O time and runtime per configuration",
                      partial(draw_config_bars, F.config_bars_frame(cfg, fmt, access), f"{fmt}, {access}"))
            for (fmt, access), _ in cfg.groupby(["format", "access"], sort=True)]
