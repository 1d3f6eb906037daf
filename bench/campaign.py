"""Campaign scale on the one-box Slurm: an N-point tiny sweep (default 300, array_parallelism 8), then two drivers.

What it runs (on the cluster ``tests/cluster/slurm.sh start`` brings up; it must say healthy, and it is never
restarted here)::

    python sweep.py -m cluster=slurm workload=tiny repeat=0,1,...,N-1 cluster.array_parallelism=8 \\
        data_root=D db=D/results.db

What it checks and prints:

- **Exactly once.** From the store: N points, each ``completed``, no job still pending, a job id each and
  exactly one row in the ``measurements`` history. From Slurm: ``sacct --array`` lists exactly the store's job ids
  (array tasks; one task measures ``cluster.points_per_task`` points in turn, chosen from N), all COMPLETED.
- **Bounded Slurm calls.** The driver runs with a PATH whose first folder holds counting stand-ins for ``squeue``,
  ``sacct``, ``sbatch`` and ``scancel``: each logs its call (time, parent PID, arguments) and execs the real command,
  so the product runs unchanged. A *poll* is one call of the driver's job watcher, which opens with
  ``squeue -o '%i|%T|%r' -j <ids>``; every squeue/sacct call of the driver up to the next such call belongs to that
  poll. Printed: polls, calls per poll (mean, max), job ids per call (max) and calls outside polls. The bound
  checked is two questions per poll (squeue; sacct for the jobs squeue no longer lists); on Slurm < 23.02 a
  driver's first ``sacct --array`` is refused and asked again without it, once, and counts as one question.
- **Time.** ``wall`` is the driver's wall time from start to exit (seconds). ``Σ point`` is the sum of the points'
  own time, ``point_seconds`` of each stored result (dataset check or generation + kernel, measured inside the job).
  With ``slots`` = array_parallelism (or N when smaller), *overhead per point* = (wall × slots − Σ point) / N: the
  slot-seconds a point costs beyond its own work (Hydra composing the configs, sbatch, queueing, job start, Python
  and submitit start-up, result pickup, idle slots at the start and the end). ``wall / N`` is shown beside the mean
  point time; the start-up (command start to the first sbatch) is shown apart.
- **Rerun.** The same command again: it must submit nothing (no sbatch call) and exit 0; its wall time is printed.
- **Two drivers.** The same command with ``--two-points`` (default 40) points started twice at once on a fresh
  store: both exit 0, every point completed and measured once (one measurement row each, sacct lists exactly that
  many tasks).

    python bench/campaign.py                         # 300 points + two drivers on 40
    python bench/campaign.py --points 20 --two-points 8 --keep /tmp/campaign
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from itertools import pairwise
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from ddlio.jobstates import expand_job_id  # noqa: E402

WRAPPED = ("squeue", "sacct", "sbatch", "scancel")
POLL_MARK = "%i|%T|%r"  # the job watcher's squeue format: each such call opens a poll

STAND_IN = """#!/bin/bash
# counting stand-in for {name} (bench/campaign.py): log the call, then run the real command unchanged
printf '%s\\t%s\\t%s\\t%s\\n' "$EPOCHREALTIME" "$PPID" {name} "$*" >> {log}
exec {real} "$@"
"""


def die(msg: str) -> None:
    print(f"campaign: {msg}", file=sys.stderr)
    sys.exit(2)


def cluster_healthy() -> str:
    """The status script's output when the one-box Slurm says healthy; exits otherwise (never restarts it)."""
    p = subprocess.run(["bash", str(ROOT / "tests/cluster/slurm.sh"), "status"], capture_output=True, text=True,
                       timeout=60, check=False)
    out = p.stdout + p.stderr
    if p.returncode != 0 or "healthy" not in out:
        die(f"the one-box Slurm is not healthy (tests/cluster/slurm.sh status):\n{out.strip()}")
    return out


