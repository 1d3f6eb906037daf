"""ddlio's checkpoints (``kind=checkpoint``) against fio writing and reading the same shards in the same layouts.

For each transfer size and layout, one ddlio point (``kind=checkpoint checkpoint=llama3_8b checkpoint.size=SIZE
ppn=2``: two ranks, each with its shard of the plan) and fio replaying the same bytes, side by side, in turn first
(ABBA), ``--rounds`` times:

- N-1 (``access=shared``): one file, ``checkpoint.distcp``; each rank ``pwrite()``s its shard at its offset (the
  shards' prefix sums). fio: two psync jobs on that one file, job ``r`` at ``offset`` = the shards before it and
  ``size`` = its shard (``offset_increment``, written out per job);
- N-N (``access=fpp checkpoint.layout=dcp``): a file per rank, ``__<r>_0.distcp``. fio: a file per job.

Every write call is ``bs`` = ``checkpoint.transfer_size`` bytes, each rank's (job's) file is fsync'd before its
clock stops (fio: ``end_fsync=1``, which fio counts in the job's runtime; ``fsync_on_close`` is not used: fio
took its time after its accounting, axboe/fio#831). Then the files' page cache is emptied (ddlio: its own step,
``posix_fadvise`` DONTNEED, verified with ``mincore``; fio: the same call through ddlio's helper
``experiments.kernel.cache.evict`` between fio's write and read jobs, verified the same way, fio's own
``invalidate`` off so its runtime holds no eviction, axboe/fio#1422) and the same shards are read back in calls of
the same size, ddlio's straight into its state (``checkpoint.restore_into=state``, as fio reads into its buffer;
``--restore-into staging`` adds DCP's new buffer per piece and the copy into the state). ddlio also writes rank
0's ``.metadata`` index (a few hundred bytes), counted in its bytes; fio writes none. While fio runs, the bench
holds memory the size of the shards, touched, as ddlio's ranks hold their state (:func:`trainer_state`; ``--state
cell`` holds it through both tools' rounds, ``--state none`` leaves it out): on this VM the page cache of a run
that first takes a GiB for its state lands in memory already handed back to the host, and writes into it run at a
half or a third. Each run starts after ``--settle`` seconds of quiet (12 by default): the tools reach their first
write 0.1 s (fio) to 1.5 s (ddlio's job) after the run before removed its files, and on a VM whose freed memory
goes back to its host that decides the writes (memory freed just now is several times faster to take than memory
freed seconds ago, ``python bench/evict_wait.py --writes``); 12 s lets both start from the same, returned memory.
``--warmup`` has each measured run follow an unmeasured run of the same tool, so that neither tool runs after the
other (docs/benchmarks.md: which tool ran just before decided the 4 MiB writes with ``--settle 1``).

Figures (MiB/s): fio's, the job bytes of both jobs over the longest job's runtime (its whole job, open to the end
of its fsync, in milliseconds); ddlio's MLPerf-style figure, the bytes over the largest per-rank duration
(``write_throughput_gib_s``: barrier to the end of the save, fsync and index included), which is the one that is
like fio's and the one the goal (ddlio >= 0.9 x fio at transfers >= 1 MiB) is judged by; and ddlio's Darshan-style
figure (``write_bandwidth_mib_s``: bytes over the slowest rank's time in its calls), printed beside it. Ratios are
ddlio / fio of the medians over rounds, and the median of each round's own ratio (paired, with its
distribution-free interval; this VM's disk varies by 30% from one run to the next).

    python bench/checkpoint_vs_fio.py                               # 64KiB,1MiB,4MiB x N-1,N-N, 5 rounds, 1 GiB
    python bench/checkpoint_vs_fio.py --transfers 1MiB --layouts n1 --rounds 9 --dir /scratch/me/bench
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
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from vs_fio import median_ci  # noqa: E402

from ddlio.units import format_size, parse_size  # noqa: E402

MIB, GIB = 1024**2, 1024**3
#: the layouts compared: name -> ddlio's overrides
LAYOUTS = {"n1": ["access=shared"], "nn": ["access=fpp", "checkpoint.layout=dcp"]}
#: the figures of one round of each tool, MiB/s (ddlio: MLPerf-style and Darshan-style; fio: its one)
FIGURES = ("write", "read", "write_darshan", "read_darshan")


def point(data: Path, size: int, transfer: int, layout: str, ranks: int, preset: str = "llama3_8b",
          overrides: list[str] | None = None) -> Any:
    """A validated ddlio checkpoint point: ``preset`` scaled to ``size`` bytes on ``ranks`` ranks of one node,
    written and read in calls of ``transfer`` bytes, in ``layout`` (a key of :data:`LAYOUTS`)."""
    from hydra import compose, initialize_config_dir
    from omegaconf import OmegaConf

    from experiments.config import register_configs
    from experiments.config.validate import validate

    register_configs()
    args = ["kind=checkpoint", f"checkpoint={preset}", f"checkpoint.size={size}",
            f"checkpoint.transfer_size={transfer}", f"ppn={ranks}", *LAYOUTS[layout], *(overrides or []),
            f"data_root={data}", f"db={data / 'bench.db'}"]
    with initialize_config_dir(config_dir=str(ROOT / "conf"), version_base=None):
        cfg = compose("config", overrides=args)
    return validate(OmegaConf.to_container(cfg, resolve=True), data)


def plan_of(spec: Any) -> Any:
    """The point's checkpoint plan (shard bytes per rank, files, offsets)."""
    from experiments.kinds.checkpoint import CheckpointKind

    return CheckpointKind().plan(spec)


