"""ddlio against DLIO 2.0.0 on the same workload, side by side: wall time, peak memory, bytes read.

Both tools generate and then read the same dataset in one command each: 64 NPZ files of one 256 KiB sample
(512 x 512 uint8, DLIO's own NPZ layout ``np.savez(x=..., y=...)``, read whole with ``np.load`` as DLIO does),
batch 4, 2 epochs, 10 ms of compute per step (a sleep), 2 MPI ranks, the files split between the ranks, the
page cache left as it is (DLIO evicts nothing; ddlio runs with ``workload.cache=warm``).

- DLIO 2.0.0 (``dlio-benchmark`` from PyPI) runs from a venv of its own (``--dlio-venv``; created when missing:
  ``python3 -m venv`` + the CPU wheel of torch 2.13.0 + ``dlio-benchmark==2.0.0`` + its dependencies, with
  ``tensorflow-cpu`` for the ``tensorflow`` it imports at start-up; its GPU-only dependencies, nvidia-dali-cuda110,
  torchvision and torchaudio, are left out: no module of this workload's path imports them), started by Open MPI's
  ``mpirun -np 2`` (Debian's openmpi-bin, the MPI its mpi4py loads).
- ddlio runs as a user does: ``python sweep.py format=npz ... ppn=2`` (Hydra, the launcher, submitit's local
  executor, ``mpiexec`` from the mpich wheel, the SQLite store), into a fresh data root and store each run, its
  packages byte-compiled first as pip compiles DLIO's (:func:`compile_ddlio`).

Measured for each whole command: wall time, from a run with nothing watching it; peak memory, from a second run,
as the peak over time of the summed proportional set size (PSS: a page shared by k processes counts 1/k) of every
process of the command, sampled every 20 ms from ``/proc/<pid>/smaps_rollup``, with the summed RSS and (where the
cgroup v1 memory controller is mounted, the command then runs in a cgroup of its own) the cgroup's
``max_usage_in_bytes``, page cache included, beside it (the sampling costs DLIO's processes, thousands of mappings
each, ~20% of their time here: a sampled run's wall time is printed, never compared); bytes read from and written
to the dataset's files, from one extra run of each under ``strace -f`` (untimed; the dataset's files only,
python's own imports not counted). The runs alternate, ``--repeat`` times each; medians.

Beside them, the floor of ddlio's process structure, measured the same way in the same run (``floor``): the four
Python processes a local point runs, nested as ddlio nests them, each doing only what its components must — the
driver composing a config with Hydra, committing a row through SQLAlchemy's ORM into SQLite and importing
submitit (``bench/floor_driver.py``), the job process (submitit's entry and cloudpickle, numpy held off as
ddlio's entry holds it) and two MPI ranks (numpy, mpi4py), the ranks waiting 3 s. What ddlio weighs above it is its
own; what the floor weighs is the price of those components.

    python bench/vs_dlio.py                           # 3 runs of each + 1 strace run of each
    python bench/vs_dlio.py --repeat 5 --dlio-venv /scratch/dlio-venv --data /scratch/bench
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
MIB = 1024 * 1024
DLIO_VERSION = "2.0.0"
#: dlio-benchmark 2.0.0's requirements, less the GPU-only ones this workload never imports (see the docstring)
DLIO_DEPS = ["Pillow>=9.3.0", "PyYAML>=6.0.0", "h5py>=3.11.0", "mpi4py>=3.1.4", "numpy>=1.23.5",
             "omegaconf>=2.2.0", "pandas>=1.5.1", "psutil>=5.9.8", "pydftracer==1.0.2", "hydra-core>=1.3.2",
             "tensorflow-cpu==2.21.0"]
CGROUP_MEMORY = Path("/sys/fs/cgroup/memory")


@dataclass
class Workload:
    """The one workload both tools run. Sizes in bytes, times in seconds."""

    files: int = 64
    sample_size: int = 256 * 1024
    batch: int = 4
    epochs: int = 2
    compute_s: float = 0.01
    ranks: int = 2

    @property
    def side(self) -> int:
        """DLIO's NPZ sample is a side x side uint8 array (record_length = side^2 bytes)."""
        side = round(self.sample_size ** 0.5)
        if side * side != self.sample_size:
            raise SystemExit(f"error: --size {self.sample_size} is not a square number of bytes (DLIO's NPZ "
                             "sample is side x side uint8)")
        return side


