"""The paper's stripe mechanism, measured by ddlio itself on a striping file system: the capped one-box CephFS of
tests/cluster/cephfs.sh (8 OSDs, reads capped at 24 MiB/s each, ceph-fuse).

One ddlio sweep: stripe 1, 2, 4, 8 x access shared/fpp x 1 and 4 ranks (one node), ``--repeat`` repetitions, a
``bin`` dataset of 1 MiB samples (``--samples`` of them, 64 per file), 8 MiB objects, one cold epoch per point
(``cache=cold``: the page cache and ceph-fuse's object cache emptied and verified; the OSDs keep no read cache,
tests/cluster/cephfs.sh). Then fio reads the very same files, cold (ceph-fuse's cache emptied the same way, fio's
``invalidate=1`` for the page cache): one psync job reading every file in turn with 1 MiB requests (beside ddlio's
one reader), and four jobs with a file each (beside ddlio's four ranks, fpp). Medians, MiB/s, and each stripe
count's ratio to stripe 1, side by side; then ``python -m analysis guidelines`` on the sweep's store, whose stripe
scenarios must now decide. Goal: one reader at stripe 4 >= 1.8x stripe 1, and ddlio's ratio within 15% of fio's.

    bash tests/cluster/cephfs.sh start
    CEPH_CONF=/tmp/ddlio-cephfs-ci/ceph.conf python bench/stripes.py       # ~10 min
    python bench/stripes.py --repeat 2 --samples 128 --data /mnt/cephfs/me/bench
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from lustre.ceph import empty_client_cache, is_cephfs  # noqa: E402
from lustre.fs import fs_info  # noqa: E402

STRIPES = [1, 2, 4, 8]
MIB = 1024 * 1024


def mount_point() -> Path | None:
    out = subprocess.run(["bash", str(ROOT / "tests" / "cluster" / "cephfs.sh"), "mountpoint"],
                         capture_output=True, text=True, timeout=30, check=False)
    return Path(out.stdout.strip()) if out.returncode == 0 else None


def sweep(data: Path, db: Path, args: argparse.Namespace) -> None:
    """The ddlio sweep (repeat outermost, so the repetitions of a configuration are spread over the run)."""
    cmd = [sys.executable, str(ROOT / "sweep.py"), "-m", f"repeat={','.join(map(str, range(args.repeat)))}",
           f"stripe={','.join(map(str, STRIPES))}", "access=shared,fpp", "ppn=1,4", "format=bin", "workload=tiny",
           f"workload.samples={args.samples}", "workload.sample_size=1MiB", "workload.samples_per_file=64",
           "workload.batch_size=4", "workload.epochs=1", "workload.cache=cold", f"object_size={args.object_size}",
           f"data_root={data}", f"db={db}"]
    print("$ " + " ".join(cmd[1:]), flush=True)
    out = subprocess.run(cmd, cwd=data.parent, timeout=7200, check=False)
    if out.returncode != 0:
        raise SystemExit(f"the sweep failed (exit {out.returncode})")


def ddlio_figures(db: Path) -> tuple[dict[tuple[int, str, int], list[float]], dict[int, list[Path]]]:
    """Bandwidth (MiB/s) per (stripe, access, ranks), and each stripe count's dataset files."""
    bw: dict[tuple[int, str, int], list[float]] = {}
    files: dict[int, list[Path]] = {}
    with sqlite3.connect(db) as c:
        rows = c.execute("SELECT stripe_count, access, ppn, bandwidth_mib_s, run_dir, dataset_key, format FROM points"
                         " WHERE status = 'completed'").fetchall()
    for stripe, access, ppn, b, run_dir, key, fmt in rows:
        bw.setdefault((stripe, access, ppn), []).append(b)
        d = Path(run_dir).parents[2] / "datasets" / f"{fmt}-{key}"
        if ppn == 1 and d.is_dir():
            manifest = json.loads((d / "manifest.json").read_text())
            files[stripe] = [d / f["name"] for f in manifest["files"] if f["samples"]]
    return bw, files


def fio(files: list[Path], jobs: int) -> float:
    """fio's aggregate read bandwidth (MiB/s), cold: one job reading every file in turn (jobs=1), or one job per
    file (jobs=len(files)); 1 MiB psync requests."""
    info = fs_info(files[0])
    dropped = empty_client_cache(files, info.mount_point, info.mount_type)
    if "error" in dropped:
        raise SystemExit(dropped["error"])
    if jobs == 1:
        sections = "[all]\nfilename=" + ":".join(str(f).replace(":", "\\:") for f in files) + \
            "\nfile_service_type=sequential\n"
    else:
        sections = "".join(f"[f{i}]\nfilename={f}\n" for i, f in enumerate(files[:jobs]))
    with tempfile.NamedTemporaryFile("w", suffix=".fio", delete=False) as job:
        job.write(f"[global]\nioengine=psync\nrw=read\nbs=1M\ninvalidate=1\ngroup_reporting=1\n{sections}")
    try:
        out = subprocess.run(["fio", "--output-format=json", job.name], capture_output=True, text=True,
                             timeout=1800, check=False)
    finally:
        os.unlink(job.name)
    if out.returncode != 0:
        raise SystemExit(f"fio failed: {out.stderr.strip() or out.stdout.strip()}")
    read = json.loads(out.stdout)["jobs"][0]["read"]
    want = sum(f.stat().st_size for f in files[:jobs]) if jobs > 1 else sum(f.stat().st_size for f in files)
    if read["io_bytes"] != want:
        raise SystemExit(f"fio read {read['io_bytes']} bytes of {want}")
    return read["bw_bytes"] / MIB


