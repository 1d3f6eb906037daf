"""Analysis at a million points: figures, guidelines, diagnose and report of a synthetic store, each command run
as a user runs it (``python -m analysis <command> --db ...``, its own process), timed with its peak memory.

The store is a real SQLite file with the ddlio schema, filled by bulk inserts (not ``Store.record`` calls):
3 formats × 2 access modes × 6 stripe counts × 5 node counts × 3 sample sizes = 540 configurations, repeated until
the point count is reached (1,000,000 points: 1,852 repetitions each), with a realistic stored config per point,
format options, layouts, the file-system layer's reads, first reads, unverified caches and failed points, and one
epoch per completed point with its 160-bucket latency histogram and its ranks' rows. Bandwidth follows a planted
model (peak at stripe 8, TFRecord ahead from 4 nodes) with 5% noise.

Each command's wall time (s) and peak resident memory (MiB, the process's ``ru_maxrss`` from ``wait4``, taken by a
small launcher process so that the bench's own memory never counts) is shown beside the reference measured in the
same run: reading the completed points' analysis columns from SQLite with one plain query into pandas, in a process
of its own. Goal: every command under 60 s and 2 GiB.

    python bench/analysis_scale.py                                # 1,000,000 points
    python bench/analysis_scale.py --points 20000 --keep /tmp/scale   # keep store, outputs and logs (and reuse)
    python bench/analysis_scale.py --keep /tmp/scale --only diagnose
"""

from __future__ import annotations

import argparse
import json
import os
import sqlite3
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent))
from childpeak import run_measured_tree

from ddlio.identity import config_digest

FORMATS = ["hdf5", "tfrecord", "npz"]
ACCESS = ["shared", "fpp"]
STRIPES = [1, 2, 4, 8, 16, 32]
NODES = [1, 2, 4, 8, 12]
SIZES = [16 * 1024, 128 * 1024, 1024 * 1024]
PPN = 4
SAMPLES = 2048
#: each format's stored options (what a real sweep stores: the knobs of that format at their defaults)
FORMAT_OPTIONS = {
    "hdf5": {"layout": "bytes", "chunk_samples": 0, "compression": "none", "sieve_buf_size": 65536,
             "rdcc_nbytes": 1048576, "rdcc_nslots": 521, "driver": "sec2", "fs_strategy": "default",
             "fs_page_size": 4096, "page_buf_size": 0, "alignment": 1, "alignment_threshold": 1},
    "tfrecord": {"compression": "none", "records_per_shard": 0},
    "npz": {"compressed": False},
}
#: share of the points stored failed (no metrics, no epochs), and of those whose cache was not verified cold
FAILED_SHARE = 0.001
UNVERIFIED_SHARE = 0.01
ENV_ID = "env-synthetic-0001"


def _config(fmt: str, access: str, stripe: int, nodes: int, size: int) -> dict:
    """A point's stored config (``points.config``), as :func:`experiments.config.point.to_stored` writes it."""
    return {
        "format": fmt, "format_options": FORMAT_OPTIONS[fmt], "access": access, "stripe_count": stripe,
        "stripe_size": 1 << 20, "nodes": nodes, "ppn": PPN, "repeat": 0, "seed": 42, "samples": SAMPLES,
        "sample_size": size, "sample_size_stdev": 0, "samples_per_file": 256, "batch_size": 8, "epochs": 1,
        "compute_time": 0.0, "cache": "cold", "workload_name": "synthetic", "data_root": "/lustre/scale/d",
        "db": "/lustre/scale/results.db",
        "cluster": {"name": "slurm", "executor": "slurm", "launch": "srun -n {ranks}", "timeout_min": 30.0, "env": {},
                    "hang_timeout_s": 600.0, "partition": "", "account": "", "qos": "", "constraint": "",
                    "sbatch": {}, "setup": [], "array_parallelism": 8},
        "fs_type": "lustre", "striping_applicable": True, "force": False,
        "overrides": [f"format={fmt}", f"access={access}", f"stripe_count={stripe}", f"nodes={nodes}"],
        "payload": "random", "compute_time_stdev": 0.0, "shuffle": "none", "drop_last": False, "read_threads": 0,
        "prefetch": 2, "trace": False, "reader": "native", "settle": True, "flush_size": 0, "sample_shape": [],
        "ranks": nodes * PPN, "num_files": 8,
    }


