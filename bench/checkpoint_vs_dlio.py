"""DLIO 2.0.0's checkpointing beside ddlio's ``kind=checkpoint``, the same bytes per rank, 2 ranks.

DLIO 2.0.0 (``dlio-benchmark`` from PyPI, in the venv bench/vs_dlio.py makes) checkpoints only inside training:
at the end of an epoch (``checkpoint_after_epoch``, ``epochs_between_checkpoints``) or every
``steps_between_checkpoints`` steps. So it runs a tiny training (2 NPZ files of 4 KiB, batch 1, no compute,
``--count`` epochs) with ``workflow.checkpoint=True`` and ``checkpoint.type=all_ranks``: after every epoch each
rank ``torch.save()``s its states (dlio_benchmark/checkpointing/pytorch_checkpointing.py: int8 tensors of zeros,
``open(name, "wb")`` then ``torch.save``): ``model-<epoch>-<step>-<rank>.pt`` holding ``checkpoint.model_size``
bytes and ``optimizer-...-<rank>.pt`` holding 3 x the sum of ``checkpoint.optimization_groups`` (each group's
``a`` and ``b`` and a ``combined`` tensor; base_checkpointing.py); ``layer_parameters`` is emptied so that no
layer files are written. The sizes are those of ddlio's plan for the preset at ``--size`` on 2 ranks (llama3_8b
under ZeRO-3: a rank's model states and optimizer states), the optimizer's rounded to a multiple of 3 bytes.

ddlio runs ``kind=checkpoint access=fpp checkpoint.layout=torch checkpoint.count=COUNT checkpoint.restore=none``
(one torch.save-named file per rank, the same bytes per rank). The two alternate, in turn first, ``--rounds``
times. DLIO 2.0.0 restores nothing (it has no checkpoint loading), so only saves are compared.

What each counts (read from DLIO 2.0.0's source, main.py and utils/statscounter.py):

- DLIO: rank 0's wall time from ``start_ckpt`` to ``end_ckpt`` around its own ``checkpoint()`` call, no barrier
  after it (rank 1's save is not waited for), no fsync (the bytes may sit in the page cache when the clock
  stops); it stores the times in ``per_epoch_stats.json`` (``ckpt<n>``: start, end) and prints no throughput.
  The bench turns them into MiB/s as the bytes of all ranks over rank 0's duration (start to end, microseconds).
- ddlio: the MLPerf-style figure, the bytes over the largest per-rank duration (barrier to the end of the save,
  every file fsync'd), and beside it the same without the slowest rank's fsync time (what ddlio would say if it
  stopped the clock where DLIO does, before the data is durable).

    python bench/checkpoint_vs_dlio.py                        # llama3_8b at 1 GiB, 2 ranks, 3 checkpoints, 3 rounds
    python bench/checkpoint_vs_dlio.py --dlio-venv /scratch/dlio-venv --rounds 5
"""

from __future__ import annotations

import argparse
import datetime as dt
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

from checkpoint_vs_fio import plan_of, point, run_ddlio, settle  # noqa: E402

from ddlio.units import format_size, parse_size  # noqa: E402

MIB = 1024**2
DLIO_VERSION = "2.0.0"
#: DLIO's timestamps (utils/utility.py LOG_TS_FORMAT)
DLIO_TS = "%Y-%m-%dT%H:%M:%S.%f"


def prerequisites(venv: Path, mpirun: str) -> list[str]:
    """What this bench needs and does not find."""
    missing = []
    exe = venv / "bin" / "dlio_benchmark"
    if not exe.exists():
        missing.append(f"DLIO {DLIO_VERSION}'s venv at {venv} (python bench/vs_dlio.py makes it once)")
    else:
        got = subprocess.run([str(venv / "bin" / "python"), "-c",
                              "import importlib.metadata as m; print(m.version('dlio_benchmark'))"],
                             capture_output=True, text=True).stdout.strip()
        if got != DLIO_VERSION:
            missing.append(f"dlio_benchmark {DLIO_VERSION} in {venv} (found {got or 'none'})")
    if not shutil.which(mpirun):
        missing.append(f"Open MPI's mpirun at {mpirun} (apt-get install openmpi-bin)")
    return missing


