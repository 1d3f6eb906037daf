"""An independent observer: the file-system layer that the kernel stores, checked against strace.

One point of every format runs its kernel step (2 real MPI ranks) under ``strace -ff -y``, which logs every read
system call of every process and thread with the path of the file it read. The epoch's boundaries are in the trace:
the kernel reads its process's I/O counters (``pread64`` on ``/proc/<pid>/io``) just before the epoch's first sample
and just after its last close. Between each pair, the read calls on the dataset's files must equal exactly what the
kernel stored for that rank and epoch (calls, bytes, size bins), and nothing else may have been read (the per-thread
counter reads aside, which the kernel subtracts itself). Every read of a dataset file outside the epochs must be
explained by name.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from collections import Counter
from pathlib import Path

import pytest

from ddlio.metrics import size_bin
from experiments.dataset import DatasetPlan, ensure_dataset, write_json_atomic
from experiments.formats import FORMATS, get_format
from experiments.kernel.lanes import native_read_run
from experiments.run.mpirun import launch_argv
from helpers import mpi_generation, point
from lustre import Layout

STRACE = shutil.which("strace")
pytestmark = pytest.mark.skipif(STRACE is None, reason="strace is not installed (apt-get install strace)")

#: ``pread64(5</path>, ""..., 65536, 2048) = 65536`` (with -y and -s 0)
LINE = re.compile(r"^(read|pread64|readv|preadv|preadv2)\((\d+)<(.*?)>, .*\) = (-?\d+)")


def read_calls(trace: Path) -> list[tuple[str, str, int]]:
    """(call, path, bytes returned) of every successful read call in one thread's strace output, in order."""
    out = []
    for line in trace.read_text(errors="replace").splitlines():
        m = LINE.match(line)
        if m and int(m.group(4)) >= 0:
            out.append((m.group(1), m.group(3), int(m.group(4))))
    return out


def run_traced(tmp_path: Path, fmt: str, *overrides: str) -> tuple[DatasetPlan, dict, Path]:
    spec = point(tmp_path, f"format={fmt}", "access=shared", "ppn=2", "workload.shuffle=sample", *overrides)
    plan = DatasetPlan.from_point(spec)
    ensure_dataset(plan, Layout(), mpi_generation(spec, tmp_path), spec.ranks)
    ks = {"point": spec.to_dict(), "plan": plan.to_dict(), "result_path": str(tmp_path / "res.json")}
    write_json_atomic(tmp_path / "k.json", ks)
    argv = launch_argv(spec.cluster.launch, 2, 1, 2, "experiments.kernel", [str(tmp_path / "k.json")])
    traces = tmp_path / "strace"
    traces.mkdir()
    cmd = [STRACE, "-ff", "-y", "-qq", "-s", "0", "-e", "trace=read,pread64,readv,preadv,preadv2",
           "-e", "signal=none", "-o", str(traces / "tr"), *argv]
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, res.stderr[-3000:]
    return plan, json.loads((tmp_path / "res.json").read_text()), traces


def data_calls_by_epoch(plan: DatasetPlan, res: dict, traces: Path) -> list[tuple[int, int, list]]:
    """(rank, epoch, its read calls on the dataset's files, as ``read_calls`` gives them) of every rank's epochs:
    the calls between the two reads of its process's I/O counters that bound the epoch."""
    data_dir = str(Path(plan.directory).resolve())
    out = []
    for info in res["rank_info"]:
        calls = read_calls(traces / f"tr.{info['pid']}")
        bounds = [i for i, (call, path, _) in enumerate(calls)
                  if call == "pread64" and path == f"/proc/{info['pid']}/io"]
        for e in range(len(res["epochs"])):
            inside = calls[bounds[2 * e] + 1 : bounds[2 * e + 1]]
            out.append((info["rank"], e, [c for c in inside if c[1].startswith(data_dir + "/")]))
    return out


@pytest.mark.parametrize("fmt", sorted(FORMATS))
def test_the_stored_file_system_layer_is_what_strace_saw(tmp_path, fmt):
    plan, res, traces = run_traced(tmp_path, fmt)
    data_dir = str(Path(plan.directory).resolve())
    first = {str(Path(p).resolve()) for p in [plan.file_path(0), *get_format(fmt).sidecars(plan.file_path(0))]}
    epochs = len(res["epochs"])
    checked = 0
    # no process or thread but the ranks' main threads (mpiexec, its proxies, MPI's and Python's threads) read
    # the dataset
    mains = {f"tr.{info['pid']}" for info in res["rank_info"]}
    # the reads strace sees are the C loop's where the format's reader has one and the loop is built
    reader = get_format(plan.format, **plan.format_options).open(plan.file_path(0))
    native = native_read_run() is not None and getattr(reader, "native_loop", None) is not None
    reader.close()
    for info in res["rank_info"]:
        loop = info["read_loop"]
        assert loop["native" if native else "python"] > 0 and loop["python" if native else "native"] == 0, loop
    for other in traces.glob("tr.*"):
        data = [c for c in read_calls(other) if c[1].startswith(data_dir + "/")]
        assert other.name in mains or not data, f"{other.name} read the dataset: {data[:3]}"
    for info in res["rank_info"]:
        pid = info["pid"]
        proc_io = f"/proc/{pid}/io"
        calls = read_calls(traces / f"tr.{pid}")
        bounds = [i for i, (call, path, _) in enumerate(calls) if call == "pread64" and path == proc_io]
        assert len(bounds) == 2 * epochs, f"rank {info['rank']}: {len(bounds)} counter reads for {epochs} epochs"
        for e in range(epochs):
            inside = calls[bounds[2 * e] + 1 : bounds[2 * e + 1]]
            on_data = [c for c in inside if c[1].startswith(data_dir + "/")]
            elsewhere = [c for c in inside if not c[1].startswith(data_dir + "/")
                         and not c[1].startswith(f"/proc/{pid}/task/")]
            assert elsewhere == [], f"rank {info['rank']} epoch {e} read other files inside the epoch: {elsewhere}"
            stored = next(r for r in res["epochs"][e]["ranks"] if r["rank"] == info["rank"])
            assert on_data and stored["bytes_read"] > 0
            assert stored["posix_reads"] == len(on_data)
            assert stored["posix_bytes_read"] == sum(n for _, _, n in on_data)
            seen = Counter(size_bin(n) for _, _, n in on_data)
            hist = stored["posix_size_hist"]
            assert sum(hist) == len(on_data)
            # a sample's step with several calls (an open's header and index reads) is binned by their mean size
            assert sum(abs(hist[k] - seen.get(k, 0)) for k in range(len(hist))) <= 2 * stored["posix_size_approx"]
            checked += 1
        # every read of a dataset file outside the epochs, explained by name
        outside = calls[: bounds[0]] + [c for e in range(epochs - 1) for c in calls[bounds[2 * e + 1] + 1:
                                                                                     bounds[2 * e + 2]]]
        outside += calls[bounds[-1] + 1 :]
        for call, path, n in outside:
            if not path.startswith(data_dir + "/"):
                continue
            name = Path(path).name
            if path in first:
                reason = "priming: the read path run once on file 0 before the first epoch (then evicted)"
            elif name in ("manifest.json", "records.npy", "loads.npy"):
                reason = "the dataset's manifest / record sizes / whole-load plan (plan and read history)"
            elif info["rank"] == 0 and (res.get("settle") or {}).get("settled"):
                reason = "settling read of a freshly generated dataset (rank 0, untimed)"
            else:
                reason = ""
            assert reason, f"rank {info['rank']}: unexplained {call} of {n} bytes on {path} outside the epochs"
    assert checked == 2 * epochs
