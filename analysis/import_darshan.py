"""``python -m analysis import-darshan LOG... [--db URL] [--workload-out FILE.yaml]``: store Darshan logs of real
applications beside the sweep's points (``source = darshan``, labelled observed), and optionally derive a
``conf/workload/`` preset from one of them. Every log is read before anything is stored: one that is not a
Darshan log is bad input (exit 2) and nothing is written; so is a log whose modules libdarshan cannot read (a
truncated or damaged log) unless ``--partial`` keeps what it could read, labelled partial. A log without POSIX
records imports what it has and says what is missing. An observed run is keyed by its job (job id, start time,
user, ranks, command), so one job imported twice is one observed run."""

from __future__ import annotations

import argparse
from pathlib import Path

from analysis.darshan_log import identity, read_log, workload_preset
from analysis.outputs import check_file, write_file
from ddlio.errors import DdlioError
from ddlio.store import open_store_for_writing

#: what the line of a log says after what was stored (ddlio.store's record_observed verdicts)
_SAID = {"new": "", "same": " (this job is already in the store)",
         "replaced": " (replaces the partial log of this job stored before)",
         "kept": " (partial; this job's whole log is already in the store and stays)"}


def setup_parser(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("logs", nargs="+", metavar="LOG", help="Darshan log files (*.darshan)")
    parser.add_argument("--db", help="SQLite file or SQLAlchemy URL (default: $DDLIO_DB or ./results.db)")
    parser.add_argument("--workload-out", metavar="FILE.yaml",
                        help="also write a conf/workload/ preset that emulates the (first) log with POSIX reads")
    parser.add_argument("--partial", action="store_true",
                        help="keep a log whose modules could not all be read (truncated, damaged): what could be read "
                             "is stored, labelled partial (default: such a log is refused)")
    parser.add_argument("--force", action="store_true",
                        help="replace an existing --workload-out that ddlio did not write (never a shipped preset)")


def main(args: argparse.Namespace) -> int:
    out = Path(args.workload_out) if args.workload_out else None
    if out is not None and out.suffix not in (".yaml", ".yml"):
        raise DdlioError(f"import-darshan: --workload-out {out} must name a .yaml file (e.g. conf/workload/app.yaml)")
    if out is not None:
        check_file(out, "yaml", args.force, what="import-darshan: --workload-out")  # before anything is stored
    records = [read_log(p, partial=args.partial) for p in args.logs]  # all read and checked before storing
    for rec in records:
        rec["observed_key"] = identity(rec)
    preset = None
    if out is not None:
        source = next((r for r in records if r.get("posix_reads")), None)
        if source is None:
            raise DdlioError("import-darshan: --workload-out needs a log with POSIX reads; none of these has any")
        preset = workload_preset(source, out.stem)
    store = open_store_for_writing(args.db)
    for rec in records:
        verdict = store.record_observed(rec)
        what = (f"{rec['posix_reads']} reads, {rec['posix_bytes_read']} bytes, {len(rec['files'])} files "
                f"({rec['access']}), agg_perf_by_slowest {rec['agg_perf_by_slowest_mib_s']:.4g} MiB/s"
                if rec.get("posix_reads") is not None else "job and modules only")
        print(f"{Path(rec['log']).name}: job {rec['job_id'] or '?'}, {rec['ranks']} ranks: {what}"
              + _SAID[verdict])
        for m in rec["missing"]:
            print(f"  missing from this log: {m}")
    if preset is not None and out is not None:
        text, assumptions = preset
        write_file(out, text, what="import-darshan: --workload-out")
        print(f"workload preset written to {out}; assumptions:")
        for a in assumptions:
            print(f"  - {a}")
    return 0
