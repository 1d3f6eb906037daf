"""Read throughput of every format on the same samples, against plain ``os.preadv`` of the same bytes.

For each workload (count x nominal size), the same samples (same seed, same payload) are written once in every
format, one file each, and once as a raw reference file (the payloads back to back, offsets kept in memory). Each
reader then reads every sample once per pass (open, one ``Reader.read`` per sample into a preallocated buffer,
close), cold (the file and its sidecars evicted from the page cache before the pass, residency checked with
mincore) and warm (after an untimed pass). The reference pass is the same loop with one ``os.preadv`` per sample.
The median of ``--repeat`` passes is reported as samples/s, MiB/s of the bytes the reads returned, and the ratio of
the format's samples/s to the reference's, measured in the same run.

A second table puts a price on the kernel's file-system counters: each format read through the kernel's own lane
(:class:`experiments.kernel.lanes.Lane`, batches of ``--batch`` samples, latency per read), once with the counters
as the kernel reads them (``/proc/self/io`` around the pass, the thread's ``/proc/thread-self/io`` around every
batch and open) and once without any, alternating; ``ratio`` = samples/s with counters / without. ``from app`` is
the share of the pass's read calls binned by their sample's size (the layers agreed), ``approx`` those binned by
a mean size.

    python bench/formats_read.py                       # 512 x 64KiB and 4096 x 4KiB, every format
    python bench/formats_read.py --workloads 256x1MiB --formats bin,hdf5 --order random --repeat 5
    python bench/formats_read.py --workloads 16384x4KiB --formats bin,hdf5 --counters-only --repeat 7
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

from ddlio.metrics import RankEpoch
from ddlio.units import format_size, parse_size
from experiments.formats import FORMATS, FilePayload, get_format
from experiments.kernel import posix
from experiments.kernel.cache import evict, residency
from experiments.kernel.lanes import EpochArrays, Lane

#: extra rows: formats whose options change the work per read
VARIANTS = {"jpeg+decode": ("jpeg", {"decode": True}), "png+decode": ("png", {"decode": True})}
REFERENCE = "preadv (reference)"


def storage_read_bytes() -> int:
    """Bytes this process has caused to be fetched from storage (``/proc/self/io`` read_bytes; 0 if unavailable)."""
    try:
        with open("/proc/self/io") as f:
            return next((int(line.split()[1]) for line in f if line.startswith("read_bytes:")), 0)
    except OSError:
        return 0


def one_pass(read_all: Callable[[], int], files: list[Path], cold: bool) -> tuple[float, int, float, int]:
    """Time one pass: seconds, the bytes its reads returned, the residency (0..1) of ``files`` before it, and the
    bytes fetched from storage during it (readahead included)."""
    if cold:
        evict(files)
    before = residency(files)
    io0 = storage_read_bytes()
    t = time.perf_counter()
    n = read_all()
    return time.perf_counter() - t, n, before, storage_read_bytes() - io0


def format_reader(fmt_name: str, options: dict, path: Path, order: np.ndarray, buf: np.ndarray) -> Callable[[], int]:
    fmt = get_format(fmt_name, **options)

    def read_all() -> int:
        n = 0
        with fmt.open(path) as r:
            for i in order.tolist():
                n += r.read(i, buf)
        return n

    return read_all


def raw_reader(path: Path, offsets: np.ndarray, order: np.ndarray, buf: np.ndarray) -> Callable[[], int]:
    mv = memoryview(buf)
    lo, hi = offsets[:-1].tolist(), offsets[1:].tolist()

    def read_all() -> int:
        n = 0
        fd = os.open(path, os.O_RDONLY)
        try:
            for i in order.tolist():
                n += os.preadv(fd, [mv[: hi[i] - lo[i]]], lo[i])
        finally:
            os.close(fd)
        return n

    return read_all


class OneFile:
    """The one thing :class:`EpochArrays` asks of a dataset plan: where each file's samples start (one file)."""

    def __init__(self, count: int) -> None:
        self.file_starts = np.array([0, count], dtype=np.int64)


def lane_reader(fmt_name: str, options: dict, path: Path, order: np.ndarray, buf_bytes: int, batch: int,
                counters: bool, layers: list[tuple]) -> Callable[[], int]:
    """One pass through the kernel's lane, in batches, as the kernel's epoch reads them; with ``counters``, the
    process's I/O counters around it and the thread's around every batch (as :mod:`experiments.kernel.posix`
    reads them), their texts appended to ``layers`` for :func:`fs_layer` (after the timing, as the kernel fills
    its file-system layer after the epoch)."""
    fmt = get_format(fmt_name, **options)
    plan, ids = OneFile(len(order)), np.asarray(order, dtype=np.int64)

    def read_all() -> int:
        lane = Lane(fmt, [str(path)], buf_bytes, trace=False, fs_layer=counters)
        ep = EpochArrays(plan, ids, False, sizes_needed=counters)  # type: ignore[arg-type]
        n, count = 0, len(ids)
        proc = posix.IOCounter() if counters else None
        io0 = proc.snap() if proc else b""
        for k0 in range(0, count, batch):
            n += lane.read_range(k0, min(k0 + batch, count), ep)
        lane.close_all()
        if proc is not None:
            io1 = proc.snap()
            proc.close()
            layers.append((io0, io1, [lane.take_snaps()], ep))
        if lane.io_fd >= 0:
            os.close(lane.io_fd)
        return n

    return read_all


