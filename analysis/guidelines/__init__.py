"""``python -m analysis guidelines``: which stripe layout and which format to use, and how sure that is.

A *scenario* is access × format × nodes × ranks per node × sample-size class. For each one the guideline names the
stripe layout (count, size) with the best mean of the metric (bandwidth by default) over its repetitions, its gain
over the baseline (stripe count 1, else the file system's default 0) with a bootstrap 95% confidence interval, and a
verdict:

- ``recommend``: the best layout's interval overlaps no other layout's and its gain interval excludes zero;
- ``keep baseline``: the baseline itself is best and separated from every other layout;
- ``cannot decide``: intervals overlap, repetitions are missing (fewer than ``min_repeats`` of the best layout or
  of the baseline), only one layout was measured, or striping was not applicable (not Lustre: every stripe count
  reads the same bytes from the same place, so a difference between them is noise).

Per access × nodes × ranks per node × sample-size class, the same comparison between formats (each at its best
layout; on a non-Lustre file system, all of a format's points pooled, since their bytes are the same). Then
cross-cutting statements in the paper's style, derived only from the decided rows, each with its numbers.

Bootstrap: every layout's repetitions are resampled with replacement ``n_boot`` times (numpy, seeded), giving the
distribution of its mean; intervals are the 2.5th and 97.5th percentiles. Taking the best of several candidates by
its mean makes its interval slightly optimistic (winner's curse); overlaps are therefore judged conservatively.

Modules: :mod:`~analysis.guidelines.compare` (settings, candidates, bootstrap), :mod:`~analysis.guidelines.layouts`,
:mod:`~analysis.guidelines.formats`, :mod:`~analysis.guidelines.statements`, :mod:`~analysis.guidelines.render`
(Markdown, JSON) and :mod:`~analysis.guidelines.cli` (:func:`compute` and the command).
"""

from analysis.guidelines.cli import below_notes, compute, main, setup_parser
from analysis.guidelines.compare import (
    FORMAT_COLUMNS,
    FORMAT_SCENARIO,
    KIB,
    LAYOUT_COLUMNS,
    MIB,
    SCENARIO,
    SIZE_CLASSES,
    Settings,
    size_class,
)
from analysis.guidelines.formats import AMPLIFICATION_NOTE, format_guidelines
from analysis.guidelines.layouts import layout_guidelines
from analysis.guidelines.render import as_json, markdown
from analysis.guidelines.statements import statements

__all__ = [
    "AMPLIFICATION_NOTE", "FORMAT_COLUMNS", "FORMAT_SCENARIO", "KIB", "LAYOUT_COLUMNS", "MIB", "SCENARIO",
    "SIZE_CLASSES", "Settings", "as_json", "below_notes", "compute", "format_guidelines", "layout_guidelines",
    "main", "markdown", "setup_parser", "size_class", "statements",
]