@dataclass
class Run:
    """One measured command: seconds, bytes, exit status."""

    tool: str
    wall_s: float
    peak_pss: int
    peak_rss: int
    cgroup_peak: int | None
    rc: int
    log: str = ""
    #: (PSS bytes, process) of each process at the sampled peak, largest first
    breakdown: list[tuple[int, str]] = field(default_factory=list)


@dataclass
class IoTotals:
    """Bytes read from and written to the dataset's files (strace), and the read calls that did it."""

    read_bytes: int = 0
    write_bytes: int = 0
    read_calls: int = 0
    files_read: set[str] = field(default_factory=set)


# --------------------------------------------------------------------------------------------------- commands

def dlio_command(venv: Path, mpirun: str, wl: Workload, run_dir: Path) -> list[str]:
    """DLIO 2.0.0's own command line for the workload: its Hydra keys (configs/workload/default.yaml), its mpirun."""
    extra = ["--allow-run-as-root"] if os.geteuid() == 0 else []
    return [mpirun, *extra, "--oversubscribe", "-np", str(wl.ranks), str(venv / "bin" / "dlio_benchmark"),
            "workload=default",
            f"++workload.dataset.data_folder={run_dir / 'data'}",
            "++workload.dataset.format=npz",
            f"++workload.dataset.num_files_train={wl.files}",
            "++workload.dataset.num_files_eval=0",
            "++workload.dataset.num_samples_per_file=1",
            f"++workload.dataset.record_length={wl.sample_size}",
            "++workload.dataset.num_subfolders_train=0",
            "++workload.dataset.num_subfolders_eval=0",
            "++workload.framework=pytorch",
            "++workload.reader.data_loader=pytorch",
            f"++workload.reader.batch_size={wl.batch}",
            f"++workload.train.epochs={wl.epochs}",
            f"++workload.train.computation_time={wl.compute_s}",
            "++workload.workflow.generate_data=True",
            "++workload.workflow.train=True",
            "++workload.workflow.evaluation=False",
            "++workload.workflow.checkpoint=False",
            f"++workload.output.folder={run_dir / 'out'}",
            f"hydra.run.dir={run_dir / 'hydra'}"]


def ddlio_command(wl: Workload, run_dir: Path) -> list[str]:
    """ddlio's command line for the same workload, as a user types it."""
    return [sys.executable, str(ROOT / "sweep.py"), "format=npz", "format.layout=array", "format.load=whole",
            "access=shared", f"ppn={wl.ranks}", f"workload.samples={wl.files}", "workload.samples_per_file=1",
            f"workload.sample_size={wl.sample_size}", f"workload.sample_shape=[{wl.side},{wl.side}]",
            f"workload.batch_size={wl.batch}", f"workload.epochs={wl.epochs}",
            f"workload.compute_time={wl.compute_s}", "workload.cache=warm",
            f"data_root={run_dir / 'data'}", f"db={run_dir / 'r.db'}"]


#: the floor's processes, outermost first: each does what its components must, then runs the next and waits for it
FLOOR_RANK = "import numpy, time; from mpi4py import MPI; MPI.COMM_WORLD.Barrier(); time.sleep(3)"
FLOOR_JOB = ("import subprocess, sys; sys.modules['numpy'] = None; import submitit.core.submission, cloudpickle; "
             "del sys.modules['numpy']; sys.exit(subprocess.call(sys.argv[1:]))")
FLOOR_DRIVER = ROOT / "bench" / "floor_driver.py"


def floor_command(wl: Workload, run_dir: Path) -> list[str]:
    """The floor of ddlio's local process structure (see the module's docstring): driver > job > ``mpiexec -n
    RANKS`` ranks, the driver's SQLite file in ``run_dir``."""
    py = sys.executable
    mpiexec = shutil.which("mpiexec", path=str(Path(py).parent)) or shutil.which("mpiexec") or "mpiexec"
    return [py, str(FLOOR_DRIVER), str(run_dir / "floor.db"), "--", py, "-c", FLOOR_JOB,
            mpiexec, "-n", str(wl.ranks), py, "-c", FLOOR_RANK]


