"""Bandwidth, IOPS, I/O time and runtime per configuration, as the paper's Figs. 6–9: a figure per format, grouped
bars over the configurations ``1N-4P-1OST …`` (a bar per series: access mode and whatever else varies), and one
overview of every format's bandwidth as small multiples on a shared scale."""

from __future__ import annotations

from functools import partial
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from analysis import frames as F
from analysis.figures.base import FigureJob, Inputs, _figure, _slug, colour_map, legend, legend_width, title

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure


def _bars(ax: Axes, frame: pd.DataFrame, metric: str, colours: dict[str, str], xs: list[str],
          series: list[str], note_n: bool = True) -> float:
    """Grouped bars of ``metric`` (mean of repetitions) at positions ``xs``, a bar per series in its colour; error
    bars (±1 std) only where a bar has repetitions, ``n=1`` written above a bar measured once."""
    k = max(1, len(series))
    width = 0.8 / k
    pos = {x: i for i, x in enumerate(xs)}
    top = 0.0
    for j, name in enumerate(series):
        s = frame[frame["series"] == name]
        x = s["x"].map(pos).to_numpy(dtype=float) + (j - (k - 1) / 2) * width
        mean = s[f"{metric}_mean"].to_numpy(dtype=float)
        n = s["n"].to_numpy(dtype=int)
        ax.bar(x, mean, width=width * 0.95, color=colours[name])
        rep = n > 1
        if rep.any():
            ax.errorbar(x[rep], mean[rep], yerr=s[f"{metric}_std"].fillna(0.0).to_numpy(dtype=float)[rep],
                        fmt="none", ecolor="#222222", capsize=2 if len(xs) * k <= 40 else 0, linewidth=1)
            top = max(top, float(np.nanmax(mean[rep] + s[f"{metric}_std"].fillna(0.0).to_numpy(dtype=float)[rep])))
        if len(mean):
            top = max(top, float(np.nanmax(mean)) if np.isfinite(mean).any() else 0.0)
        if note_n:
            for xi, yi in zip(x[~rep], mean[~rep], strict=True):
                if np.isfinite(yi):
                    ax.annotate("n=1", (xi, yi), textcoords="offset points", xytext=(0, 2), ha="center",
                                va="bottom", fontsize=6, rotation=90 if width < 0.3 else 0, color="#444444")
    ax.set_ylim(0, top * 1.22 if top > 0 else 1.0)
    ax.set_xlim(-0.6, len(xs) - 0.4)
    ax.grid(axis="y", alpha=0.3)
    return top


def draw_config_bars(frame: pd.DataFrame, title_text: str, colours: dict[str, str] | None = None) -> Figure:
    """Bandwidth, IOPS, I/O time and runtime per configuration (x: the paper's ``1N-4P-1OST``, shared by the four
    stacked panels), grouped bars = mean over repetitions (a bar per series, one colour per series in every
    panel, one legend), error bars ±1 std where repeated, ``n=1`` where not; ``frame`` from
    :func:`analysis.frames.config_bars_frame`; ``colours`` from :func:`~analysis.figures.base.colour_map`."""
    xs = list(dict.fromkeys(frame["x"].astype(str)))
    series = sorted(frame["series"].astype(str).unique())
    colours = colours or colour_map(series)
    longest = max((len(x) for x in xs), default=10)
    fontsize = 6 if len(xs) > 30 else 8
    bottom = 0.75 + longest * fontsize * 0.62 / 72  # rotated labels: characters × font size (points) in inches
    right = legend_width(series) + 0.2
    fig, axes = _figure(min(30.0, max(7.0, 0.22 * len(xs) * max(1, len(series)) + 1.5 + right)), 8.0 + bottom,
                        4, 1, sharex=True, bottom=bottom, right=right, hspace=0.12)
    for ax, metric in zip(axes[:, 0], F.CONFIG_PANELS, strict=True):
        _bars(ax, frame, metric, colours, xs, series)
        ax.set_ylabel(F.METRICS[metric][0], fontsize=8)
    axes[-1, 0].set_xticks(range(len(xs)), xs, rotation=90, fontsize=fontsize)
    axes[-1, 0].set_xlabel("configuration (nodes-ranks-stripe count)")
    n = frame["n"] if len(frame) else pd.Series([0])
    title(fig, f"{title_text}: mean of repetitions (n = {_n_range(n)}), error bars ±1 std where "
          "repeated, n=1 marked where measured once")
    legend(fig, colours, series, title="series")
    return fig


