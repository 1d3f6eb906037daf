"""Run a Python module as an MPI step with a point's launch line (``mpiexec -n {ranks}``, ``srun ...``)."""

from __future__ import annotations

import contextlib
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from ddlio.env import PROJECT_DIR
from ddlio.errors import LaunchError, StartTimeoutError, TimeLimitError
from ddlio.mpistep import LAST_WORDS_ENV, STARTED_ENV, announce_started
from ddlio.shell import resolve_command


@dataclass
class StepResult:
    """How an MPI step ended: the command, its exit code, wall seconds and the tail of its output."""

    argv: list[str]
    returncode: int
    seconds: float
    stdout_tail: str
    stderr_tail: str
    #: what ended the step, found anywhere in its output (see :func:`failure_cause`), or None
    cause: str | None = None


def launch_argv(launch: str, ranks: int, nodes: int, ppn: int, module: str, args: list[str]) -> list[str]:
    """The full command line of an MPI step: the launch line (placeholders filled) + this Python + ``-m module``."""
    words = shlex.split(launch.format(ranks=ranks, nodes=nodes, ppn=ppn))
    if not words:
        raise LaunchError("cluster.launch is empty: give an MPI launch line such as 'mpiexec -n {ranks}'")
    exe = resolve_command(words[0])
    if exe is None:
        raise LaunchError(
            f"'{words[0]}' not found: install an MPI (pip install mpich) "
            "or set cluster.launch to your MPI's launch line"
        )
    return [exe, *words[1:], sys.executable, "-m", module, *args]


def headline(stderr: str) -> str:
    """The line of an MPI step's stderr that says what went wrong: a ddlio rank's own message if there is one (a
    rank that stalled inside an epoch first: the others' waits at a barrier follow from it), else the last
    non-empty line."""
    lines = [ln.strip() for ln in stderr.splitlines() if ln.strip()]
    for ln in lines:
        if ln.startswith("ddlio kernel: rank ") and " made no progress for " in ln:
            return ln
    for ln in lines:
        if ln.startswith(("ddlio", "rank ")):
            return ln
    return lines[-1] if lines else "(no output)"


def _signal_name(num: int) -> str:
    try:
        return signal.Signals(num).name
    except ValueError:
        return f"signal {num}"


#: causes of a failed step, most telling first: (pattern over its output, what the failure's first line says)
_CAUSES: list[tuple[re.Pattern[str], Callable[[re.Match[str]], str]]] = [
    (re.compile(r"No space left on device|\bENOSPC\b|\[Errno 28\]"), lambda m: "No space left on device"),
    (re.compile(r"Disk quota exceeded|\bEDQUOT\b|\[Errno 122\]"), lambda m: "Disk quota exceeded"),
    (re.compile(r"DUE TO TIME LIMIT|[Tt]ime limit exceeded"), lambda m: "time limit reached"),
    (re.compile(r"DUE TO PREEMPTION"), lambda m: "preempted"),
    (re.compile(r"\boom[-_ ]kill|Out Of Memory|\bMemoryError\b", re.I), lambda m: "out of memory"),
    # MPICH: "EXIT STRING: Killed (signal 9)"; Open MPI: "exited on signal 9 (Killed)"; Hydra: "KILLED BY SIGNAL: 9"
    (re.compile(r"\(signal (\d+)\)|on signal (\d+)|KILLED BY SIGNAL: (\d+)"),
     lambda m: f"killed by {_signal_name(int(next(g for g in m.groups() if g)))}"),
    # srun: "srun: error: n1: task 1: Killed" / "... task 0: Segmentation fault"
    (re.compile(r"task \d+: (Killed|Segmentation fault|Aborted|Bus error|Terminated)"),
     lambda m: {"Killed": "killed by SIGKILL", "Segmentation fault": "killed by SIGSEGV", "Aborted":
                "killed by SIGABRT", "Bus error": "killed by SIGBUS", "Terminated": "killed by SIGTERM"}[m.group(1)]),
]


