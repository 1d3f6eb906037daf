"""``python -m analysis figures``: the figures from the store, written as PNG plus SVG or PDF."""

from __future__ import annotations

import argparse
from pathlib import Path

from analysis.figures.render import plan_figures, render
from analysis.query import analysis_frame, hist_frame, parse_where
from ddlio.store import open_store_for_reading


def setup_parser(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--db", help="SQLite file or SQLAlchemy URL (default: $DDLIO_DB or ./results.db)")
    parser.add_argument("--out", default="figures", help="directory for the figures (default: ./figures)")
    parser.add_argument("--where", help="keep the points where this holds, e.g. \"format == 'hdf5' and nodes >= 2\" "
                                          "(columns, literals, comparisons, in [...], and/or/not, arithmetic)")
    parser.add_argument("--vector", choices=("svg", "pdf"), default="svg", help="vector format besides PNG")
    parser.add_argument("--jobs", type=int, help="processes drawing figures (default: one per CPU)")


def main(args: argparse.Namespace) -> int:
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