def table(bw: dict, fio_bw: dict) -> dict[str, float]:
    """Print medians and ratios to stripe 1; the figures the goal is judged on."""
    med = {k: statistics.median(v) for k, v in bw.items()}
    fmed = {k: statistics.median(v) for k, v in fio_bw.items()}
    print(f"\n{'stripe':>6} | {'1 reader shared':>15} {'1 reader fpp':>12} {'fio 1 job':>9} | "
          f"{'4 ranks shared':>14} {'4 ranks fpp':>11} {'fio 4 jobs':>10}   (MiB/s, median; x = ratio to stripe 1)")
    for s in STRIPES:
        cells = []
        for key, ref in (((s, "shared", 1), (1, "shared", 1)), ((s, "fpp", 1), (1, "fpp", 1)),
                         (("fio", s, 1), ("fio", 1, 1)), ((s, "shared", 4), (1, "shared", 4)),
                         ((s, "fpp", 4), (1, "fpp", 4)), (("fio", s, 4), ("fio", 1, 4))):
            src = fmed if key[0] == "fio" else med
            cells.append(f"{src[key]:6.1f} {src[key] / src[ref]:4.2f}x" if key in src and ref in src else "-")
        print(f"{s:>6} | {cells[0]:>15} {cells[1]:>12} {cells[2]:>9} | {cells[3]:>14} {cells[4]:>11} {cells[5]:>10}")
    one = [med[(4, a, 1)] / med[(1, a, 1)] for a in ("shared", "fpp")]
    ratio = statistics.mean(one)
    fio_ratio = fmed[("fio", 4, 1)] / fmed[("fio", 1, 1)]
    return {"ddlio": ratio, "fio": fio_ratio}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", help="a directory on CephFS (default: a fresh one on the tests/cluster/cephfs.sh mount)")
    ap.add_argument("--repeat", type=int, default=3, help="repetitions of every point and fio run (default 3)")
    ap.add_argument("--samples", type=int, default=256, help="1 MiB samples in the dataset (default 256)")
    ap.add_argument("--object-size", default="8MiB", help="CephFS object size of the layouts (default 8MiB)")
    ap.add_argument("--keep", action="store_true", help="keep the data directory (default: removed at the end)")
    args = ap.parse_args(argv)
    if shutil.which("fio") is None:
        print("fio not found: apt-get install fio", file=sys.stderr)
        return 2
    if args.data:
        work = Path(args.data)
    else:
        mnt = mount_point()
        if mnt is None:
            print("no CephFS mount: run bash tests/cluster/cephfs.sh start, or give --data", file=sys.stderr)
            return 2
        work = mnt / "ddlio-bench" / f"stripes-{os.getpid()}"
    if not is_cephfs(work):
        print(f"{work} is not on CephFS (no ceph.dir.layout xattrs)", file=sys.stderr)
        return 2
    work.mkdir(parents=True, exist_ok=True)
    db = Path(tempfile.mkdtemp(prefix="ddlio-stripes-")) / "stripes.db"
    try:
        sweep(work / "d", db, args)
        bw, files = ddlio_figures(db)
        fio_bw: dict[tuple[str, int, int], list[float]] = {}
        for _ in range(args.repeat):
            for s in STRIPES:
                for jobs in (1, 4):
                    fio_bw.setdefault(("fio", s, jobs), []).append(fio(files[s], jobs))
        got = table(bw, fio_bw)
        print(f"\none reader, stripe 4 / stripe 1: ddlio {got['ddlio']:.2f}x (mean of shared and fpp), "
              f"fio {got['fio']:.2f}x; ddlio/fio {got['ddlio'] / got['fio']:.2f}")
        ok = got["ddlio"] >= 1.8 and abs(got["ddlio"] / got["fio"] - 1) <= 0.15
        print(f"goal (>= 1.80x, within 15% of fio): {'met' if ok else 'NOT met'}\n")
        print(f"$ python -m analysis guidelines --db {db}", flush=True)
        subprocess.run([sys.executable, "-m", "analysis", "guidelines", "--db", str(db)], cwd=ROOT, timeout=600,
                       check=False)
        print(f"store: {db}")
        return 0 if ok else 1
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    raise SystemExit(main())
