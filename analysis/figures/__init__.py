"""``python -m analysis figures``: the paper's figures, regenerated from the store (PNG plus SVG or PDF).

One module per figure kind (:mod:`~analysis.figures.config_bars`, :mod:`~analysis.figures.stripe`,
:mod:`~analysis.figures.scaling`, :mod:`~analysis.figures.heatmap`, :mod:`~analysis.figures.amplification`,
:mod:`~analysis.figures.latency`, :mod:`~analysis.figures.access_pattern`), each with a ``draw_*`` function (a frame
from :mod:`analysis.frames` in, a matplotlib ``Figure`` out, drawn with the Agg canvas, no pyplot, no global
state) and a ``plan`` listed in :data:`~analysis.figures.registry.FIGURES`; :mod:`~analysis.figures.render` plans,
draws and saves them; :mod:`~analysis.figures.cli` is the command. matplotlib is imported inside the functions so
``python -m analysis --help`` stays fast. Error bars are ±1 sample standard deviation over the repetitions of a
configuration (none when it was measured once).
"""

from analysis.figures.access_pattern import MAX_TRACE_RANKS, MAX_TRACES, draw_access_pattern
from analysis.figures.amplification import draw_amplification
from analysis.figures.base import Drawn, FigureJob, Inputs
from analysis.figures.cli import main, setup_parser
from analysis.figures.config_bars import draw_config_bars
from analysis.figures.heatmap import draw_heatmap
from analysis.figures.latency import draw_latency
from analysis.figures.registry import FIGURES
from analysis.figures.render import build_figures, plan_figures, png_bytes, render, render_png, save
from analysis.figures.scaling import draw_scaling
from analysis.figures.stripe import draw_stripe

__all__ = [
    "FIGURES", "MAX_TRACES", "MAX_TRACE_RANKS", "Drawn", "FigureJob", "Inputs", "build_figures",
    "draw_access_pattern", "draw_amplification", "draw_config_bars", "draw_heatmap", "draw_latency", "draw_scaling",
    "draw_stripe", "main", "plan_figures", "png_bytes", "render", "render_png", "save", "setup_parser",
]
