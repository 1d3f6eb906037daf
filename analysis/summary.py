"""``python -m analysis summary``: what was measured, one row per point."""

from __future__ import annotations

import argparse
import sys

import pandas as pd

from analysis.below import store_notes
from analysis.query import analysis_frame, summary_frame
from ddlio.store import open_store_for_reading

SHORT = ["status", "label", "repeat", "bytes_read", "bandwidth_mib_s", "iops", "io_time_slowest_s",
         "wall_time_s", "cache", "settle", "first_read", "error"]


def unsettled(df: pd.DataFrame) -> pd.Series:
    """Completed cold-cache points whose dataset was not settled before their first measured epoch: measured with
    settle=false, or by an earlier ddlio (before settling existed: ``settle`` NULL)."""
    return (df["status"] == "completed") & (df["cache"] == "cold") & (df["settle"] != True)  # noqa: E712 (NULL)


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
        cold = unsettled(df)
        t.loc[cold, "label"] = t.loc[cold, "label"] + " (unsettled)"  # told apart from a settled measurement
        t["error"] = t["error"].fillna("").str.split("\n").str[0].str.slice(0, 60)
        with_counts = t["status"].value_counts().to_dict()
        print(t.to_string(index=False, float_format=lambda v: f"{v:.4g}", na_rep="-"))
        print(f"\n{len(df)} points: " + ", ".join(f"{n} {k}" for k, n in sorted(with_counts.items())))
        for note in store_notes(store, analysis_frame(store)):
            print(f"note: {note}")
        earlier = int((cold & df["settle"].isna()).sum())
        if earlier:
            print(f"note: {earlier} point(s) were measured by an earlier method: cold cache without settling (ddlio "
                  "before b63f0f0); the same sweep with remeasure_earlier=true measures them again by today's method")
    return 0
