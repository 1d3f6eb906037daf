"""Planning, drawing and saving: :func:`plan_figures` asks every figure of the registry for its jobs,
:func:`build_figures` draws them here, :func:`render` draws and saves them in worker processes (:func:`render_png`:
as PNG bytes, for the report)."""

from __future__ import annotations

import io
import multiprocessing
import os
import signal
from collections.abc import Iterator
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from analysis.figures.base import Drawn, FigureJob, Inputs
from analysis.figures.registry import CHECKPOINT_FIGURES, FIGURES
from analysis.outputs import write_with

if TYPE_CHECKING:
    from matplotlib.figure import Figure

#: zlib level 3 instead of Pillow's default: half the time to write a large figure, no larger a file (measured)
_PNG_KW = {"png": {"pil_kwargs": {"compress_level": 3}}}
#: every figure is saved to its tight bounding box: whatever text a figure draws is inside the file
_TIGHT = {"bbox_inches": "tight", "pad_inches": 0.1}


def plan_figures(points: pd.DataFrame, keys: pd.Series, hists: np.ndarray, traces: bool = True,
                 checkpoints: pd.DataFrame | None = None) -> list[FigureJob]:
    """Every figure for ``points`` (from :func:`analysis.query.analysis_frame`) in report order, frames computed
    and drawings deferred; latency from ``keys``/``hists`` (:func:`analysis.query.hist_frame`); then the
    checkpoint figures of ``checkpoints`` (:func:`analysis.checkpoint.checkpoint_frame`; None or empty: none).
    Figures that cannot be drawn carry the reason in ``skipped``."""
    ck = checkpoints if checkpoints is not None else pd.DataFrame()
    if points.empty and ck.empty:
        return [FigureJob("all", "all figures", skipped="no completed points (after --where)")]
    inputs = Inputs(points, keys, hists, traces, ck)
    plans = ([] if points.empty else FIGURES) + (CHECKPOINT_FIGURES if len(ck) else [])
    return [job for plan in plans for job in plan(inputs)]


def build_figures(points: pd.DataFrame, keys: pd.Series, hists: np.ndarray,
                  traces: bool = True, checkpoints: pd.DataFrame | None = None) -> Iterator[Drawn]:
    """Every figure of :func:`plan_figures`, drawn one at a time in this process, in report order."""
    for job in plan_figures(points, keys, hists, traces, checkpoints):
        yield Drawn(job.name, job.caption, job.draw() if job.draw else None, job.skipped)


def _draw_and_save(job: FigureJob, out: Path, formats: tuple[str, ...]) -> list[Path]:
    fig = job.draw()
    return save(fig, out, job.name, formats)


def render(jobs: list[FigureJob], out: Path, formats: tuple[str, ...] = ("png", "svg"),
           workers: int | None = None) -> list[tuple[FigureJob, list[Path]]]:
    """Draw and save every job that has a drawing, in ``workers`` processes (default: one per CPU; drawing is
    CPU-bound and matplotlib holds the GIL). Returns (job, written paths) in job order."""
    todo = [j for j in jobs if j.draw is not None]
    workers = max(1, min(workers or os.cpu_count() or 1, len(todo)))
    if workers == 1:
        return [(j, _draw_and_save(j, out, formats)) for j in todo]
    ctx = multiprocessing.get_context("fork")  # workers inherit the frames: nothing big is pickled back
    # Ctrl-C reaches the whole process group: workers ignore it (no traceback from each), the parent stops the pool
    with ProcessPoolExecutor(max_workers=workers, mp_context=ctx, initializer=ignore_sigint) as pool:
        try:
            paths = list(pool.map(_draw_and_save, todo, [out] * len(todo), [formats] * len(todo)))
        except KeyboardInterrupt:
            pool.shutdown(wait=False, cancel_futures=True)
            raise
    return list(zip(todo, paths, strict=True))


def _draw_png(job: FigureJob, dpi: int) -> bytes:
    return png_bytes(job.draw(), dpi)


def render_png(jobs: list[FigureJob], dpi: int = 90, workers: int | None = None) -> list[bytes | None]:
    """Each job's figure as PNG bytes (:func:`png_bytes`; None for a job with nothing to draw), drawn in
    ``workers`` processes as :func:`render` draws (default: one per CPU); in job order."""
    todo = [j for j in jobs if j.draw is not None]
    workers = max(1, min(workers or os.cpu_count() or 1, len(todo)))
    if workers == 1:
        images = iter([_draw_png(j, dpi) for j in todo])
    else:
        ctx = multiprocessing.get_context("fork")  # workers inherit the frames: only the PNG bytes come back
        with ProcessPoolExecutor(max_workers=workers, mp_context=ctx, initializer=ignore_sigint) as pool:
            try:
                images = iter(list(pool.map(_draw_png, todo, [dpi] * len(todo))))
            except KeyboardInterrupt:
                pool.shutdown(wait=False, cancel_futures=True)
                raise
    return [next(images) if j.draw is not None else None for j in jobs]


def ignore_sigint() -> None:
    """A worker process's initializer: Ctrl-C is the parent's to handle (no traceback from each worker)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def save(fig: Figure, out: Path, name: str, formats: tuple[str, ...] = ("png", "svg"), dpi: int = 100) -> list[Path]:
    """Write ``fig`` as ``out/name.<fmt>`` for each format; returns the paths."""
    import matplotlib  # lazy: matplotlib is heavy; --help stays fast

    paths = []
    with matplotlib.rc_context({"svg.fonttype": "none", "pdf.fonttype": 42}):  # text stays text: small, fast
        for fmt in formats:
            p = out / f"{name}.{fmt}"
            # through a temporary file removed on failure: a full disk leaves no empty figure
            write_with(p, lambda tmp, fmt=fmt: fig.savefig(tmp, format=fmt, dpi=dpi, **_TIGHT, **_PNG_KW.get(fmt, {})))
            paths.append(p)
    return paths


def png_bytes(fig: Figure, dpi: int = 90) -> bytes:
    """``fig`` as PNG bytes (for embedding in the report)."""
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=dpi, **_TIGHT, **_PNG_KW["png"])
    return buf.getvalue()
