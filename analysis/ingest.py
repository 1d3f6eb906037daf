"""``python -m analysis ingest DIR``: store the result and failure files found below DIR (run folders left by
jobs whose driver was gone). Idempotent: records already stored are counted, not duplicated."""

from __future__ import annotations

import argparse

from analysis.store import open_store
from experiments.launch import load_run_records


def setup_parser(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("directory", help="a run folder or a folder of run folders (e.g. DATA_ROOT/runs)")
    parser.add_argument("--db", help="SQLite file or SQLAlchemy URL (default: $DDLIO_DB or ./results.db)")


def main(args: argparse.Namespace) -> int:
    store = open_store(args.db, create=True)
    records = load_run_records(args.directory)
    new = sum(store.record(r) for r in records)
    print(
        f"{len(records)} records found below {args.directory}: "
        f"{new} stored, {len(records) - new} already in the store"
    )
    return 0
