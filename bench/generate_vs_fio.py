"""Dataset generation against fio's sequential write on the same file system, measured in the same run.

For each format, a dataset of ``--size`` bytes (``--sample-size`` samples, one shared file by default: the
``default`` workload's 256 MiB) is generated through ddlio's own path (:func:`experiments.dataset.ensure_dataset`
with :func:`experiments.run.generation_runner`; a point's job hands the same plan to its kernel's ranks instead,
which write it with the same code, :func:`experiments.dataset.writers.generate_by_writers` for one rank): the
dataset lock, an empty directory, the files written (by writer processes forked from a one-rank generation's, one
per usable core, or by an MPI step of ``min(ppn, files)`` ranks), each fsync'd, the verification pass and the
manifest. Its rate is the bytes on disk (data files and
sidecars, from the manifest) / the wall seconds of that whole call. The clock starts once the runner is ready: a
one-rank dataset's writer, forked when the runner is made, has loaded numpy and the format's library (its start:
0.1-0.3 s here, as long as writing 256 MiB takes), as a point's job reaches generation with its kernel's ranks
already started and as fio's runtime starts once its job is set up. That start is shown apart (``start s``, wall
seconds) and is not in the CPU seconds either. A several-rank generation's MPI step starts inside the clock.

fio writes the same number of bytes to a new file in the same directory: one psync job (``--fio-jobs``), blocks
of ``--fio-bs`` (1MiB), ``end_fsync=1`` (fio counts the final fsync in its runtime), ``fallocate=none`` (a fresh
file grows as ddlio's do). Its rate is fio's own bandwidth (bytes / runtime).

Both run ``--rounds`` times, interleaved (format A, fio, format B, fio, ...; every timed run starts after
``sync``; every round opens with an untimed fio write of ``--size``; round r starts at the r-th plain format and
goes round, the images last: the first generation of a round runs after two fio writes, so no format takes that
place in every round), and medians are compared: ``ratio`` = a
format's median generation MiB/s / the median of the fio runs beside the plain formats (the file system's
sequential write speed, measured between every two generations; the median of the fio runs beside each format is
shown too). The last line is ``min ratio: X.XX`` over the formats whose writing is not bound by an image codec
(hdf5, tfrecord, npz, npy, bin). For jpeg and png (``--image-size`` bytes of payload, smaller: the codec is slow)
the table gives the payload MiB/s generated and, beside it, the codec's own speed encoding the same pixels in
memory (no file I/O, no other work): generation / codec says how close generation comes to the codec's bound.

Every timed run starts right after the previous run's files (as large) were deleted, so both write into page-cache
memory just freed. This matters on a VM: writes go to the guest's page cache and, through fsync, to the host; and
memory the guest freed a few seconds ago has been handed back to the host (virtio-balloon free page reporting),
so writing into it faults every page in again: here fio writes 256 MiB at ~1300 MiB/s right after a deletion and
at ~300 MiB/s after ``--settle 8``. Other load on the machine moves both too, hence interleaving and rounds.

    python bench/generate_vs_fio.py                          # 256MiB per format (64MiB for images), 5 rounds, temp dir
    python bench/generate_vs_fio.py --size 1GiB --formats bin,hdf5 --rounds 5 --data-root /scratch/me/gen
    python bench/generate_vs_fio.py --workload mlperf/unet3d --scale 0.05 --rounds 2   # a scaled MLPerf dataset
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from ddlio.units import format_size, parse_size  # noqa: E402

MIB = 1024 * 1024
#: formats whose generation is bound by their writing, not by an image codec: the ``min ratio`` is over these
PLAIN = ("hdf5", "tfrecord", "npz", "npy", "bin")
IMAGES = ("jpeg", "png")


def point(data: Path, fmt: str, total: int, sample_size: int, files: int, ppn: int,
          workload: str | None = None, scale: float = 1.0) -> Any:
    """A validated ddlio point whose dataset is ``total`` bytes of ``sample_size``-byte samples in ``files`` files
    (``workload``: instead, a workload preset's dataset, e.g. ``mlperf/unet3d``, at ``scale`` of its samples)."""
    from hydra import compose, initialize_config_dir
    from omegaconf import OmegaConf

    from experiments.config import register_configs
    from experiments.config.validate import validate

    register_configs()
    if workload:
        overrides = [f"workload={workload}", f"workload.scale={scale}", f"ppn={ppn}"]
    else:
        samples = max(files, total // sample_size)
        overrides = [
            f"format={fmt}", "access=shared", f"ppn={ppn}", f"workload.samples={samples}",
            f"workload.sample_size={sample_size}", f"workload.samples_per_file={-(-samples // files)}",
        ]
    overrides += [f"data_root={data}", f"db={data / 'bench.db'}"]
    with initialize_config_dir(config_dir=str(ROOT / "conf"), version_base=None):
        cfg = compose("config", overrides=overrides)
    return validate(OmegaConf.to_container(cfg, resolve=True), data)


from ddlio.runpaths import runs_dir  # noqa: E402
from experiments.dataset import DatasetPlan  # noqa: E402


def cpu_seconds() -> float:
    """CPU seconds (user + system) of this process, its threads and its waited-for children (MPI steps)."""
    me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime


def generate(spec: Any, run_dir: Path) -> tuple[float, int, int, int, float, float]:
    """Generate ``spec``'s dataset from scratch through the product's path; returns (wall seconds, bytes on disk,
    payload bytes, generation ranks, CPU seconds, start seconds). The clock starts once the runner's writer
    forked ahead has loaded its libraries (:meth:`~experiments.run.job.GenerationRunner.ready`), as a point's job
    reaches generation with its kernel's ranks started and fio's runtime starts with its job set up; the CPU
    seconds leave that start out too. The start's wall seconds are returned apart."""
    from experiments.dataset import ensure_dataset
    from experiments.run import generation_runner
    from lustre import Layout

    plan = DatasetPlan.from_point(spec)
    shutil.rmtree(plan.directory, ignore_errors=True)
    run_dir.mkdir(parents=True, exist_ok=True)
    os.sync()
    t = time.perf_counter()
    run = generation_runner(spec, run_dir)
    start_cpu = run.ready()
    t, started, cpu = time.perf_counter(), time.perf_counter() - t, cpu_seconds()
    info = ensure_dataset(plan, Layout(spec.layout.stripe_count, spec.layout.stripe_size), run, spec.ranks)
    seconds, cpu = time.perf_counter() - t, cpu_seconds() - cpu - start_cpu
    run.close()
    if not info.generated:
        raise SystemExit(f"{plan.directory}: the dataset was reused, not generated")
    m = info.manifest
    return seconds, int(m["disk_bytes"]), int(m["payload_bytes"]), int(m["generation_ranks"]), cpu, started


def run_fio(directory: Path, nbytes: int, bs: int, jobs: int) -> tuple[float, float]:
    """fio's sequential write bandwidth (MiB/s) of ``nbytes`` (split over ``jobs`` files) into ``directory``, and
    its CPU seconds (fio's usr + sys share of its jobs' runtime)."""
    directory.mkdir(parents=True, exist_ok=True)
    per_job = -(-nbytes // jobs // bs) * bs
    os.sync()
    argv = ["fio", "--output-format=json", "--name=gen", f"--directory={directory}", "--rw=write", f"--bs={bs}",
            f"--size={per_job}", f"--numjobs={jobs}", "--ioengine=psync", "--end_fsync=1", "--fallocate=none",
            "--group_reporting=1", "--create_on_open=1"]
    try:
        out = subprocess.run(argv, capture_output=True, text=True, timeout=1800)
    finally:
        for p in directory.glob("gen.*"):
            p.unlink()
    if out.returncode != 0:
        raise SystemExit(f"fio failed: {out.stderr.strip() or out.stdout.strip()}")
    job = json.loads(out.stdout)["jobs"][0]
    write = job["write"]
    if write["io_bytes"] != per_job * jobs:
        raise SystemExit(f"fio wrote {write['io_bytes']} bytes, asked {per_job * jobs}")
    return write["bw_bytes"] / MIB, (job["usr_cpu"] + job["sys_cpu"]) / 100 * job["job_runtime"] / 1000


def codec_rate(fmt_name: str, spec: Any) -> float:
    """MiB/s of payload the format's codec encodes in memory (no file I/O), on the dataset's own pixels."""
    from experiments.formats import get_format
    from experiments.formats.image import payload_image

    plan = DatasetPlan.from_point(spec)
    fmt = get_format(fmt_name, **plan.format_options)
    payload = plan.file_payload(0)
    images = []
    for lo, hi, buf in payload.iter_groups():
        pos = 0
        for s in payload.sizes[lo:hi].tolist():
            images.append((payload_image(buf[pos : pos + s]), s))
            pos += s
        if len(images) >= 64:
            break
    t = time.perf_counter()
    for pixels, s in images:
        fmt.encode(pixels, s)
    return sum(s for _, s in images) / (time.perf_counter() - t) / MIB


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--size", default="256MiB", help="dataset payload per format (default %(default)s)")
    ap.add_argument("--image-size", default="64MiB", help="dataset payload for jpeg and png (default %(default)s)")
    ap.add_argument("--sample-size", default="128KiB", help="bytes per sample (default %(default)s)")
    ap.add_argument("--formats", default=",".join(PLAIN + IMAGES), help="formats (default %(default)s)")
    ap.add_argument("--files", type=int, default=1, help="files per dataset (default %(default)s)")
    ap.add_argument("--ppn", type=int, default=1, help="the point's ranks: generation uses min(ppn, files)")
    ap.add_argument("--rounds", type=int, default=5, help="interleaved rounds, median reported (default %(default)s)")
    ap.add_argument("--fio-bs", default="1MiB", help="fio's write block size (default %(default)s)")
    ap.add_argument("--fio-jobs", type=int, default=1, help="fio's writing processes (default %(default)s)")
    ap.add_argument("--workload", help="instead of --formats and sizes, a workload preset's own dataset (format, "
                    "sample sizes and files), e.g. mlperf/unet3d; its row is named after it")
    ap.add_argument("--scale", type=float, default=1.0,
                    help="with --workload: workload.scale, the fraction of the preset's samples (default 1)")
    ap.add_argument("--settle", type=float, default=0.0,
                    help="seconds to wait after deleting the last run's files, before each timed run (default 0)")
    ap.add_argument("--data-root", help="where datasets and fio's file go (default: a temporary directory under "
                    "the system's temp dir, removed after); the file system under test")
    args = ap.parse_args(argv)
    formats = [f.strip() for f in args.formats.split(",") if f.strip()]
    unknown = [f for f in formats if f not in PLAIN + IMAGES]
    if args.workload:
        formats, unknown = [args.workload], []
        if not (ROOT / "conf" / "workload" / f"{args.workload}.yaml").is_file():
            print(f"unknown workload {args.workload}: see conf/workload/", file=sys.stderr)
            return 2
    if unknown:
        print(f"unknown format(s) {', '.join(unknown)}: choose from {', '.join(PLAIN + IMAGES)}", file=sys.stderr)
        return 2
    if shutil.which("fio") is None:
        print("fio not found: apt-get install fio", file=sys.stderr)
        return 2
    size, image_size, sample = parse_size(args.size), parse_size(args.image_size), parse_size(args.sample_size)
    bs = parse_size(args.fio_bs)
    tmp = None
    data = Path(args.data_root) if args.data_root else Path(tmp := tempfile.mkdtemp(prefix="ddlio-gen-vs-fio-"))
    data = data.resolve()
    gen: dict[str, list[float]] = {f: [] for f in formats}
    fio: dict[str, list[float]] = {f: [] for f in formats}
    gen_cpu: dict[str, list[float]] = {f: [] for f in formats}  # CPU seconds per GiB written
    starts: dict[str, list[float]] = {f: [] for f in formats}  # the forked writer's start, wall seconds (untimed)
    plain = (*PLAIN, args.workload) if args.workload else PLAIN
    fio_cpu: list[float] = []
    disk: dict[str, int] = {}
    ranks: dict[str, int] = {}
    specs = {f: point(data, f, image_size if f in IMAGES else size, sample, args.files, args.ppn,
                      args.workload, args.scale) for f in formats}
    if args.workload:
        spec = specs[args.workload]
        size = int(DatasetPlan.from_point(spec).sizes().sum())
        print(f"{args.workload} at workload.scale={args.scale:g}: format {spec.format.name}", flush=True)
        w = spec.workload
        what = (f"{format_size(size)} in {w.samples} samples of {format_size(w.sample_size)} ± "
                f"{format_size(w.sample_size_stdev)}, {spec.num_files} file(s)")
    else:
        what = (f"payload {format_size(size)} per format ({format_size(image_size)} for images), "
                f"{format_size(sample)} samples, {args.files} file(s)")
    print(f"data root {data}; {what}, ppn={args.ppn}; fio bs={format_size(bs)} jobs={args.fio_jobs}, end_fsync=1",
          flush=True)
    try:
        for rnd in range(args.rounds):
            # untimed, as large as the largest run: the round's first timed write meets memory as all the others do
            # (the last round ended with the images' smaller files)
            run_fio(data / "fio", size, bs, args.fio_jobs)
            order = [f for f in formats if f not in IMAGES]
            order = order[rnd % max(1, len(order)) :] + order[: rnd % max(1, len(order))]
            for f in order + [f for f in formats if f in IMAGES]:
                time.sleep(args.settle)
                s, nbytes, payload, ranks[f], cpu, started = generate(specs[f], runs_dir(data) / f)
                starts[f].append(started)
                gen_cpu[f].append(cpu / (nbytes / 2**30))
                disk[f] = nbytes
                gen[f].append((payload if f in IMAGES else nbytes) / s / MIB)
                shutil.rmtree(DatasetPlan.from_point(specs[f]).directory)
                time.sleep(args.settle)
                bw, cpu = run_fio(data / "fio", nbytes, bs, args.fio_jobs)
                fio[f].append(bw)
                if f in plain:
                    fio_cpu.append(cpu / (nbytes / 2**30))
                print(f"round {rnd + 1} {f:>8}: generation {gen[f][-1]:8.1f} MiB/s ({format_size(nbytes)} in "
                      f"{s:.2f} s, {ranks[f]} rank(s); writer's start {started:.2f} s before)   fio "
                      f"{fio[f][-1]:8.1f} MiB/s", flush=True)
        codec = {f: codec_rate(f, specs[f]) for f in formats if f in IMAGES}
    finally:
        if tmp:
            shutil.rmtree(tmp, ignore_errors=True)
    pooled = [w for f in formats if f in plain for w in fio[f]] or [w for f in formats for w in fio[f]]
    ref = statistics.median(pooled)
    print(f"\nfio sequential write: median {ref:.1f} MiB/s over its {len(pooled)} runs of --size "
          f"(min {min(pooled):.1f}, max {max(pooled):.1f}); ratio = generation / this median")
    if fio_cpu:
        print(f"fio's CPU: median {statistics.median(fio_cpu):.2f} s per GiB written")
    print(f"{'format':>8} {'on disk':>10} {'gen MiB/s':>10} {'(min-max)':>15} {'CPU s/GiB':>9} {'start s':>7} "
          f"{'fio beside':>10} {'ratio':>6}")
    ratios = {}
    for f in formats:
        g, w = statistics.median(gen[f]), statistics.median(fio[f])
        spread, cpu = f"({min(gen[f]):.0f}-{max(gen[f]):.0f})", statistics.median(gen_cpu[f])
        line = (f"{f:>8} {format_size(disk[f]):>10} {g:10.1f} {spread:>15} {cpu:9.2f} "
                f"{statistics.median(starts[f]):7.2f} {w:10.1f}")
        if f in IMAGES:
            c = codec[f]
            print(f"{line}   payload MiB/s; the codec alone encodes {c:.1f} MiB/s of the same pixels: "
                  f"generation/codec {g / c:.2f} (not in the min ratio)")
        else:
            ratios[f] = g / ref
            print(f"{line} {g / ref:6.2f}")
    if ratios:
        print(f"min ratio: {min(ratios.values()):.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
