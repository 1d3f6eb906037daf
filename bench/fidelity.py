"""Emulation fidelity: real training programs side by side with ddlio's emulation of them, in one run.

    python bench/fidelity.py [--samples 256] [--epochs 2] [--batch 8] [--rounds 3] [--apps hdf5,tfrecord]
                             [--readers tf,native,tf:cpu,native:cpu] [--compute-threads 1] [--wait 20]
                             [--workers 1,2] [--keep DIR]
    python bench/fidelity.py --apps torch_hdf5,torch_jpeg --workers 1,2

For each application of ``bench/fidelity/`` (``app_hdf5.py``: a DeepGalaxy-like Keras CNN fed by tf.data from a
generator over h5py ``images[i]``; ``app_tfrecord.py``: ``TFRecordDataset(num_parallel_reads)`` + ``parse_example``
feeding a Keras CNN; ``app_torch.py``: a PyTorch CNN fed by a DataLoader with ``--workers`` worker processes, a
DistributedSampler and ``prefetch_factor``, from the HDF5 N-d layout (``torch_hdf5``) or a folder of JPEG files
(``torch_jpeg``), emulated by ``reader=torch`` and ``torch:cpu``, once per worker count):

1. calibrate its model's compute per batch on in-memory batches (``python -m experiments.calibrate``, median and
   stdev), which becomes ``workload.compute_time`` / ``compute_time_stdev`` -- again at the start of every round,
   because other work on a shared machine changes what a step costs;
2. measure ddlio's emulation (``python sweep.py ...``, one point per reader and round, samples/s read back from
   the store) and the application on the same N, batch, epochs, prefetch, threads and cold page cache each epoch;
   the application reads the files ddlio generated where ddlio writes them in the application's layout, else
   files the bench writes itself (same N, shape and number of files; printed);
   A reader ``R:cpu`` (``tf:cpu``, ``native:cpu``) is ``reader=R`` with ``workload.compute=cpu`` and
   ``workload.compute_threads`` = ``--compute-threads`` (0: the node's CPUs): ddlio's step then burns the CPU
   for the calibrated time instead of sleeping, as the application's model does;
3. also run the application with its model replaced by a sleep of the calibrated time per batch (``--sleep``):
   the difference between the two application runs is what real compute contending with the input pipeline
   for the CPUs costs, which a sleep does not emulate (and ``compute=cpu`` does).

Every file is read once, untimed, before the first measurement (the cache below this VM serves repeats ~5x faster
than a fresh file's first read), and the order of the runs alternates between rounds. Prints per application
and reader: the application's samples/s (all epochs and rounds: samples / seconds), ddlio's, and the error
``ddlio / application - 1``.
"""

from __future__ import annotations

import argparse
import json
import os
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
PY = sys.executable
HERE = ROOT / "bench" / "fidelity"
sys.path.insert(0, str(ROOT))  # this checkout's experiments, not an installed one

#: what each application is, and the ddlio point that emulates it
APPS: dict[str, dict[str, Any]] = {
    "hdf5": {"script": "app_hdf5.py", "model": "deepgalaxy_cnn", "format": "hdf5", "files": 1,
             "shuffle": "sample", "threads": 1,
             # one generator reads one sample at a time ahead of the loop: one reader thread
             "format_overrides": ["format.chunk_samples=1"]},
    "tfrecord": {"script": "app_tfrecord.py", "model": "record_cnn", "format": "tfrecord", "files": 8,
                 "shuffle": "file", "threads": 2, "format_overrides": []},
    # PyTorch: a DataLoader with --workers worker processes (ddlio: reader=torch, read_threads = workers), a
    # DistributedSampler reshuffled every epoch (shuffle=sample), prefetch_factor = --prefetch
    "torch_hdf5": {"script": "app_torch.py", "kind": "hdf5", "model": "galaxy_cnn", "models": "torch_models.py",
                   "format": "hdf5", "files": 1, "shuffle": "sample", "threads": 2,
                   "format_overrides": ["format.chunk_samples=1"], "readers": ("torch", "torch:cpu")},
    "torch_jpeg": {"script": "app_torch.py", "kind": "jpeg", "model": "galaxy_cnn", "models": "torch_models.py",
                   "format": "jpeg", "files": 0, "shuffle": "sample", "threads": 2, "layout": None,
                   "format_overrides": [], "readers": ("torch", "torch:cpu")},
}
#: the ddlio point's format.layout per format (the application's layout), where it has one
LAYOUTS = {"hdf5": "array", "tfrecord": "example"}