def failure_cause(*texts: str, returncode: int | None = None) -> str | None:
    """What ended a failed step, searched for anywhere in its output (stderr, and stdout where MPI launchers
    report dead ranks): no space left, quota, time limit, preemption, out of memory, a signal by name. A
    negative ``returncode`` (the launcher itself killed by a signal) names that signal. None when nothing tells."""
    for pattern, say in _CAUSES:
        for text in texts:
            m = pattern.search(text)
            if m:
                return say(m)
    if returncode is not None and returncode < 0:
        return f"killed by {_signal_name(-returncode)}"
    return None


def read_log(path: str | os.PathLike, limit: int = 16 << 20) -> str:
    """The last ``limit`` bytes of a log file (empty when it cannot be read)."""
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            f.seek(max(0, f.tell() - limit))
            return f.read().decode(errors="replace")
    except OSError:
        return ""


def _tail(text: str, lines: int = 30) -> str:
    return "\n".join(text.strip().splitlines()[-lines:])


def _watch_start(proc: subprocess.Popen, started: str | os.PathLike, start_timeout_s: float, t0: float) -> None:
    """Return once ``started`` exists or the step has ended; StartTimeoutError once ``start_timeout_s`` seconds
    (from ``t0``, perf_counter) have passed without either."""
    while proc.poll() is None and not os.path.exists(started):
        waited = time.perf_counter() - t0
        if waited >= start_timeout_s:
            raise StartTimeoutError(f"the MPI step's ranks were not all through MPI start-up after {waited:.0f} s "
                                    "(cluster.hang_timeout_s)")
        time.sleep(min(0.1, start_timeout_s - waited))


class RunningStep:
    """An MPI step, started (the arguments of :func:`run_step`) and not waited for: :meth:`wait` for how it
    ended, :meth:`kill` to end it early."""

    def __init__(self, argv: list[str], timeout_s: float, env: Mapping[str, str] | None = None,
                 cwd: str | None = None, logs: tuple[str | os.PathLike, str | os.PathLike] | None = None,
                 started: str | os.PathLike | None = None, start_timeout_s: float | None = None) -> None:
        full_env = dict(os.environ)
        full_env.update(env or {})
        # the project must be importable by the ranks, wherever they start
        root = str(PROJECT_DIR)
        full_env["PYTHONPATH"] = os.pathsep.join(p for p in (root, full_env.get("PYTHONPATH", "")) if p)
        self.argv, self.timeout_s, self.started, self.start_timeout_s = argv, timeout_s, started, start_timeout_s
        self.tmpdir = None
        if logs is None:
            self.tmpdir = tempfile.mkdtemp(prefix="ddlio-step-")
            logs = (os.path.join(self.tmpdir, "step.out"), os.path.join(self.tmpdir, "step.err"))
        self.out_path, self.err_path = os.fspath(logs[0]), os.fspath(logs[1])
        self.last_path = self.err_path + ".last"  # a rank's last words before it aborted (ddlio.mpistep)
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.last_path)
        full_env[LAST_WORDS_ENV] = self.last_path
        self.t0 = time.perf_counter()
        try:
            with open(self.out_path, "w") as out, open(self.err_path, "w") as err:
                if started is not None:
                    with contextlib.suppress(FileNotFoundError):
                        os.unlink(started)  # an earlier attempt's mark says nothing about this one
                    full_env[STARTED_ENV] = os.fspath(started)
                self.proc = subprocess.Popen(argv, stdout=out, stderr=err, env=full_env, cwd=cwd,
                                             start_new_session=True)
        except BaseException:
            self._clean()
            raise

    def _tail(self, path: str) -> str:
        with open(path, errors="replace") as f:
            return _tail(f.read()[-65536:])

    def _clean(self) -> None:
        if self.tmpdir:
            shutil.rmtree(self.tmpdir, ignore_errors=True)
            self.tmpdir = None

    def kill(self) -> None:
        """End the step now (its whole process group) if it still runs, and remove its temporary logs."""
        try:
            if self.proc.poll() is None:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
        finally:
            self._clean()

    def wait(self) -> StepResult:
        """Wait for the step to end within its ``timeout_s`` (from its start); on time-out the whole process
        group is killed and a TimeLimitError raised, a start that took ``start_timeout_s`` raises
        StartTimeoutError (see :func:`run_step`)."""
        proc, t0 = self.proc, self.t0
        try:
            try:
                if self.started is not None and self.start_timeout_s is not None and \
                        self.start_timeout_s < self.timeout_s:
                    _watch_start(proc, self.started, self.start_timeout_s, t0)
                proc.wait(timeout=max(0.0, self.timeout_s - (time.perf_counter() - t0)))
            except StartTimeoutError as e:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
                raise StartTimeoutError(f"{e}: {shlex.join(self.argv)}\n{_tail(self._tail(self.err_path), 15)}") \
                    from None
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
                raise TimeLimitError(
                    f"MPI step timed out after {self.timeout_s:.1f} s and was killed: {shlex.join(self.argv)}\n"
                    f"{_tail(self._tail(self.err_path), 15)}"
                ) from None
            finally:
                if proc.poll() is None:
                    os.killpg(proc.pid, signal.SIGKILL)
                    proc.wait()
            err_tail = self._tail(self.err_path)
            if proc.returncode != 0:  # what an aborting rank said, where the launcher did not pass it on
                lost = [ln for ln in read_log(self.last_path).splitlines() if ln.strip() and ln not in err_tail]
                err_tail = "\n".join([*lost, err_tail] if err_tail else lost)
            cause = None if proc.returncode == 0 else failure_cause(read_log(self.err_path), err_tail,
                                                                      read_log(self.out_path),
                                                                      returncode=proc.returncode)
            return StepResult(self.argv, proc.returncode, time.perf_counter() - t0, self._tail(self.out_path),
                              err_tail, cause)
        finally:
            self._clean()