def compile_ddlio() -> None:
    """Byte-compile ddlio's packages, as pip compiles an installed package (DLIO's, in its venv): neither tool then
    compiles its sources inside the timed runs. An editable install is compiled by its first run, except under
    ``PYTHONDONTWRITEBYTECODE`` (set on this VM), where every process of every run would compile ddlio's sources
    again (0.3-0.5 s a run here)."""
    import compileall

    for package in ("ddlio", "experiments", "lustre", "hydra_plugins"):
        compileall.compile_dir(str(ROOT / package), quiet=1)


def ensure_dlio_venv(venv: Path) -> None:
    """Create DLIO's venv when it is missing (a few minutes: torch from the local wheel, TensorFlow from PyPI)."""
    if (venv / "bin" / "dlio_benchmark").exists():
        return
    print(f"creating DLIO {DLIO_VERSION}'s venv in {venv} (once) ...", flush=True)
    pip = [str(venv / "bin" / "python"), "-m", "pip", "install", "-q"]
    steps = [[sys.executable if not shutil.which("python3") else "python3", "-m", "venv", str(venv)],
             [*pip, "torch==2.13.0"],  # the CPU build; a bare 'torch' would pull a CUDA one
             [*pip, "--no-deps", f"dlio-benchmark=={DLIO_VERSION}"],
             [*pip, *DLIO_DEPS]]
    for cmd in steps:
        done = subprocess.run(cmd, capture_output=True, text=True)
        if done.returncode:
            tail = "\n".join((done.stderr or done.stdout).strip().splitlines()[-5:])
            raise SystemExit(f"error: building DLIO's venv failed at: {' '.join(cmd)}\n{tail}")


# --------------------------------------------------------------------------------------------------- /proc

def parse_smaps_rollup(text: str) -> tuple[int, int]:
    """(Rss, Pss) in bytes from the text of /proc/<pid>/smaps_rollup (values there are in kB)."""
    rss = pss = 0
    for line in text.splitlines():
        if line.startswith("Rss:"):
            rss = int(line.split()[1]) * 1024
        elif line.startswith("Pss:"):
            pss = int(line.split()[1]) * 1024
    return rss, pss


def parse_stat_ppid(text: str) -> int:
    """The parent pid from the text of /proc/<pid>/stat (the command name may hold spaces and parentheses)."""
    return int(text[text.rindex(")") + 2:].split()[1])


def descendants(root: int) -> list[int]:
    """``root`` and every live process below it (by parent pid)."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            ppid = parse_stat_ppid(Path(f"/proc/{entry}/stat").read_text())
        except (OSError, ValueError):
            continue
        children.setdefault(ppid, []).append(int(entry))
    out, todo = [], [root]
    while todo:
        pid = todo.pop()
        out.append(pid)
        todo.extend(children.get(pid, []))
    return out


def memory_now(pids: list[int], parts: dict[int, int] | None = None) -> tuple[int, int]:
    """(summed RSS, summed PSS) in bytes of the processes still alive; ``parts``, when given, gets each one's PSS
    by pid."""
    rss = pss = 0
    for pid in pids:
        try:
            r, p = parse_smaps_rollup(Path(f"/proc/{pid}/smaps_rollup").read_text())
        except OSError:
            continue
        rss += r
        pss += p
        if parts is not None:
            parts[pid] = p
    return rss, pss


def process_name(pid: int) -> str:
    """A short name of a process for the peak's breakdown: its program, and the module of ``python -m M``."""
    try:
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace").split("\0")
    except OSError:
        return str(pid)
    words = [a for a in argv if a]
    name = Path(words[0]).name if words else str(pid)
    rest = words[1:]
    while rest and rest[0].startswith("-") and rest[0] not in ("-m", "-c"):  # an interpreter's flags (-u)
        rest = rest[1:]
    if rest[:1] == ["-m"] and len(rest) > 1:
        name += " -m " + rest[1]
    elif rest[:1] == ["-c"]:
        name += " -c"
    elif rest and rest[0].endswith(".py"):
        name += " " + Path(rest[0]).name
    return name


