"""Analysis at scale: figures + guidelines on a synthetic store of 100,000 points (goal: under 10 s in total).

The store is a real SQLite file with the ddlio schema, filled by one bulk insert per table (not 100,000
``Store.record`` calls): 3 formats × 2 access modes × 6 stripe counts × 5 node counts × 3 sample sizes = 540
configurations, repeated until the point count is reached, each point with one epoch and its 160-bucket latency
histogram. Bandwidth follows a planted model (peak at stripe 8, TFRecord ahead from 4 nodes) with 5% noise.

Timed, in the same run: reading the points frame from SQLite (the reference every step is compared with),
reading the latency histograms, computing the guidelines (2000 bootstrap resamples), and drawing and saving every
figure as PNG + SVG. Each line shows seconds and the ratio to the reference.

    python bench/analysis_scale.py                  # 100,000 points
    python bench/analysis_scale.py --points 20000 --keep /tmp/scale   # keep the store and the figures
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

FORMATS = ["hdf5", "tfrecord", "npz"]
ACCESS = ["shared", "fpp"]
STRIPES = [1, 2, 4, 8, 16, 32]
NODES = [1, 2, 4, 8, 12]
SIZES = [16 * 1024, 128 * 1024, 1024 * 1024]
PPN = 4


def synthetic_points(n: int, seed: int = 0) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(points rows, epochs rows) for the ``points`` and ``epochs`` tables; bandwidth in MiB/s."""
    rng = np.random.default_rng(seed)
    grid = pd.MultiIndex.from_product([FORMATS, ACCESS, STRIPES, NODES, SIZES],
                                      names=["format", "access", "stripe_count", "nodes", "sample_size"]).to_frame(
        index=False)
    reps = -(-n // len(grid))
    df = grid.loc[grid.index.repeat(reps)].reset_index(drop=True)
    df["repeat"] = np.tile(np.arange(reps), len(grid))
    df = df.iloc[:n].reset_index(drop=True)
    peak = 1 - 0.08 * np.abs(np.log2(df["stripe_count"]) - 3)
    fmt = df["format"].map({"hdf5": 1.0, "tfrecord": 1.0, "npz": 0.8}) * np.where(
        (df["format"] == "tfrecord") & (df["nodes"] >= 4), 1.5, 1.0)
    bw = 200 * df["nodes"] ** 0.7 * peak * fmt * (df["sample_size"] / 16384) ** 0.3
    bw = bw * (1 + 0.05 * rng.standard_normal(n))
    samples = 2048
    nbytes = samples * df["sample_size"]
    io = nbytes / 2**20 / bw
    key = pd.Series([f"{i:020x}" for i in range(n)])
    pts = pd.DataFrame({
        "point_key": key, "dataset_key": key, "sweep_id": None,
        "label": df["format"] + "/" + df["access"] + " " + df["nodes"].astype(str) + "N-"
                 + (df["nodes"] * PPN).astype(str) + "P-" + df["stripe_count"].astype(str) + "OST",
        "status": "completed", "error": None, "job_id": None, "job_state": "COMPLETED", "run_dir": None,
        "attempts": 1, "submitted_utc": "2026-01-01 00:00:00.000000", "finished_utc": "2026-01-01 00:00:01.000000",
        "format": df["format"], "format_options": "{}", "access": df["access"], "stripe_count": df["stripe_count"],
        "stripe_size": 1 << 20, "nodes": df["nodes"], "ppn": PPN, "ranks": df["nodes"] * PPN, "repeat": df["repeat"],
        "seed": 42, "workload": "synthetic", "samples": samples, "sample_size": df["sample_size"],
        "sample_size_stdev": 0, "samples_per_file": 256, "num_files": 8, "batch_size": 8, "epochs": 1,
        "compute_time_s": 0.0, "cache_policy": "cold", "cluster": "slurm", "data_root": "/lustre/x", "config": "{}",
        "hosts": df["nodes"], "host_names": "[]", "bytes_read": nbytes, "bytes_planned": nbytes,
        "os_read_bytes": nbytes, "io_time_slowest_s": io, "bandwidth_mib_s": bw, "iops": samples / io,
        "wall_time_s": io * 1.05, "samples_per_s": samples / (io * 1.05), "au": 0.0, "lat_p50_us": 100.0,
        "lat_p90_us": 200.0, "lat_p99_us": 400.0, "cache": "cold", "max_rss_kib": 100000, "fs_type": "lustre",
        "striping_applicable": 1, "layout": json.dumps({"applicable": True}), "mpi_library": "MPICH",
        "env_id": None, "result": "{}",
    })
    # one histogram per point: reads spread over 3 buckets around a latency that falls with bandwidth
    centre = np.clip((np.log2(io / samples * 1e9) * 4).astype(int), 3, 150)
    hist = np.zeros((n, 160), dtype=np.int64)
    for d, share in ((-1, 0.25), (0, 0.5), (1, 0.25)):
        hist[np.arange(n), centre + d] = int(samples * share)
    hist_text = ["[" + ", ".join(map(str, h)) + "]" for h in hist.tolist()]
    epochs = pd.DataFrame({
        "point_key": key, "epoch": 0, "samples": samples, "bytes_read": nbytes, "bytes_planned": nbytes,
        "read_ops": samples, "meta_ops": 16, "cache": "cold", "hist": hist_text, "rank_rows": "[]",
        "io_time_slowest_s": io, "bandwidth_mib_s": bw,
    })
    return pts, epochs


def build(path: Path, n: int) -> float:
    """Create the store at ``path`` with ``n`` points; returns seconds."""
    from ddlio.store import Store

    t = time.perf_counter()
    Store(str(path))  # the schema, exactly as ddlio creates it
    pts, epochs = synthetic_points(n)
    with sqlite3.connect(path) as conn:
        pts.to_sql("points", conn, if_exists="append", index=False)
        epochs.to_sql("epochs", conn, if_exists="append", index=False)
    return time.perf_counter() - t


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--points", type=int, default=100_000)
    ap.add_argument("--keep", help="keep the store and figures in this directory (default: a temporary one)")
    args = ap.parse_args(argv)

    from analysis import guidelines as G
    from analysis.figures import plan_figures, render
    from analysis.query import analysis_frame, hist_frame
    from ddlio.store import open_store_for_reading

    with tempfile.TemporaryDirectory(prefix="ddlio-scale-") as tmp:
        root = Path(args.keep or tmp)
        root.mkdir(parents=True, exist_ok=True)
        db = root / "scale.db"
        db.unlink(missing_ok=True)
        t_build = build(db, args.points)
        print(f"built {db} with {args.points} points in {t_build:.1f} s (not timed below)", file=sys.stderr)
        store = open_store_for_reading(str(db))
        import matplotlib  # imported once up front so no step is charged for it

        del matplotlib
        rows = []

        t = time.perf_counter()
        points = analysis_frame(store)
        t_ref = time.perf_counter() - t
        rows.append(("read points frame from SQLite (reference)", t_ref))

        t = time.perf_counter()
        keys, hists = hist_frame(store, points["point_key"].tolist())
        rows.append(("read latency histograms", time.perf_counter() - t))

        t = time.perf_counter()
        lay, fmt, stmts = G.compute(points, G.Settings())
        n_statements = len(stmts)
        rows.append((f"guidelines ({len(lay)} layout + {len(fmt)} format scenarios, {n_statements} statements)",
                     time.perf_counter() - t))

        out = root / "fig"
        out.mkdir(exist_ok=True)
        t = time.perf_counter()
        drawn = len(render(plan_figures(points, keys, hists), out, ("png", "svg")))
        rows.append((f"figures ({drawn} drawn, PNG + SVG, {os.cpu_count()} processes)", time.perf_counter() - t))

        total = sum(s for _, s in rows)
        width = max(len(r[0]) for r in rows) + 2
        print(f"{'step':<{width}}{'seconds':>9}{'× reference':>13}")
        for name, s in rows:
            print(f"{name:<{width}}{s:>9.2f}{s / t_ref:>13.1f}")
        print(f"{'total (read + guidelines + figures)':<{width}}{total:>9.2f}{total / t_ref:>13.1f}")
        decided = int(lay["verdict"].isin(["recommend", "keep baseline"]).sum())
        print(f"{len(points)} points, {decided}/{len(lay)} layout scenarios decided; goal < 10 s total: "
              f"{'met' if total < 10 else 'NOT met'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