def sh(cmd: list[str], timeout: float = 900) -> str:
    """Run a command; its stdout, or exit with its stderr's tail."""
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2", "PYTHONPATH": str(ROOT)}
    p = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=timeout, env=env)
    if p.returncode:
        tail = "\n".join((p.stderr or p.stdout).strip().splitlines()[-15:])
        sys.exit(f"failed ({p.returncode}): {' '.join(cmd)}\n{tail}")
    return p.stdout


def calibrate(model: str, batch: int, shape: tuple[int, ...], threads: int,
              models: str = "models.py") -> dict[str, Any]:
    out = sh([PY, "-m", "experiments.calibrate", "--model", f"{HERE / models}:{model}", "--batch",
              str(batch), "--shape", ",".join(map(str, shape)), "--threads", str(threads), "--json"])
    return json.loads(out.strip().splitlines()[-1])


def layouts_available() -> bool:
    """Does this ddlio write the applications' layouts (``format.layout``, ``workload.sample_shape``)?"""
    from experiments.config import WorkloadConf

    return "sample_shape" in getattr(WorkloadConf, "__dataclass_fields__", {})


def point_overrides(app: dict[str, Any], a: Any, reader: str, rnd: int, calib: dict[str, Any],
                    root: Path, layouts: bool, epochs: int | None = None) -> list[str]:
    reader, _, mode = reader.partition(":")
    shape = a.shape
    size = 1
    for d in shape:
        size *= d
    over = [f"format={app['format']}", *app["format_overrides"], "access=shared",
            f"workload.samples={a.samples}",
            f"workload.samples_per_file={-(-a.samples // app['files']) if app['files'] else 1}",
            f"workload.batch_size={a.batch}", f"workload.epochs={epochs or a.epochs}",
            f"workload.compute_time={calib['median_s']:.6f}", f"workload.compute_time_stdev={calib['stdev_s']:.6f}",
            f"workload.shuffle={app['shuffle']}", f"workload.read_threads={app['threads']}",
            f"workload.prefetch={a.prefetch}", "workload.cache=cold", f"reader={reader}", f"repeat={rnd}",
            f"data_root={root / 'data'}", f"db={root / 'results.db'}"]
    if mode == "cpu":
        over += ["workload.compute=cpu", f"workload.compute_threads={a.compute_threads}"]
    if layouts and app["format"] in LAYOUTS:
        over += [f"workload.sample_shape=[{','.join(map(str, shape))}]", f"format.layout={LAYOUTS[app['format']]}"]
    else:
        over += [f"workload.sample_size={size}"]
    return over


def run_ddlio(overrides: list[str], db: Path) -> tuple[str, list[dict[str, Any]]]:
    """One sweep.py point; its key and epochs (samples, wall_time_s, cache) from the store."""
    before = _keys(db)
    sh([PY, "sweep.py", *overrides])
    new = _keys(db) - before
    if len(new) != 1:
        sys.exit(f"expected one new point in {db}, found {len(new)} (was it measured already?)")
    key = new.pop()
    with sqlite3.connect(db) as c:
        c.row_factory = sqlite3.Row
        rows = [dict(r) for r in c.execute("SELECT epoch, samples, wall_time_s, samples_per_s, cache FROM epochs "
                                           "WHERE point_key = ? ORDER BY epoch", (key,))]
    return key, rows


def compute_calibration(db: Path, key: str) -> dict[str, Any] | None:
    """Rank 0's calibration of compute=cpu for point ``key`` (threads, units/s), from its stored result."""
    with sqlite3.connect(db) as c:
        row = c.execute("SELECT result FROM points WHERE point_key = ?", (key,)).fetchone()
    info = (json.loads(row[0]) if row and row[0] else {}).get("rank_info") or [{}]
    cal = info[0].get("compute") or {}
    return cal if cal.get("mode") == "cpu" else None


def _keys(db: Path) -> set[str]:
    if not db.exists():
        return set()
    with sqlite3.connect(db) as c:
        return {r[0] for r in c.execute("SELECT point_key FROM points WHERE status = 'completed'")}