def draw_overview(cfg: pd.DataFrame, metric: str = "bandwidth_mib_s",
                  colours: dict[str, str] | None = None) -> Figure:
    """``metric`` of every format side by side: a small panel per format, all on one y scale, grouped bars as
    :func:`draw_config_bars` draws them; ``cfg`` from :func:`analysis.frames.configs`."""
    formats = sorted(cfg["format"].astype(str).unique())
    frames = {f: F.config_bars_frame(cfg, f) for f in formats}
    series = sorted({s for fr in frames.values() for s in fr["series"].astype(str)})
    colours = colours or colour_map(series)
    ncols = min(4, len(formats))
    nrows = -(-len(formats) // ncols)
    longest = max((len(x) for fr in frames.values() for x in fr["x"]), default=10)
    bottom = 0.75 + longest * 8 * 0.62 / 72
    right = legend_width(series) + 0.2
    widths = [max(2.2, 0.3 * fr["x"].nunique() * max(1, len(series)) + 0.6) for fr in frames.values()]
    fig, axes = _figure(min(30.0, max(widths) * ncols + 1.2 + right), (2.6 + bottom) * nrows + 0.9, nrows, ncols,
                        sharey=True, bottom=bottom, right=right, hspace=0.25 + bottom / 2.6, wspace=0.12)
    top = 0.0
    for ax, fmt in zip(axes.flat, formats, strict=False):
        fr = frames[fmt]
        xs = list(dict.fromkeys(fr["x"].astype(str)))
        top = max(top, _bars(ax, fr, metric, colours, xs, series))
        ax.set_xticks(range(len(xs)), xs, rotation=90, fontsize=8)
        ax.set_xlabel("configuration", fontsize=8)
        ax.set_title(fmt, fontsize=10)
    for ax in list(axes.flat)[len(formats):]:
        ax.set_visible(False)
    for ax in axes.flat:  # one scale for all (sharey): the highest bar with its error bar fits
        ax.set_ylim(0, top * 1.22 if top > 0 else 1.0)
    for ax in axes[:, 0]:
        ax.set_ylabel(F.METRICS[metric][0], fontsize=8)
    title(fig, f"{F.METRICS[metric][0]} of every format on one scale (mean of repetitions, ±1 std where repeated, "
          "n=1 marked where measured once)")
    legend(fig, colours, series, title="series")
    return fig


def plan(inp: Inputs) -> list[FigureJob]:
    """The overview (when more than one format was measured), then a figure per format; one colour map for all."""
    cfg = inp.cfg
    formats = sorted(cfg["format"].astype(str).unique())
    frames = {f: F.config_bars_frame(cfg, f) for f in formats}
    colours = colour_map(s for fr in frames.values() for s in fr["series"].astype(str))
    jobs = []
    if len(formats) > 1:
        jobs.append(FigureJob("overview_bandwidth", "bandwidth of every format on one scale",
                              partial(draw_overview, cfg, "bandwidth_mib_s", colours)))
    jobs += [FigureJob(f"config_{_slug(fmt)}", f"{fmt}: bandwidth, IOPS, I/O time and runtime per configuration",
                       partial(draw_config_bars, frames[fmt], fmt, colours)) for fmt in formats]
    return jobs


def _n_range(n: pd.Series) -> str:
    """The repetitions per bar: one number where all bars have as many, else the range ("1–3")."""
    lo, hi = int(n.min()), int(n.max())
    return str(lo) if lo == hi else f"{lo}–{hi}"
