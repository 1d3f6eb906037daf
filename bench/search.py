"""Does an adaptive search find a near-best configuration with a third of the grid's points?

A space of 48 points (format x read_threads x batch_size x shuffle; 16 MiB read twice, cold, with 5 ms of emulated
compute per batch, so that read-ahead threads and batch size change the samples/s a loader gets on this machine) is
measured in full once by the grid sweeper. Then Hydra's Optuna sweeper searches the same space through the ddlio
launcher with at most a third of the points (16 trials), for several seeds. Every trial is answered from the store
(the grid measured it), so the searches cost seconds and the comparison is exact: the best objective each search
found against the grid's best, beside what a blind search of as many distinct random points finds on average.

    python bench/search.py                          # 48-point grid (a few minutes the first time), 8 seeds
    python bench/search.py --seeds 1,2,3 --trials 12 --dir /tmp/s   # reuse /tmp/s: the grid is measured once
"""

from __future__ import annotations

import argparse
import math
import os
import re
import sqlite3
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OBJECTIVE = "samples_per_s"
WORKLOAD = ["workload=tiny", "workload.samples=512", "workload.sample_size=32KiB", "workload.samples_per_file=128",
            "workload.epochs=2", "workload.compute_time=0.005", f"objective={OBJECTIVE}"]
GRID = ["format=hdf5,tfrecord,npz", "workload.read_threads=0,1,2,3", "workload.batch_size=4,32",
        "workload.shuffle=none,sample"]
# (Optuna's sweeper reads range(0,3) as 0..3 inclusive; choice() names the grid's values exactly)
SEARCH = ["format=choice(hdf5,tfrecord,npz)", "workload.read_threads=choice(0,1,2,3)",
          "workload.batch_size=choice(4,32)", "workload.shuffle=choice(none,sample)"]


def sweep(args: list[str]) -> str:
    p = subprocess.run([sys.executable, str(ROOT / "sweep.py"), "-m", *args], cwd=ROOT, capture_output=True,
                       text=True, env=dict(os.environ, PYTHONPATH=str(ROOT)))
    if p.returncode != 0:
        sys.exit(f"sweep.py {' '.join(args)} failed ({p.returncode}):\n{p.stdout[-2000:]}\n{p.stderr[-2000:]}")
    return p.stdout


def blind_expected_best(values: list[float], k: int) -> float:
    """Expected best of ``k`` distinct points drawn uniformly from ``values`` (exact, over all k-subsets)."""
    v = sorted(values)
    n = len(v)
    return sum(v[i] * math.comb(i, k - 1) for i in range(k - 1, n)) / math.comb(n, k)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seeds", default="1,2,3,4,5,6,7,8")
    ap.add_argument("--trials", type=int, default=16, help="trials per search (a third of the 48 points)")
    ap.add_argument("--startup", type=int, default=5,
                    help="TPE's random trials before it models the objective (Hydra's default, 10, leaves 6 of 16)")
    ap.add_argument("--dir", help="data_root and store (default: a temporary directory; reuse one to skip the grid)")
    ap.add_argument("--keep", action="store_true", help="keep the temporary directory")
    a = ap.parse_args()
    base = Path(a.dir) if a.dir else Path(tempfile.mkdtemp(prefix="ddlio-search-"))
    where = [f"data_root={base / 'data'}", f"db={base / 'r.db'}"]
    out = sweep([*GRID, *WORKLOAD, *where])
    with sqlite3.connect(base / "r.db") as c:
        # the grid's points: those of the sweep just run (a reused --dir may hold others)
        values = [r[0] for r in c.execute(
            f"SELECT p.{OBJECTIVE} FROM points p JOIN sweep_points sp ON sp.point_key = p.point_key "
            "WHERE p.status = 'completed' AND sp.sweep_id = "
            "(SELECT id FROM sweeps WHERE n_points = 48 ORDER BY started_utc DESC LIMIT 1)")]
    if len(values) < 48:
        sys.exit(f"the grid stored {len(values)} completed points, expected 48:\n{out[-2000:]}")
    best = max(values)
    print(f"grid: {len(values)} points, {OBJECTIVE} {min(values):.0f} .. {best:.0f} (best)")
    ratios = []
    for seed in [int(s) for s in a.seeds.split(",")]:
        found = sweep(["hydra/sweeper=optuna", f"hydra.sweeper.n_trials={a.trials}", "hydra.sweeper.n_jobs=2",
                       f"hydra.sweeper.sampler.seed={seed}",
                       f"hydra.sweeper.sampler.n_startup_trials={a.startup}", *SEARCH, *WORKLOAD, *where])
        m = re.search(rf"best of (\d+) configurations by {OBJECTIVE} \(maximised\): (\S+)\n  (.*?)    \(", found)
        if not m:
            sys.exit(f"no best line in the search's output:\n{found[-2000:]}")
        measured = len(re.findall(r"^\[\d+/\d+\] ", found, re.M))
        distinct, value = int(m.group(1)), float(m.group(2))
        ratios.append(value / best)
        blind = blind_expected_best(values, distinct)
        print(f"seed {seed}: {distinct} distinct points of {a.trials} trials, best {value:.0f} = "
              f"{100 * value / best:.1f}% of the grid's best (a blind search of {distinct}: {100 * blind / best:.1f}% "
              f"on average); measured anew: {measured}; {' '.join(m.group(3).split()[:4])}")
    within = sum(r >= 0.9 for r in ratios)
    print(f"within 10% of the grid's best: {within} of {len(ratios)} seeds")
    if not a.keep and not a.dir:
        import shutil

        shutil.rmtree(base, ignore_errors=True)
    else:
        print(f"kept: {base}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
