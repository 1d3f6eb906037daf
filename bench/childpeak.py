"""A command's wall time and peak resident memory, measured from a small launcher process.

Why a launcher: on Linux a child's ``ru_maxrss`` (from ``wait4``) is at least the high-water RSS of the memory map
it exec'ed from. Python's ``subprocess`` starts children by ``vfork`` + ``exec`` from the calling process, so a bench
that has built a 2 GiB frame would see every command it runs "peak" at 2 GiB. Here a fresh interpreter (a few MiB,
no numpy) forks and execs the command and reports the ``wait4`` usage of that child: the command's own peak and the
largest peak of any descendant it waited for (drawing processes, MPI ranks), never the bench's; and, sampled, the
peak of the whole process tree's summed PSS (what several processes of one command hold together).

    secs, peak_mib, rc = run_measured([sys.executable, "-m", "analysis", "figures", ...], out=Path("figures.log"))
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

#: The launcher: fork, exec the command (its stdout and stderr are the launcher's), sample the summed PSS of its
#: process tree every 0.5 s until it exits, wait4, report on the fd given first.
LAUNCHER = r"""
import json, os, sys, time
fd, argv = int(sys.argv[1]), sys.argv[2:]

def tree_pss(root):
    # the summed PSS (KiB) of root and every descendant: a page shared by k of them counts 1/k
    parent = {}
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                with open(f"/proc/{d}/stat") as f:
                    parent[int(d)] = int(f.read().rsplit(")", 1)[1].split()[1])
            except OSError:
                pass
    mine, grew = {root}, True
    while grew:
        more = {p for p, pp in parent.items() if pp in mine and p not in mine}
        grew = bool(more)
        mine |= more
    total = 0
    for p in mine:
        try:
            with open(f"/proc/{p}/smaps_rollup") as f:
                total += sum(int(line.split()[1]) for line in f if line.startswith("Pss:"))
        except OSError:
            pass
    return total

t = time.perf_counter()
pid = os.fork()
if pid == 0:
    os.close(fd)
    try:
        os.execvp(argv[0], argv)
    finally:
        os._exit(127)
peak_pss = 0
while True:
    got, status, usage = os.wait4(pid, os.WNOHANG)
    if got:
        break
    peak_pss = max(peak_pss, tree_pss(pid))
    time.sleep(0.5)
secs = time.perf_counter() - t
with os.fdopen(fd, "w") as report:
    json.dump({"secs": secs, "maxrss_kib": usage.ru_maxrss, "pss_kib": peak_pss,
               "rc": os.waitstatus_to_exitcode(status)}, report)
"""


def run_measured(argv: list[str], out: Path | None = None, env: dict[str, str] | None = None,
                 ) -> tuple[float, float, int]:
    """Run ``argv`` (stdout and stderr to ``out``, or discarded); returns (wall seconds of the command, its peak
    resident memory in MiB, its exit code). The peak is the ``ru_maxrss`` that ``wait4`` reports for the command:
    the largest of its own peak and those of the descendants it waited for (one process's peak: see
    :func:`run_measured_tree` for the whole tree's)."""
    secs, mib, _, rc = run_measured_tree(argv, out, env)
    return secs, mib, rc


def run_measured_tree(argv: list[str], out: Path | None = None, env: dict[str, str] | None = None,
                      ) -> tuple[float, float, float, int]:
    """:func:`run_measured` plus the peak of the summed PSS of the command's process tree (MiB, sampled every
    0.5 s, so that reading /proc costs the command little; a page shared by k processes counts 1/k): (seconds,
    peak RSS MiB, peak tree PSS MiB, exit code)."""
    import os

    read_fd, write_fd = os.pipe()
    sink = open(out, "wb") if out is not None else open(os.devnull, "wb")  # noqa: SIM115 - closed below
    try:
        t = time.perf_counter()
        proc = subprocess.Popen([sys.executable, "-S", "-c", LAUNCHER, str(write_fd), *argv], stdout=sink,
                                stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, pass_fds=(write_fd,), env=env)
        os.close(write_fd)
        with os.fdopen(read_fd) as report:
            text = report.read()
        proc.wait()
        wall = time.perf_counter() - t
    finally:
        sink.close()
    if not text:  # the launcher itself failed (it cannot have measured anything)
        return wall, float("nan"), float("nan"), proc.returncode or 1
    got = json.loads(text)
    return float(got["secs"]), got["maxrss_kib"] / 1024, got["pss_kib"] / 1024, int(got["rc"])
