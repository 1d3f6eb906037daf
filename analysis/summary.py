"""``python -m analysis summary``: what was measured, one row per point."""

from __future__ import annotations

import argparse
import sys

from analysis.below import store_notes
from analysis.query import analysis_frame, summary_frame
from ddlio.store import open_store_for_reading

SHORT = ["status", "label", "repeat", "bytes_read", "bandwidth_mib_s", "iops", "io_time_slowest_s",
         "wall_time_s", "cache", "first_read", "validity", "error"]


def setup_parser(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--db", help="SQLite file or SQLAlchemy URL (default: $DDLIO_DB or ./results.db)")
    parser.add_argument("--format", choices=("table", "csv", "json"), default="table",
                        help="table: a readable subset of columns; csv/json: every summary column")


def main(args: argparse.Namespace) -> int:
    store = open_store_for_reading(args.db)
    df = summary_frame(store)
    if args.format == "csv":
        df.to_csv(sys.stdout, index=False)
    elif args.format == "json":
        sys.stdout.write(df.to_json(orient="records", indent=1, date_format="iso") + "\n")
    else:
        if df.empty:
            print("no points in the store yet")
            return 0
        t = df[SHORT].copy()
        t["error"] = t["error"].fillna("").str.split("\n").str[0].str.slice(0, 60)
        t["validity"] = t["validity"].where(df["validity"] != "invalid", "invalid: " + df["invalid_reasons"].fillna(""))
        with_counts = t["status"].value_counts().to_dict()
        print(t.to_string(index=False, float_format=lambda v: f"{v:.4g}", na_rep="-"))
        print(f"\n{len(df)} points: " + ", ".join(f"{n} {k}" for k, n in sorted(with_counts.items())))
        for note in store_notes(store, analysis_frame(store)):
            print(f"note: {note}")
    return 0
