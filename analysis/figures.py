"""``python -m analysis figures``: the paper's figures, regenerated from the store (PNG plus SVG or PDF).

Each ``draw_*`` function takes a frame from :mod:`analysis.frames` and returns a matplotlib ``Figure`` (drawn
with the Agg canvas, no pyplot, no global state); :func:`build_figures` pairs frames with drawings. matplotlib is
imported inside the functions so ``python -m analysis --help`` stays fast. Error bars are ±1 sample standard
deviation over the repetitions of a configuration (none when it was measured once).
"""

from __future__ import annotations

import argparse
import io
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from analysis import frames as F

if TYPE_CHECKING:
    from matplotlib.figure import Figure

#: Most ranks drawn in one access-pattern figure (one row each), and most access logs drawn per run.
MAX_TRACE_RANKS = 8
MAX_TRACES = 12


def _figure(width: float, height: float, nrows: int = 1, ncols: int = 1, *, left: float = 0.9, right: float = 0.3,
            bottom: float = 0.7, top: float = 0.6, wspace: float = 0.25, hspace: float = 0.3,
            **kw: Any) -> tuple[Figure, np.ndarray]:
    """A figure of ``width`` × ``height`` inches with fixed margins in inches (no layout engine: with hundreds of
    tick labels, constrained layout costs more than drawing)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width, height))
    FigureCanvasAgg(fig)
    axes = fig.subplots(nrows, ncols, squeeze=False, **kw)
    fig.subplots_adjust(left=left / width, right=1 - right / width, bottom=bottom / height, top=1 - top / height,
                        wspace=wspace, hspace=hspace)
    return fig, axes


def _yerr(std: pd.Series) -> np.ndarray:
    return std.fillna(0.0).to_numpy(dtype=float)


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


def draw_amplification(frame: pd.DataFrame) -> Figure:
    """Amplification per format × access × configuration (horizontal bars, mean of repetitions ±1 std), with the
    line at 1 where the file system served exactly the bytes the reader returned; ``frame`` from
    :func:`analysis.frames.amplification_frame`."""
    n = len(frame)
    names = (frame["format"] + "/" + frame["access"] + " " + frame["label"]).tolist()
    fig, axes = _figure(8.0, max(2.5, 0.28 * n + 1.2), left=0.4 + 0.075 * max(len(t) for t in names))
    ax = axes[0, 0]
    y = np.arange(n)
    ax.barh(y, frame["mean"].to_numpy(dtype=float), xerr=_yerr(frame["std"]), color="#aa7744", ecolor="#222222",
            capsize=2 if n <= 40 else 0)
    ax.axvline(1.0, color="#222222", linewidth=1, linestyle="--")
    ax.set_yticks(y, names, fontsize=8)
    ax.invert_yaxis()
    ax.set_xlim(0, max(1.1, float(np.nanmax(frame["mean"].to_numpy(dtype=float))) * 1.1))
    ax.set_xlabel(F.METRICS["amplification"][0])
    ax.grid(axis="x", alpha=0.3)
    fig.suptitle("what the file system served per byte returned (mean of repetitions, ±1 std; 1 = no amplification)")
    return fig


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


def draw_scaling(best: pd.DataFrame) -> Figure:
    """Each of bandwidth, IOPS, I/O time and runtime against node count, a line per format × access, at the best
    stripe layout of each node count (annotated); ``best`` from :func:`analysis.frames.best_per_scale`."""
    fig, axes = _figure(11.0, 7.5, 2, 2, hspace=0.3)
    for ax, metric in zip(axes.flat, F.CONFIG_PANELS, strict=True):
        for series, s in best.groupby("series", sort=True):
            ax.errorbar(s["nodes"], s[f"{metric}_mean"], yerr=_yerr(s[f"{metric}_std"]), marker="o", capsize=3,
                        label=series)
            if metric == "bandwidth_mib_s":
                for x, y, lay in zip(s["nodes"], s[f"{metric}_mean"], s["layout"], strict=True):
                    ax.annotate(lay, (x, y), textcoords="offset points", xytext=(3, 4), fontsize=7)
        ax.set_xlabel("nodes")
        ax.set_xticks(sorted(best["nodes"].unique()))
        ax.set_ylabel(F.METRICS[metric][0])
        ax.grid(alpha=0.3)
    if len(best):
        axes[0, 0].legend(fontsize=8)
    fig.suptitle("scaling: each node count at its best stripe layout (by bandwidth; mean of repetitions, ±1 std)")
    return fig


def draw_heatmap(values: pd.DataFrame, layouts: pd.DataFrame) -> Figure:
    """Best bandwidth (colour, MiB/s) and its stripe layout (text) per format × access (rows) and node count
    (columns); frames from :func:`analysis.frames.heatmap_frame`. Empty cells were not measured."""
    longest = max((len(str(r)) for r in values.index), default=8)
    fig, axes = _figure(max(5.0, 1.4 * values.shape[1] + 3.5), max(2.5, 0.55 * values.shape[0] + 1.5),
                        left=0.5 + longest * 0.075, right=1.2)
    ax = axes[0, 0]
    data = np.ma.masked_invalid(values.to_numpy(dtype=float))
    im = ax.imshow(data, aspect="auto", cmap="viridis")
    ax.set_xticks(range(values.shape[1]), [str(c) for c in values.columns])
    ax.set_yticks(range(values.shape[0]), [str(r) for r in values.index])
    ax.set_xlabel("nodes")
    ax.set_ylabel("format/access")
    vmax = np.nanmax(values.to_numpy(dtype=float)) if values.size and np.isfinite(values.to_numpy(float)).any() else 0
    for (i, j), lay in np.ndenumerate(layouts.to_numpy(dtype=object)):
        v = values.iat[i, j]
        if isinstance(lay, str) and np.isfinite(v):
            ax.text(j, i, f"{lay}\n{v:.4g}", ha="center", va="center", fontsize=7,
                    color="black" if v > 0.6 * vmax else "white")
    fig.colorbar(im, ax=ax, label="best bandwidth (MiB/s)", fraction=0.08, pad=0.03)
    ax.set_title("best stripe layout per format × access at each scale")
    return fig


def draw_latency(frame: pd.DataFrame) -> Figure:
    """Cumulative distribution of read latency (x: µs, log scale) per series, from the stored histograms (exact at
    each bucket's upper edge, 4 buckets per octave); ``frame`` from :func:`analysis.frames.latency_frame`."""
    fig, axes = _figure(7.0, 4.5)
    ax = axes[0, 0]
    for series, s in frame.groupby("series", sort=True):
        ax.step(s["upper_us"], s["cdf"], where="post", label=f"{series} ({int(s['reads'].sum())} reads)")
    ax.set_xscale("log")
    ax.set_ylim(0, 1.02)
    ax.set_xlabel("read latency (µs)")
    ax.set_ylabel("fraction of reads ≤ latency")
    ax.grid(alpha=0.3, which="both")
    if len(frame):
        ax.legend(fontsize=8)
    ax.set_title("read-latency distribution (all epochs and repetitions)")
    return fig


def draw_access_pattern(trace: pd.DataFrame, title: str) -> Figure:
    """The access pattern of one run: file offset (MiB) against time (s), a panel per rank (at most
    :data:`MAX_TRACE_RANKS`), coloured by request size (KiB, log scale); ``trace`` from
    :func:`analysis.frames.trace_frame`."""
    from matplotlib.colors import LogNorm

    ranks = sorted(trace["rank"].unique())[:MAX_TRACE_RANKS]
    fig, axes = _figure(8.0, 1.6 * max(1, len(ranks)) + 1.2, max(1, len(ranks)), 1, sharex=True, right=1.3)
    sizes = trace["size"].clip(lower=1) / 1024
    norm = LogNorm(vmin=float(sizes.min()), vmax=max(float(sizes.max()), float(sizes.min()) * 1.01))
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
    fig.suptitle(f"access pattern: {title}{shown}")
    return fig


# ----------------------------------------------------------------------------------------------- assembling
@dataclass
class Drawn:
    """One figure (or the reason it was skipped): ``name`` is the file stem, ``caption`` says what it shows."""

    name: str
    caption: str
    figure: Figure | None = None
    skipped: str | None = None


@dataclass
class FigureJob:
    """A figure to draw: its frames are computed, the drawing is deferred (``draw()`` returns the Figure), so
    figures can be drawn in worker processes. ``skipped`` says why there is nothing to draw."""

    name: str
    caption: str
    draw: Callable[[], Figure] | None = None
    skipped: str | None = None


def _slug(text: str) -> str:
    return "".join(c if c.isalnum() or c in "-_" else "_" for c in text).strip("_")


def plan_figures(points: pd.DataFrame, keys: pd.Series, hists: np.ndarray, traces: bool = True) -> list[FigureJob]:
    """Every figure for ``points`` (from :func:`analysis.query.analysis_frame`) in report order, frames computed
    and drawings deferred; latency from ``keys``/``hists`` (:func:`analysis.query.hist_frame`). Figures that
    cannot be drawn carry the reason in ``skipped``."""
    if points.empty:
        return [FigureJob("all", "all figures", skipped="no completed points (after --where)")]
    jobs = []
    cfg = F.configs(points)
    for (fmt, access), _ in cfg.groupby(["format", "access"], sort=True):
        jobs.append(FigureJob(f"config_{_slug(fmt)}_{_slug(access)}",
                              f"{fmt}, {access}: bandwidth, IOPS, I/O time and runtime per configuration",
                              partial(draw_config_bars, F.config_bars_frame(cfg, fmt, access), f"{fmt}, {access}")))
    for metric in ("bandwidth_mib_s", "iops"):
        jobs.append(FigureJob(f"stripe_{metric}", f"{F.METRICS[metric][0]} against stripe count",
                              partial(draw_stripe, F.stripe_frame(cfg, metric), metric)))
    best = F.best_per_scale(cfg)
    if best["nodes"].nunique() > 1:
        jobs.append(FigureJob("scaling", "scaling with node count, best layout at each scale",
                              partial(draw_scaling, best)))
    else:
        jobs.append(FigureJob("scaling", "scaling with node count",
                              skipped=f"one node count measured ({int(best['nodes'].iloc[0])}): nothing to scale"))
    jobs.append(FigureJob("best_heatmap", "best stripe layout per format × access and node count",
                          partial(draw_heatmap, *F.heatmap_frame(best))))
    amp = F.amplification_frame(cfg)
    if amp.empty:
        jobs.append(FigureJob("amplification", "amplification per format and layout",
                              skipped="no file-system layer stored (points measured before it existed)"))
    else:
        jobs.append(FigureJob("amplification", "amplification per format and layout (file-system bytes / bytes "
                              "returned)", partial(draw_amplification, amp)))
    lat = F.latency_frame(points, keys, hists)
    if lat.empty:
        jobs.append(FigureJob("latency", "read-latency distribution", skipped="no latency histograms stored"))
    else:
        jobs.append(FigureJob("latency", "read-latency distribution", partial(draw_latency, lat)))
    if not traces:
        return jobs
    found = F.find_traces(points)
    if found.empty:
        jobs.append(FigureJob("access_pattern", "access pattern", skipped="no access logs (trace*.csv) in the "
                              "points' run folders: run the sweep with trace=true"))
        return jobs
    for row in found.head(MAX_TRACES).itertuples(index=False):
        name = f"access_{row.point_key}_{_slug(Path(row.path).stem)}"
        caption = f"access pattern of {row.label}"
        try:
            tr = F.trace_frame(row.path)
        except (ValueError, OSError, pd.errors.ParserError) as e:
            jobs.append(FigureJob(name, caption, skipped=str(e)))
            continue
        if tr.empty:
            jobs.append(FigureJob(name, caption, skipped=f"{row.path}: no reads logged"))
        else:
            jobs.append(FigureJob(name, caption, partial(draw_access_pattern, tr, row.label)))
    if len(found) > MAX_TRACES:
        jobs.append(FigureJob("access_more", "access pattern", skipped=f"{len(found) - MAX_TRACES} more access "
                              "logs not drawn (narrow with --where)"))
    return jobs


def build_figures(points: pd.DataFrame, keys: pd.Series, hists: np.ndarray,
                  traces: bool = True) -> Iterator[Drawn]:
    """Every figure of :func:`plan_figures`, drawn one at a time in this process, in report order."""
    for job in plan_figures(points, keys, hists, traces):
        yield Drawn(job.name, job.caption, job.draw() if job.draw else None, job.skipped)


def _draw_and_save(job: FigureJob, out: Path, formats: tuple[str, ...]) -> list[Path]:
    fig = job.draw()
    return save(fig, out, job.name, formats)


def render(jobs: list[FigureJob], out: Path, formats: tuple[str, ...] = ("png", "svg"),
           workers: int | None = None) -> list[tuple[FigureJob, list[Path]]]:
    """Draw and save every job that has a drawing, in ``workers`` processes (default: one per CPU; drawing is
    CPU-bound and matplotlib holds the GIL). Returns (job, written paths) in job order."""
    import os

    todo = [j for j in jobs if j.draw is not None]
    workers = max(1, min(workers or os.cpu_count() or 1, len(todo)))
    if workers == 1:
        return [(j, _draw_and_save(j, out, formats)) for j in todo]
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    ctx = multiprocessing.get_context("fork")  # workers inherit the frames: nothing big is pickled back
    # Ctrl-C reaches the whole process group: workers ignore it (no traceback from each), the parent stops the pool
    with ProcessPoolExecutor(max_workers=workers, mp_context=ctx, initializer=_ignore_sigint) as pool:
        try:
            paths = list(pool.map(_draw_and_save, todo, [out] * len(todo), [formats] * len(todo)))
        except KeyboardInterrupt:
            pool.shutdown(wait=False, cancel_futures=True)
            raise
    return list(zip(todo, paths, strict=True))


def _ignore_sigint() -> None:
    import signal

    signal.signal(signal.SIGINT, signal.SIG_IGN)


#: zlib level 3 instead of Pillow's default: half the time to write a large figure, no larger a file (measured)
_PNG_KW = {"png": {"pil_kwargs": {"compress_level": 3}}}


def save(fig: Figure, out: Path, name: str, formats: tuple[str, ...] = ("png", "svg"), dpi: int = 100) -> list[Path]:
    """Write ``fig`` as ``out/name.<fmt>`` for each format; returns the paths."""
    import matplotlib

    paths = []
    with matplotlib.rc_context({"svg.fonttype": "none", "pdf.fonttype": 42}):  # text stays text: small, fast
        for fmt in formats:
            p = out / f"{name}.{fmt}"
            fig.savefig(p, format=fmt, dpi=dpi, **_PNG_KW.get(fmt, {}))
            paths.append(p)
    return paths


def png_bytes(fig: Figure, dpi: int = 90) -> bytes:
    """``fig`` as PNG bytes (for embedding in the report)."""
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=dpi, **_PNG_KW["png"])
    return buf.getvalue()


