"""A real torch.distributed.checkpoint save and restore beside ddlio's emulation of it, the same bytes per rank.

The torch side is bench/checkpoint_torch_program.py (torch only, no ddlio code), run by
``torchrun --standalone --nproc_per_node RANKS`` (gloo, CPU ranks, ``OMP_NUM_THREADS=1`` as torchrun sets it):
every rank holds one uint8 DTensor per piece of its shard, sharded ``Shard(0)`` over a CPU device mesh, the
pieces' bytes those of ddlio's plan for the preset (``checkpoint=llama3_8b checkpoint.size=SIZE``: on 2 ranks
under ZeRO-3, a rank's model states and its optimizer states). ``dcp.save`` with DCP's own
``FileSystemWriter(sync_files=True)`` is timed from a barrier on every rank; then a second torchrun allocates the
DTensors, empties the page cache of the files the save wrote (``posix_fadvise`` DONTNEED, verified with
``mincore``: the torch program's own, right before its timed call, where ddlio's step empties it too), times
``dcp.load`` with ``FileSystemReader`` into them and checks every byte (untimed).

ddlio's side is ``kind=checkpoint access=fpp checkpoint.layout=dcp`` on the same preset and size (its
``checkpoint.transfer_size``, 4 MiB unless ``--transfer``), run as its job runs it. The two alternate, in turn
first (ABBA), ``--rounds`` times, each run after ``--settle`` seconds of quiet.

On a VM whose freed memory goes back to its host (virtio-balloon's free page reporting, as on the development
VM), a save into memory freed seconds ago runs several times slower than one into memory freed just now
(``python bench/evict_wait.py --writes`` shows it), and each tool starts writing a different time after the
last files were removed (ddlio's job about 1.5 s, torchrun about 5 s): ``--settle`` 12 (the default) lets every
run start from the same memory, the slow case. ``--settle 1`` shows the other.

Figures, MiB/s, MLPerf-style on both sides: the shards' bytes over the largest per-rank duration (torch: the
timed ``dcp.save`` / ``dcp.load`` call, planning collectives and rank 0's ``.metadata`` included; ddlio:
``write_throughput_gib_s`` / ``read_throughput_gib_s``, barrier to the end of the save or restore, index
included). Ratios ddlio / torch of the medians, and the median of the rounds' own ratios. The files each wrote
(names, bytes) are listed side by side: DCP's from the directory, ddlio's from its plan (its own tests hold the
files it writes to the plan, byte for byte).

    python bench/checkpoint_vs_torch.py                         # llama3_8b at 1 GiB, 2 ranks, 5 rounds
    python bench/checkpoint_vs_torch.py --size 2GiB --rounds 7 --dir /scratch/me/bench
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
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from checkpoint_vs_fio import ddlio_figures, in_turn, plan_of, point, run_ddlio  # noqa: E402
from vs_fio import median_ci  # noqa: E402

from ddlio.units import format_size, parse_size  # noqa: E402

MIB = 1024**2
PROGRAM = ROOT / "bench" / "checkpoint_torch_program.py"


def torchrun() -> str | None:
    """torchrun of the interpreter running this bench (its venv), else one on PATH."""
    here = Path(sys.executable).parent / "torchrun"
    return str(here) if here.exists() else shutil.which("torchrun")


def prerequisites() -> list[str]:
    """What this bench needs and does not find."""
    missing = []
    try:
        import torch.distributed.checkpoint  # noqa: F401
        from torch.distributed.tensor import DTensor  # noqa: F401
    except ImportError as e:
        missing.append(f"torch with torch.distributed.checkpoint and DTensor ({e}; pip install 'ddlio[torch]')")
    if torchrun() is None:
        missing.append("torchrun (comes with torch)")
    return missing


def equal_pieces(plan: Any) -> list[int]:
    """The bytes of each piece of a rank's shard, which must be the same on every rank: DTensor's ``Shard(0)``
    splits a tensor evenly, and DCP computes each rank's part so."""
    sizes = [[b for _, b in rank] for rank in plan.pieces]
    if any(s != sizes[0] for s in sizes):
        raise SystemExit(f"error: the ranks' pieces differ ({sizes}): this bench shards each piece evenly over the "
                         "ranks (DTensor Shard(0)); choose a preset or rank count whose shards are equal")
    return sizes[0]


def run_torch(mode: str, directory: Path, pieces: list[int], seed: int, out: Path, ranks: int) -> dict[str, Any]:
    """One torchrun of the torch program (``mode`` save or load): each rank's seconds in the timed call."""
    cmd = [torchrun() or "torchrun", "--standalone", f"--nproc_per_node={ranks}", str(PROGRAM), "--mode", mode,
           "--dir", str(directory), "--pieces", ",".join(map(str, pieces)), "--seed", str(seed), "--out", str(out)]
    out.unlink(missing_ok=True)
    env = {**os.environ, "PYTHONPATH": ""}  # the torch program sees torch, not ddlio
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=900, env=env)
    if done.returncode != 0 or not out.exists():
        tail = "\n".join((done.stderr or done.stdout).strip().splitlines()[-15:])
        raise SystemExit(f"torch {mode} failed ({done.returncode}):\n{tail}")
    said = json.loads(out.read_text())
    if not all(r["ok"] for r in said["ranks"]):
        raise SystemExit(f"torch {mode}: the bytes loaded differ from the bytes saved")
    return said


