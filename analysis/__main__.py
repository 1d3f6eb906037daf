"""``python -m analysis <command>``: each command is a module with ``setup_parser(parser)`` and ``main(args)``.

No traceback reaches a user: a ddlio error (bad input, no store) prints ``error: ...`` and exits 2; anything
unexpected prints one line naming its type and message and exits 1 (``DDLIO_TRACEBACK=1`` shows the traceback);
Ctrl-C prints ``interrupted`` and exits 130 (SIGTERM: ``interrupted (SIGTERM)``, 143); a reader
that goes away (``| head``) ends the command quietly.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
import traceback

from ddlio.errors import DdlioError
from ddlio.signals import INTERRUPTED, interrupt_code, interrupt_name, terminate_as_interrupt

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
    "import-darshan": ("analysis.import_darshan", "store Darshan logs of real applications beside the points"),
    "predict": ("analysis.predict", "bandwidth (and accelerators fed) beyond the measured scale, with its interval"),
    "diagnose": ("analysis.diagnose.cli", "coded I/O findings with thresholds and fixes, per configuration and run"),
}
#: the commands that write the store (open_store_for_writing: they create it, or upgrade an older one); every other
#: command only reads it (open_store_for_reading: it never creates or alters a schema)
WRITERS = ("ingest", "import-darshan")
#: OS errors about a path the user gave (--db, --out, a directory): bad input, exit 2. FileNotFoundError also
#: carries the store's "no results store at ...".
_PATH_ERRORS = (FileNotFoundError, FileExistsError, NotADirectoryError, IsADirectoryError, PermissionError)
#: The one documented switch that shows the traceback of an error (``DDLIO_TRACEBACK=1``, as for sweep.py).
TRACEBACK_ENV = "DDLIO_TRACEBACK"


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m analysis", description="Read the ddlio results store.")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name, (module, help_) in COMMANDS.items():
        p = sub.add_parser(name, help=help_, description=help_)
        p.set_defaults(_module=module)
        importlib.import_module(module).setup_parser(p)
    return parser


def _run(argv: list[str] | None) -> int:
    args = build_parser().parse_args(argv)
    code = importlib.import_module(args._module).main(args)
    sys.stdout.flush()  # inside the guard: a reader gone before our buffered output is written is not an error
    return code


def main(argv: list[str] | None = None) -> int:
    """Run one command; returns the exit code (0 ok, 1 failed or unexpected error, 2 bad input, 130 interrupted)."""
    show = os.environ.get(TRACEBACK_ENV) == "1"  # as sweep.py reads it
    try:
        with terminate_as_interrupt():
            return _run(argv)
    except BrokenPipeError:  # the reader of our output went away (| head): not an error of ours
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # so the exit's flush cannot fail again
        return 0
    except KeyboardInterrupt as e:  # Ctrl-C, or SIGTERM (ddlio.signals: exit 143)
        _traceback(show)
        print("interrupted" if interrupt_code(e) == INTERRUPTED else f"interrupted ({interrupt_name(e)})",
              file=sys.stderr)
        return interrupt_code(e)
    except (DdlioError, *_PATH_ERRORS) as e:  # a path the user named: missing, in the way, not allowed
        _traceback(show)
        if isinstance(e, OSError) and e.strerror and e.filename:
            print(f"error: {e.strerror}: {e.filename}", file=sys.stderr)
        else:
            print(f"error: {e}", file=sys.stderr)
        return 2
    except Exception as e:
        if _traceback(show):
            return 1
        first = (str(e).strip().splitlines() or [""])[0][:300]
        what = f"{type(e).__name__}: {first}" if first else type(e).__name__
        print(f"error: {what} (set {TRACEBACK_ENV}=1 to see the traceback)", file=sys.stderr)
        return 1


def _traceback(show: bool) -> bool:
    """Print the exception being handled with its traceback when ``show``; returns ``show``."""
    if show:
        traceback.print_exc()
    return show


if __name__ == "__main__":
    sys.exit(main())
