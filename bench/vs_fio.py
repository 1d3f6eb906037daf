"""The reader kernel against fio on the same bytes: same file, request size, process count and pattern.

For each request size, one ``bin`` dataset (records of exactly that size back to back in one shared file) is
generated through ddlio. Then, for each pattern (sequential: each rank reads its contiguous share in order;
random: ``shuffle=sample``, every record once per epoch in a seeded global order) and cache state (cold: the file
evicted from the page cache before the run; warm: read once before, and four times the bytes, so that a warm
pass lasts longer than a blink), the kernel runs as
``mpiexec -n P python -m experiments.kernel``, and fio replays the very same reads: one psync job per rank with an
iolog of that rank's requests (offsets, sizes, order, from the kernel's own sampler). A kernel run reads
``--epochs`` epochs and fio runs as many times in a row, each replaying the reads of the epoch of its rank (a
shuffled epoch reads its own order), and a repetition's figure of each is the median of those; kernel and fio
run side by side, in turn first (ABBA), ``--repeat`` times, each followed by the kernel's two references.

Both are compared by the same yardstick: bytes delivered / wall time of the reading phase (fio: its aggregate
bandwidth, bytes / runtime; the kernel: the epoch's bytes / the slowest rank's epoch wall time, which includes
the loop's own overhead, so the ratio is the kernel's full cost). Medians are printed side by side with the
kernel/fio ratio and the median of each repetition's own ratio ("paired", with its distribution-free 95%
confidence interval: on this VM one run's bandwidth varies by 10% or more from the next), beside the kernel's
same reads without the file-system layer's counters (``DDLIO_FS_LAYER=off``: what the counters cost, apart from
the loop's own) and by its Python loop instead of its C one
(``DDLIO_READ_LOOP=python``), and the last line is ``min ratio: X.XX`` (with counters, the C loop when built), with
the lowest paired ratio and the lowest upper bound of its interval (under the goal: a gap the noise cannot
explain). ``--runs FILE`` keeps every repetition's figures.

    python bench/vs_fio.py                         # 4KiB 64KiB 1MiB 16MiB, seq+random, cold+warm, 2 processes
    python bench/vs_fio.py --sizes 4KiB,256KiB --procs 1 --repeat 5 --data /scratch/me/bench
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from ddlio.runpaths import RunPaths  # noqa: E402
from ddlio.units import format_size, parse_size  # noqa: E402
from experiments.dataset import DatasetPlan, data_files  # noqa: E402
from experiments.kernel.cache import evict, warm  # noqa: E402

MIB = 1024 * 1024


def point(data: Path, size: int, total: int, procs: int, shuffle: str, cache: str, epochs: int) -> Any:
    """A validated ddlio point reading ``total`` bytes of ``size``-byte records from one bin file."""
    from hydra import compose, initialize_config_dir
    from omegaconf import OmegaConf

    from experiments.config import register_configs
    from experiments.config.validate import validate

    register_configs()
    samples = max(procs, total // size)
    overrides = [
        "format=bin", "access=shared", f"ppn={procs}", f"workload.samples={samples}", f"workload.sample_size={size}",
        f"workload.samples_per_file={samples}", f"workload.batch_size={max(1, min(64, samples // procs))}",
        f"workload.epochs={epochs}", f"workload.shuffle={shuffle}", f"workload.cache={cache}",
        f"data_root={data}", f"db={data / 'bench.db'}",
    ]
    with initialize_config_dir(config_dir=str(ROOT / "conf"), version_base=None):
        cfg = compose("config", overrides=overrides)
    return validate(OmegaConf.to_container(cfg, resolve=True), data)


def run_kernel(spec: Any, run_dir: Path, **env: str) -> dict[str, Any]:
    """The kernel's record of one run of ``spec``, with ``env`` set for it (inherited by the MPI step):
    ``DDLIO_FS_LAYER="off"``, the same reads without the file-system layer's counters (the reference for their
    cost); ``DDLIO_READ_LOOP="python"``, the same reads by the kernel's Python loop instead of its C one."""
    from experiments.run import run_point

    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    try:
        rec = run_point(spec.to_dict(), str(run_dir))
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    if rec.kind != "ddlio.result":
        raise SystemExit(f"kernel failed: {rec.error}")
    return rec.to_dict()


def loops(rec: dict[str, Any]) -> set[str]:
    """The read loops (native, python) that made the run's reads."""
    return {name for r in rec["rank_info"] for name, n in r.get("read_loop", {}).items() if n}


def kernel_bw(rec: dict[str, Any]) -> list[float]:
    """MiB/s of each epoch: bytes the reads returned / the slowest rank's epoch wall time."""
    return [e["bytes_read"] / max(r["wall_time_s"] for r in e["ranks"]) / MIB for e in rec["epochs"]]


