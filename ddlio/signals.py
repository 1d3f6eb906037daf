"""SIGTERM (what ``kill`` and Slurm send) and SIGHUP (a closed terminal or SSH session) are handled as Ctrl-C is:
each raises :class:`Terminated` (:class:`HungUp` for SIGHUP), a ``KeyboardInterrupt``, so every place that stops a
running point on Ctrl-C and stores it as interrupted does so on them too, naming the signal that came; the command
then exits 143 (128 + SIGTERM) or 129 (128 + SIGHUP) instead of 130. A SIGHUP ignored from the start (``nohup``)
stays ignored."""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator
from typing import Any

#: exit status after Ctrl-C (128 + SIGINT), after SIGTERM (128 + SIGTERM) and after SIGHUP (128 + SIGHUP)
INTERRUPTED, TERMINATED, HUNG_UP = 130, 143, 129


class Terminated(KeyboardInterrupt):
    """SIGTERM arrived: stop as on Ctrl-C."""

    signum: int = signal.SIGTERM


class HungUp(Terminated):
    """SIGHUP arrived (the terminal or the SSH session that started the command closed): stop as on Ctrl-C."""

    signum: int = signal.SIGHUP


def _raise_terminated(signum: int, frame: Any) -> None:
    signal.signal(signum, signal.SIG_DFL)  # a second one ends the process at once
    if signum == signal.SIGHUP:
        raise HungUp("SIGHUP")
    raise Terminated("SIGTERM")


@contextlib.contextmanager
def terminate_as_interrupt() -> Iterator[None]:
    """Inside, SIGTERM raises :class:`Terminated` and SIGHUP :class:`HungUp` in the main thread (a no-op off the
    main thread); the handlers before are restored after. SIGINT ignored from the start (a command put in the
    background by a shell script) is handled again: the local job inherits it, and SIGINT is how a stopping driver
    stops its job (and the job its MPI step). SIGHUP ignored from the start (``nohup``) is left ignored."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    sigs = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)
    before = {s: signal.getsignal(s) for s in sigs}
    signal.signal(signal.SIGTERM, _raise_terminated)
    if before[signal.SIGHUP] != signal.SIG_IGN:
        signal.signal(signal.SIGHUP, _raise_terminated)
    if before[signal.SIGINT] == signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        for s, handler in before.items():
            if handler is not None:  # None: set outside Python; nothing to put back
                signal.signal(s, handler)


def interrupt_code(e: BaseException) -> int:
    """The exit status for an interrupt: 129 after SIGHUP, 143 after SIGTERM, 130 after Ctrl-C."""
    if isinstance(e, HungUp):
        return HUNG_UP
    return TERMINATED if isinstance(e, Terminated) else INTERRUPTED


def interrupt_name(e: BaseException) -> str:
    """How the interrupt came, for the one line that says so: ``SIGHUP``, ``SIGTERM`` or ``Ctrl-C``."""
    if isinstance(e, HungUp):
        return "SIGHUP"
    return "SIGTERM" if isinstance(e, Terminated) else "Ctrl-C"


def interrupt_signal(e: BaseException) -> int:
    """The signal an interrupt came by (SIGINT for Ctrl-C): what a driver passes on to the job it stops, so that the
    job's own record names it."""
    return int(e.signum) if isinstance(e, Terminated) else int(signal.SIGINT)


def signal_interrupt(signum: int) -> KeyboardInterrupt:
    """The interrupt :func:`terminate_as_interrupt` raises for ``signum`` (KeyboardInterrupt for SIGINT)."""
    if signum == signal.SIGHUP:
        return HungUp("SIGHUP")
    return Terminated("SIGTERM") if signum == signal.SIGTERM else KeyboardInterrupt()