def torch_round(plan: Any, scratch: Path, seed: int) -> dict[str, Any]:
    """DCP's save and load of the plan's shards in a fresh directory: MiB/s of each (MLPerf-style), the
    residency left by the eviction between them (the torch program's own, right before its timed load, as ddlio's
    step does it), and the files DCP wrote (name -> bytes). Removed after."""
    pieces = equal_pieces(plan)
    d = scratch / "torch-ckpt"
    shutil.rmtree(d, ignore_errors=True)
    try:
        save = run_torch("save", d, pieces, seed, scratch / "save.json", plan.ranks)
        files = {p.name: p.stat().st_size for p in sorted(d.iterdir())}
        load = run_torch("load", d, pieces, seed, scratch / "load.json", plan.ranks)
    finally:
        shutil.rmtree(d, ignore_errors=True)
    total = sum(r["bytes"] for r in save["ranks"])

    def mib_s(said: dict[str, Any]) -> float:
        return total / MIB / max(r["seconds"] for r in said["ranks"])

    return {"write": mib_s(save), "read": mib_s(load), "resident": load["resident"], "files": files,
            "torch": save["torch"]}


def ddlio_files(plan: Any) -> dict[str, int]:
    """The files one ddlio checkpoint of ``plan`` writes (name -> bytes)."""
    sizes = {plan.data_file(r): plan.shard_bytes[r] for r in range(plan.ranks)}
    if plan.indexed:
        sizes[".metadata"] = len(plan.index())
    return sizes


def measure(spec: Any, scratch: Path, rounds: int, pause: float = 1.0, warmup: bool = False) -> dict[str, Any]:
    """``rounds`` rounds, ddlio and torch in turn (:func:`checkpoint_vs_fio.in_turn`: ABBA, each run after a
    ``sync`` and ``pause`` seconds of quiet, with ``warmup`` each tool after itself): each round's figures of each."""
    plan = plan_of(spec)

    def said(k: int, out: dict[str, Any]) -> None:
        d, t = out["ddlio"][-1], out["torch"][-1]
        print(f"round {k + 1}/{rounds}: save ddlio {d['write']:7.1f} torch {t['write']:7.1f} MiB/s, "
              f"restore ddlio {d['read']:7.1f} torch {t['read']:7.1f} MiB/s", flush=True)

    return in_turn(rounds, {"ddlio": lambda k: ddlio_figures(run_ddlio(spec, scratch / "run")),
                            "torch": lambda k: torch_round(plan, scratch, seed=k)}, pause, warmup, said)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--size", default="1GiB", help="one checkpoint's bytes, all ranks (default %(default)s)")
    ap.add_argument("--preset", default="llama3_8b", help="conf/checkpoint preset (default %(default)s)")
    ap.add_argument("--ranks", type=int, default=2, help="ranks of both (default %(default)s)")
    ap.add_argument("--transfer", default="4MiB", help="ddlio's checkpoint.transfer_size (default %(default)s)")
    ap.add_argument("--rounds", type=int, default=5, help="rounds of each, ABBA (default %(default)s)")
    ap.add_argument("--settle", type=float, default=12.0,
                    help="seconds of quiet (after a sync) before each run (default %(default)s: long enough that "
                         "memory freed by the run before has gone back to a VM's host for both tools)")
    ap.add_argument("--warmup", action="store_true",
                    help="before each measured run, an unmeasured one of the same tool: each tool runs after itself")
    ap.add_argument("--dir", help="scratch directory (default: a temporary one under /tmp, removed after)")
    ap.add_argument("--runs", help="also write every round's figures to this JSON file")
    args = ap.parse_args(argv)
    missing = prerequisites()
    if missing:
        print(f"missing: {'; '.join(missing)}", file=sys.stderr)
        return 2
    tmp = None
    scratch = Path(args.dir) if args.dir else Path(tmp := tempfile.mkdtemp(prefix="ddlio-ckpt-vs-torch-"))
    scratch.mkdir(parents=True, exist_ok=True)
    try:
        spec = point(scratch, parse_size(args.size), parse_size(args.transfer), "nn", args.ranks, args.preset)
        plan = plan_of(spec)
        print(f"{args.preset} at {args.size} on {args.ranks} ranks: pieces of a rank "
              f"{', '.join(f'{n} {format_size(b)}' for n, b in plan.pieces[0])}", flush=True)
        runs = measure(spec, scratch, args.rounds, args.settle, args.warmup)
        if args.runs:
            Path(args.runs).write_text(json.dumps(runs, indent=1))
    finally:
        if tmp:
            shutil.rmtree(tmp, ignore_errors=True)
    d, t = runs["ddlio"], runs["torch"]
    print(f"\nfiles of one checkpoint (torch {t[0]['torch']}; ddlio from its plan):")
    mine, theirs = ddlio_files(plan), t[0]["files"]
    for name in sorted(set(mine) | set(theirs)):
        a, b = theirs.get(name), mine.get(name)
        print(f"  {name:<16} DCP {'-' if a is None else f'{a:,}':>15} B   ddlio {'-' if b is None else f'{b:,}':>15} B")
    print(f"\nddlio / torch.distributed.checkpoint, medians of {args.rounds} rounds (MiB/s, shards' bytes over the "
          "largest per-rank duration)")
    print(f"{'phase':>8} {'torch':>8} {'ddlio':>8} {'ratio':>6} {'paired [95% CI]':>20}")
    for phase, name in (("write", "save"), ("read", "restore")):
        tm, dm = statistics.median(x[phase] for x in t), statistics.median(x[phase] for x in d)
        pairs = [a[phase] / b[phase] for a, b in zip(d, t, strict=True)]
        lo, hi = median_ci(pairs)
        print(f"{name:>8} {tm:8.1f} {dm:8.1f} {dm / tm:6.2f} {statistics.median(pairs):6.2f} [{lo:.2f}, {hi:.2f}]")
    print(f"residency before the restores <= {max(x['resident'] for x in d + t):.3f} (0: page cache emptied)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