def make_stand_ins(folder: Path, log: Path) -> None:
    """Counting stand-ins for the Slurm commands the driver calls, in ``folder`` (put first on PATH)."""
    folder.mkdir(parents=True, exist_ok=True)
    for name in WRAPPED:
        real = shutil.which(name)
        if real is None:
            die(f"'{name}' is not on PATH: is Slurm installed (tests/cluster/slurm.sh start)?")
        path = folder / name
        path.write_text(STAND_IN.format(name=name, log=log, real=real))
        path.chmod(0o755)


@dataclass
class Calls:
    """The Slurm calls one driver made (from the stand-ins' log), grouped into polls."""

    polls: list[list[tuple[str, str]]] = field(default_factory=list)  # each poll's (command, arguments)
    outside: list[tuple[str, str]] = field(default_factory=list)  # squeue/sacct calls before the first poll
    sbatch: int = 0
    scancel: int = 0
    first_sbatch_unix: float | None = None  # when the first sbatch call started (seconds since the epoch)
    poll_unix: list[float] = field(default_factory=list)  # when each poll started
    polls_by_pid: dict[int, int] = field(default_factory=dict)

    @property
    def per_poll(self) -> list[int]:
        return [len(p) for p in self.polls]

    @property
    def probes(self) -> list[int]:
        """Per poll, the ``sacct --array`` calls refused and asked again without it (Slurm < 23.02: once per
        driver, after which the watcher no longer asks with ``--array``)."""
        out = []
        for p in self.polls:
            out.append(sum(a[0] == b[0] == "sacct" and "--array" in a[1].split() and "--array" not in b[1].split()
                           for a, b in pairwise(p)))
        return out

    @property
    def questions(self) -> list[int]:
        """Per poll, the squeue/sacct questions asked (a refused ``--array`` probe and its retry count as one)."""
        return [n - k for n, k in zip(self.per_poll, self.probes, strict=True)]

    @property
    def max_ids(self) -> int:
        """The most job ids one squeue/sacct call named (``-j a,b,c``)."""
        n = 0
        for _name, args in [c for p in self.polls for c in p] + self.outside:
            words = args.split()
            if "-j" in words and words.index("-j") + 1 < len(words):
                n = max(n, len(words[words.index("-j") + 1].split(",")))
        return n


def read_calls(log: Path, pids: set[int]) -> Calls:
    """The calls made by the processes ``pids`` (the drivers; the jobs' own calls, if any, are left out)."""
    calls = Calls()
    if not log.exists():
        return calls
    for line in log.read_text().splitlines():
        cols = line.split("\t", 3)
        if len(cols) < 4 or not cols[1].isdigit() or int(cols[1]) not in pids:
            continue
        at, pid, name, args = float(cols[0]), int(cols[1]), cols[2], cols[3]
        if name == "sbatch":
            calls.sbatch += 1
            calls.first_sbatch_unix = calls.first_sbatch_unix or at
        elif name == "scancel":
            calls.scancel += 1
        elif name == "squeue" and POLL_MARK in args and "-j" in args.split():
            calls.polls.append([(name, args)])
            calls.poll_unix.append(at)
            calls.polls_by_pid[pid] = calls.polls_by_pid.get(pid, 0) + 1
        elif calls.polls:
            calls.polls[-1].append((name, args))
        else:
            calls.outside.append((name, args))
    return calls


@dataclass
class Run:
    rc: int
    wall_s: float
    start_unix: float  # when the driver was started (seconds since the epoch)
    pids: set[int]
    log: Path


def sweep_argv(points: int, parallel: int, data_root: Path, db: Path, extra: list[str]) -> list[str]:
    return [sys.executable, str(ROOT / "sweep.py"), "-m", "cluster=slurm", "workload=tiny",
            "repeat=" + ",".join(map(str, range(points))), f"cluster.array_parallelism={parallel}",
            f"data_root={data_root}", f"db={db}", *extra]


