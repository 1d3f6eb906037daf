"""A one-rank generation's writer: one process forked from the job's, ahead of the dataset it may write, as a point's
kernel ranks are started ahead (:meth:`~experiments.run.job.StepRunner.ahead`). While the job does what comes before
(its lock, the dataset directory, the layout), the child loads numpy and the format's writing library (~0.07-0.12 s
of CPU here, more than writing 256 MiB takes), then waits for a plan on a pipe; a runner that is never asked to
generate (the dataset was complete) ends it. The job itself stays without numpy: its memory sits beside the
kernel's ranks.

Given a plan, the child forks the writers from itself, libraries loaded, one per usable core (at most one per file;
one per two cores for a dataset's one file: :func:`~experiments.dataset.writers.writer_count`), and gathers
their checks (:func:`~experiments.dataset.writers.generate_by_writers`): the same bytes as one writer.
"""

from __future__ import annotations

import contextlib
import importlib
import os
import resource
import select
import signal
import sys
import weakref
from typing import NoReturn

from ddlio.lazy import one_blas_thread
from experiments.formats import FORMATS


def warm_up(format_name: str) -> None:
    """Load what writing a dataset of ``format_name`` takes: numpy and numpy.random (the sizes' and payload's
    PCG64: ~13 ms of imports), the payload's fill, the generation's modules, the format's module and the libraries
    its writer imports on first use (:attr:`~experiments.formats.base.Format.writer_libraries`)."""
    for name in ("numpy", "numpy.random", "experiments.formats.pcg64", "experiments.dataset.writers"):
        importlib.import_module(name)
    for name in FORMATS[format_name].writer_libraries:
        importlib.import_module(name)


def _dismiss(pid: int, plan_w: int, said_r: int, ready_r: int) -> None:
    """End a child that was never asked to generate (its pipe closes: it exits) and reap it."""
    for fd in (plan_w, said_r, ready_r):
        with contextlib.suppress(OSError):
            os.close(fd)
    with contextlib.suppress(ChildProcessError, OSError):
        os.waitpid(pid, 0)


class ForkedGenerator:
    """A child forked now that loads the writer's libraries (:func:`warm_up` of ``format_name``) and then writes
    the dataset of the plan :meth:`generate` hands it (:func:`~experiments.dataset.writers.generate_by_writers`,
    with ``env``), once. :meth:`ready` waits until it has loaded them. :meth:`close` (or losing the last reference)
    ends a child that was not asked."""

    def __init__(self, format_name: str, env: dict[str, str]) -> None:
        plan_r, self._plan_w = os.pipe()
        self._said_r, said_w = os.pipe()
        self._ready_r, ready_w = os.pipe()
        self._warm_cpu: float | None = None
        for stream in (sys.stdout, sys.stderr):  # the child inherits what is buffered: it would print it once more
            with contextlib.suppress(Exception):
                stream.flush()
        self.pid = os.fork()
        if self.pid == 0:  # the child: os._exit on every path (the parent's exit handlers are not the child's)
            os.close(self._plan_w)
            os.close(self._said_r)
            os.close(self._ready_r)
            _child(format_name, env, plan_r, said_w, ready_w)
        os.close(plan_r)
        os.close(said_w)
        os.close(ready_w)
        self._finalizer = weakref.finalize(self, _dismiss, self.pid, self._plan_w, self._said_r, self._ready_r)

    def ready(self, timeout: float = 60.0) -> float:
        """Wait (at most ``timeout`` seconds) until the child has loaded the writer's libraries; return the CPU
        seconds (user + system) it spent up to then, its start. A benchmark times generation from here, as a
        point's job reaches generation with its kernel's ranks started. Raises :class:`TimeoutError` when the
        child is not ready in time, :class:`RuntimeError` when it ended or was asked already."""
        if self._warm_cpu is not None:
            return self._warm_cpu
        if not self._finalizer.alive:
            raise RuntimeError("this forked generator was used or closed already")
        if not select.select([self._ready_r], [], [], timeout)[0]:
            raise TimeoutError(f"the forked writer (pid {self.pid}) did not load its libraries in {timeout:g} s")
        said = os.read(self._ready_r, 64)
        if not said:
            raise RuntimeError(f"the forked writer (pid {self.pid}) ended before it was ready")
        self._warm_cpu = float(said)
        return self._warm_cpu

    def generate(self, plan_path: str) -> str | None:
        """Have the child write the dataset of ``plan_path`` and wait for it; None, or its failure as ``Type:
        message``. Once: the child ends after it."""
        if not self._finalizer.alive:
            raise RuntimeError("this forked generator was used or closed already")
        self._finalizer.detach()
        with contextlib.suppress(OSError):
            os.close(self._ready_r)
        try:
            with contextlib.suppress(BrokenPipeError):  # a child that died early: its status says why
                os.write(self._plan_w, os.fsencode(plan_path))
            os.close(self._plan_w)
            with os.fdopen(self._said_r, "rb") as f:
                said = f.read().decode(errors="replace")
            _, status = os.waitpid(self.pid, 0)
        except BaseException:  # Ctrl-C here: the child had it too; it is not left behind
            with contextlib.suppress(OSError):
                os.kill(self.pid, signal.SIGKILL)
                os.waitpid(self.pid, 0)
            raise
        if status == 0:
            return None
        return said or f"the generating process ended with status {os.waitstatus_to_exitcode(status)}"

    def close(self) -> None:
        """End the child if it was not asked to generate (it exits when its pipe closes)."""
        self._finalizer()


def _child(format_name: str, env: dict[str, str], plan_r: int, said_w: int, ready_w: int) -> NoReturn:
    """The forked child: load the writer's libraries, say so with its CPU seconds so far, wait for a plan (none:
    end), write it, tell, end."""
    code, said = 0, b""
    try:
        one_blas_thread(env)  # numpy loads below, here (the job's process has none): its BLAS would spin a core
        with contextlib.suppress(Exception):  # a library that fails to load fails the generation, with its error
            warm_up(format_name)
        me = resource.getrusage(resource.RUSAGE_SELF)
        with contextlib.suppress(OSError):
            os.write(ready_w, f"{me.ru_utime + me.ru_stime:.6f}".encode())
        with contextlib.suppress(OSError):
            os.close(ready_w)
        with os.fdopen(plan_r, "rb") as f:
            plan_path = os.fsdecode(f.read())
        if plan_path:
            from experiments.dataset.writers import generate_by_writers  # lazy: the job never loads it (warm_up here)

            generate_by_writers(plan_path, env)
    except BaseException as e:  # everything, Ctrl-C included, goes back to the parent as text
        code, said = 1, f"{type(e).__name__}: {e}".encode(errors="replace")[:60000]
    finally:
        with contextlib.suppress(OSError):
            os.write(said_w, said)
        for stream in (sys.stdout, sys.stderr):  # what the writer printed: os._exit flushes nothing
            with contextlib.suppress(Exception):
                stream.flush()
        os._exit(code)
