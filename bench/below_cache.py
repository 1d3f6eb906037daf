"""What each cache mode measures on this machine, with caches below the client that no client can evict.

For each format, a fresh dataset is generated and measured with ``repeat=0..R-1`` (every repetition its own point,
2 epochs each) in three modes, each on datasets of its own (a different ``seed``, so every mode starts fresh):

- ``cold/no-settle`` (``settle=false``): the client's page cache evicted and verified before every epoch; the
  first epoch of repeat 0 is the dataset's first read since it was generated;
- ``cold (default)`` (``settle=true``): the same, after one untimed settling read of the fresh dataset;
- ``storage_cold``: before every epoch an untimed read of a flush file of ``--flush-size`` bytes, then the client's
  eviction.

It prints, per format and mode, the first read's bandwidth (MiB/s; only where an epoch was a first read), the
repeats' mean and their coefficient of variation across repetitions (each repetition's whole-run bandwidth), the
flush read's rate, and the reference: the same files read right after each sweep by a plain sequential reader
(Python ``readv`` of the sample size, evicted before every pass: no ddlio code), as many repetitions of as many
epochs, with its CV. That CV is this platform's noise floor for windows of that length: ddlio's CV cannot be
expected below it. Everything is measured by ``sweep.py`` into a store of its own under a temporary directory
(``--keep`` keeps it), so the numbers are the ones a user would get.

    python bench/below_cache.py                                   # hdf5, tfrecord, npz; 5 repeats; 256 MiB
    python bench/below_cache.py --formats bin --repeats 3 --flush-size 16GiB --data-root /scratch/x
"""

from __future__ import annotations

import argparse
import glob
import os
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

MODES = {
    "cold/no-settle": ["workload.cache=cold", "workload.settle=false"],
    "cold (default)": ["workload.cache=cold", "workload.settle=true"],
    "storage_cold": ["workload.cache=storage_cold"],
}


def sweep(args: list[str]) -> None:
    p = subprocess.run([sys.executable, str(ROOT / "sweep.py"), *args], cwd=ROOT, capture_output=True, text=True,
                       env=dict(os.environ, PYTHONPATH=str(ROOT)))
    if p.returncode != 0:
        sys.exit(f"sweep.py {' '.join(args)} failed:\n{p.stdout[-2000:]}\n{p.stderr[-2000:]}")


def plain_reads(files: list[str], block: int, repeats: int, epochs: int) -> list[float]:
    """The reference reader: per repetition, ``epochs`` passes over the files (each evicted first, read
    sequentially in ``block``-byte reads); returns each repetition's bandwidth, MiB/s (bytes / read time)."""
    buf = bytearray(block)
    out = []
    for _ in range(repeats):
        nbytes, secs = 0, 0.0
        for _ in range(epochs):
            for f in files:
                fd = os.open(f, os.O_RDONLY)
                try:
                    os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
                    t = time.perf_counter()
                    while got := os.readv(fd, [buf]):
                        nbytes += got
                    secs += time.perf_counter() - t
                    os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
                finally:
                    os.close(fd)
        out.append(nbytes / secs / 2**20)
    return out


def cv(xs: list[float]) -> float:
    return statistics.stdev(xs) / statistics.mean(xs) if len(xs) > 1 else float("nan")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--formats", default="hdf5,tfrecord,npz")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--workload", default="default", help="workload preset (default: 2048 x 128 KiB = 256 MiB)")
    ap.add_argument("--flush-size", default="8GiB", help="storage_cold's flush file (bytes or units)")
    ap.add_argument("--modes", default=",".join(MODES), help=f"comma-separated, of: {', '.join(MODES)}")
    ap.add_argument("--data-root", help="where datasets and the flush file go (default: a temporary directory)")
    ap.add_argument("--keep", action="store_true", help="keep the temporary directory (datasets, store)")
    a = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="ddlio-below-"))
    data_root = Path(a.data_root) if a.data_root else tmp / "data"
    db = tmp / "r.db"
    modes = [m.strip() for m in a.modes.split(",")]
    rows = []
    try:
        for i, mode in enumerate(modes):
            for fmt in a.formats.split(","):
                seed = 1000 + i  # every mode reads datasets of its own, freshly generated
                reps = ",".join(map(str, range(a.repeats)))
                sweep(["-m", f"format={fmt}", f"workload={a.workload}", f"repeat={reps}", f"seed={seed}",
                       f"data_root={data_root}", f"db={db}", f"workload.flush_size={a.flush_size}", *MODES[mode]])
                with sqlite3.connect(db) as c:
                    key, size, epochs = c.execute("SELECT dataset_key, sample_size, epochs FROM points WHERE "
                                                  "format=? AND seed=? LIMIT 1", (fmt, seed)).fetchone()
                files = sorted(f for f in glob.glob(str(data_root / "datasets" / f"{fmt}-{key[:20]}" / "part-*")))
                ref = plain_reads(files, int(size), a.repeats, int(epochs))
                rows.append((mode, fmt, seed, ref))
        with sqlite3.connect(db) as c:
            print(f"{'format':9} {'mode':24} {'first read':>11} {'repeats':>9} {'CV of reps':>10} {'flush':>9}"
                  f" {'plain':>7} {'plain CV':>9}   (MiB/s)")
            for mode, fmt, seed, ref in rows:
                pts = c.execute("SELECT point_key, bandwidth_mib_s FROM points WHERE format=? AND seed=? AND "
                                "status='completed'", (fmt, seed)).fetchall()
                keys = [k for k, _ in pts]
                marks = ",".join("?" * len(keys))
                ep = c.execute(f"SELECT first_read, bandwidth_mib_s, flush_mib_s FROM epochs WHERE point_key IN "
                               f"({marks})", keys).fetchall()
                first = [bw for f, bw, _ in ep if f]
                later = [bw for f, bw, _ in ep if not f]
                per_rep = [bw for _, bw in pts]
                flush = [fl for _, _, fl in ep if fl]
                print(f"{fmt:9} {mode:24} {(f'{statistics.mean(first):.0f}' if first else '-'):>11} "
                      f"{statistics.mean(later):9.0f} {cv(per_rep):10.1%} "
                      f"{(f'{statistics.mean(flush):.0f}' if flush else '-'):>9} {statistics.mean(ref):7.0f} "
                      f"{cv(ref):9.1%}")
    finally:
        if a.keep:
            print(f"kept: {tmp}")
        else:
            import shutil

            shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