def fs_layer(texts: tuple) -> RankEpoch:
    """The file-system layer of one pass from its counter texts (as the kernel fills it after an epoch)."""
    io0, io1, snaps, ep = texts
    m = RankEpoch(0, "", 0)
    posix.epoch_layer(m, io0, io1, snaps, ep.lat, ep.size, per_sample=True)
    return m


def bench_counters(root: Path, count: int, size: int, names: list[str], args: argparse.Namespace) -> list[dict]:
    """Per format and cache state: the kernel lane's samples/s with its counters and without (same run, passes
    alternating), and how the counted read calls were binned."""
    payload = FilePayload(args.seed, 0, np.full(count, size, dtype=np.int64), args.payload)
    order = np.random.default_rng(args.seed).permutation(count) if args.order == "random" else np.arange(count)
    rows = []
    for name in names:
        fmt_name, options = VARIANTS.get(name, (name, {}))
        fmt = get_format(fmt_name, **options)
        path = root / f"{fmt_name}{fmt.suffix}"
        if not path.exists():
            fmt.write(path, payload)
        files = [path, *fmt.sidecars(path)]
        with get_format(fmt_name).open(path) as r:
            biggest = max(r.record_bytes(i) for i in range(r.num_samples))
        layers: list[tuple] = []
        with_c = lane_reader(fmt_name, options, path, order, biggest, args.batch, True, layers)
        without = lane_reader(fmt_name, options, path, order, biggest, args.batch, False, layers)
        for cache in ("cold", "warm"):
            on: list[float] = []
            off: list[float] = []
            for _ in range(args.repeat):
                for fn, out in ((with_c, on), (without, off)):
                    if cache == "warm":
                        fn()
                    out.append(one_pass(fn, files, cache == "cold")[0])
            last = fs_layer(layers[-1])
            layers.clear()
            calls = last.posix_reads or 0
            rows.append({"workload": f"{count} x {format_size(size)}", "cache": cache, "format": name,
                         "with_s": count / statistics.median(on), "without_s": count / statistics.median(off),
                         "calls": calls, "from_app": (last.posix_size_from_app or 0) / calls if calls else 0.0,
                         "approx": (last.posix_size_approx or 0) / calls if calls else 0.0})
    return rows


def print_counters(rows: list[dict]) -> None:
    head = (f"{'workload':>14} {'cache':>5} {'format':>18} {'with counters':>14} {'without':>11} {'ratio':>6} "
            f"{'calls':>7} {'from app':>8} {'approx':>7}")
    print("# the kernel lane's samples/s with its file-system counters and without them, same run")
    print(head)
    print("-" * len(head))
    for r in rows:
        print(f"{r['workload']:>14} {r['cache']:>5} {r['format']:>18} {r['with_s']:>14.0f} {r['without_s']:>11.0f} "
              f"{r['with_s'] / r['without_s']:>6.3f} {r['calls']:>7} {r['from_app']:>8.0%} {r['approx']:>7.0%}")
    print()


def bench_workload(root: Path, count: int, size: int, names: list[str], args: argparse.Namespace) -> list[dict]:
    sizes = np.full(count, size, dtype=np.int64)
    payload = FilePayload(args.seed, 0, sizes, args.payload)
    rng = np.random.default_rng(args.seed)
    order = rng.permutation(count) if args.order == "random" else np.arange(count)

    ref = root / "reference.raw"
    with open(ref, "wb") as f:
        for _, _, b in payload.iter_groups():
            f.write(memoryview(b))
        f.flush()
        os.fsync(f.fileno())
    offsets = np.concatenate([[0], np.cumsum(sizes)])
    cases: dict[str, list[Path]] = {REFERENCE: [ref]}  # name -> the files a pass reads (data file + sidecars)
    for name in names:
        fmt_name, options = VARIANTS.get(name, (name, {}))
        fmt = get_format(fmt_name, **options)
        path = root / f"{fmt_name}{fmt.suffix}"
        if not path.exists():
            fmt.write(path, payload)
        cases[name] = [path, *fmt.sidecars(path)]

    readers = {}
    for name, files in cases.items():
        if name == REFERENCE:
            readers[name] = raw_reader(ref, offsets, order, np.empty(size, dtype=np.uint8))
        else:
            fmt_name, options = VARIANTS.get(name, (name, {}))
            with get_format(fmt_name).open(files[0]) as r:
                biggest = max(r.record_bytes(i) for i in range(r.num_samples))
            readers[name] = format_reader(fmt_name, options, files[0], order, np.empty(biggest, dtype=np.uint8))

    rows = []
    for cache in ("cold", "warm"):
        # every repetition runs every case in turn, so drift (other load, host cache) hits them all alike
        passes: dict[str, list[tuple[float, int, float, int]]] = {name: [] for name in cases}
        for _ in range(args.repeat):
            for name, files in cases.items():
                if cache == "warm":
                    readers[name]()
                passes[name].append(one_pass(readers[name], files, cache == "cold"))
        for name, files in cases.items():
            runs = passes[name]
            secs = statistics.median(r[0] for r in runs)
            nbytes = runs[0][1]
            rows.append({"workload": f"{count} x {format_size(size)}", "cache": cache, "format": name,
                         "seconds": secs, "samples_s": count / secs, "mib_s": nbytes / secs / 2**20,
                         "bytes_read": nbytes, "storage_bytes": statistics.median(r[3] for r in runs),
                         "disk_bytes": sum(f.stat().st_size for f in files),
                         "residency_before": max(r[2] for r in runs) if cache == "cold" else min(r[2] for r in runs)})
    return rows