def run_ddlio(spec: Any, run_dir: Path, record: dict[str, Any] | None = None) -> dict[str, float]:
    """One ddlio point, as its job runs it: its metrics (name -> value, the store's units). ``record``, if given,
    receives the point's whole record (its stored form: the layout read back per file, among the rest)."""
    from experiments.run.job import run_point

    rec = run_point(spec.to_dict(), str(run_dir))
    if rec.kind != "ddlio.result":
        raise SystemExit(f"ddlio's checkpoint point failed: {rec.to_dict().get('error')}")
    if record is not None:
        record.update(rec.to_dict())
    return {m["name"]: m["value"] for m in rec.to_dict()["metrics"]}


def ddlio_figures(metrics: dict[str, float]) -> dict[str, float]:
    """MiB/s of the save and the restore: MLPerf-style (bytes / the largest per-rank duration) and Darshan-style
    (bytes / the slowest rank's time in its calls)."""
    return {"write": metrics["write_throughput_gib_s"] * 1024, "read": metrics["read_throughput_gib_s"] * 1024,
            "write_darshan": metrics["write_bandwidth_mib_s"], "read_darshan": metrics["read_bandwidth_mib_s"],
            "resident": metrics["restore_resident_fraction"]}


def fio_files(plan: Any, directory: Path) -> list[tuple[Path, int, int]]:
    """(file, offset, bytes) of each rank's shard, as ddlio's plan lays them out in ``directory``."""
    return [(directory / plan.data_file(r), plan.offset(r), plan.shard_bytes[r]) for r in range(plan.ranks)]


def fio_job(shards: list[tuple[Path, int, int]], rw: str, transfer: int, sync: bool = True) -> str:
    """A fio job file: one psync job per shard (file, offset, bytes), sequential ``rw`` (write or read) in calls of
    ``transfer`` bytes, buffered; writes fsync'd at the end (``end_fsync``, inside the job's runtime), no
    fallocate (ddlio allocates nothing ahead), no invalidation by fio (the caller empties the cache)."""
    head = (f"[global]\nioengine=psync\nrw={rw}\nbs={transfer}\ndirect=0\ninvalidate=0\nfallocate=none\n"
            f"end_fsync={1 if sync and rw == 'write' else 0}\n")
    return head + "".join(f"[rank{r}]\nfilename={path}\noffset={off}\nsize={n}\n"
                          for r, (path, off, n) in enumerate(shards))


