"""Access patterns: file offset against time per rank, from the access logs (``trace*.csv``) of the runs."""

from __future__ import annotations

from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING

import pandas as pd

from analysis import frames as F
from analysis.figures.base import FigureJob, Inputs, _figure, _slug, title

if TYPE_CHECKING:
    from matplotlib.figure import Figure

#: Most ranks drawn in one access-pattern figure (one row each), and most access logs drawn per run.
MAX_TRACE_RANKS = 8
MAX_TRACES = 12


def draw_access_pattern(trace: pd.DataFrame, label: str) -> Figure:
    """The access pattern of one run: file offset (MiB) against time (s), a panel per rank (at most
    :data:`MAX_TRACE_RANKS`), coloured by request size (KiB, log scale); ``trace`` from
    :func:`analysis.frames.trace_frame`."""
    from matplotlib.colors import LogNorm, Normalize  # lazy: matplotlib is heavy; --help stays fast

    ranks = sorted(trace["rank"].unique())[:MAX_TRACE_RANKS]
    fig, axes = _figure(8.0, 1.6 * max(1, len(ranks)) + 1.2, max(1, len(ranks)), 1, sharex=True, left=1.2, right=1.3)
    sizes = trace["size"].clip(lower=1) / 1024
    lo, hi = float(sizes.min()), float(sizes.max())
    # one size (or nearly): a linear bar around it reads better than a log bar of 1.6×10¹ ticks
    norm = LogNorm(vmin=lo, vmax=hi) if hi >= 2 * lo else Normalize(vmin=lo * 0.9, vmax=hi * 1.1)
    sc = None
    t0 = float(trace["start_s"].min()) if len(trace) else 0.0
    for ax, rank in zip(axes[:, 0], ranks, strict=False):
        s = trace[trace["rank"] == rank]
        sc = ax.scatter(s["start_s"] - t0, s["offset"] / 2**20, c=s["size"].clip(lower=1) / 1024, norm=norm,
                        s=6, cmap="plasma")
        ax.set_ylabel(f"rank {rank}\noffset (MiB)")
        ax.grid(alpha=0.3)
    axes[-1, 0].set_xlabel("time since first read (s)")
    if sc is not None:
        fig.colorbar(sc, ax=axes[:, 0].tolist(), label="request size (KiB)")
    shown = "" if trace["rank"].nunique() <= MAX_TRACE_RANKS else f" (first {MAX_TRACE_RANKS} ranks)"
    title(fig, f"access pattern: {label}{shown}")
    return fig


def _trace_job(point_key: str, path: str, label: str) -> FigureJob:
    name = f"access_{point_key}_{_slug(Path(path).stem)}"
    caption = f"access pattern of {label}"
    try:
        tr = F.trace_frame(path)
    except (ValueError, OSError, pd.errors.ParserError) as e:
        return FigureJob(name, caption, skipped=str(e))
    if tr.empty:
        return FigureJob(name, caption, skipped=f"{path}: no reads logged")
    return FigureJob(name, caption, partial(draw_access_pattern, tr, label))


def plan(inp: Inputs) -> list[FigureJob]:
    """A figure per access log of the points (at most :data:`MAX_TRACES`), none unless ``inp.traces``."""
    if not inp.traces:
        return []
    found = F.find_traces(inp.points)
    if found.empty:
        return [FigureJob("access_pattern", "access pattern", skipped="no access logs (trace*.csv) in the "
                          "points' run folders: run the sweep with workload.trace=true")]
    jobs = [_trace_job(row.point_key, row.path, row.label) for row in found.head(MAX_TRACES).itertuples(index=False)]
    if len(found) > MAX_TRACES:
        jobs.append(FigureJob("access_more", "access pattern", skipped=f"{len(found) - MAX_TRACES} more access "
                              "logs not drawn (narrow with --where)"))
    return jobs
