"""Does the time between eviction and reading change a cold read? A test of the layer under the page cache.

A cold read (the file evicted from the client's page cache, then read) should not care whether the eviction came
just before the read or seconds before it: the same bytes come from the same storage. This reads one file of
``--size`` bytes (written once, fsync'd), cold every time, in ``--block``-byte reads, in three conditions
interleaved over ``--rounds`` rounds:

- ``evict, read``: evicted right before the read (what ``cache=cold`` does before every epoch);
- ``wait, evict, read``: the file stays cached for ``--wait`` seconds, then is evicted right before the read;
- ``evict, wait, read``: evicted, then ``--wait`` seconds pass, then the read.

The first two are the reference for each other; if the third is slower, what slows a cold read is not the
storage but the memory the read lands in: in a VM whose host takes back the guest's free memory (virtio-balloon
free page reporting; on this VM ``page_reporting.page_reporting_order=11`` is on the kernel command line, see
``/proc/cmdline``), pages freed seconds ago are gone from the host and every read into them faults there. It
prints each condition's median MiB/s and its ratio to ``evict, read``, and whether ``/proc/cmdline`` asks for
free page reporting. No ddlio code is used: it tests the platform ddlio measures on.

    python bench/evict_wait.py [--size 256MiB] [--block 128KiB] [--wait 5] [--rounds 5] [--dir DIR]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from ddlio.units import parse_size  # noqa: E402


def evict(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)


def read(path: Path, block: int) -> float:
    """Read the file through in ``block``-byte reads; MiB/s."""
    buf = bytearray(block)
    fd = os.open(path, os.O_RDONLY)
    try:
        n, t = 0, time.perf_counter()
        while got := os.readv(fd, [buf]):
            n += got
        return n / (time.perf_counter() - t) / 2**20
    finally:
        os.close(fd)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--size", default="256MiB")
    ap.add_argument("--block", default="128KiB")
    ap.add_argument("--wait", type=float, default=5.0, help="seconds (default 5)")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--dir", help="where the file goes (default: a temporary directory under the repository)")
    a = ap.parse_args()
    size, block = parse_size(a.size), parse_size(a.block)
    d = Path(tempfile.mkdtemp(prefix="ddlio-evict-wait-", dir=a.dir or ROOT))
    path = d / "f.bin"
    try:
        with open(path, "wb") as f:
            for i in range(0, size, 8 << 20):
                f.write(np.random.default_rng(i).bytes(min(8 << 20, size - i)))
            f.flush()
            os.fsync(f.fileno())
        evict(path)
        read(path, block)  # its first read since it was written, untimed
        runs: dict[str, list[float]] = {"evict, read": [], "wait, evict, read": [], "evict, wait, read": []}
        for r in range(a.rounds):
            evict(path)
            runs["evict, read"].append(read(path, block))
            time.sleep(a.wait)
            evict(path)
            runs["wait, evict, read"].append(read(path, block))
            evict(path)
            time.sleep(a.wait)
            runs["evict, wait, read"].append(read(path, block))
            print(f"round {r}: " + "  ".join(f"{k} {v[-1]:6.0f}" for k, v in runs.items()), flush=True)
        ref = statistics.median(runs["evict, read"])
        print(f"\n{size / 2**20:.0f} MiB in {block // 1024} KiB reads, cold every time, wait {a.wait:g} s, "
              f"{a.rounds} rounds (MiB/s, median (min-max)):")
        for k, v in runs.items():
            med = statistics.median(v)
            print(f"  {k:18} {med:7.0f} ({min(v):.0f}-{max(v):.0f})  ratio {med / ref:.2f}")
        cmdline = Path("/proc/cmdline").read_text() if Path("/proc/cmdline").exists() else ""
        reporting = [w for w in cmdline.split() if w.startswith("page_reporting")]
        print(f"free page reporting on the kernel command line: {' '.join(reporting) or 'not asked for'}")
    finally:
        path.unlink(missing_ok=True)
        d.rmdir()
    return 0


if __name__ == "__main__":
    sys.exit(main())