def run_drivers(argv: list[str], copies: int, env: dict[str, str], out: Path, timeout_s: float) -> list[Run]:
    """Start ``copies`` drivers of the same command at once; wait for all (killed after ``timeout_s``)."""
    procs = []
    t0, start = time.perf_counter(), time.time()
    for i in range(copies):
        log = out.with_name(f"{out.stem}-{i}.log") if copies > 1 else out
        fh = open(log, "w")  # noqa: SIM115 - closed below
        procs.append((subprocess.Popen(argv, cwd=ROOT, env=env, stdout=fh, stderr=subprocess.STDOUT), fh, log))
    runs = []
    for p, fh, log in procs:
        try:
            rc = p.wait(timeout=max(1.0, timeout_s - (time.perf_counter() - t0)))
        except subprocess.TimeoutExpired:
            p.terminate()
            rc = p.wait()
            print(f"campaign: a driver ran past --timeout ({timeout_s:.0f} s) and was stopped; see {log}")
        fh.close()
        runs.append(Run(rc, time.perf_counter() - t0, start, {p.pid}, log))
    return runs


@dataclass
class StoreCheck:
    points: int
    completed: int
    pending: int
    distinct_jobs: int
    measurements_max: int
    measurements_total: int
    point_seconds: list[float]
    job_ids: list[str]


def check_store(db: Path) -> StoreCheck:
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        rows = con.execute("SELECT point_key, status, pending, job_id, result FROM points").fetchall()
        counts = dict(con.execute("SELECT point_key, COUNT(*) FROM measurements GROUP BY point_key").fetchall())
    finally:
        con.close()
    secs = []
    for _, status, _, _, result in rows:
        if status == "completed" and result:
            rec = json.loads(result)
            if rec.get("point_seconds") is not None:
                secs.append(float(rec["point_seconds"]))
    return StoreCheck(
        points=len(rows),
        completed=sum(r[1] == "completed" for r in rows),
        pending=sum(bool(r[2]) for r in rows),
        distinct_jobs=len({r[3] for r in rows if r[3]}),
        measurements_max=max((counts.get(r[0], 0) for r in rows), default=0),
        measurements_total=sum(counts.values()),
        point_seconds=secs,
        job_ids=sorted({r[3] for r in rows if r[3]}),
    )


def sacct_tasks(job_ids: list[str]) -> dict[str, str]:
    """Task id -> state, as sacct lists the sweep's jobs one task per line (``--array``)."""
    bases = sorted({j.split("_")[0] for j in job_ids})
    if not bases:
        return {}
    argv = ["sacct", "-n", "-P", "-X", "--array", "-o", "JobID,State", "-j", ",".join(bases)]
    p = subprocess.run(argv, capture_output=True, text=True, timeout=120, check=False)
    if p.returncode != 0 and "--array" in p.stderr:  # Slurm < 23.02: pending tasks come as one line, expanded below
        argv.remove("--array")
        p = subprocess.run(argv, capture_output=True, text=True, timeout=120, check=False)
    if p.returncode != 0:
        die(f"sacct failed: {p.stderr.strip()}")
    out = {}
    for line in p.stdout.splitlines():
        jid, _, state = line.partition("|")
        for task in expand_job_id(jid):
            out[task] = state.split()[0] if state.split() else ""
    return out


def exactly_once(name: str, db: Path, n: int, runs: list[Run]) -> tuple[StoreCheck, list[str]]:
    """The store's and sacct's view of ``n`` points; the list of problems (empty when every point is stored once)."""
    s = check_store(db)
    tasks = sacct_tasks(s.job_ids)
    problems = []
    if any(r.rc != 0 for r in runs):
        problems.append(f"exit codes {[r.rc for r in runs]} (expected all 0)")
    if s.points != n or s.completed != n:
        problems.append(f"{s.completed} of {s.points} stored points completed (expected {n} of {n})")
    if s.pending:
        problems.append(f"{s.pending} point(s) still marked pending")
    if s.distinct_jobs < 1 or s.distinct_jobs > n:
        problems.append(f"{s.distinct_jobs} distinct job ids for {n} points (cluster.points_per_task packs several "
                        "points into one array task: between 1 and N expected)")
    if s.measurements_max != 1 or s.measurements_total != n:
        problems.append(f"{s.measurements_total} measurement rows (most for one point: {s.measurements_max}); "
                        f"expected {n}, one each")
    if set(tasks) != set(s.job_ids):
        problems.append(f"sacct lists {len(tasks)} task(s) for the sweep's jobs, expected the store's "
                        f"{len(s.job_ids)} job ids")
    bad = {t: st for t, st in tasks.items() if st != "COMPLETED"}
    if bad:
        problems.append(f"sacct: {len(bad)} task(s) not COMPLETED, e.g. {sorted(bad.items())[:3]}")
    print(f"{name}: store {s.completed}/{s.points} completed, {s.distinct_jobs} job ids, "
          f"{s.measurements_total} measurement rows (max {s.measurements_max} per point); "
          f"sacct {len(tasks)} tasks ({n / max(1, len(tasks)):.1f} points per task), {len(tasks) - len(bad)} "
          "COMPLETED -> "
          + ("exactly once: OK" if not problems else "PROBLEMS:\n  " + "\n  ".join(problems)))
    return s, problems


