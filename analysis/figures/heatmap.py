"""The best stripe layout and its bandwidth per format × access and node count, as a heat map."""

from __future__ import annotations

from functools import partial
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from analysis import frames as F
from analysis.figures.base import FigureJob, Inputs, _figure, title

if TYPE_CHECKING:
    from matplotlib.figure import Figure


def draw_heatmap(values: pd.DataFrame, layouts: pd.DataFrame) -> Figure:
    """Best bandwidth (colour, MiB/s) and its stripe layout (text) per format × access (rows) and node count
    (columns); frames from :func:`analysis.frames.heatmap_frame`. Empty cells were not measured."""
    longest = max((len(str(r)) for r in values.index), default=8)
    # a cell holds its layout's name and a number in 7-point text: as wide as the longest (never clipped, with one
    # node column too); the colour bar takes 12% of the axes' width beside them
    text = max((len(lay) for lay in layouts.to_numpy(dtype=object).ravel() if isinstance(lay, str)), default=6)
    cell = max(1.1, 0.07 * max(text, 6) + 0.35)
    left, right = 0.75 + longest * 0.075, 1.5
    fig, axes = _figure(max(5.0, left + right + cell * max(1, values.shape[1]) / 0.88),
                        max(2.5, 0.55 * values.shape[0] + 1.5), left=left, right=right)
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
    title(fig, "best stripe layout per format × access at each scale (colour: its mean bandwidth)")
    return fig


def plan(inp: Inputs) -> list[FigureJob]:
    """The heat map of the best layouts."""
    return [FigureJob("best_heatmap", "best stripe layout per format × access and node count",
                      partial(draw_heatmap, *F.heatmap_frame(inp.best)))]