class Cgroup:
    """A cgroup v1 memory group of its own for one command (None of it when the controller is not there)."""

    def __init__(self, name: str) -> None:
        self.path: Path | None = None
        if CGROUP_MEMORY.is_dir() and os.access(CGROUP_MEMORY, os.W_OK):
            path = CGROUP_MEMORY / name
            try:
                path.mkdir()
                self.path = path
            except OSError:
                self.path = None

    def join(self) -> None:
        """Move the calling process into the group (run in the child, before exec)."""
        if self.path is not None:
            (self.path / "cgroup.procs").write_text(str(os.getpid()))

    def pids(self) -> list[int]:
        if self.path is None:
            return []
        try:
            return [int(x) for x in (self.path / "cgroup.procs").read_text().split()]
        except OSError:
            return []

    def peak(self) -> int | None:
        if self.path is None:
            return None
        return int((self.path / "memory.max_usage_in_bytes").read_text())

    def remove(self) -> None:
        if self.path is not None:
            for _ in range(50):
                try:
                    self.path.rmdir()
                    return
                except OSError:
                    time.sleep(0.1)


def timed(tool: str, cmd: list[str], cwd: Path, env: dict[str, str], timeout_s: float) -> tuple[float, int, str]:
    """Run ``cmd`` once with nothing watching it: (wall seconds, exit status, its output)."""
    log = cwd / f"{tool}-timed.log"
    with open(log, "w") as out:
        t0 = time.perf_counter()
        try:
            rc = subprocess.run(cmd, cwd=cwd, env=env, stdout=out, stderr=subprocess.STDOUT,
                                timeout=timeout_s).returncode
        except subprocess.TimeoutExpired:
            rc = -9
        wall = time.perf_counter() - t0
    return wall, rc, log.read_text(errors="replace")


def measure(tool: str, cmd: list[str], cwd: Path, env: dict[str, str], timeout_s: float) -> Run:
    """Run ``cmd`` once, sampled: wall seconds of the whole command (sampled: see the module's docstring), peak
    summed PSS and RSS of its processes (bytes), the peak of its cgroup (bytes, page cache included) where there
    is one."""
    group = Cgroup(f"ddlio-vs-dlio-{os.getpid()}-{tool}-{time.monotonic_ns()}")
    log = cwd / f"{tool}.log"
    peak_rss = peak_pss = 0
    breakdown: list[tuple[int, str]] = []
    with open(log, "w") as out:
        t0 = time.perf_counter()
        proc = subprocess.Popen(cmd, cwd=cwd, env=env, stdout=out, stderr=subprocess.STDOUT,
                                preexec_fn=group.join if group.path else None)
        try:
            while proc.poll() is None:
                pids = group.pids() or descendants(proc.pid)
                now: dict[int, int] = {}
                rss, pss = memory_now(pids, now)
                if pss > peak_pss:
                    breakdown = sorted(((b, process_name(pid)) for pid, b in now.items()), reverse=True)
                peak_rss, peak_pss = max(peak_rss, rss), max(peak_pss, pss)
                if time.perf_counter() - t0 > timeout_s:
                    proc.kill()
                    break
                time.sleep(0.02)
            rc = proc.wait()
        except BaseException:
            proc.kill()
            proc.wait()
            group.remove()
            raise
        wall = time.perf_counter() - t0
    cg = group.peak()
    group.remove()
    return Run(tool, wall, peak_pss, peak_rss, cg, rc, log.read_text(errors="replace"), breakdown)


# --------------------------------------------------------------------------------------------------- strace

_SYSCALL = re.compile(r"^(?P<pid>\d+)\s+(?P<name>\w+)\((?P<fd>\d+)<(?P<path>[^>]*)>,(?P<rest>.*)$")
_RESUMED = re.compile(r"^(?P<pid>\d+)\s+<\.\.\. (?P<name>\w+) resumed>(?P<rest>.*)$")
_RESULT = re.compile(r"\)\s+=\s+(-?\d+)")
READS = {"read", "pread64", "readv", "preadv", "preadv2"}
WRITES = {"write", "pwrite64", "writev", "pwritev", "pwritev2"}


