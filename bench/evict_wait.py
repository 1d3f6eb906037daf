"""Does the time between eviction and reading change a cold read? A test of the layer under the page cache.

A cold read (the file evicted from the client's page cache, then read) should not care whether the eviction came
just before the read or seconds before it: the same bytes come from the same storage. This reads one file of
``--size`` bytes (written once, fsync'd), cold every time, in ``--block``-byte reads, in three conditions
interleaved over ``--rounds`` rounds:

- ``evict, read``: evicted right before the read (what ``cache=cold`` does before every epoch);
- ``wait, evict, read``: the file stays cached for ``--wait`` seconds, then is evicted right before the read;
- ``evict, wait, read``: evicted, then ``--wait`` seconds pass, then the read.

and, with ``--writes``, the same for a page-cache write in ``--write-block``-byte calls (4 MiB; ``write`` calls
only, the fsync after them untimed):

- ``free, write``: the file written last is removed (its page cache freed) right before a new one is written;
- ``free, wait, write``: removed, then ``--wait`` seconds pass, then the new one is written.

On the development VM (kernel 6.18, ext4) the writes show it only in large calls: in 128 KiB calls a write after
the wait ran as fast as one right after the free, in 4 MiB or whole-file calls at a quarter to a sixth (the page
cache then takes large folios, from the high-order free blocks that are the ones handed back).

The first two are the reference for each other; if the third (or the last) is slower, what slows a cold read is not the
storage but the memory the read lands in: in a VM whose host takes back the guest's free memory (virtio-balloon
free page reporting; on this VM ``page_reporting.page_reporting_order=11`` is on the kernel command line, see
``/proc/cmdline``), pages freed seconds ago are gone from the host and every read into them faults there. It
prints each condition's median MiB/s and its ratio to ``evict, read``, and whether ``/proc/cmdline`` asks for
free page reporting. No ddlio code is used: it tests the platform ddlio measures on.

    python bench/evict_wait.py [--size 256MiB] [--block 128KiB] [--wait 5] [--rounds 5] [--dir DIR]
    python bench/evict_wait.py --writes [--write-block 4MiB] --size 1GiB --wait 10 --rounds 3

A benchmark that compares tools' writes (bench/checkpoint_vs_fio.py, checkpoint_vs_torch.py) must start each
tool's run the same time after the last files were removed, or wait long enough (its ``--settle``) that every run
starts from memory the host took back: ddlio's job, fio and torchrun take 0.1 to 5 s to reach their first write.
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


def balloon_reporting() -> str:
    """Whether a virtio balloon offers free page reporting (its feature bit 5, VIRTIO_BALLOON_F_REPORTING):
    ``yes``, ``no``, or ``no balloon``."""
    for dev in Path("/sys/bus/virtio/devices").glob("*"):
        driver = dev / "driver"
        if driver.exists() and driver.resolve().name == "virtio_balloon":
            features = (dev / "features").read_text().strip()
            return "yes" if len(features) > 5 and features[5] == "1" else "no"
    return "no balloon"


def write(path: Path, data: np.ndarray, block: int) -> float:
    """Write ``data`` to a new file ``path`` in ``block``-byte calls, then fsync (untimed); MiB/s of the calls."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        n, t = 0, time.perf_counter()
        for at in range(0, len(data), block):
            n += os.pwrite(fd, data[at:at + block], at)
        dt = time.perf_counter() - t
        os.fsync(fd)
        return n / dt / 2**20
    finally:
        os.close(fd)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--size", default="256MiB")
    ap.add_argument("--block", default="128KiB")
    ap.add_argument("--wait", type=float, default=5.0, help="seconds (default 5)")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--writes", action="store_true", help="also the two write conditions")
    ap.add_argument("--write-block", default="4MiB", help="bytes of each write call (default %(default)s)")
    ap.add_argument("--dir", help="where the file goes (default: a temporary directory under the repository)")
    a = ap.parse_args()
    size, block, wblock = parse_size(a.size), parse_size(a.block), parse_size(a.write_block)
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
        if a.writes:
            runs |= {"free, write": [], "free, wait, write": []}
            data = np.frombuffer(np.random.default_rng(1).bytes(size), dtype=np.uint8)
            written = d / "w.bin"
            write(written, data, wblock)  # the file each write condition removes first
        for r in range(a.rounds):
            evict(path)
            runs["evict, read"].append(read(path, block))
            time.sleep(a.wait)
            evict(path)
            runs["wait, evict, read"].append(read(path, block))
            evict(path)
            time.sleep(a.wait)
            runs["evict, wait, read"].append(read(path, block))
            if a.writes:
                written.unlink()
                runs["free, write"].append(write(written, data, wblock))
                written.unlink()
                time.sleep(a.wait)
                runs["free, wait, write"].append(write(written, data, wblock))
            print(f"round {r}: " + "  ".join(f"{k} {v[-1]:6.0f}" for k, v in runs.items()), flush=True)
        ref = statistics.median(runs["evict, read"])
        calls = f"{block // 1024} KiB reads" + (f", {wblock // 1024} KiB writes" if a.writes else "")
        print(f"\n{size / 2**20:.0f} MiB in {calls}, reads cold every time, wait {a.wait:g} s, "
              f"{a.rounds} rounds (MiB/s, median (min-max); ratio to the first of its kind):")
        for k, v in runs.items():
            med = statistics.median(v)
            first = statistics.median(runs["free, write"]) if "write" in k else ref
            print(f"  {k:18} {med:7.0f} ({min(v):.0f}-{max(v):.0f})  ratio {med / first:.2f}")
        cmdline = Path("/proc/cmdline").read_text() if Path("/proc/cmdline").exists() else ""
        reporting = [w for w in cmdline.split() if w.startswith("page_reporting")]
        print(f"free page reporting on the kernel command line: {' '.join(reporting) or 'not asked for'}; "
              f"offered by a virtio balloon: {balloon_reporting()}")
    finally:
        path.unlink(missing_ok=True)
        (d / "w.bin").unlink(missing_ok=True)
        d.rmdir()
    return 0


if __name__ == "__main__":
    sys.exit(main())
