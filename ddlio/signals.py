"""SIGTERM (what ``kill`` and Slurm send) is handled as Ctrl-C is: it raises :class:`Terminated`, a
``KeyboardInterrupt``, so every place that stops a running point on Ctrl-C and stores it as interrupted does so
on SIGTERM too; the command then exits 143 (128 + SIGTERM) instead of 130."""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator
from typing import Any

#: exit status after Ctrl-C (128 + SIGINT) and after SIGTERM (128 + SIGTERM)
INTERRUPTED, TERMINATED = 130, 143


class Terminated(KeyboardInterrupt):
    """SIGTERM arrived: stop as on Ctrl-C."""


def _raise_terminated(signum: int, frame: Any) -> None:
    signal.signal(signal.SIGTERM, signal.SIG_DFL)  # a second SIGTERM ends the process at once
    raise Terminated("SIGTERM")


@contextlib.contextmanager
def terminate_as_interrupt() -> Iterator[None]:
    """Inside, SIGTERM raises :class:`Terminated` in the main thread (a no-op off the main thread); the handlers
    before are restored after. SIGINT ignored from the start (a command put in the background by a shell script)
    is handled again: the local job inherits it, and SIGINT is how a stopping driver stops its job (and the job
    its MPI step)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    before = signal.getsignal(signal.SIGTERM), signal.getsignal(signal.SIGINT)
    signal.signal(signal.SIGTERM, _raise_terminated)
    if before[1] == signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, before[0])
        signal.signal(signal.SIGINT, before[1])


def interrupt_code(e: BaseException) -> int:
    """The exit status for an interrupt: 143 after SIGTERM, 130 after Ctrl-C."""
    return TERMINATED if isinstance(e, Terminated) else INTERRUPTED


def interrupt_name(e: BaseException) -> str:
    """How the interrupt came, for the one line that says so: ``SIGTERM`` or ``Ctrl-C``."""
    return "SIGTERM" if isinstance(e, Terminated) else "Ctrl-C"