def parse_strace(lines: Any, under: str, suffix: str = ".npz") -> IoTotals:
    """Bytes read and written on files under ``under`` whose name ends in ``suffix``, from ``strace -f -y`` output
    (pid-prefixed lines; a call split by another process's into ``<unfinished ...>`` and ``<... resumed>``)."""
    tot = IoTotals()
    pending: dict[tuple[str, str], str] = {}

    def count(name: str, path: str, rest: str) -> None:
        m = _RESULT.search(rest)
        if not m or not (path.startswith(under) and path.endswith(suffix)):
            return
        n = int(m.group(1))
        if n <= 0:
            return
        if name in READS:
            tot.read_bytes += n
            tot.read_calls += 1
            tot.files_read.add(path)
        elif name in WRITES:
            tot.write_bytes += n

    for line in lines:
        line = line.rstrip("\n")
        m = _SYSCALL.match(line)
        if m:
            name = m.group("name")
            if name not in READS and name not in WRITES:
                continue
            if line.endswith("<unfinished ...>"):
                pending[(m.group("pid"), name)] = m.group("path")
            else:
                count(name, m.group("path"), m.group("rest"))
            continue
        r = _RESUMED.match(line)
        if r:
            path = pending.pop((r.group("pid"), r.group("name")), None)
            if path is not None:
                count(r.group("name"), path, r.group("rest"))
    return tot


def traced(tool: str, cmd: list[str], cwd: Path, env: dict[str, str], timeout_s: float) -> IoTotals:
    """One untimed run of ``cmd`` under strace; the dataset files' bytes."""
    trace = cwd / f"{tool}.strace"
    full = ["strace", "-f", "-qq", "-y", "-s", "0", "-e", "signal=none",
            "-e", "trace=" + ",".join(sorted(READS | WRITES)), "-o", str(trace), *cmd]
    with open(cwd / f"{tool}.strace.log", "w") as out:
        done = subprocess.run(full, cwd=cwd, env=env, stdout=out, stderr=subprocess.STDOUT, timeout=timeout_s)
    if done.returncode:
        raise SystemExit(f"error: {tool} failed under strace (exit {done.returncode}); "
                         f"see {cwd / (tool + '.strace.log')}")
    with open(trace, errors="replace") as f:
        return parse_strace(f, str((cwd / "data").resolve()))


# --------------------------------------------------------------------------------------------------- DLIO output

def parse_dlio_log(text: str) -> dict[str, Any]:
    """What DLIO's rank 0 says of its run: epochs finished, steps per epoch, its train AU and throughput
    (samples/s), from its ``[METRIC]`` / ``[INFO]`` lines. Missing keys are absent."""
    out: dict[str, Any] = {}
    m = re.findall(r"Ending epoch (\d+) - (\d+) steps completed", text)
    if m:
        out["epochs"] = len(m)
        out["steps"] = [int(s) for _, s in m]
    for key, pat in (("train_au_pct", r"Training Accelerator Utilization \[AU\] \(%\):\s*([\d.]+)"),
                     ("samples_per_s", r"Training Throughput \(samples/second\):\s*([\d.]+)"),
                     ("io_mib_s", r"Training I/O Throughput \(MB/second\):\s*([\d.]+)")):
        found = re.search(pat, text)
        if found:
            out[key] = float(found.group(1))
    return out


# --------------------------------------------------------------------------------------------------- main

def fmt_mib(n: float | None) -> str:
    return "-" if n is None else f"{n / MIB:.0f} MiB"


