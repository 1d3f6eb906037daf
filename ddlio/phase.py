"""Which phase a running point is in, written to its run folder as it goes (``phase.json``) and read by the
driver's live line on a terminal (:class:`LiveLine`) and by ``python -m analysis status``.

The job writes ``generating`` when the point's dataset must be written; the kernel's rank 0 writes ``settling``
while a fresh dataset settles below the client, then ``epoch`` before each epoch (``epoch``: 0-based, ``epochs``:
how many, ``epoch_s``: the seconds each finished epoch took, for the estimate). ``since`` is the Unix time the
phase began. Every write is atomic (a reader sees the old file or the new one) and never fails a point: a folder
that cannot take it leaves the phase unsaid. Nothing here is written between a point's timed reads: the kernel
writes its phase before an epoch's start barrier.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import threading
import time
from pathlib import Path
from typing import Any, TextIO

#: the file in a point's run folder
FILE = "phase.json"
#: what each phase is called on the screen
NAMES = {"generating": "generating the dataset", "settling": "settling the fresh dataset", "starting": "starting"}


def write(run_dir: str | os.PathLike, phase: str, **info: Any) -> None:
    """Say that the point in ``run_dir`` is now in ``phase`` (with ``info``: its epoch and the like), from now
    (``since``, Unix seconds). Errors are swallowed: the phase is a courtesy, the point goes on."""
    path = Path(run_dir) / FILE
    tmp = path.with_name(f"{FILE}.tmp.{os.getpid()}")
    with contextlib.suppress(OSError, TypeError, ValueError):
        tmp.write_text(json.dumps({"phase": phase, "since": time.time(), **info}))
        os.replace(tmp, path)


def read(run_dir: str | os.PathLike | None) -> dict[str, Any] | None:
    """The phase last written in ``run_dir`` (None: none, or not readable)."""
    if not run_dir:
        return None
    try:
        got = json.loads((Path(run_dir) / FILE).read_text())
    except (OSError, ValueError):
        return None
    return got if isinstance(got, dict) and isinstance(got.get("phase"), str) else None


def describe(ph: dict[str, Any], now: float | None = None) -> str:
    """``epoch 2 of 5 (~6 s left)``, ``generating the dataset (12 s so far)``: the phase, how long it has run (s)
    and, in the epochs, an estimate of the time left from the epochs finished so far (s)."""
    now = time.time() if now is None else now
    elapsed = max(0.0, now - float(ph.get("since") or now))
    if ph.get("phase") == "epoch":
        k, n = int(ph.get("epoch", 0)), int(ph.get("epochs", 0))
        done = [float(x) for x in ph.get("epoch_s") or ()]
        text = f"epoch {k + 1} of {n}"
        if done:
            per = sum(done) / len(done)
            left = max(0.0, per * (n - k) - elapsed)
            return f"{text} (~{left:.0f} s left)"
        return f"{text} ({elapsed:.0f} s so far)"
    return f"{NAMES.get(str(ph.get('phase')), str(ph.get('phase')))} ({elapsed:.0f} s so far)"


class LiveLine:
    """One line on a terminal, rewritten in place while a local point runs: its label and phase
    (:func:`describe`), at most every ``every_s`` seconds. Nothing at all when ``stream`` is not a terminal. Any
    other output clears it first (:meth:`clear`)."""

    def __init__(self, stream: TextIO | None = None, every_s: float = 0.5) -> None:
        self.stream = stream if stream is not None else sys.stdout
        try:
            self.on = bool(self.stream.isatty())
        except (AttributeError, ValueError):
            self.on = False
        self.every_s = every_s
        self.label = ""
        self.run_dir: Path | None = None
        self.shown = False
        self.last = 0.0
        self.lock = threading.Lock()

    def running(self, label: str, run_dir: str | os.PathLike) -> None:
        """A local point labelled ``label`` now runs in ``run_dir``."""
        self.label, self.run_dir = label, Path(run_dir)

    def tick(self) -> None:
        """Show the running point's phase, if it is time to."""
        if not self.on or self.run_dir is None or time.monotonic() - self.last < self.every_s:
            return
        self.last = time.monotonic()
        ph = read(self.run_dir)
        text = f"  {self.label}: {describe(ph) if ph else 'starting'}"
        with self.lock, contextlib.suppress(OSError, ValueError):
            self.stream.write("\r" + text[:_width() - 1] + "\x1b[K")
            self.stream.flush()
            self.shown = True

    def clear(self) -> None:
        """Take the line away (before other output, and when the point is done)."""
        if not self.shown:
            return
        with self.lock, contextlib.suppress(OSError, ValueError):
            self.stream.write("\r\x1b[K")
            self.stream.flush()
            self.shown = False

    def done(self) -> None:
        """The running point ended."""
        self.clear()
        self.run_dir = None


def _width() -> int:
    """The terminal's columns (80 where it does not say, or says too few to be true: a pseudo-terminal of 0)."""
    try:
        columns = os.get_terminal_size().columns
    except OSError:
        return 80
    return columns if columns >= 40 else 80


def time_split(fields: dict[str, Any], totals: dict[str, Any]) -> str:
    """The part of a measured point's line that splits its time (s): ``generation 8.1 s, epochs 3.9 s`` where
    its dataset was generated for it, ``epochs 3.9 s`` otherwise ("" for a kind without epochs)."""
    wall = totals.get("wall_time_s")
    if not isinstance(wall, (int, float)):
        return ""
    ds = fields.get("dataset") or {}
    gen = ds.get("generation_s") if ds.get("generated") else None
    return (f"generation {float(gen):.1f} s, " if isinstance(gen, (int, float)) else "") + f"epochs {wall:.1f} s"
