"""``python -m analysis figures``: the figures from the store, written as PNG plus SVG or PDF."""

from __future__ import annotations

import argparse

from analysis.checkpoint import checkpoint_frame
from analysis.figures.render import plan_figures, render
from analysis.outputs import check_dir, check_dir_names, record_names
from analysis.query import analysis_frame, hist_frame, parse_where, per_configuration
from ddlio.store import open_store_for_reading


def setup_parser(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--db", help="SQLite file or SQLAlchemy URL (default: $DDLIO_DB or ./results.db)")
    parser.add_argument("--out", default="figures", help="directory for the figures (default: ./figures)")
    parser.add_argument("--where", help="keep the points where this holds, e.g. \"format == 'hdf5' and nodes >= 2\" "
                                          "(columns, literals, comparisons, in [...], and/or/not, arithmetic)")
    parser.add_argument("--vector", choices=("svg", "pdf"), default="svg", help="vector format besides PNG")
    parser.add_argument("--jobs", type=int, help="processes drawing figures (default: one per CPU)")
    parser.add_argument("--force", action="store_true",
                        help="replace an existing output that ddlio did not write (never a file shipped in conf/)")


def main(args: argparse.Namespace) -> int:
    where = parse_where(args.where)
    out = check_dir(args.out, args.force)  # before any work
    store = open_store_for_reading(args.db)
    points = analysis_frame(store, where, "figures")
    keys, hists = hist_frame(store, points["point_key"].tolist(), by=per_configuration(points))
    checkpoints = checkpoint_frame(store, where)
    jobs = plan_figures(points, keys, hists, checkpoints=checkpoints)
    names = [f"{j.name}.{fmt}" for j in jobs if j.draw is not None for fmt in ("png", args.vector)]
    check_dir_names(out, names, args.force)  # before any figure is drawn
    if names:
        record_names(out, names)
    skipped = 0
    for job in jobs:
        if job.draw is None:
            print(f"skipped {job.name}: {job.skipped}")
            skipped += 1
    done = render(jobs, out, ("png", args.vector), workers=args.jobs)
    for job, paths in done:
        print(f"wrote {', '.join(str(p) for p in paths)}  ({job.caption})")
    written = len(done)
    also = f" and {len(checkpoints)} checkpoint points" if len(checkpoints) else ""
    print(f"{written} figures in {out} from {len(points)} completed points{also}; {skipped} skipped")
    return 0 if written else 1