def median(xs: list[float]) -> float:
    return statistics.median(xs) if xs else float("nan")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dlio-venv", default=str(Path.home() / ".cache" / "ddlio-bench" / "dlio-venv"),
                    help="DLIO 2.0.0's venv, created when missing (default %(default)s)")
    ap.add_argument("--mpirun", default="/usr/bin/mpirun",
                    help="Open MPI's mpirun for DLIO, the MPI its mpi4py loads (default %(default)s)")
    ap.add_argument("--repeat", type=int, default=3, help="timed runs of each, alternating (default %(default)s)")
    ap.add_argument("--no-strace", action="store_true", help="skip the bytes run under strace")
    ap.add_argument("--data", help="scratch directory (default: a temporary directory, removed after)")
    ap.add_argument("--files", type=int, default=64, help="files of one sample each (default %(default)s)")
    ap.add_argument("--size", type=int, default=256 * 1024, help="sample bytes, a square (default %(default)s)")
    ap.add_argument("--timeout", type=float, default=900.0, help="seconds per command (default %(default)s)")
    args = ap.parse_args(argv)
    if args.repeat < 1:
        ap.error("--repeat must be >= 1")
    wl = Workload(files=args.files, sample_size=args.size)
    wl.side  # noqa: B018  (checks the size)
    if not Path(args.mpirun).exists():
        raise SystemExit("error: no mpirun for DLIO: apt-get install openmpi-bin libopenmpi-dev (or --mpirun PATH)")
    if not args.no_strace and not shutil.which("strace"):
        raise SystemExit("error: strace not found: apt-get install strace (or --no-strace)")
    venv = Path(args.dlio_venv).expanduser()
    ensure_dlio_venv(venv)
    compile_ddlio()

    scratch = Path(args.data) if args.data else Path(tempfile.mkdtemp(prefix="vs-dlio-"))
    scratch.mkdir(parents=True, exist_ok=True)
    env_ddlio = dict(os.environ, PYTHONPATH=str(ROOT))
    env_dlio = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env_dlio["PATH"] = f"{venv / 'bin'}{os.pathsep}{env_dlio.get('PATH', '')}"
    env_dlio["OMPI_MCA_rmaps_base_oversubscribe"] = "1"

    def command(tool: str, run_dir: Path) -> tuple[list[str], dict[str, str]]:
        if tool == "dlio":
            return dlio_command(venv, args.mpirun, wl, run_dir), env_dlio
        if tool == "floor":
            return floor_command(wl, run_dir), env_ddlio
        return ddlio_command(wl, run_dir), env_ddlio

    runs: dict[str, list[Run]] = {"dlio": [], "ddlio": [], "floor": []}
    dlio_info: dict[str, Any] = {}
    try:
        for i in range(args.repeat):
            order = ("dlio", "ddlio", "floor") if i % 2 == 0 else ("floor", "ddlio", "dlio")
            for tool in order:
                run_dir = (scratch / f"{tool}-{i}").resolve()
                (run_dir / "timed").mkdir(parents=True)
                (run_dir / "sampled").mkdir()
                cmd, env = command(tool, run_dir / "timed")
                wall, rc, log = timed(tool, cmd, run_dir / "timed", env, args.timeout)
                if rc == 0:
                    cmd, env = command(tool, run_dir / "sampled")
                    r = measure(tool, cmd, run_dir / "sampled", env, args.timeout)
                    rc, log = r.rc, r.log
                if rc != 0:
                    tail = "\n".join(log.strip().splitlines()[-15:])
                    raise SystemExit(f"error: {tool} exited {rc} (logs in {run_dir}):\n{tail}")
                if tool == "dlio":
                    dlio_info = parse_dlio_log(r.log)
                sampled_wall, r.wall_s = r.wall_s, wall
                runs[tool].append(r)
                print(f"  run {i + 1}/{args.repeat} {tool:5s}: {wall:6.1f} s ({sampled_wall:.1f} s sampled), peak PSS "
                      f"{fmt_mib(r.peak_pss)}, RSS {fmt_mib(r.peak_rss)}, cgroup {fmt_mib(r.cgroup_peak)}", flush=True)
        io: dict[str, IoTotals] = {}
        if not args.no_strace:
            for tool in ("dlio", "ddlio"):
                run_dir = (scratch / f"{tool}-strace").resolve()
                run_dir.mkdir(parents=True)
                cmd, env = command(tool, run_dir)
                io[tool] = traced(tool, cmd, run_dir, env, args.timeout)
    finally:
        if not args.data:
            shutil.rmtree(scratch, ignore_errors=True)

    report(wl, runs, io, dlio_info)
    return 0


