"""``python -m analysis export --format csv|parquet``: the store's points (or epochs) as one flat table.

``points``: one row per point, every column of the ``points`` table except the full config/result JSON (the
layout and format options are kept as JSON text). ``epochs``: one row per point and epoch, without the histograms
and per-rank rows. Units as in the store (bytes, seconds, MiB/s, ops/s, µs). Parquet is written with pyarrow.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import pandas as pd
from sqlalchemy import Text, cast, select

from analysis.outputs import PARQUET_KEY, check_file, record_output, write_with
from analysis.query import epochs_frame
from ddlio.errors import DdlioError
from ddlio.store import Point, StoreReader, open_store_for_reading


def export_frame(store: StoreReader, table: str) -> pd.DataFrame:
    """The ``points`` or ``epochs`` table of ``store`` (an :class:`ddlio.store.StoreReader`) as a flat frame."""
    if table == "epochs":
        return epochs_frame(store)
    cols = [cast(c, Text).label(c.name) if c.name in ("layout", "format_options", "host_names") else c
            for c in Point.__table__.columns if c.name not in ("config", "result")]
    with store.engine.connect() as conn:
        return pd.read_sql(select(*cols).order_by(Point.point_key), conn)


def write(df: pd.DataFrame, fmt: str, out: str | None) -> str:
    """Write ``df`` as CSV (to ``out`` or stdout) or Parquet (to ``out``); returns where it went."""
    if fmt == "csv":
        if out is None:
            df.to_csv(sys.stdout, index=False)
            return "stdout"
        write_with(Path(out), lambda tmp: df.to_csv(tmp, index=False))
        record_output(Path(out))  # a CSV carries no mark: its directory's manifest says ddlio wrote it
        return out
    if out is None:
        raise DdlioError("--format parquet needs --out FILE (Parquet is binary; it is not written to a terminal)")
    try:
        import pyarrow as pa  # lazy: an optional dependency, needed only for Parquet
        import pyarrow.parquet as pq  # lazy: as above
    except ImportError as e:
        raise DdlioError("Parquet export needs pyarrow: pip install pyarrow (or use --format csv)") from e

    def put(tmp: str) -> None:
        table = pa.Table.from_pandas(df, preserve_index=False)
        meta = {**(table.schema.metadata or {}), PARQUET_KEY: b"export"}  # recognisably ddlio's (analysis.outputs)
        pq.write_table(table.replace_schema_metadata(meta), tmp)

    write_with(Path(out), put)
    return out


def setup_parser(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--db", help="SQLite file or SQLAlchemy URL (default: $DDLIO_DB or ./results.db)")
    parser.add_argument("--format", choices=("csv", "parquet"), default="csv", help="csv (default) or parquet")
    parser.add_argument("--table", choices=("points", "epochs"), default="points", help="what to export")
    parser.add_argument("--out", help="output file (csv: default stdout; parquet: required)")
    parser.add_argument("--force", action="store_true",
                        help="replace an existing output that ddlio did not write (never a file shipped in conf/)")


def main(args: argparse.Namespace) -> int:
    if args.format == "parquet" and not args.out:
        raise DdlioError("--format parquet needs --out FILE (Parquet is binary; it is not written to a terminal)")
    if args.out:
        check_file(args.out, args.format, args.force)
    df = export_frame(open_store_for_reading(args.db), args.table)
    where = write(df, args.format, args.out)
    if where != "stdout":
        print(f"{len(df)} {args.table} rows written to {where}", file=sys.stderr)
    return 0