def dlio_sizes(plan: Any) -> tuple[int, int]:
    """(model_size, optimization group) of DLIO's checkpoint giving rank 0's pieces of ``plan``: the model states'
    bytes, and a third of the optimizer states' (DLIO writes 3 x the group), rounded down."""
    pieces = dict(plan.pieces[0])
    model = next(b for n, b in pieces.items() if n.endswith("model_states"))
    optim = next(b for n, b in pieces.items() if n.endswith("optim_states"))
    if any(sorted(b for _, b in rank) != sorted(pieces.values()) for rank in plan.pieces):
        raise SystemExit("error: the ranks' shards differ; DLIO 2.0.0 gives every rank the same sizes")
    return model, optim // 3


def dlio_command(venv: Path, mpirun: str, run_dir: Path, ranks: int, count: int, model: int, group: int
                 ) -> list[str]:
    """DLIO 2.0.0's command: a tiny training whose every epoch ends with an all-ranks checkpoint."""
    extra = ["--allow-run-as-root"] if os.geteuid() == 0 else []
    return [mpirun, *extra, "--oversubscribe", "-np", str(ranks), str(venv / "bin" / "dlio_benchmark"),
            "workload=default",
            f"++workload.dataset.data_folder={run_dir / 'data'}",
            "++workload.dataset.format=npz",
            f"++workload.dataset.num_files_train={ranks}",
            "++workload.dataset.num_files_eval=0",
            "++workload.dataset.num_samples_per_file=1",
            "++workload.dataset.record_length=4096",
            "++workload.dataset.num_subfolders_train=0",
            "++workload.dataset.num_subfolders_eval=0",
            "++workload.framework=pytorch",
            "++workload.reader.data_loader=pytorch",
            "++workload.reader.batch_size=1",
            f"++workload.train.epochs={count}",
            "++workload.train.computation_time=0",
            "++workload.workflow.generate_data=True",
            "++workload.workflow.train=True",
            "++workload.workflow.evaluation=False",
            "++workload.workflow.checkpoint=True",
            f"++workload.checkpoint.checkpoint_folder={run_dir / 'checkpoints'}",
            "++workload.checkpoint.checkpoint_after_epoch=1",
            "++workload.checkpoint.epochs_between_checkpoints=1",
            "++workload.checkpoint.type=all_ranks",
            f"++workload.checkpoint.model_size={model}",
            f"++workload.checkpoint.optimization_groups=[{group}]",
            "++workload.checkpoint.layer_parameters=[]",
            f"++workload.output.folder={run_dir / 'out'}",
            f"hydra.run.dir={run_dir / 'hydra'}"]


