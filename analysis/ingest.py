"""``python -m analysis ingest DIR``: store the result and failure files found below DIR (run folders left by
jobs whose driver was gone). Idempotent: records already stored are counted, not duplicated.

DIR must be an existing directory holding at least one ``result.json`` or ``failure.json`` somewhere below it;
otherwise the command says so and exits 2 without creating or touching the store (a wrong path should not leave
an empty ``results.db`` behind). Files that cannot be read or are not ddlio records are skipped and counted. A
ddlio record that is damaged (a part missing or of the wrong type) is named and not stored, the others are, and
the command exits 1."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from sqlalchemy.exc import DataError, IntegrityError

from ddlio.errors import DdlioError
from ddlio.runpaths import FAILURE, RESULT
from ddlio.store import StoreError, open_store_for_writing

_KINDS = ("ddlio.result", "ddlio.failure")


def setup_parser(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("directory", help="a run folder or a folder of run folders (e.g. DATA_ROOT/runs)")
    parser.add_argument("--db", help="SQLite file or SQLAlchemy URL (default: $DDLIO_DB or ./results.db)")


def _is_record(r: Any) -> bool:
    return isinstance(r, dict) and r.get("kind") in _KINDS and isinstance(r.get("point"), dict)


def _damage(r: dict[str, Any]) -> str:
    """Why the ddlio record ``r`` cannot be stored as it is (a missing or mistyped part), or "" when it looks whole."""
    if not isinstance(r["point"].get("point_key"), str):
        return "its point has no point_key"
    if r["kind"] == "ddlio.failure":
        return "" if isinstance(r.get("error"), str) else "it has no error text"
    for key, kind in (("totals", dict), ("epochs", list), ("nodes", list)):
        if not isinstance(r.get(key), kind):
            return f"its {key} is missing or not a {kind.__name__}"
    if not all(isinstance(e, dict) for e in r["epochs"]):
        return "an epoch is not an object"
    return ""


def _records(d: Path) -> tuple[list[tuple[Path, dict[str, Any]]], int]:
    """Every ddlio record below ``d`` with its file, and how many result/failure files were not records."""
    out, other = [], 0
    for name in (RESULT, FAILURE):
        for p in sorted(d.rglob(name)):
            try:
                r = json.loads(p.read_text(encoding="utf-8"))
            except (OSError, ValueError):  # unreadable, not UTF-8 (UnicodeDecodeError), not JSON
                r = None
            if _is_record(r):
                out.append((p, r))
            else:
                other += 1
    return out, other


def _store_one(store: Any, r: dict[str, Any]) -> tuple[bool, str]:
    """Store ``r``: (changed anything, "") or (False, why the store refused it). An error of the store itself (full,
    unwritable, gone) is raised: it is not the record's fault and would refuse every other record too."""
    why = _damage(r)
    if why:
        return False, why
    try:
        return bool(store.record(r)), ""
    except StoreError as e:
        if isinstance(e.__context__, (IntegrityError, DataError)):  # a value the schema refuses: the record's
            return False, str(e)
        raise
    except (KeyError, TypeError, ValueError, AttributeError) as e:  # a part missing or of the wrong type
        return False, f"{type(e).__name__}: {e}"


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
    records, skipped = _records(d)
    if not records:
        raise DdlioError(f"ingest: none of the {files} {RESULT}/{FAILURE} files below {d} is a readable ddlio "
                         "record: nothing to ingest, the store is left untouched")
    store = open_store_for_writing(args.db)
    new, damaged = 0, []
    for p, r in records:  # one by one: a damaged record is named and the others are stored
        changed, why = _store_one(store, r)
        new += changed
        if why:
            damaged.append((p, why))
    good = len(records) - len(damaged)
    print(
        f"{len(records)} records found below {args.directory}: "
        f"{new} stored, {good - new} already in the store"
        + (f"; {skipped} unreadable or not ddlio records, skipped" if skipped else "")
        + (f"; {len(damaged)} damaged, not stored" if damaged else "")
    )
    if damaged:
        p, why = damaged[0]
        more = f" (and {len(damaged) - 1} more)" if len(damaged) > 1 else ""
        sys.stdout.flush()
        print(f"error: ingest: {len(damaged)} damaged record(s) not stored, e.g. {p}: {why}{more}; the other "
              "records are stored", file=sys.stderr)
        return 1
    return 0
