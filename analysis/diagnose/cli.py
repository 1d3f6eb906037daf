"""``python -m analysis diagnose [--db URL] [--where EXPR] [--format text|json|csv|html] [--config FILE]
[--thresholds] [--fail-on high|warn] [--all] [--log LOG ...]``.

Every configuration of completed emulated points (repetitions pooled) and every observed run in the store, or the
Darshan logs named with ``--log`` (read, not stored). Exit status: 0; with ``--fail-on LEVEL``, 3 when the worst
finding is warn and 4 when it is high, if that is at or above LEVEL (1 and 2 keep their meaning: an error, bad
input).
"""

from __future__ import annotations

import argparse
import hashlib
import sys
from pathlib import Path
from typing import Any

from analysis.diagnose import Diagnosis, diagnose_subject
from analysis.diagnose.model import Level
from analysis.diagnose.thresholds import Thresholds, load_thresholds, thresholds_text
from ddlio.errors import DdlioError
from ddlio.store import StoreReader, open_store_for_reading

FORMATS = ("text", "json", "csv", "html")
#: exit status when the worst finding is at this level (and ``--fail-on`` is at or below it)
EXIT = {Level.WARN: 3, Level.HIGH: 4}


def setup_parser(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--db", help="SQLite file or SQLAlchemy URL (default: $DDLIO_DB or ./results.db)")
    parser.add_argument("--where", help="keep the points (and observed runs) where this holds, e.g. "
                                        "\"format == 'hdf5'\" (the language of summary/figures --where)")
    parser.add_argument("--format", default="text", help=f"output: {', '.join(FORMATS)} (default text)")
    parser.add_argument("--config", metavar="FILE", help="thresholds settings file (JSON or YAML), as Drishti's")
    parser.add_argument("--thresholds", action="store_true", help="print the thresholds in force and exit")
    parser.add_argument("--fail-on", choices=("high", "warn"), help="exit 4 (high) or 3 (warn) when a finding at "
                                                                     "or above this level fires: a CI gate")
    parser.add_argument("--all", action="store_true", help="text: list the quiet (ok) findings too")
    parser.add_argument("--log", nargs="+", metavar="LOG", help="diagnose these Darshan logs instead of the store")


def collect(store: StoreReader, where: str | None = None, t: Thresholds | None = None,
            points: Any = None) -> list[Diagnosis]:
    """The diagnoses of the store's configurations (completed points matching ``where``), observed runs and
    configurations of checkpoint points (:mod:`analysis.diagnose.checkpoint`). ``points``: the train points, when
    the caller has read them already (:func:`analysis.query.analysis_frame` with ``where``); without a filter, the
    completed points are chosen in SQL and the frame is not read at all."""
    from analysis.checkpoint import checkpoint_frame  # lazy: pandas-backed queries
    from analysis.diagnose.checkpoint import checkpoint_diagnoses  # lazy: with the checkpoint points
    from analysis.diagnose.sources import emulated_subjects, observed_keys, observed_subjects  # lazy: the store
    from analysis.query import analysis_frame, parse_where  # lazy: pandas-backed queries

    checked = parse_where(where)
    if points is None and checked is not None:
        points = analysis_frame(store, checked, "diagnose")
    subjects = emulated_subjects(store, None if points is None else points["point_key"].tolist())
    observed = observed_subjects(store)
    if checked is not None and observed:
        keep = observed_keys(store, checked)
        observed = [o for o in observed if o.key in keep]
    return [diagnose_subject(s, t) for s in [*subjects, *observed]] + checkpoint_diagnoses(
        checkpoint_frame(store, checked), t)


def report_section(store: StoreReader, where: str | None = None, points: Any = None) -> str:
    """The report's diagnosis section (HTML), with the default thresholds (``points`` as :func:`collect` takes)."""
    from analysis.diagnose.render import to_html_section  # lazy: output formats

    return to_html_section(collect(store, where, points=points))


def from_logs(logs: list[str], t: Thresholds) -> list[Diagnosis]:
    """The diagnoses of Darshan logs read directly (nothing stored)."""
    from analysis.darshan_log import read_log  # lazy: pydarshan, only with --log
    from analysis.diagnose.sources import observed_subject  # lazy: with the store's sources

    out = []
    for p in logs:
        rec = read_log(p)
        key = "darshan-" + (rec.get("log_sha256") or hashlib.sha256(p.encode()).hexdigest())[:20]
        label = f"observed: {rec.get('exe') or Path(p).name} job {rec.get('job_id') or '?'} ({rec.get('ranks')} ranks)"
        out.append(diagnose_subject(observed_subject(key, label, rec), t))
    return out


def render(diags: list[Diagnosis], fmt: str, show_ok: bool = False) -> str:
    from analysis.diagnose import render as R  # lazy: output formats

    if fmt == "json":
        return R.to_json(diags)
    if fmt == "csv":
        return R.to_csv(diags)
    if fmt == "html":
        return R.to_html_page(diags)
    return R.to_text(diags, show_ok)


def exit_status(diags: list[Diagnosis], fail_on: str | None) -> int:
    """0, or :data:`EXIT` of the worst finding when it is at or above ``fail_on``."""
    if not fail_on:
        return 0
    worst = max((d.worst for d in diags), default=Level.OK)
    return EXIT.get(worst, 0) if worst >= Level[fail_on.upper()] else 0


def main(args: argparse.Namespace) -> int:
    if args.format not in FORMATS:
        raise DdlioError(f"diagnose: --format {args.format!r} is not one of {', '.join(FORMATS)}")
    t = load_thresholds(args.config)
    if args.thresholds:
        sys.stdout.write(thresholds_text(t))
        return 0
    if args.log:
        diags = from_logs(args.log, t)
    else:
        from analysis.query import parse_where  # lazy: the filter language

        parse_where(args.where)  # a refused filter is named before the store is opened
        diags = collect(open_store_for_reading(args.db), args.where, t)
    sys.stdout.write(render(diags, args.format, args.all))
    return exit_status(diags, args.fail_on)