def run_dlio(cmd: list[str], run_dir: Path) -> dict[str, Any]:
    """One DLIO run: each checkpoint's rank-0 seconds (from per_epoch_stats.json) and the files it wrote."""
    shutil.rmtree(run_dir, ignore_errors=True)
    run_dir.mkdir(parents=True)
    done = subprocess.run(cmd, cwd=run_dir, capture_output=True, text=True, timeout=1800)
    stats = run_dir / "out" / "per_epoch_stats.json"
    if done.returncode != 0 or not stats.exists():
        tail = "\n".join((done.stderr or done.stdout).strip().splitlines()[-15:])
        raise SystemExit(f"DLIO failed ({done.returncode}):\n{tail}")
    seconds = []
    for epoch in json.loads(stats.read_text()).values():
        for key, v in epoch.items():
            if key.startswith("ckpt") and "end" in v:
                start, end = (dt.datetime.strptime(v[k], DLIO_TS) for k in ("start", "end"))
                seconds.append((end - start).total_seconds())
    ckpt = run_dir / "checkpoints"
    files = {p.name: p.stat().st_size for p in sorted(ckpt.iterdir())} if ckpt.exists() else {}
    shutil.rmtree(run_dir, ignore_errors=True)
    if not seconds:
        raise SystemExit("DLIO ran and recorded no checkpoint in per_epoch_stats.json")
    return {"seconds": seconds, "files": files}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--size", default="1GiB", help="one checkpoint's bytes, all ranks (default %(default)s)")
    ap.add_argument("--preset", default="llama3_8b", help="conf/checkpoint preset (default %(default)s)")
    ap.add_argument("--ranks", type=int, default=2, help="ranks of both (default %(default)s)")
    ap.add_argument("--count", type=int, default=3, help="checkpoints a run writes (default %(default)s)")
    ap.add_argument("--rounds", type=int, default=3, help="runs of each, in turn first (default %(default)s)")
    ap.add_argument("--settle", type=float, default=1.0, help="seconds of quiet before each run (default 1)")
    ap.add_argument("--dlio-venv", default=str(Path.home() / ".cache" / "ddlio-bench" / "dlio-venv"),
                    help="DLIO 2.0.0's venv (default %(default)s; bench/vs_dlio.py makes it)")
    ap.add_argument("--mpirun", default="/usr/bin/mpirun", help="Open MPI's mpirun for DLIO (default %(default)s)")
    ap.add_argument("--dir", help="scratch directory (default: a temporary one under /tmp, removed after)")
    args = ap.parse_args(argv)
    venv = Path(args.dlio_venv)
    missing = prerequisites(venv, args.mpirun)
    if missing:
        print(f"missing: {'; '.join(missing)}", file=sys.stderr)
        return 2
    tmp = None
    scratch = Path(args.dir) if args.dir else Path(tmp := tempfile.mkdtemp(prefix="ddlio-ckpt-vs-dlio-"))
    scratch.mkdir(parents=True, exist_ok=True)
    d_runs: list[dict[str, float]] = []
    l_runs: list[dict[str, Any]] = []
    try:
        spec = point(scratch, parse_size(args.size), 4 * MIB, "nn", args.ranks, args.preset,
                     ["checkpoint.layout=torch", f"checkpoint.count={args.count}", "checkpoint.restore=none"])
        plan = plan_of(spec)
        model, group = dlio_sizes(plan)
        per_rank = model + 3 * group
        print(f"{args.preset} at {args.size} on {args.ranks} ranks: ddlio {format_size(plan.shard_bytes[0])} a rank "
              f"({plan.shard_bytes[0]} B), DLIO model_size={model} optimization_groups=[{group}] -> {per_rank} B a "
              f"rank", flush=True)
        cmd = dlio_command(venv, args.mpirun, scratch / "dlio", args.ranks, args.count, model, group)
        for k in range(args.rounds):
            for tool in (("ddlio", "dlio") if k % 2 == 0 else ("dlio", "ddlio")):
                settle(args.settle)
                if tool == "ddlio":
                    m = run_ddlio(spec, scratch / "run")
                    fsync_free = m["write_duration_max_s"] - m["fsync_time_s"]
                    d_runs.append({"mlperf": m["write_throughput_gib_s"] * 1024,
                                   "no_fsync": m["bytes_written"] / MIB / fsync_free,
                                   "darshan": m["write_bandwidth_mib_s"], "fsync_s": m["fsync_time_s"],
                                   "bytes": m["bytes_written"]})
                else:
                    r = run_dlio(cmd, scratch / "dlio")
                    r["mib_s"] = [per_rank * args.ranks / MIB / s for s in r["seconds"]]
                    l_runs.append(r)
            print(f"round {k + 1}/{args.rounds}: ddlio {d_runs[-1]['mlperf']:7.1f} MiB/s (without fsync "
                  f"{d_runs[-1]['no_fsync']:7.1f}), DLIO {statistics.median(l_runs[-1]['mib_s']):7.1f} MiB/s "
                  f"(its {len(l_runs[-1]['seconds'])} checkpoints: "
                  f"{', '.join(f'{s:.3f}' for s in l_runs[-1]['seconds'])} s)", flush=True)
    finally:
        if tmp:
            shutil.rmtree(tmp, ignore_errors=True)
    files = l_runs[0]["files"]
    print(f"\nDLIO's files of one run ({len(files)}): " + ", ".join(f"{n} {b:,} B" for n, b in files.items()))
    print(f"ddlio's files of one checkpoint: {', '.join(plan.files())}, {plan.shard_bytes[0]:,} B each")
    dl = statistics.median(x for r in l_runs for x in r["mib_s"])
    ml = statistics.median(x["mlperf"] for x in d_runs)
    nf = statistics.median(x["no_fsync"] for x in d_runs)
    fs = statistics.median(x["fsync_s"] for x in d_runs)
    print(f"\nsaves, medians (MiB/s), {args.rounds} runs of each, {args.count} checkpoints a run:")
    print(f"  DLIO {DLIO_VERSION} (rank 0's save, no fsync)            {dl:8.1f}")
    print(f"  ddlio, MLPerf-style (slowest rank, fsync'd)           {ml:8.1f}   ddlio / DLIO {ml / dl:5.2f}")
    print(f"  ddlio without its fsync time ({fs:.2f} s a run)          {nf:8.1f}   ddlio / DLIO {nf / dl:5.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