def write_iologs(spec: Any, plan: Any, path: Path, size: int, scratch: Path, epoch: int = 0) -> list[Path]:
    """One fio iolog (version 2) per rank, replaying exactly the reads the kernel's rank makes in ``epoch``:
    the same offsets, sizes and order (epoch_ids is the kernel's own sampler)."""
    from experiments.kernel import epoch_ids

    return [write_iolog(scratch / f"epoch{epoch}-rank{rank}.iolog", path,
                        epoch_ids(plan, spec, epoch, spec.ranks, rank), size)
            for rank in range(spec.ranks)]


def write_iolog(log: Path, path: Path | str, records: Any, size: int) -> Path:
    """A fio iolog (version 2) at ``log`` reading ``path``'s records of ``size`` bytes (record i at byte i * size)
    in the order of ``records``; returns ``log``."""
    with open(log, "w") as f:
        f.write(f"fio version 2 iolog\n{path} add\n{path} open\n")
        f.writelines(f"{path} read {int(i) * size} {size}\n" for i in records)
        f.write(f"{path} close\n")
    return log


def run_fio(path: Path, logs: list[Path], cold: bool, scratch: Path) -> float:
    """fio's aggregate read bandwidth (MiB/s): one psync job per rank replaying that rank's iolog as fast as it
    can (replay_no_stall), after evicting the file when cold."""
    if cold:
        evict([path])
    job = scratch / "job.fio"
    sections = "".join(f"[rank{r}]\nread_iolog={log}\n" for r, log in enumerate(logs))
    job.write_text(
        f"[global]\nioengine=psync\ndirect=0\ninvalidate={1 if cold else 0}\nreplay_no_stall=1\n"
        f"group_reporting=1\nthread=0\n{sections}"
    )
    out = subprocess.run(["fio", "--output-format=json", str(job)], capture_output=True, text=True, timeout=900)
    if out.returncode != 0:
        raise SystemExit(f"fio failed: {out.stderr.strip() or out.stdout.strip()}")
    read = json.loads(out.stdout)["jobs"][0]["read"]
    expected = path.stat().st_size
    if read["io_bytes"] != expected:
        raise SystemExit(f"fio read {read['io_bytes']} bytes, the kernel's plan is {expected}")
    return read["bw_bytes"] / MIB


def measure_cell(spec: Any, data: Path, size: int, cold: bool, repeat: int, epochs: int) -> dict[str, Any]:
    """``repeat`` repetitions of one cell: the kernel and fio side by side, in turn first (ABBA: a drift of the
    machine between the two cancels over pairs; the first kernel run generates the file), then the kernel's two
    references. Each figure (MiB/s) is the median of a run's ``epochs`` epochs (fio: of as many runs, each
    replaying its epoch's order). Returns the figures per repetition, which went first, and the cache labels and
    read loops the kernel's runs reported."""
    plan = DatasetPlan.from_point(spec)
    root = RunPaths.of(data, spec.point_key).root
    out: dict[str, Any] = {"kernel": [], "fio": [], "kernel_first": [], "without_counters": [], "python_loop": [],
                           "states": set(), "loops": set()}
    logs: list[list[Path]] = []  # per epoch, per rank

    def kernel(name: str, **env: str) -> None:
        rec = run_kernel(spec, root, **env)
        out[name].append(statistics.median(kernel_bw(rec)))
        out["states"].update(e["cache"] for e in rec["epochs"])
        if not env:
            out["loops"].update(loops(rec))

    def fio() -> None:
        files = [p for p in data_files(plan) if p.suffix == ".bin"]
        logs[:] = logs or [write_iologs(spec, plan, files[0], size, data, e) for e in range(epochs)]
        if not cold:
            warm(files)
        out["fio"].append(statistics.median(run_fio(files[0], logs[e], cold, data) for e in range(epochs)))

    for rep in range(repeat):
        out["kernel_first"].append(rep % 2 == 0)
        if rep % 2 == 0:
            kernel("kernel")
            fio()
        else:
            fio()
            kernel("kernel")
        kernel("without_counters", DDLIO_FS_LAYER="off")
        kernel("python_loop", DDLIO_READ_LOOP="python")
    return out