def ddlio_files(db: Path, key: str, root: Path) -> list[Path]:
    """The data files of the dataset ddlio generated for point ``key`` (from its manifest)."""
    with sqlite3.connect(db) as c:
        fmt, dkey = c.execute("SELECT format, dataset_key FROM points WHERE point_key = ?", (key,)).fetchone()
    d = root / "data" / "datasets" / f"{fmt}-{dkey}"
    manifest = json.loads((d / "manifest.json").read_text())
    return [d / e["name"] for e in manifest["files"] if not e["name"].endswith((".idx", ".index"))]


def write_own(app: dict[str, Any], a: Any, where: Path) -> list[Path]:
    """The application's files, written by the bench (while ddlio cannot write the application's layout)."""
    import numpy as np

    where.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(7)
    labels = rng.integers(0, 10, a.samples)
    if app["format"] == "hdf5":
        import h5py

        path = where / "images.h5"
        with h5py.File(path, "w") as f:
            ds = f.create_dataset("images", (a.samples, *a.shape), np.uint8, chunks=(1, *a.shape))
            for i in range(a.samples):
                ds[i] = rng.integers(0, 256, a.shape, dtype=np.uint8)
            f["labels"] = labels
        paths = [path]
    else:
        os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
        import tensorflow as tf

        paths, per = [], -(-a.samples // app["files"])
        for k in range(app["files"]):
            path = where / f"part-{k:05d}.tfrecord"
            with tf.io.TFRecordWriter(str(path)) as w:
                for i in range(k * per, min(a.samples, (k + 1) * per)):
                    image = rng.integers(0, 256, a.shape, dtype=np.uint8).tobytes()
                    w.write(tf.train.Example(features=tf.train.Features(feature={
                        "image": tf.train.Feature(bytes_list=tf.train.BytesList(value=[image])),
                        "label": tf.train.Feature(int64_list=tf.train.Int64List(value=[int(labels[i])])),
                    })).SerializeToString())
            paths.append(path)
    for p in paths:
        fd = os.open(p, os.O_RDONLY)
        os.fsync(fd)
        os.close(fd)
    return paths


def settle(paths: list[Path]) -> None:
    """Read the files once, untimed, and drop them from the page cache: every measured epoch is then a repeat
    for the cache below the client (as ddlio's settle does for its own datasets)."""
    for p in paths:
        fd = os.open(p, os.O_RDONLY)
        try:
            while os.read(fd, 8 << 20):
                pass
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)


def run_app(app: dict[str, Any], a: Any, files: list[Path], sleep: float | None) -> list[dict[str, Any]]:
    if "kind" in app:  # the PyTorch application: its kind first, its worker processes
        files = [app["kind"], *files, "--workers", str(app["threads"])]
    cmd = [PY, str(HERE / app["script"]), *map(str, files), "--epochs", str(a.epochs), "--batch", str(a.batch),
           "--prefetch", str(a.prefetch), "--model", app["model"], "--compute-threads", str(a.compute_threads)]
    if app["format"] == "tfrecord":
        cmd += ["--shape", ",".join(map(str, a.shape)), "--samples", str(a.samples), "--threads", str(app["threads"])]
    if sleep is not None:
        cmd += ["--sleep", f"{sleep:.6f}"]
    return [json.loads(line) for line in sh(cmd).splitlines() if line.startswith("{")]


def flat(rounds: list[list[dict[str, Any]]]) -> list[dict[str, Any]]:
    return [r for rr in rounds for r in rr]


def span(errors: list[float]) -> str:
    """``median [min..max]`` of relative errors, in percent."""
    return f"{statistics.median(errors):+.1%} [{min(errors):+.0%}..{max(errors):+.0%}]"