def synthetic_points(n: int, seed: int = 0) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(points rows, epochs rows) for the ``points`` and ``epochs`` tables; bandwidth in MiB/s.

    Every column that figures, guidelines, diagnose and report read is filled: the stored config (JSON, one
    per point with its own repeat and keys), format options, the layout applied, the file-system layer's reads and
    size bins, the result's dataset size, the environment (node memory), first reads (repeat 0), a share of
    points whose cache was not verified cold and a share of failed points (error text, no metrics, no epochs).
    Each completed point has one epoch with its 160-bucket latency histogram and its ranks' rows (the first four
    ranks', to keep the file at a few GiB)."""
    rng = np.random.default_rng(seed)
    grid = pd.MultiIndex.from_product([FORMATS, ACCESS, STRIPES, NODES, SIZES],
                                      names=["format", "access", "stripe_count", "nodes", "sample_size"]).to_frame(
        index=False)
    reps = -(-n // len(grid))
    cfg_id = np.repeat(np.arange(len(grid)), reps)[:n]
    df = grid.iloc[cfg_id].reset_index(drop=True)
    df["repeat"] = np.tile(np.arange(reps), len(grid))[:n]
    peak = 1 - 0.08 * np.abs(np.log2(df["stripe_count"]) - 3)
    fmt = df["format"].map({"hdf5": 1.0, "tfrecord": 1.0, "npz": 0.8}) * np.where(
        (df["format"] == "tfrecord") & (df["nodes"] >= 4), 1.5, 1.0)
    bw = 200 * df["nodes"] ** 0.7 * peak * fmt * (df["sample_size"] / 16384) ** 0.3
    bw = (bw * (1 + 0.05 * rng.standard_normal(n))).to_numpy()
    nbytes = (SAMPLES * df["sample_size"]).to_numpy()
    io = nbytes / 2**20 / bw
    key = pd.Series([f"{i:020x}" for i in range(n)])
    dkey = pd.Series([f"d{c:04x}r{r:014x}" for c, r in zip(cfg_id, df["repeat"], strict=True)])
    failed = rng.random(n) < FAILED_SHARE
    unverified = rng.random(n) < UNVERIFIED_SHARE
    first = (df["repeat"] == 0).to_numpy()
    # per configuration: the stored config as text with the per-point fields as placeholders, and the JSON columns
    texts, digests, layouts, results, hists10, ranks_text = [], [], [], [], [], []
    for g in grid.itertuples(index=False):
        c = _config(g.format, g.access, int(g.stripe_count), int(g.nodes), int(g.sample_size))
        digests.append(config_digest(c))  # as ddlio's writer stores it: the config without its per-point fields
        c.update(repeat=-12345, dataset_key="@D@", point_key="@P@")
        texts.append(json.dumps(c).replace("-12345", "{r}").replace('"@D@"', '"{d}"').replace('"@P@"', '"{p}"'))
        stripe = {"stripe_count": int(g.stripe_count), "stripe_size": 1 << 20}
        layouts.append(json.dumps({"applicable": True, "fs_type": "lustre", "requested": stripe, "applied": stripe,
                                   "files": {}, "reason": ""}))
        results.append(json.dumps({"kind": "ddlio.result", "dataset": {"disk_bytes": SAMPLES * int(g.sample_size)}}))
        bins = [0] * 10
        bins[min(9, int(np.log2(g.sample_size)) - 10)] = SAMPLES
        hists10.append(json.dumps(bins))
        ranks_text.append(json.dumps([{"rank": r, "node": f"n{r // PPN}", "samples": SAMPLES // (g.nodes * PPN),
                                       "io_time_s": 0.5, "read_time_s": 0.4, "meta_time_s": 0.01,
                                       "compute_time_s": 0.0, "wall_time_s": 0.55}
                                      for r in range(min(4, int(g.nodes) * PPN))]))
    config = [texts[c].replace("{r}", str(r), 1).replace("{d}", d, 1).replace("{p}", p, 1)
              for c, r, d, p in zip(cfg_id, df["repeat"], dkey, key, strict=True)]
    done = ~failed
    metric = lambda v: np.where(done, v, np.nan)  # noqa: E731 - failed points have no figures
    posix_reads = SAMPLES + 16
    pts = pd.DataFrame({
        "point_key": key, "dataset_key": dkey, "sweep_id": "sweep-scale",
        "label": df["format"] + "/" + df["access"] + " " + df["nodes"].astype(str) + "N-"
                 + (df["nodes"] * PPN).astype(str) + "P-" + df["stripe_count"].astype(str) + "OST",
        "status": np.where(failed, "failed", "completed"),
        "error": np.where(failed, "RuntimeError: rank 3 lost its node\nTraceback ...", None),
        "job_id": [f"{1000 + c}_{r}" for c, r in zip(cfg_id, df["repeat"], strict=True)],
        "job_state": np.where(failed, "FAILED", "COMPLETED"), "run_dir": None,
        "attempts": 1, "pending": 0, "measurement_id": None, "overlapping": 0,
        "submitted_utc": "2026-01-01 00:00:00.000000", "finished_utc": "2026-01-01 00:00:01.000000",
        "format": df["format"], "format_options": df["format"].map({f: json.dumps(o) for f, o in
                                                                   FORMAT_OPTIONS.items()}),
        "access": df["access"], "stripe_count": df["stripe_count"],
        "stripe_size": 1 << 20, "nodes": df["nodes"], "ppn": PPN, "ranks": df["nodes"] * PPN, "repeat": df["repeat"],
        "seed": 42, "workload": "synthetic", "samples": SAMPLES, "sample_size": df["sample_size"],
        "sample_size_stdev": 0, "samples_per_file": 256, "num_files": 8, "batch_size": 8, "epochs": 1,
        "compute_time_s": 0.0, "cache_policy": "cold", "cluster": "slurm", "data_root": "/lustre/scale/d",
        "config": config, "config_digest": [digests[c] for c in cfg_id], "hosts": df["nodes"], "host_names": "[]",
        "bytes_read": np.where(done, nbytes, None),
        "bytes_planned": nbytes, "os_read_bytes": np.where(done, nbytes, None),
        "io_time_slowest_s": metric(io), "bandwidth_mib_s": metric(bw), "iops": metric(SAMPLES / io),
        "wall_time_s": metric(io * 1.05), "samples_per_s": metric(SAMPLES / (io * 1.05)), "au": metric(0.0),
        "lat_p50_us": metric(io / SAMPLES * 1e6), "lat_p90_us": metric(io / SAMPLES * 2e6),
        "lat_p99_us": metric(io / SAMPLES * 4e6),
        "cache": np.where(failed, None, np.where(unverified, "unknown", "cold")), "settle": 1,
        "first_read": np.where(done, first.astype(int), None), "max_rss_kib": 100000, "fs_type": "lustre",
        "striping_applicable": 1, "layout": [layouts[c] for c in cfg_id], "mpi_library": "MPICH",
        "env_id": ENV_ID, "posix_reads": np.where(done, posix_reads, None),
        "posix_bytes_read": np.where(done, nbytes + 16 * 4096, None), "posix_read_time_s": metric(io * 0.9),
        "posix_size_hist": [hists10[c] for c in cfg_id],
        "amplification": metric((nbytes + 16 * 4096) / nbytes), "source": "ddlio",
        "result": [results[c] for c in cfg_id],
    })
    # one histogram per point: reads spread over 3 buckets around a latency that falls with bandwidth
    centre = np.clip((np.log2(io / SAMPLES * 1e9) * 4).astype(int), 3, 150)
    hist_of = {}
    for c in np.unique(centre):
        h = [0] * 160
        h[c - 1], h[c], h[c + 1] = SAMPLES // 4, SAMPLES // 2, SAMPLES // 4
        hist_of[int(c)] = "[" + ", ".join(map(str, h)) + "]"
    epochs = pd.DataFrame({
        "point_key": key, "epoch": 0, "samples": SAMPLES, "bytes_read": nbytes, "bytes_planned": nbytes,
        "read_ops": SAMPLES, "meta_ops": 16, "os_read_bytes": nbytes, "io_time_slowest_s": io,
        "io_time_mean_s": io * 0.9, "bandwidth_mib_s": bw, "iops": SAMPLES / io, "wall_time_s": io * 1.05,
        "compute_time_s": 0.0, "samples_per_s": SAMPLES / (io * 1.05), "au": 0.0,
        "cache": np.where(unverified, "unknown", "cold"), "cache_note": np.where(unverified, "fadvise refused", ""),
        "first_read": first.astype(int), "hist": [hist_of[int(c)] for c in centre],
        "rank_rows": [ranks_text[c] for c in cfg_id], "posix_reads": posix_reads,
        "posix_bytes_read": nbytes + 16 * 4096,
    })[done].reset_index(drop=True)
    return pts, epochs


def build(path: Path, n: int) -> float:
    """Create the store at ``path`` with ``n`` points; returns seconds."""
    from ddlio.store import Store

    t = time.perf_counter()
    Store(str(path))  # the schema, exactly as ddlio creates it
    pts, epochs = synthetic_points(n)
    env = {"host": "login1", "os": "Linux", "cpus": 64, "memory_bytes": 256 * 2**30,
           "packages": {"python": "3.11", "ddlio": "0.1.0"}}
    with sqlite3.connect(path) as conn:
        conn.execute("INSERT INTO environments (id, host, os, git_commit, git_dirty, packages, raw) VALUES "
                     "(?, 'login1', 'Linux', 'abc1234', 0, ?, ?)", (ENV_ID, json.dumps(env["packages"]),
                                                                  json.dumps(env)))
        conn.execute("INSERT INTO sweeps (id, started_utc, finished_utc, argv, host, n_points, n_skipped, "
                     "n_completed, n_failed) VALUES ('sweep-scale', '2026-01-01 00:00:00', '2026-01-02 00:00:00', "
                     "?, 'login1', ?, 0, ?, ?)", (json.dumps(["sweep.py", "-m", "+experiment=scale"]), n,
                                                  int((pts["status"] == "completed").sum()),
                                                  int((pts["status"] == "failed").sum())))
        for i in range(0, len(pts), 200_000):  # in slices: the frame's SQL text stays small
            pts.iloc[i:i + 200_000].to_sql("points", conn, if_exists="append", index=False)
        for i in range(0, len(epochs), 200_000):
            epochs.iloc[i:i + 200_000].to_sql("epochs", conn, if_exists="append", index=False)
    return time.perf_counter() - t


#: The reference, run as a child like every step: the completed points' analysis columns in one plain query
REFERENCE = """
import sqlite3, sys
import pandas as pd
from analysis.query import ANALYSIS_COLUMNS, DERIVED_COLUMNS
cols = ", ".join(c for c in ANALYSIS_COLUMNS if c not in DERIVED_COLUMNS and c != "config")
with sqlite3.connect(sys.argv[1]) as conn:
    df = pd.read_sql_query(f"SELECT {cols} FROM points WHERE status = 'completed' ORDER BY point_key", conn)
print(len(df), "rows")
"""


def run_child(argv: list[str], out: Path) -> tuple[float, float, float, int]:
    """Run ``argv`` as its own process (stdout to ``out``); returns (seconds, peak RSS in MiB, peak PSS of its
    process tree in MiB, exit code). The RSS peak is the command's own ``ru_maxrss`` from ``wait4`` (the largest
    of it and of its worker processes: drawing, the report's diagnosis), so numpy's and SQLite's memory count
    too; the tree's PSS is sampled every 0.5 s and sums every process of the command (a shared page counted
    once). Both are taken from a small launcher (:mod:`childpeak`), so this bench's own frames never count."""
    return run_measured_tree(argv, out)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--points", type=int, default=1_000_000)
    ap.add_argument("--keep", help="keep the store, the outputs and the logs in this directory (default: a "
                                   "temporary one); an existing store of the same size there is reused")
    ap.add_argument("--only", nargs="+", choices=[c for c, _ in STEPS], help="run only these commands")
    args = ap.parse_args(argv)

    with tempfile.TemporaryDirectory(prefix="ddlio-scale-") as tmp:
        root = Path(args.keep or tmp)
        root.mkdir(parents=True, exist_ok=True)
        db = root / f"scale-{args.points}.db"
        if not db.exists():
            part = db.with_suffix(".part")
            part.unlink(missing_ok=True)
            t_build = build(part, args.points)
            part.rename(db)
            print(f"built {db} with {args.points} points in {t_build:.1f} s (not timed below)", file=sys.stderr)
        else:
            print(f"reusing {db}", file=sys.stderr)
        py = sys.executable
        env_db = ["--db", str(db)]
        steps = [("reference", [py, "-c", REFERENCE, str(db)])]
        for name, extra in STEPS:
            if args.only and name not in args.only:
                continue
            out = [a.replace("{root}", str(root)) for a in extra]
            steps.append((name, [py, "-m", "analysis", name, *env_db, *out]))
        rows = []
        for name, cmd in steps:
            secs, mib, pss, code = run_child(cmd, root / f"{name}.log")
            rows.append((name, secs, mib, pss, code))
            print(f"  {name}: {secs:.1f} s, {mib:.0f} MiB, tree PSS {pss:.0f} MiB, exit {code}", file=sys.stderr)
        t_ref, m_ref = rows[0][1], rows[0][2]
        width = max(len(r[0]) for r in rows) + 2
        print(f"{args.points} points ({os.cpu_count()} CPUs; load {os.getloadavg()[0]:.2f})")
        print(f"{'command':<{width}}{'seconds':>9}{'× ref':>8}{'peak MiB':>10}{'× ref':>8}{'tree PSS':>10}"
              f"{'exit':>6}  goal")
        for name, s, m, pss, code in rows:
            ok = s < GOAL_S and max(m, pss) < GOAL_MIB and code in (0, 3, 4)
            goal = "" if name == "reference" else ("met" if ok else "NOT met")
            print(f"{name:<{width}}{s:>9.1f}{s / t_ref:>8.1f}{m:>10.0f}{m / m_ref:>8.1f}{pss:>10.0f}{code:>6}  {goal}")
        goal = f"goal per command: < {GOAL_S} s, and < {GOAL_MIB} MiB both for its largest process and its tree"
        print(f"{goal}; logs in {root}" if args.keep else goal)
    return 0


#: the commands as a user runs them, each its own process on the store ({root}: the output directory)
STEPS = [
    ("figures", ["--out", "{root}/fig", "--force"]),
    ("guidelines", []),
    ("diagnose", []),
    ("report", ["--out", "{root}/report.html", "--force"]),
]
GOAL_S = 60
GOAL_MIB = 2048


if __name__ == "__main__":
    sys.exit(main())