def run_fio(job_text: str, job_path: Path, rw: str, expected: int) -> dict[str, Any]:
    """Run one fio job file: MiB/s as the bytes of all jobs over the longest job's runtime, and each job's
    (bytes, runtime ms). Refuses a run whose bytes are not ``expected``."""
    job_path.write_text(job_text)
    out = subprocess.run(["fio", "--output-format=json", str(job_path)], capture_output=True, text=True,
                         timeout=900)
    if out.returncode != 0:
        raise SystemExit(f"fio failed: {out.stderr.strip() or out.stdout.strip()}")
    jobs = [(j[rw]["io_bytes"], j[rw]["runtime"]) for j in json.loads(out.stdout)["jobs"]]
    total, longest = sum(b for b, _ in jobs), max(ms for _, ms in jobs)
    if total != expected:
        raise SystemExit(f"fio {rw} {total} bytes, the plan's shards are {expected}")
    return {"mib_s": total / MIB / (longest / 1000), "jobs": jobs}


def trainer_state(plan: Any) -> list[Any]:
    """Memory the size of every rank's shard, touched: what ddlio's ranks hold while they save and restore (a
    trainer's state is in memory), held by the bench while fio runs, so that both tools' page cache comes from
    the same free memory. On this VM it matters: memory freed for more than ~2 s has been handed back to the host
    (free page reporting) and faults there when the page cache takes it (docs/benchmarks.md, Caches below the
    client); a run that first takes a gibibyte for its state writes its checkpoint into such memory."""
    import numpy as np

    state = [np.empty(b, dtype=np.uint8) for b in plan.shard_bytes]
    for a in state:
        a.fill(0xA5)
    return state


def fio_round(plan: Any, scratch: Path, transfer: int, hold_state: bool = True,
              inspect: Callable[[list[Path]], Any] | None = None) -> dict[str, Any]:
    """fio's save and restore of the plan's shards in a fresh directory, with the trainers' state held in memory
    meanwhile (:func:`trainer_state`, unless ``hold_state`` is false): MiB/s of each and the residency left after
    the eviction between them (0: emptied). ``inspect``, if given, is called with the written files before they
    are read (its answer is returned as ``inspected``). The files are removed after."""
    from experiments.kernel.cache import evict, residency
    from lustre import drop_client_cache

    state = trainer_state(plan) if hold_state else []
    d = scratch / "fio-ckpt"
    shutil.rmtree(d, ignore_errors=True)
    d.mkdir(parents=True)
    try:
        shards = fio_files(plan, d)
        expected = sum(n for _, _, n in shards)
        w = run_fio(fio_job(shards, "write", transfer), scratch / "write.fio", "write", expected)
        files = sorted({p for p, _, _ in shards})
        inspected = inspect(files) if inspect is not None else None
        drop_client_cache(files)  # a client's own cache (ceph-fuse's object cache), as ddlio's step empties it
        evict(files)
        resident = residency(files)
        r = run_fio(fio_job(shards, "read", transfer), scratch / "read.fio", "read", expected)
    finally:
        shutil.rmtree(d, ignore_errors=True)
        del state
    return {"write": w["mib_s"], "read": r["mib_s"], "resident": resident, "inspected": inspected}


def settle(seconds: float) -> None:
    """Start a tool's run from a quiet disk: everything written so far flushed (``sync``), then ``seconds`` of
    nothing (the files the other tool just removed are discarded meanwhile)."""
    os.sync()
    time.sleep(seconds)


#: how the bench holds the trainers' state (:func:`trainer_state`) while fio runs
STATE_MODES = ("round", "cell", "none")


def in_turn(rounds: int, runs: dict[str, Callable[[int], dict[str, Any]]], pause: float = 1.0,
            warmup: bool = False, each: Callable[[int, dict[str, Any]], None] | None = None) -> dict[str, Any]:
    """``rounds`` rounds of two tools, ``runs`` (name -> a run of round ``k``: its figures), the first-named first
    in even rounds and second in odd ones (ABBA: a drift of the machine cancels over pairs), each run after
    :func:`settle` (``pause`` seconds): each tool's figures per round, ``<first>_first`` (whether it went first)
    and ``warmup``. ``warmup``: each measured run follows an unmeasured run of the same tool, so that each tool
    runs after itself (what memory the one before left free, and how long ago, is then the same for both), not
    after the other: on the development VM that decided the 4 MiB saves (docs/benchmarks.md). ``each``, if given,
    is called with each round's number and the figures so far."""
    a, b = runs
    out: dict[str, Any] = {a: [], b: [], f"{a}_first": [], "warmup": warmup}
    for k in range(rounds):
        first = k % 2 == 0
        out[f"{a}_first"].append(first)
        for tool in ((a, b) if first else (b, a)):
            for measured in ((False, True) if warmup else (True,)):
                settle(pause)
                figures = runs[tool](k)
                if measured:
                    out[tool].append(figures)
        if each is not None:
            each(k, out)
    return out


