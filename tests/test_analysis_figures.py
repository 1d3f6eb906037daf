"""Every figure kind of the registry, drawn from one small sweep's frame: nothing clipped (every text artist inside
the canvas and the saved tight bounding box), a legend (or colour bar) on every figure, one colour per series in
every panel, error bars only where a configuration was repeated, n=1 written where it was not."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from test_analysis import points_rows

from analysis.figures import FIGURES, Inputs
from analysis.figures.base import colour_map, wrap


def sweep_points(tmp_path: Path) -> tuple[pd.DataFrame, pd.Series, np.ndarray]:
    """Two formats × two access modes × three stripe counts × two node counts, two repetitions except at stripe 4
    (measured once); an access log in every run folder, a latency histogram per point."""
    run = tmp_path / "run"
    run.mkdir()
    pd.DataFrame({"rank": [0, 0, 1], "start_s": [0.0, 0.1, 0.05], "offset": [0, 4096, 8192],
                  "size": [4096, 4096, 8192]}).to_csv(run / "trace.csv", index=False)
    rows = []
    for f in ("hdf5", "tfrecord"):
        for a in ("shared", "fpp"):
            for s in (1, 4, 16):
                for n in (1, 2):
                    for r in range(1 if s == 4 else 2):
                        bw = 100.0 * s ** 0.5 * n * (1.3 if f == "tfrecord" else 1.0) * (1 + 0.05 * r)
                        rows.append(dict(format=f, access=a, stripe_count=s, nodes=n, repeat=r, bandwidth_mib_s=bw,
                                         iops=bw * 64, io_time_slowest_s=10 / bw, wall_time_s=12 / bw,
                                         amplification=1.0 + 0.1 * s, run_dir=str(run),
                                         label=f"{f}/{a} {n}N-{n}P-{s}OST"))
    pts = points_rows(rows)
    hists = np.zeros((len(pts), 160), dtype=np.int64)
    hists[:, 60:64] = 5
    return pts, pts["point_key"], hists


def drawn_texts(fig) -> list:
    """The text artists ``fig`` draws (tick labels outside the view limits are not drawn, so not counted)."""
    from matplotlib.text import Text

    fig.draw_without_rendering()
    ticks = set()
    for ax in fig.axes:
        for axis in (ax.xaxis, ax.yaxis):
            for t in axis.get_major_ticks() + axis.get_minor_ticks():
                ticks |= {t.label1, t.label2}
            drawn = axis._update_ticks()  # the ticks inside the view: the only ones drawn
            ticks -= {lab for t in drawn for lab in (t.label1, t.label2) if lab.get_visible()}
    return [t for t in fig.findobj(Text) if t.get_visible() and t.get_text().strip() and t not in ticks
            and (t.axes is None or t.axes.get_visible())]


@pytest.fixture(scope="module")
def figures(tmp_path_factory) -> dict[str, list]:
    pts, keys, hists = sweep_points(tmp_path_factory.mktemp("fig"))
    inp = Inputs(pts, keys, hists, traces=True)
    out = {}
    for plan in FIGURES:
        jobs = plan(inp)
        out[plan.__module__.rsplit(".", 1)[1]] = [(j.name, j.draw()) for j in jobs if j.draw is not None]
    return out


def test_every_kind_is_drawn(figures):
    assert set(figures) == {p.__module__.rsplit(".", 1)[1] for p in FIGURES}
    for kind, figs in figures.items():
        assert figs, f"{kind}: nothing drawn from a sweep that has everything it needs"


def test_no_text_is_clipped_in_any_figure(figures):
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    for kind, figs in figures.items():
        for name, fig in figs:
            texts = drawn_texts(fig)
            renderer = FigureCanvasAgg(fig).get_renderer() if fig.canvas is None else fig.canvas.get_renderer()
            canvas, tight = fig.bbox, fig.get_tightbbox(renderer).transformed(fig.dpi_scale_trans)
            assert texts
            for t in texts:
                box = t.get_window_extent(renderer)
                where = f"{kind}/{name}: {t.get_text()[:60]!r} at {box.bounds}"
                assert tight.x0 - 1 <= box.x0 and box.x1 <= tight.x1 + 1 and tight.y0 - 1 <= box.y0, where
                assert box.y1 <= tight.y1 + 1, where
                assert box.x0 >= 0 and box.x1 <= canvas.x1 + 0.5 and box.y0 >= 0 and box.y1 <= canvas.y1 + 0.5, where


def test_clipping_check_can_fail():
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(3, 2))
    FigureCanvasAgg(fig)
    fig.suptitle("a title far too long for a figure three inches wide, cut at both edges")
    box = drawn_texts(fig)[0].get_window_extent(fig.canvas.get_renderer())
    assert box.x0 < 0 and box.x1 > fig.bbox.x1


def test_every_figure_has_a_legend_or_colour_bar(figures):
    for kind, figs in figures.items():
        for name, fig in figs:
            has_colorbar = any(ax.get_label() == "<colorbar>" for ax in fig.axes)
            assert fig.legends or has_colorbar, f"{kind}/{name} has no legend"


def _colour_of_series(fig) -> dict[str, set]:
    from matplotlib.colors import to_hex

    legend = fig.legends[0]
    seen: dict[str, set] = {}
    for text, handle in zip(legend.get_texts(), legend.legend_handles, strict=True):
        seen.setdefault(text.get_text(), set()).add(to_hex(handle.get_facecolor() if hasattr(handle, "get_width")
                                                          else handle.get_color()))
    return seen


def test_one_colour_per_series_in_every_panel_and_figure(figures):
    from matplotlib.colors import to_hex

    stripe = dict(figures["stripe"])
    bw, iops = stripe["stripe_bandwidth_mib_s"], stripe["stripe_iops"]
    assert _colour_of_series(bw) == _colour_of_series(iops)
    colours = {k: next(iter(v)) for k, v in _colour_of_series(bw).items()}
    assert len(set(colours.values())) == len(colours) == 2  # hdf5, tfrecord
    for ax in bw.axes:  # every panel: the line of a series has the series' colour
        assert {c.get_label(): to_hex(c.lines[0].get_color()) for c in ax.containers} == colours
    bars = dict(figures["config_bars"])
    per_format = [_colour_of_series(bars["config_hdf5"]), _colour_of_series(bars["config_tfrecord"])]
    assert per_format[0] == per_format[1] == _colour_of_series(bars["overview_bandwidth"])
    assert colour_map(["b", "a"]) == colour_map(["a", "b", "a"])  # keyed by name, not by order of appearance


def test_error_bars_only_where_repeated_and_n1_marked(figures):
    fig = dict(figures["config_bars"])["config_hdf5"]
    ax = fig.axes[0]
    xs = [t.get_text() for t in fig.axes[3].get_xticklabels()]
    assert xs == ["1N-1P-1OST", "1N-1P-4OST", "1N-1P-16OST", "2N-2P-1OST", "2N-2P-4OST", "2N-2P-16OST"]
    assert len(ax.patches) == 12  # two series (shared, fpp) at six configurations
    marks = [t for t in ax.texts if t.get_text() == "n=1"]
    assert len(marks) == 4  # stripe 4, measured once: two node counts × two access modes
    segments = sum(len(c.get_segments()) for c in ax.collections)
    assert segments == 8  # error bars at the 8 repeated bars, none at the 4 single ones


def test_titles_wrap_to_the_figure_width():
    assert wrap("x " * 100, 3.0, 12).count("\n") >= 3
    assert "\n" not in wrap("short title", 8.0)