def median_ci(values: list[float], conf: float = 0.95) -> tuple[float, float]:
    """A distribution-free confidence interval of the median of ``values``: the order statistics whose ranks the
    binomial distribution of half-chances puts around it (``conf`` or more coverage); with fewer than 6 values it
    cannot reach 95%, and the interval is the range."""
    xs, n = sorted(values), len(values)
    if n < 2:
        return (xs[0], xs[0]) if xs else (float("nan"), float("nan"))
    # (xs[j], xs[n-1-j]) misses the median when j or fewer values lie below it, or above: 2 P(X <= j) at most
    cdf = [sum(math.comb(n, i) for i in range(j + 1)) / 2 ** n for j in range(n // 2)]
    lo = 0
    for j, p in enumerate(cdf):
        if 2 * p > 1 - conf:
            break
        lo = j
    return xs[lo], xs[n - 1 - lo]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", default="4KiB,64KiB,1MiB,16MiB", help="request sizes (default %(default)s)")
    ap.add_argument("--total", default="1GiB", help="bytes read per run for sizes >= 64KiB (default %(default)s)")
    ap.add_argument("--total-small", default="256MiB", help="bytes read per run for smaller sizes")
    ap.add_argument("--warm-total", default="4GiB",
                    help="bytes read per warm run for sizes >= 64KiB (default %(default)s: a warm pass over 1 GiB "
                         "lasts ~70 ms here, and fio counts whole milliseconds)")
    ap.add_argument("--procs", type=int, default=2, help="processes (MPI ranks, fio jobs); default %(default)s")
    ap.add_argument("--repeat", type=int, default=5, help="runs of each (median reported); default %(default)s")
    ap.add_argument("--epochs", type=int, default=3,
                    help="epochs of each kernel run, and fio runs in a row beside it: a repetition's figure is their "
                         "median (default %(default)s)")
    ap.add_argument("--patterns", default="seq,random", help="access patterns (default %(default)s)")
    ap.add_argument("--caches", default="cold,warm", help="cache states (default %(default)s)")
    ap.add_argument("--data", help="directory for the datasets (default: a temporary directory, removed after)")
    ap.add_argument("--runs", help="also write every run's figures (MiB/s, in the order they ran) to this JSON file")
    args = ap.parse_args(argv)
    if shutil.which("fio") is None:
        print("fio not found: apt-get install fio", file=sys.stderr)
        return 2
    tmp = None
    data = Path(args.data) if args.data else Path(tmp := tempfile.mkdtemp(prefix="ddlio-vs-fio-"))
    rows = []
    runs: list[dict[str, Any]] = []
    try:
        for size in [parse_size(s) for s in args.sizes.split(",")]:
            for pattern in args.patterns.split(","):
                for cache in args.caches.split(","):
                    total = parse_size(args.total_small if size < 64 * 1024 else
                                       args.warm_total if cache == "warm" else args.total)
                    spec = point(data, size, total, args.procs, "none" if pattern == "seq" else "sample", cache,
                                 epochs=args.epochs)
                    cell = measure_cell(spec, data, size, cache == "cold", args.repeat, args.epochs)
                    k_bw, f_bw = cell["kernel"], cell["fio"]
                    off_bw, py_bw = cell["without_counters"], cell["python_loop"]
                    states, used = cell.pop("states"), cell.pop("loops")
                    k, f = statistics.median(k_bw), statistics.median(f_bw)
                    o, y = statistics.median(off_bw), statistics.median(py_bw)
                    # each kernel run over the fio run beside it: drift of the machine between repetitions cancels
                    pairs = [a / b for a, b in zip(k_bw, f_bw, strict=True)]
                    paired, (lo, hi) = statistics.median(pairs), median_ci(pairs)
                    rows.append((format_size(size), pattern, cache, f, k, k / f, ",".join(sorted(states)), o, y,
                                 paired, lo, hi))
                    runs.append({"size": size, "pattern": pattern, "cache": cache, **cell})
                    if args.runs:
                        Path(args.runs).write_text(json.dumps(runs, indent=1))
                    print(f"{rows[-1][0]:>9} {pattern:>6} {cache:>4}  fio {f:9.1f} MiB/s  kernel {k:9.1f} MiB/s  "
                          f"ratio {k / f:5.2f} (paired {paired:4.2f} [{lo:4.2f}, {hi:4.2f}]; "
                          f"loop: {','.join(sorted(used))})  "
                          f"without counters {o / f:5.2f}  python loop {y / f:5.2f}  (kernel cache: {rows[-1][6]})",
                          flush=True)
    finally:
        if tmp:
            shutil.rmtree(tmp, ignore_errors=True)
    print(f"\n{'size':>9} {'pattern':>7} {'cache':>5} {'fio MiB/s':>11} {'kernel MiB/s':>13} {'ratio':>6} "
          f"{'paired':>6} {'95% CI':>12} {'no counters':>12} {'ratio':>6} {'python loop':>12} {'ratio':>6}")
    for size, pattern, cache, f, k, r, _, o, y, pr, lo, hi in rows:
        print(f"{size:>9} {pattern:>7} {cache:>5} {f:11.1f} {k:13.1f} {r:6.2f} {pr:6.2f} {f'[{lo:.2f}, {hi:.2f}]':>12} "
              f"{o:12.1f} {o / f:6.2f} {y:12.1f} {y / f:6.2f}")
    print(f"min ratio: {min(r[5] for r in rows):.2f} (paired: {min(r[9] for r in rows):.2f}, "
          f"lowest upper 95% bound: {min(r[11] for r in rows):.2f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