def measure_cell(spec: Any, scratch: Path, transfer: int, rounds: int, pause: float = 1.0, state: str = "round",
                 warmup: bool = False) -> dict[str, Any]:
    """``rounds`` rounds of one cell, ddlio and fio in turn (:func:`in_turn`): each round's figures (MiB/s) of each
    tool and which went first. ``state``: ``round``, the trainers' state taken for each fio round and freed after
    it; ``cell``, taken once before the cell's first round and held through every round of both tools (no gibibyte
    is freed between a fio round and the ddlio round after it); ``none``, no state."""
    if state not in STATE_MODES:
        raise ValueError(f"state {state!r}: choose from {', '.join(STATE_MODES)}")
    plan = plan_of(spec)
    held = trainer_state(plan) if state == "cell" else []
    try:
        out = in_turn(rounds, {"ddlio": lambda k: ddlio_figures(run_ddlio(spec, scratch / "run")),
                               "fio": lambda k: fio_round(plan, scratch, transfer, state == "round")},
                      pause, warmup)
    finally:
        del held
    return {**out, "state": state}


def summarise(cell: dict[str, Any]) -> dict[str, Any]:
    """Medians (MiB/s) of each figure, ratios of medians ddlio / fio (MLPerf- and Darshan-style ddlio against
    fio's one figure) and the paired ratios' medians and intervals."""
    d, f = cell["ddlio"], cell["fio"]
    out: dict[str, Any] = {}
    for phase in ("write", "read"):
        fio_med = statistics.median(x[phase] for x in f)
        out[f"fio_{phase}"] = fio_med
        for fig in (phase, f"{phase}_darshan"):
            med = statistics.median(x[fig] for x in d)
            out[f"ddlio_{fig}"] = med
            out[f"ratio_{fig}"] = med / fio_med
        pairs = [a[phase] / b[phase] for a, b in zip(d, f, strict=True)]
        out[f"paired_{phase}"] = statistics.median(pairs)
        out[f"ci_{phase}"] = median_ci(pairs)
    out["resident"] = max(x["resident"] for x in d + f)
    return out