def rate(rows: list[dict[str, Any]]) -> float:
    """samples / seconds over all the rows (epochs and rounds)."""
    return sum(r["samples"] for r in rows) / sum(r["seconds"] for r in rows)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--samples", type=int, default=256)
    ap.add_argument("--shape", default="512,512,3")
    ap.add_argument("--epochs", type=int, default=2)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--prefetch", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--apps", default="hdf5,tfrecord")
    ap.add_argument("--readers", default="tf,native,tf:cpu,native:cpu",
                    help="ddlio's readers to run: tf, native, and R:cpu for reader R with workload.compute=cpu "
                    "(default tf,native,tf:cpu,native:cpu); the PyTorch applications run torch and torch:cpu "
                    "unless torch readers are given here")
    ap.add_argument("--workers", default="1,2", help="the PyTorch applications' DataLoader worker processes: one "
                    "run per count (default 1,2)")
    ap.add_argument("--wait", type=float, default=20.0,
                    help="seconds to wait after writing the datasets, before the first measurement (default 20)")
    ap.add_argument("--compute-threads", type=int, default=1,
                    help="TensorFlow threads of the model's step, in the application and its calibration alike "
                    "(default 1: one core trains, the other feeds it, as a host CPU feeds an accelerator; 0: "
                    "TensorFlow's default, every core, so that training and input pipeline contend)")
    ap.add_argument("--keep", type=Path, default=None, help="work in this directory and keep it")
    a = ap.parse_args(argv)
    a.shape = tuple(int(x) for x in a.shape.split(","))
    all_readers = a.readers.split(",")
    root = a.keep or Path(tempfile.mkdtemp(prefix="ddlio-fidelity-"))
    root.mkdir(parents=True, exist_ok=True)
    layouts = layouts_available()
    t_start, load0 = time.time(), os.getloadavg()[0]
    names = expand_apps(a.apps.split(","), [int(w) for w in a.workers.split(",")])
    calib: dict[str, dict[str, Any]] = {}
    files: dict[str, list[Path]] = {}
    for name in names:  # calibrate, generate ddlio's dataset (one untimed point), the application's files
        app = APPS[name]
        readers = readers_of(app, all_readers)
        no_compute = {"median_s": 0.0, "stdev_s": 0.0}
        run_ddlio(point_overrides(app, a, readers[0], 1000, no_compute, root, layouts, epochs=1),
                  root / "results.db")
        files[name] = _app_files(app, a, root, layouts)
    time.sleep(a.wait)  # the host keeps writing back for seconds after the guest's fsync (README: caches below)
    summary = []
    notes: dict[str, str] = {}
    for name in names:
        app = APPS[name]
        readers = readers_of(app, all_readers)
        rows: dict[str, list[list[dict[str, Any]]]] = {w: [] for w in ["app", "sleep", *readers]}
        calibs, cpus, burners = [], [], []
        for rnd in range(a.rounds):
            # calibrated again every round: other work on the machine changes what a step costs within minutes
            calib[name] = c = calibrate(app["model"], a.batch, a.shape, a.compute_threads,
                                        app.get("models", "models.py"))
            calibs.append(c["median_s"])
            cpus.append(c["cpu_per_step_s"])
            print(f"[{name}] round {rnd} {app['model']}: compute per batch of {a.batch} (in memory, calibrated): "
                  f"median {c['median_s'] * 1e3:.1f} ms, stdev {c['stdev_s'] * 1e3:.1f} ms", flush=True)
            order = [*readers, "sleep", "app"]
            if rnd % 2:
                order.reverse()
            for what in order:
                if what in ("app", "sleep"):
                    got = run_app(app, a, files[name], calib[name]["median_s"] if what == "sleep" else None)
                else:
                    key, got = run_ddlio(point_overrides(app, a, what, rnd, calib[name], root, layouts),
                                         root / "results.db")
                    cal = compute_calibration(root / "results.db", key)
                    if cal:
                        burners.append(cal)
                    bad = [r for r in got if r["cache"] != "cold"]
                    if bad:
                        print(f"  note: ddlio epochs not verified cold: {bad}")
                    got = [{**r, "seconds": r["wall_time_s"]} for r in got]
                rows[what].append(got)
                print(f"[{name}] round {rnd} {what:>7}: {rate(got):7.1f} samples/s  (epochs: "
                      + ", ".join(f"{r['samples'] / r['seconds']:.0f}" for r in got) + ")", flush=True)
        med = {w: statistics.median(rate(rr) for rr in v) for w, v in rows.items()}
        batches = -(-a.samples // a.batch) * a.epochs * a.rounds
        pipe_ms = sum(r["cpu_s"] for r in flat(rows["sleep"])) / batches * 1e3
        app_ms = sum(r["cpu_s"] for r in flat(rows["app"])) / batches * 1e3
        notes[name] = (f"{name}: CPU per batch (ms): the model's step {statistics.median(cpus) * 1e3:.0f} "
                       f"(calibrated, in memory; wall {statistics.median(calibs) * 1e3:.0f}), the application's input "
                       f"pipeline {pipe_ms:.0f} (run with a sleep), the application training {app_ms:.0f}; "
                       "calibrated compute by round (ms): " + ", ".join(f"{c * 1e3:.0f}" for c in calibs)
                       + (f"; compute=cpu: {burners[0]['threads']} thread(s), work rate calibrated per point "
                          f"{min(b['units_per_s'] for b in burners):.0f}..{max(b['units_per_s'] for b in burners):.0f}"
                          " units/s" if burners else ""))
        for reader in readers:
            err = [rate(d) / rate(p) - 1 for d, p in zip(rows[reader], rows["app"], strict=True)]
            err_sleep = [rate(d) / rate(p) - 1 for d, p in zip(rows[reader], rows["sleep"], strict=True)]
            summary.append((name, reader, med["app"], med[reader], err, med["sleep"], err_sleep))
    print(f"\nfidelity: {a.samples} samples of {a.shape} uint8, batch {a.batch}, {a.epochs} epochs x {a.rounds} "
          f"rounds, cold each epoch, compute threads {a.compute_threads or 'all'}; "
          f"files {'generated by ddlio' if layouts else 'written by the bench'}; "
          f"{time.time() - t_start:.0f} s; load average {load0:.1f} at the start, {os.getloadavg()[0]:.1f} at the end")
    print("samples/s: median over rounds; error: ddlio / application - 1 within each round, median [range]")
    print(f"{'application':<12}{'reader':<12}{'app':>8}{'ddlio':>8}{'error':>22}{'app, sleep as compute':>23}"
          f"{'error vs it':>24}")
    for name, reader, app_rate, d, err, sleep_rate, err_sleep in summary:
        print(f"{name:<12}{reader:<12}{app_rate:>8.1f}{d:>8.1f}{span(err):>22}{sleep_rate:>23.1f}{span(err_sleep):>24}")
    for name in names:
        print(notes[name])
    if a.keep is None:
        import shutil

        shutil.rmtree(root, ignore_errors=True)
    return 0


def expand_apps(names: list[str], workers: list[int]) -> list[str]:
    """The applications to run: a PyTorch application once per worker count (``torch_hdf5@2``: 2 workers)."""
    out = []
    for name in names:
        if name not in APPS:
            sys.exit(f"--apps: unknown application {name!r}: choose from {', '.join(APPS)}")
        if "kind" not in APPS[name]:
            out.append(name)
            continue
        for w in workers:
            APPS[f"{name}@{w}"] = {**APPS[name], "threads": w}
            out.append(f"{name}@{w}")
    return out


def readers_of(app: dict[str, Any], readers: list[str]) -> list[str]:
    """ddlio's readers that emulate ``app``: its own (torch) for a PyTorch application, the others else."""
    own = app.get("readers")
    if own is None:
        return [r for r in readers if not r.startswith("torch")]
    return [r for r in readers if r.partition(":")[0] in {o.partition(":")[0] for o in own}] or list(own)


def _app_files(app: dict[str, Any], a: Any, root: Path, layouts: bool) -> list[Path]:
    """The files the application reads: ddlio's own (generated by its first point) when it writes the
    application's layout, else files the bench writes (read once, untimed, as ddlio settles its own)."""
    if layouts:
        db = root / "results.db"
        with sqlite3.connect(db) as c:
            key = c.execute("SELECT point_key FROM points WHERE format = ? AND status = 'completed' LIMIT 1",
                            (app["format"],)).fetchone()[0]
        files = ddlio_files(db, key, root)
        print(f"  the application reads ddlio's dataset: {files[0].parent}", flush=True)
        return files
    else:
        files = write_own(app, a, root / f"app-{app['format']}")
        print(f"  the application reads files written by the bench (ddlio has no application layouts yet): "
              f"{files[0].parent}", flush=True)
    settle(files)
    return files


if __name__ == "__main__":
    sys.exit(main())