def describe_calls(c: Calls, points: int) -> str:
    per = c.per_poll or [0]
    gaps = [b - a for a, b in pairwise(c.poll_unix)]
    sacct = sum(any(name == "sacct" for name, _ in p) for p in c.polls)
    return (f"{len(c.polls)} polls for {points} points (every {statistics.mean(gaps or [0]):.1f} s on average; "
            f"polls by driver PID: {c.polls_by_pid or {}}); squeue+sacct calls per poll: mean "
            f"{statistics.mean(per):.2f}, max {max(per)} ({sacct} poll(s) asked sacct, {sum(c.probes)} refused "
            f"sacct --array probe(s) asked again); questions per poll max {max(c.questions or [0])}; "
            f"most job ids in one call: "
            f"{c.max_ids}; calls outside polls: {len(c.outside)}; sbatch calls: {c.sbatch}, scancel calls: {c.scancel}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--points", type=int, default=300, help="points of the big sweep (repeat=0..N-1)")
    ap.add_argument("--parallel", type=int, default=8, help="cluster.array_parallelism")
    ap.add_argument("--two-points", type=int, default=40, help="points of the two-driver figure (0: skip it)")
    ap.add_argument("--data-root", type=Path, help="data_root of the big sweep (default: a temporary folder)")
    ap.add_argument("--db", type=Path, help="SQLite store of the big sweep (default: DATA_ROOT/results.db)")
    ap.add_argument("--keep", type=Path, help="work here and keep everything (default: a temporary folder, removed)")
    ap.add_argument("--timeout", type=float, default=4 * 3600, help="seconds before a driver is stopped")
    ap.add_argument("--sweep-arg", action="append", default=[], help="one more sweep.py override (repeatable)")
    args = ap.parse_args(argv)
    if args.points < 1 or args.parallel < 1 or args.two_points < 0:
        die("--points and --parallel must be >= 1, --two-points >= 0")

    cluster_healthy()
    work = args.keep or Path(tempfile.mkdtemp(prefix="ddlio-campaign-"))
    work.mkdir(parents=True, exist_ok=True)
    try:
        return _bench(args, work)
    finally:
        if args.keep is None:
            shutil.rmtree(work, ignore_errors=True)


