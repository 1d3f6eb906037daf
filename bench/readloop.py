"""The kernel's read loops against fio and a bare loop, in one process, on one page-cached file.

For each request size, one file of records of that size (``--file-size`` bytes) is written, read once (cached),
and then read whole in each ``--orders`` (``seq``: record after record; ``random``: every record once, in a
seeded shuffled order), ``--repeat`` times in alternation, by:

- fio: one psync job replaying that very order (an iolog) at that block size (its bandwidth, as a time per read);
- the kernel's C loop (``experiments/kernel/_readrun.c``): a :class:`~experiments.kernel.lanes.Lane` reading
  batches of ``--batch`` records, with the file-system layer's per-batch counters, every read timed;
- the kernel's Python loop: the same Lane with the C loop switched off;
- a bare Python loop: ``os.preadv`` of each record into one buffer, nothing timed or counted (offsets from a
  list computed before the pass, as fio's come from its parsed log).

Printed per size: the median time per read (µs; the whole pass / reads), the time inside the read calls as the
loops timed them (the loop's own cost is the difference), and each loop's time per read over fio's. No MPI, no
job: what is left between the kernel and fio here is the loop.

    python bench/readloop.py                              # 4KiB,64KiB,1MiB, seq+random, 256 MiB, 9 repetitions
    python bench/readloop.py --sizes 64KiB --orders random --file-size 1GiB --repeat 15
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from formats_read import OneFile  # noqa: E402
from vs_fio import write_iolog  # noqa: E402

from ddlio.units import format_size, parse_size  # noqa: E402
from experiments.formats.indexed import IndexedReader, offsets_of, write_index  # noqa: E402
from experiments.kernel.cache import warm  # noqa: E402
from experiments.kernel.lanes import EpochArrays, Lane, native_read_run  # noqa: E402


class _Fmt:
    loads_whole = False

    def open(self, path: str) -> IndexedReader:
        return IndexedReader(path)


def lane_pass(path: str, size: int, order: np.ndarray, batch: int, native: bool) -> tuple[float, float]:
    """One pass of a Lane over the file's records in ``order``: (ns per read, ns per read inside the read
    calls)."""
    n = len(order)
    ln = Lane(_Fmt(), [path], size, trace=False, fs_layer=True)
    if not native:
        ln.read_run = None
    ep = EpochArrays(OneFile(n), order, False, sizes_needed=True)  # type: ignore[arg-type]
    t = time.perf_counter_ns()
    got = sum(ln.read_range(k0, min(k0 + batch, n), ep) for k0 in range(0, n, batch))
    dt = time.perf_counter_ns() - t
    ln.close_all()
    if got != n * size:
        raise SystemExit(f"the lane read {got} bytes of {n * size}")
    return dt / n, sum(ep.lat) / n


def bare_pass(path: str, size: int, order: np.ndarray) -> float:
    """ns per read of a bare ``os.preadv`` loop over the file's records in ``order``."""
    fd = os.open(path, os.O_RDONLY)
    iov = [memoryview(np.empty(size, dtype=np.uint8))]
    offsets = (order * size).tolist()
    t = time.perf_counter_ns()
    got = 0
    for off in offsets:
        got += os.preadv(fd, iov, off)
    dt = time.perf_counter_ns() - t
    os.close(fd)
    if got != len(order) * size:
        raise SystemExit(f"the bare loop read {got} bytes of {len(order) * size}")
    return dt / len(order)


def fio_pass(log: Path, size: int, n: int, scratch: Path) -> float:
    """ns per read of fio (psync) replaying the iolog ``log`` of ``n`` reads of ``size`` bytes: its runtime over
    its reads."""
    job = scratch / "job.fio"
    job.write_text(f"[r]\nioengine=psync\ninvalidate=0\nreplay_no_stall=1\nread_iolog={log}\n")
    out = subprocess.run(["fio", "--output-format=json", str(job)], capture_output=True, text=True, timeout=600)
    if out.returncode != 0:
        raise SystemExit(f"fio failed: {out.stderr.strip() or out.stdout.strip()}")
    read = json.loads(out.stdout)["jobs"][0]["read"]
    if read["io_bytes"] != n * size:
        raise SystemExit(f"fio read {read['io_bytes']} bytes of {n * size}")
    return read["io_bytes"] / read["bw_bytes"] * 1e9 / n


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", default="4KiB,64KiB,1MiB", help="request sizes (default %(default)s)")
    ap.add_argument("--file-size", default="256MiB", help="bytes of the file read per pass (default %(default)s)")
    ap.add_argument("--orders", default="seq,random", help="orders of the reads (default %(default)s)")
    ap.add_argument("--batch", type=int, default=64, help="records per batch of the lanes (default %(default)s)")
    ap.add_argument("--repeat", type=int, default=9, help="passes of each (median reported); default %(default)s")
    ap.add_argument("--data", help="directory for the file (default: a temporary directory, removed after)")
    args = ap.parse_args(argv)
    if shutil.which("fio") is None:
        print("fio not found: apt-get install fio", file=sys.stderr)
        return 2
    native = native_read_run() is not None
    if not native:
        print("note: the C read loop is not built here (pip install -e . with a C compiler); its column repeats "
              "the Python loop's", file=sys.stderr)
    tmp = None
    data = Path(args.data) if args.data else Path(tmp := tempfile.mkdtemp(prefix="ddlio-readloop-"))
    rows = []
    try:
        for size in [parse_size(s) for s in args.sizes.split(",")]:
            n = max(1, parse_size(args.file_size) // size)
            path = str(data / f"records-{size}.bin")
            with open(path, "wb") as f:
                chunk = np.random.default_rng(size).integers(0, 256, size=min(n * size, 64 << 20), dtype=np.uint8)
                left = n * size
                while left:
                    left -= f.write(chunk[: min(left, len(chunk))].tobytes())
            write_index(path, offsets_of([size] * n))
            warm([path])
            for order_name in args.orders.split(","):
                if order_name not in ("seq", "random"):
                    raise SystemExit(f"--orders: {order_name!r} is not one of seq, random")
                order = np.arange(n, dtype=np.int64)
                if order_name == "random":
                    order = np.random.default_rng(n).permutation(n)
                log = write_iolog(data / "order.iolog", path, order, size)
                runs: dict[str, list[tuple[float, float]]] = {"fio": [], "C loop": [], "Python loop": [], "bare": []}
                for _ in range(args.repeat):
                    runs["fio"].append((fio_pass(log, size, n, data), 0.0))
                    runs["C loop"].append(lane_pass(path, size, order, args.batch, native))
                    runs["Python loop"].append(lane_pass(path, size, order, args.batch, False))
                    runs["bare"].append((bare_pass(path, size, order), 0.0))
                med = {k: (statistics.median(a for a, _ in v), statistics.median(b for _, b in v))
                       for k, v in runs.items()}
                rows.append((format_size(size), order_name, med))
            os.unlink(path)
            os.unlink(path + ".idx")
    finally:
        if tmp:
            shutil.rmtree(tmp, ignore_errors=True)
    print(f"{'size':>9} {'order':>6} {'':12} {'µs/read':>8} {'in reads':>9} {'÷ fio':>6}")
    for size, order_name, med in rows:
        for name, (per, inside) in med.items():
            print(f"{size:>9} {order_name:>6} {name:12} {per / 1e3:8.2f} "
                  f"{inside / 1e3 if inside else float('nan'):9.2f} {per / med['fio'][0]:6.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