# ------------------------------------------------------------------------------------------------- command
def setup_parser(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--db", help="SQLite file or SQLAlchemy URL (default: $DDLIO_DB or ./results.db)")
    parser.add_argument("--out", default="figures", help="directory for the figures (default: ./figures)")
    parser.add_argument("--where", help="keep the points where this holds, e.g. \"format == 'hdf5' and nodes >= 2\" "
                                          "(columns, literals, comparisons, in [...], and/or/not, arithmetic)")
    parser.add_argument("--vector", choices=("svg", "pdf"), default="svg", help="vector format besides PNG")
    parser.add_argument("--jobs", type=int, help="processes drawing figures (default: one per CPU)")


def main(args: argparse.Namespace) -> int:
    from analysis.query import analysis_frame, hist_frame, parse_where
    from ddlio.store import open_store_for_reading

    where = parse_where(args.where)
    store = open_store_for_reading(args.db)
    points = analysis_frame(store, where)
    keys, hists = hist_frame(store, points["point_key"].tolist())
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    jobs = plan_figures(points, keys, hists)
    skipped = 0
    for job in jobs:
        if job.draw is None:
            print(f"skipped {job.name}: {job.skipped}")
            skipped += 1
    done = render(jobs, out, ("png", args.vector), workers=args.jobs)
    for job, paths in done:
        print(f"wrote {', '.join(str(p) for p in paths)}  ({job.caption})")
    written = len(done)
    print(f"{written} figures in {out} from {len(points)} completed points; {skipped} skipped")
    return 0 if written else 1