def _bench(args: argparse.Namespace, work: Path) -> int:
    calls_log = work / "slurm-calls.tsv"
    make_stand_ins(work / "stand-ins", calls_log)
    env = {**os.environ, "PATH": f"{work / 'stand-ins'}{os.pathsep}{os.environ.get('PATH', '')}",
           "PYTHONPATH": str(ROOT) + (os.pathsep + os.environ["PYTHONPATH"] if os.environ.get("PYTHONPATH") else "")}
    env.pop("DDLIO_TRACEBACK", None)
    n = args.points
    slots = min(args.parallel, n)  # slots a sweep of n points can fill
    data_root = args.data_root or work / "data"
    db = args.db or data_root / "results.db"
    data_root.mkdir(parents=True, exist_ok=True)
    argv = sweep_argv(n, args.parallel, data_root, db, args.sweep_arg)
    print(f"campaign: {n} points, array_parallelism {args.parallel}, data_root {data_root}, db {db}; "
          f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f}")
    print("  " + " ".join(a if "," not in a else a.split("=")[0] + f"=0,...,{n - 1}" for a in argv[1:]))
    failed: list[str] = []

    run = run_drivers(argv, 1, env, work / "sweep.log", args.timeout)[0]
    s, problems = exactly_once("sweep", db, n, [run])
    failed += problems
    calls = read_calls(calls_log, run.pids)
    total = sum(s.point_seconds)
    mean = total / len(s.point_seconds) if s.point_seconds else float("nan")
    print(f"sweep: wall {run.wall_s:.1f} s; Σ point time {total:.1f} s over {len(s.point_seconds)} points "
          f"(mean {mean:.2f} s, median {statistics.median(s.point_seconds or [0]):.2f} s)")
    print(f"  wall / N = {run.wall_s / n:.2f} s per point; ideal wall with {slots} slots = Σ/{slots} = "
          f"{total / slots:.1f} s; overhead per point = (wall × {slots} − Σ) / N = "
          f"{(run.wall_s * slots - total) / n:.2f} slot-seconds")
    if calls.first_sbatch_unix:
        startup = calls.first_sbatch_unix - run.start_unix
        print(f"  start-up (command start -> first sbatch: Hydra composes every point, store and cluster checks, "
              f"claims): {startup:.1f} s; after it: overhead per point = ((wall − start-up) × {slots} − Σ) / N = "
              f"{((run.wall_s - startup) * slots - total) / n:.2f} slot-seconds")
    print("  " + describe_calls(calls, n))
    if max(calls.questions or [0]) > 2:
        failed.append(f"a poll asked squeue/sacct {max(calls.questions)} times (bound: 2)")

    rerun = run_drivers(argv, 1, env, work / "rerun.log", args.timeout)[0]
    rc = read_calls(calls_log, rerun.pids)
    print(f"  load average at the end: {os.getloadavg()[0]:.1f} (1 min), {os.getloadavg()[1]:.1f} (5 min)")
    print(f"rerun: exit {rerun.rc}, wall {rerun.wall_s:.1f} s, sbatch calls {rc.sbatch}, "
          f"squeue/sacct calls {sum(rc.per_poll) + len(rc.outside)}")
    if rerun.rc != 0 or rc.sbatch:
        failed.append(f"the rerun exited {rerun.rc} and called sbatch {rc.sbatch} time(s) (expected 0 and 0)")
    problems = exactly_once("after rerun", db, n, [rerun])
    failed += problems[1]

    if args.two_points:
        m = args.two_points
        root2 = work / "two-drivers"
        root2.mkdir(exist_ok=True)
        argv2 = sweep_argv(m, args.parallel, root2, root2 / "results.db", args.sweep_arg)
        runs = run_drivers(argv2, 2, env, work / "two.log", args.timeout)
        pids = set().union(*(r.pids for r in runs))
        c2 = read_calls(calls_log, pids)
        print(f"two drivers at once on {m} points: exit {[r.rc for r in runs]}, wall "
              f"{max(r.wall_s for r in runs):.1f} s, sbatch calls {c2.sbatch}")
        print("  " + describe_calls(c2, m))
        if max(c2.questions or [0]) > 2:
            failed.append(f"a poll of the two drivers asked squeue/sacct {max(c2.questions)} times (bound: 2)")
        failed += exactly_once("two drivers", root2 / "results.db", m, runs)[1]
        for r in runs:
            text = r.log.read_text(errors="replace")
            if "Traceback" in text:
                failed.append(f"a traceback in {r.log.name}")

    if failed:
        for log in sorted(work.glob("*.log")):
            tail = log.read_text(errors="replace").splitlines()[-15:]
            print(f"--- the last lines of {log.name}:\n" + "\n".join(tail))
        print("campaign: FAILED\n  " + "\n  ".join(failed) + f"\n  (logs in {work}; --keep DIR keeps them)")
        return 1
    print("campaign: every point stored exactly once")
    return 0


if __name__ == "__main__":
    sys.exit(main())