def report(wl: Workload, runs: dict[str, list[Run]], io: dict[str, IoTotals], dlio_info: dict[str, Any]) -> None:
    """The side-by-side table: medians of each, ratios ddlio / DLIO, the goal check."""
    expected = wl.files * wl.sample_size * wl.epochs
    print(f"\nworkload: {wl.files} NPZ files x {wl.sample_size // 1024} KiB, batch {wl.batch}, {wl.epochs} epochs, "
          f"{wl.compute_s * 1000:.0f} ms compute/step, {wl.ranks} ranks; generation + reading; "
          f"{len(runs['dlio'])} runs each, medians")
    if dlio_info:
        print(f"DLIO says: {dlio_info}")
    rows: list[tuple[str, float, float, str]] = []
    for label, get in (("wall time (s)", lambda r: r.wall_s),
                       ("peak memory, sum PSS (MiB)", lambda r: r.peak_pss / MIB),
                       ("peak memory, sum RSS (MiB)", lambda r: r.peak_rss / MIB)):
        d, m = median([get(r) for r in runs["dlio"]]), median([get(r) for r in runs["ddlio"]])
        rows.append((label, d, m, f"{m / d:.3f}"))
    cg_d = [r.cgroup_peak for r in runs["dlio"] if r.cgroup_peak is not None]
    cg_m = [r.cgroup_peak for r in runs["ddlio"] if r.cgroup_peak is not None]
    if cg_d and cg_m:
        d, m = median(cg_d) / MIB, median(cg_m) / MIB
        rows.append(("peak memory, cgroup incl. cache (MiB)", d, m, f"{m / d:.3f}"))
    if io:
        for label, attr in (("dataset bytes read (MiB)", "read_bytes"), ("dataset bytes written (MiB)", "write_bytes")):
            d, m = getattr(io["dlio"], attr) / MIB, getattr(io["ddlio"], attr) / MIB
            rows.append((label, d, m, f"{m / d:.3f}" if d else "-"))
        rows.append(("dataset read calls", io["dlio"].read_calls, io["ddlio"].read_calls,
                     f"{io['ddlio'].read_calls / max(1, io['dlio'].read_calls):.3f}"))
    width = max(len(r[0]) for r in rows)
    print(f"{'':{width}s}  {'DLIO 2.0.0':>12s}  {'ddlio':>10s}  {'ddlio/DLIO':>10s}")
    for label, d, m, ratio in rows:
        print(f"{label:{width}s}  {d:12.1f}  {m:10.1f}  {ratio:>10s}")
    print(f"(the samples' own bytes: {wl.files} x {wl.sample_size // 1024} KiB x {wl.epochs} epochs = "
          f"{expected / MIB:.1f} MiB; the rest is each file's npz/npy headers)")
    for tool in ("ddlio", "floor"):
        if runs.get(tool):
            peak = max(runs[tool], key=lambda r: r.peak_pss)
            print(f"{tool} at its largest peak: " + " + ".join(f"{name} {b / MIB:.0f}" for b, name in peak.breakdown
                                                             if b >= MIB // 2) + " MiB")
    if runs.get("floor"):
        d, m = median([r.peak_pss for r in runs["dlio"]]), median([r.peak_pss for r in runs["ddlio"]])
        f = median([r.peak_pss for r in runs["floor"]])
        print(f"floor of ddlio's process structure (its four Python processes, its components only): {f / MIB:.1f} "
              f"MiB PSS = {f / d:.3f} of DLIO's; ddlio above it: {(m - f) / MIB:+.1f} MiB")
        if f / d > 0.1:
            print("(the memory goal <= 0.1 is below what the components weigh with nothing of ddlio's in them)")
    wall = float(rows[0][3])
    mem = float(rows[1][3])
    same = "-"
    if io:
        same = "yes" if io["dlio"].read_bytes == io["ddlio"].read_bytes else (
            f"no ({io['ddlio'].read_bytes - io['dlio'].read_bytes:+d} bytes)")
    print(f"goal: wall <= 0.25: {'met' if wall <= 0.25 else 'missed'} ({wall:.3f}); "
          f"peak memory <= 0.1: {'met' if mem <= 0.1 else 'missed'} ({mem:.3f}); same bytes read: {same}")


if __name__ == "__main__":
    sys.exit(main())