def run_step(
    argv: list[str],
    timeout_s: float,
    env: Mapping[str, str] | None = None,
    cwd: str | None = None,
    logs: tuple[str | os.PathLike, str | os.PathLike] | None = None,
    started: str | os.PathLike | None = None,
    start_timeout_s: float | None = None,
) -> StepResult:
    """Run one MPI step to completion within ``timeout_s`` seconds; on time-out the whole process group is
    killed and a TimeLimitError raised (with the tail of what the step wrote). A non-zero exit is returned, not
    raised (the caller decides).

    The step's stdout/stderr stream into the files ``logs`` names (``(stdout, stderr)``; a temporary pair without
    it) as it runs, so a job killed mid-step still leaves its ranks' last words.

    With ``started`` (a file path; the ranks must call :func:`announce_started`) and ``start_timeout_s``: a step
    whose rank 0 has not created that file within ``start_timeout_s`` seconds is killed and StartTimeoutError raised
    (its ranks never all got through MPI start-up: a lost rank, or a launcher and a process manager that hang in
    their start-up protocol), instead of holding its nodes until the time limit.
    """
    return RunningStep(argv, timeout_s, env, cwd, logs, started, start_timeout_s).wait()


if __name__ == "__main__":  # a smallest MPI step: start, announce, wait at a gate if given one, end (tests of the
    # watchdog and of steps started ahead, with real ranks)
    from mpi4py import MPI  # lazy: MPI starts only in a step run as a program

    from ddlio.errors import KernelError
    from ddlio.mpistep import wait_for_gate

    announce_started(MPI.COMM_WORLD)
    try:
        waited, _ = wait_for_gate(MPI.COMM_WORLD)
    except KernelError as e:
        print(f"ddlio step: {e}", file=sys.stderr, flush=True)
        raise SystemExit(3) from None
    print(f"rank {MPI.COMM_WORLD.rank} through the gate after {waited:.3f} s", flush=True)
