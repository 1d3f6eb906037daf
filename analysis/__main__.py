"""``python -m analysis <command>``: each command is a module with ``setup_parser(parser)`` and ``main(args)``."""

from __future__ import annotations

import argparse
import importlib
import sys

#: command -> (module, one-line help). Listed explicitly: adding a command is adding a line.
COMMANDS = {
    "summary": ("analysis.summary", "one row per point: config, status, bandwidth, IOPS ..."),
    "ingest": ("analysis.ingest", "store result files found below a directory (jobs whose driver was gone)"),
    "status": ("analysis.status", "sweeps and their points by state: queued/running, done, failed"),
    "figures": ("analysis.figures", "the paper's figures from the store, PNG plus SVG/PDF"),
    "guidelines": ("analysis.guidelines", "best stripe layout and format per scenario, with 95 percent CIs"),
    "report": ("analysis.report", "one self-contained HTML report: sweeps, figures, guidelines, provenance"),
    "query": ("analysis.sql", "read-only SQL over the store (writes are refused)"),
    "export": ("analysis.export", "the points (or epochs) as CSV or Parquet"),
}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m analysis", description="Read the ddlio results store.")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name, (module, help_) in COMMANDS.items():
        p = sub.add_parser(name, help=help_, description=help_)
        p.set_defaults(_module=module)
        importlib.import_module(module).setup_parser(p)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    from experiments.errors import DdlioError

    try:
        return importlib.import_module(args._module).main(args)
    except (DdlioError, FileNotFoundError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    except BrokenPipeError:  # the reader of our output went away (| head): not an error of ours
        import os

        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0


if __name__ == "__main__":
    sys.exit(main())
