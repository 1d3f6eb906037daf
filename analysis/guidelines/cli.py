"""``python -m analysis guidelines``: :func:`compute` the guidelines of the store's points and print them."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

import pandas as pd

from analysis.below import excluded_note, holds_first_read, store_notes
from analysis.checkpoint import checkpoint_frame
from analysis.frames import METRICS
from analysis.guidelines.checkpoint import checkpoint_guidelines, checkpoint_json, checkpoint_markdown
from analysis.guidelines.compare import FORMAT_COLUMNS, LAYOUT_COLUMNS, Settings, compared
from analysis.guidelines.fed import fed_json, fed_markdown, fed_rows
from analysis.guidelines.formats import formats_of
from analysis.guidelines.layouts import layouts_of
from analysis.guidelines.render import as_json, markdown
from analysis.guidelines.statements import statements
from analysis.query import analysis_frame, parse_where
from analysis.validity import is_valid, valid_only
from ddlio.errors import DdlioError
from ddlio.store import open_store_for_reading


def compute(points: pd.DataFrame, st: Settings) -> tuple[pd.DataFrame, pd.DataFrame, list[dict[str, Any]]]:
    """(layout guidelines, format guidelines, statements) for ``points``. Points that include their dataset's
    first read since generation are left out (:func:`analysis.below.excluded_note`): a first read is served by
    the device, every other read by a cache below the client, and the two must never be compared; so are the
    invalid points (:mod:`analysis.validity`)."""
    keep = is_valid(points) & ~holds_first_read(points)  # as valid_only and excluded_note leave them
    if not keep.any():
        lay, fmt = pd.DataFrame(columns=LAYOUT_COLUMNS), pd.DataFrame(columns=FORMAT_COLUMNS)
    else:  # the points folded once into their configurations: no copy of a million points
        pts = compared(points, st, keep)
        lay, fmt = layouts_of(pts, st), formats_of(pts, st)
    return lay, fmt, statements(lay, fmt, points.loc[keep, [c for c in ("cache",) if c in points.columns]], st)


def below_notes(store: Any, points: pd.DataFrame) -> list[str]:
    """What the guidelines say of caches below the client: points left out for holding a first read, and
    configurations whose first reads differ from their repeats."""
    valid, invalid = valid_only(points[[c for c in ("validity", "invalid_reasons", "first_read")
                                        if c in points.columns]])  # the notes only: no copy of every column
    _, left_out = excluded_note(valid)
    return [n for n in (invalid, left_out) if n] + store_notes(store, points)


def setup_parser(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--db", help="SQLite file or SQLAlchemy URL (default: $DDLIO_DB or ./results.db)")
    parser.add_argument("--format", choices=("md", "json"), default="md", help="Markdown (default) or JSON")
    parser.add_argument("--where", help="keep the points where this holds, e.g. \"format == 'hdf5' and nodes >= 2\" "
                                          "(columns, literals, comparisons, in [...], and/or/not, arithmetic)")
    parser.add_argument("--metric", choices=["auto", *METRICS], default="auto",
                        help="what 'best' means (default auto: au where every point has a compute time, else "
                             "bandwidth_mib_s; times: lower is better)")
    parser.add_argument("--bootstrap", type=int, default=2000, help="bootstrap resamples (default 2000)")
    parser.add_argument("--seed", type=int, default=0, help="bootstrap seed (default 0)")
    parser.add_argument("--min-repeats", type=int, default=2, help="repetitions a compared layout needs (default 2)")


def main(args: argparse.Namespace) -> int:
    if args.bootstrap < 100 or args.min_repeats < 2:
        raise DdlioError("--bootstrap must be at least 100 and --min-repeats at least 2 (an interval needs two "
                         "repetitions)")
    where = parse_where(args.where)
    store = open_store_for_reading(args.db)
    points = analysis_frame(store, where, "guidelines")
    ck = checkpoint_frame(store, where)
    st = Settings(metric=auto_metric(points) if args.metric == "auto" else args.metric, n_boot=args.bootstrap,
                  seed=args.seed, min_repeats=args.min_repeats)
    if points.empty and ck.empty:
        print("no completed points in the store (after --where): nothing to recommend", file=sys.stderr)
        return 1
    text = ""
    if len(points):
        lay, fmt, stmts = compute(points, st)
        notes = below_notes(store, points)
        text = (as_json(lay, fmt, stmts, st, notes) if args.format == "json"
                else markdown(lay, fmt, stmts, st, notes))
        text = with_fed(text, fed_rows(points), args.format)
    if len(ck):
        text = with_checkpoints(text, ck, st, args.format)
    sys.stdout.write(text + ("\n" if args.format == "json" else ""))
    return 0


def auto_metric(points: pd.DataFrame) -> str:
    """What ``--metric auto`` ranks by: ``au`` where every point has a compute time (AU is then the answer:
    objective=auto's rule), else ``bandwidth_mib_s``."""
    if points.empty or "compute_time_s" not in points.columns:
        return "bandwidth_mib_s"
    step = pd.to_numeric(points["compute_time_s"], errors="coerce").fillna(0.0)
    return "au" if bool((step > 0).all()) else "bandwidth_mib_s"


def with_fed(text: str, rows: pd.DataFrame, fmt: str) -> str:
    """The guidelines ``text`` with the accelerators' verdict (:mod:`analysis.guidelines.fed`) leading it: in
    Markdown right under the title, in JSON as ``accelerators``. Unchanged without a point that has a compute
    time."""
    if fmt == "json":
        doc = json.loads(text)
        doc["accelerators"] = fed_json(rows)
        return json.dumps(doc, indent=1)
    section = fed_markdown(rows)
    if not section:
        return text
    title, _, rest = text.partition("\n\n")
    return f"{title}\n\n{section}\n{rest}"


def with_checkpoints(text: str, ck: pd.DataFrame, st: Settings, fmt: str) -> str:
    """The guidelines ``text`` (Markdown or JSON; "" when there is no train point) with the checkpoint guideline of
    the checkpoint points ``ck`` (:mod:`analysis.guidelines.checkpoint`): a section after train's, or the JSON
    document's ``checkpoints``."""
    rows, notes = checkpoint_guidelines(ck, st)
    if fmt == "json":
        doc = json.loads(text) if text else {"confidence": st.confidence, "n_boot": st.n_boot, "seed": st.seed,
                                              "min_repeats": st.min_repeats}
        doc["checkpoints"] = checkpoint_json(rows, notes)
        return json.dumps(doc, indent=1)
    return text + ("\n" if text else "# Guidelines\n\n") + checkpoint_markdown(rows, notes, st)
