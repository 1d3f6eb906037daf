"""``python -m analysis ingest DIR``: store the result and failure files found below DIR (run folders left by
jobs whose driver was gone). Idempotent: records already stored are counted, not duplicated.

DIR must be an existing directory holding at least one ``result.json`` or ``failure.json`` somewhere below it;
otherwise the command says so and exits 2 without creating or touching the store (a wrong path should not leave
an empty ``results.db`` behind). Files that cannot be read or are not ddlio records are skipped and counted."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from ddlio.errors import DdlioError
from ddlio.records import load_run_records
from ddlio.runpaths import FAILURE, RESULT
from ddlio.store import open_store_for_writing

_KINDS = ("ddlio.result", "ddlio.failure")


def setup_parser(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("directory", help="a run folder or a folder of run folders (e.g. DATA_ROOT/runs)")
    parser.add_argument("--db", help="SQLite file or SQLAlchemy URL (default: $DDLIO_DB or ./results.db)")


def _is_record(r: Any) -> bool:
    return isinstance(r, dict) and r.get("kind") in _KINDS and isinstance(r.get("point"), dict)


def main(args: argparse.Namespace) -> int:
    d = Path(args.directory)
    hint = "name a run folder or a folder of run folders (e.g. DATA_ROOT/runs)"
    if not d.exists():
        raise DdlioError(f"ingest: {d} does not exist; {hint}")
    if not d.is_dir():
        raise DdlioError(f"ingest: {d} is not a directory; {hint}")
    files = sum(1 for name in (RESULT, FAILURE) for _ in d.rglob(name))
    if files == 0:
        raise DdlioError(f"ingest: no {RESULT} or {FAILURE} below {d}: nothing to ingest, the store is left "
                         f"untouched (a run folder holds one once its job has ended); {hint}")
    loaded = load_run_records(d)
    records = [r for r in loaded if _is_record(r)]
    skipped = files - len(records)
    if not records:
        raise DdlioError(f"ingest: none of the {files} {RESULT}/{FAILURE} files below {d} is a readable ddlio "
                         "record: nothing to ingest, the store is left untouched")
    store = open_store_for_writing(args.db)
    new = sum(store.record(r) for r in records)
    print(
        f"{len(records)} records found below {args.directory}: "
        f"{new} stored, {len(records) - new} already in the store"
        + (f"; {skipped} unreadable or not ddlio records, skipped" if skipped else "")
    )
    return 0