def print_rows(rows: list[dict]) -> None:
    head = f"{'workload':>14} {'cache':>5} {'format':>18} {'samples/s':>11} {'MiB/s':>9} {'vs preadv':>9} " \
           f"{'read/sample':>11} {'on disk':>10} {'resident':>8} {'from dev':>8}"
    print(head)
    print("-" * len(head))
    for (wl, cache), group in _groups(rows).items():
        ref = next(r for r in group if r["format"] == REFERENCE)
        for r in group:
            per = r["bytes_read"] / ref["bytes_read"]
            print(f"{wl:>14} {cache:>5} {r['format']:>18} {r['samples_s']:>11.0f} {r['mib_s']:>9.1f} "
                  f"{r['samples_s'] / ref['samples_s']:>9.2f} {per:>11.3f} {format_size(r['disk_bytes']):>10} "
                  f"{r['residency_before']:>8.0%} {r['storage_bytes'] / r['bytes_read']:>8.2f}")
        print()


def _groups(rows: list[dict]) -> dict[tuple[str, str], list[dict]]:
    out: dict[tuple[str, str], list[dict]] = {}
    for r in rows:
        out.setdefault((r["workload"], r["cache"]), []).append(r)
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--workloads", default="512x64KiB,4096x4KiB", help="COUNTxSIZE,... (default: %(default)s)")
    p.add_argument("--formats", default=",".join([*sorted(FORMATS), *VARIANTS]), help="default: all, + decode rows")
    p.add_argument("--order", choices=("seq", "random"), default="seq", help="sample order within a pass")
    p.add_argument("--repeat", type=int, default=3, help="timed passes per case; the median is reported")
    p.add_argument("--payload", default="random", help="random | zeros | a compressibility ratio (default random)")
    p.add_argument("--seed", type=int, default=42)
    p.add_argument("--batch", type=int, default=32, help="samples per batch of the kernel lane (default 32)")
    p.add_argument("--counters-only", action="store_true", help="only the table of the counters' cost")
    p.add_argument("--no-counters", action="store_true", help="leave out the table of the counters' cost")
    p.add_argument("--dir", default=None, help="where to write the files (default: a temporary directory here)")
    args = p.parse_args(argv)
    names = [n.strip() for n in args.formats.split(",") if n.strip()]
    bad = [n for n in names if n not in FORMATS and n not in VARIANTS]
    if bad:
        p.error(f"unknown format(s) {', '.join(bad)}: choose from {', '.join([*sorted(FORMATS), *VARIANTS])}")
    base = Path(args.dir or tempfile.mkdtemp(prefix="ddlio-formats-bench-", dir="."))
    base.mkdir(parents=True, exist_ok=True)
    print(f"# same samples in every format; median of {args.repeat} passes; order={args.order}, "
          f"payload={args.payload}; files under {base}")
    print("# vs preadv = the format's samples/s / plain os.preadv's samples/s of the same payload bytes, same run;")
    print("# read/sample = bytes a read returned / payload bytes (framing, encoded size); resident = page-cache "
          "residency before the pass;")
    print("# from dev = bytes fetched from storage (/proc/self/io, readahead included) / bytes the reads returned\n")
    if args.batch < 1 or (args.counters_only and args.no_counters):
        p.error("--batch must be >= 1, and --counters-only and --no-counters exclude each other")
    rows, counter_rows = [], []
    try:
        for wl in args.workloads.split(","):
            count, size = wl.lower().split("x", 1)
            root = base / wl
            root.mkdir(exist_ok=True)
            if not args.counters_only:
                rows += bench_workload(root, int(count), parse_size(size), names, args)
            if not args.no_counters and posix.available():
                counter_rows += bench_counters(root, int(count), parse_size(size), names, args)
    finally:
        if args.dir is None:
            shutil.rmtree(base, ignore_errors=True)
    if rows:
        print_rows(rows)
    if counter_rows:
        print_counters(counter_rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