def prerequisites() -> list[str]:
    """What this bench needs and does not find."""
    return [] if shutil.which("fio") else ["fio (apt-get install fio)"]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--size", default="1GiB", help="one checkpoint's bytes, all ranks (default %(default)s)")
    ap.add_argument("--transfers", default="64KiB,1MiB,4MiB", help="bytes of a call (default %(default)s)")
    ap.add_argument("--layouts", default="n1,nn", help="n1 (access=shared), nn (fpp, dcp); default %(default)s")
    ap.add_argument("--ranks", type=int, default=2, help="ranks = fio jobs (default %(default)s)")
    ap.add_argument("--preset", default="llama3_8b", help="conf/checkpoint preset (default %(default)s)")
    ap.add_argument("--rounds", type=int, default=5, help="rounds of each, ABBA (default %(default)s)")
    ap.add_argument("--settle", type=float, default=12.0,
                    help="seconds of quiet (after a sync) before each run (default %(default)s: long enough that "
                         "memory freed by the run before has gone back to a VM's host for both tools)")
    ap.add_argument("--restore-into", choices=("state", "staging"), default="state",
                    help="ddlio's checkpoint.restore_into (default %(default)s: reads straight into the state, as "
                         "fio's into its buffer; staging adds DCP's new buffer and copy per piece)")
    ap.add_argument("--state", choices=STATE_MODES, default="round",
                    help="the trainers' state beside fio (see trainer_state): taken for each fio round (round, "
                         "default), held through the whole cell by both tools' rounds (cell), or none")
    ap.add_argument("--warmup", action="store_true",
                    help="before each measured run, an unmeasured one of the same tool: each tool runs after itself")
    ap.add_argument("--dir", help="scratch directory (default: a temporary one under /tmp, removed after)")
    ap.add_argument("--runs", help="also write every round's figures to this JSON file")
    args = ap.parse_args(argv)
    missing = prerequisites()
    if missing:
        print(f"missing: {', '.join(missing)}", file=sys.stderr)
        return 2
    tmp = None
    scratch = Path(args.dir) if args.dir else Path(tmp := tempfile.mkdtemp(prefix="ddlio-ckpt-vs-fio-"))
    scratch.mkdir(parents=True, exist_ok=True)
    size = parse_size(args.size)
    rows, runs = [], []
    try:
        for transfer in [parse_size(s) for s in args.transfers.split(",")]:
            for layout in args.layouts.split(","):
                spec = point(scratch, size, transfer, layout, args.ranks, args.preset,
                             overrides=[f"checkpoint.restore_into={args.restore_into}"])
                shards = plan_of(spec).shard_bytes
                cell = measure_cell(spec, scratch, transfer, args.rounds, args.settle, args.state, args.warmup)
                s = summarise(cell)
                rows.append((format_size(transfer), layout, s))
                runs.append({"transfer": transfer, "layout": layout, "shards": list(shards), **cell})
                if args.runs:
                    Path(args.runs).write_text(json.dumps(runs, indent=1))
                print(f"{format_size(transfer):>9} {layout}  shards {'+'.join(format_size(b) for b in shards)}  "
                      f"write fio {s['fio_write']:7.1f} ddlio {s['ddlio_write']:7.1f} MiB/s "
                      f"ratio {s['ratio_write']:4.2f} (paired {s['paired_write']:4.2f}; Darshan-style "
                      f"{s['ratio_write_darshan']:4.2f})  read fio {s['fio_read']:7.1f} ddlio {s['ddlio_read']:7.1f} "
                      f"ratio {s['ratio_read']:4.2f} (paired {s['paired_read']:4.2f}; Darshan-style "
                      f"{s['ratio_read_darshan']:4.2f})  residency before reads <= {s['resident']:.3f}", flush=True)
    finally:
        if tmp:
            shutil.rmtree(tmp, ignore_errors=True)
    print(f"\nddlio / fio, {args.ranks} ranks, {format_size(size)} a checkpoint, medians of {args.rounds} rounds "
          "(MiB/s; ratio: MLPerf-style ddlio over fio, the goal's; Darshan: ddlio's slowest-rank figure over fio)")
    print(f"{'transfer':>9} {'layout':>6} | {'fio W':>7} {'ddlio W':>7} {'ratio':>5} {'paired [CI]':>18} "
          f"{'Darshan':>7} | {'fio R':>7} {'ddlio R':>7} {'ratio':>5} {'paired [CI]':>18} {'Darshan':>7}")
    for transfer, layout, s in rows:
        cw, cr = s["ci_write"], s["ci_read"]
        print(f"{transfer:>9} {layout:>6} | {s['fio_write']:7.1f} {s['ddlio_write']:7.1f} {s['ratio_write']:5.2f} "
              f"{s['paired_write']:5.2f} [{cw[0]:.2f}, {cw[1]:.2f}] {s['ratio_write_darshan']:7.2f} | "
              f"{s['fio_read']:7.1f} {s['ddlio_read']:7.1f} {s['ratio_read']:5.2f} "
              f"{s['paired_read']:5.2f} [{cr[0]:.2f}, {cr[1]:.2f}] {s['ratio_read_darshan']:7.2f}")
    big = [s for t, _, s in rows if parse_size(t) >= MIB]
    if big:
        print(f"min ratio at transfers >= 1 MiB: write {min(s['ratio_write'] for s in big):.2f}, "
              f"read {min(s['ratio_read'] for s in big):.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
