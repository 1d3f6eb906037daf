"""kind=checkpoint end to end: real MPI ranks save and restore checkpoints through sweep.py, on both accesses and
both file layouts, with a shifted restore; what was stored is held to the plan and, by strace, to the system calls
the ranks made; every refusal comes before anything is written."""

from __future__ import annotations

import json
import re
import shutil
import sqlite3
import subprocess
from collections import defaultdict
from dataclasses import asdict
from pathlib import Path

import numpy as np
import pytest
from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf

from conftest import ROOT
from ddlio.errors import ConfigError, KernelError
from experiments.config import register_configs
from experiments.config.validate import validate
from experiments.kinds.checkpoint import CheckpointKind
from experiments.kinds.checkpoint.plan import METADATA, CheckpointPlan
from experiments.kinds.checkpoint.shards import PRESETS
from experiments.kinds.checkpoint.step import fill, verify
from experiments.run.mpirun import launch_argv
from lustre import Layout, apply_layout

register_configs()

#: a small llama3_8b: 8 MiB over 2 ranks, ZeRO 1 (rank 0 holds the model's states too: unequal shards)
SMALL = ("kind=checkpoint", "checkpoint=llama3_8b", "checkpoint.size=8MiB", "checkpoint.transfer_size=1MiB",
         "checkpoint.zero_stage=1", "ppn=2")


def _metrics(db: Path) -> dict[str, dict[str, float]]:
    """``<label> <checkpoint.layout>`` -> metric -> value of the store's checkpoint points."""
    out: dict[str, dict[str, float]] = defaultdict(dict)
    with sqlite3.connect(db) as c:
        for label, config, metric, value in c.execute(
                "SELECT p.label, p.config, m.metric, m.value FROM point_metrics m JOIN points p USING (point_key) "
                "WHERE p.kind = 'checkpoint'"):
            out[f"{label} {json.loads(config)['checkpoint']['layout']}"][metric] = value
    return out


def _options(**over: object) -> dict:
    model, par, _ = PRESETS["llama3_8b"]
    return {"name": "llama3_8b", **asdict(model), **asdict(par), "size": 8 << 20, "layout": "dcp",
            "transfer_size": 1 << 20, "count": 2, "restore": "all", "read_shift": 1, **over}


def test_both_accesses_and_layouts_save_restore_and_a_rerun_skips_them(sweep, tmp_path):
    args = (*SMALL, "checkpoint.count=2", "checkpoint.read_shift=1")
    first = sweep("-m", *args, "access=shared,fpp", timeout=300)
    assert first.returncode == 0, first.stdout + first.stderr
    torch_layout = sweep(*args, "access=fpp", "checkpoint.layout=torch", timeout=300)
    assert torch_layout.returncode == 0, torch_layout.stdout + torch_layout.stderr
    assert re.search(r"checkpoint llama3_8b/shared 1N-2P-1OST.*: write [\d.]+ MiB/s \(fsync [\d.]+ s\), restore "
                     r"[\d.]+ MiB/s, 16\.\d MiB written, caches emptied \(verified\)", first.stdout), first.stdout

    plan = CheckpointPlan.build(_options(zero_stage=1), 2, "shared", 42, "/x")
    assert plan.shard_bytes[0] > plan.shard_bytes[1] > 0  # ZeRO 1: the model's states on data-parallel rank 0
    metrics = _metrics(tmp_path / "r.db")
    assert len(metrics) == 3, metrics.keys()
    for label, m in metrics.items():
        indexed = "torch" not in label
        this = CheckpointPlan.build(_options(zero_stage=1, layout=label.split()[-1]), 2,
                                    "shared" if "shared" in label else "fpp", 42, "/x")
        index = len(this.index()) if indexed else 0
        assert m["checkpoints"] == 2 and m["bytes_written"] == 2 * (8 << 20) + 2 * index, label
        assert m["checkpoint_bytes"] == (8 << 20) + index
        assert m["bytes_read"] == 2 * (8 << 20) + 2 * index, label  # every shard, and rank 0 the index
        assert m["files"] == (2 if "shared" in label else 3 if indexed else 2)
        assert m["writes"] >= 2 * 8 and m["fsync_time_s"] > 0 and m["write_time_s"] >= m["fsync_time_s"]
        assert m["write_bandwidth_mib_s"] == pytest.approx(m["bytes_written"] / 2**20 / m["write_time_s"])
        assert m["write_duration_max_s"] >= m["fsync_time_s"] and m["read_duration_max_s"] > 0
        assert m["restore_resident_fraction"] <= 0.01 and 0 <= m["write_to_read_s"] < 30
        # torch's memory work beside the calls: the save's checksums (the layouts torch writes), the restore's copies
        assert (m["write_crc_time_s"] > 0) == ("shared" not in label) and m["read_copy_time_s"] > 0, label
        assert m["write_duration_max_s"] >= m["write_crc_time_s"] and m["read_duration_max_s"] >= m["read_copy_time_s"]
    with sqlite3.connect(tmp_path / "r.db") as c:
        rows = c.execute("SELECT label, layout, config, result FROM points").fetchall()
    for label, layout, config, result in rows:
        label += " " + json.loads(config)["checkpoint"]["layout"]
        files = json.loads(layout)["files"]
        assert json.loads(layout)["requested"]["stripe_count"] == 1
        said = json.loads(result)["checkpoints"]
        names = said["files"]
        assert ("checkpoint.distcp" in names) == ("shared" in label) and (".metadata" in names) == ("torch" not in
                                                                                                    label)
        assert json.loads(config)["checkpoint"]["read_shift"] == 1 and len(said["saves"]) == 2
        assert (said["saves"][0]["crc_time_max_s"] > 0) == ("shared" not in label)
        assert said["restores"][0]["copy_time_max_s"] > 0
        assert isinstance(files, dict)  # per file where the file system stripes; {} on this ext4
    assert not (tmp_path / "data" / "checkpoints").exists()  # measured, then removed

    again = sweep("-m", *args, "access=shared,fpp", timeout=300)
    assert again.returncode == 0 and "2 of 2 points already measured: skipped" in again.stdout, again.stdout


def test_a_shifted_restore_reads_the_other_ranks_shard_and_checks_its_bytes(tmp_path):
    plan = CheckpointPlan.build(_options(zero_stage=1, count=1), 2, "fpp", 7, tmp_path / "ck")
    said = _run_step(tmp_path, plan)
    restores = {r["rank"]: r["restores"][0] for r in said["ranks"]}
    # rank 0 read rank 1's shard (and the index), rank 1 rank 0's
    assert restores[1]["bytes"] == plan.shard_bytes[0]
    assert restores[0]["bytes"] == plan.shard_bytes[1] + len(plan.index())
    buf = np.empty(plan.shard_bytes[1], dtype=np.uint8)
    fill(buf, 7, 0, 1)
    verify(plan, 0, 1, buf)
    buf[12345] ^= 1
    with pytest.raises(KernelError, match="differs from what was written, first at byte 12345"):
        verify(plan, 0, 1, buf)


def _run_step(tmp_path: Path, plan: CheckpointPlan, strace: Path | None = None) -> dict:
    for k in range(plan.count):
        apply_layout(plan.directory(k), Layout())
    spec = tmp_path / "spec.json"
    spec.write_text(json.dumps({"plan": plan.to_dict(), "result_path": str(tmp_path / "out.json")}))
    argv = launch_argv("mpiexec -n {ranks}", plan.ranks, 1, plan.ranks, "experiments.kinds.checkpoint.step",
                       [str(spec)])
    if strace is not None:
        calls = "openat,pwrite64,pread64,preadv,preadv2,fsync,fdatasync,close"
        argv = [shutil.which("strace"), "-ff", "-y", "-s", "0", "-e", f"trace={calls}", "-o", str(strace), *argv]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=240, cwd=ROOT)
    assert done.returncode == 0, done.stdout + done.stderr
    return json.loads((tmp_path / "out.json").read_text())


@pytest.mark.skipif(shutil.which("strace") is None, reason="strace is not installed (apt-get install strace)")
@pytest.mark.parametrize("access", ["shared", "fpp"])
def test_strace_sees_the_bytes_stored_and_an_fsync_before_every_close(tmp_path, access):
    plan = CheckpointPlan.build(_options(zero_stage=1, count=2), 2, access, 42, tmp_path / "ck")
    trace = tmp_path / "trace"
    said = _run_step(tmp_path, plan, strace=trace)
    values = CheckpointKind().values(plan, said)
    root = str(tmp_path / "ck")
    written = read = 0
    open_files: dict[tuple[str, str], list[str]] = defaultdict(list)  # (pid, path) -> calls since its open
    synced_before_close = []
    call = re.compile(r"^(\w+)\((\d+)<([^>]*)>.*\) = (-?\d+)")
    lines = [(f.suffix, line) for f in tmp_path.glob("trace.*") for line in f.read_text().splitlines()]
    for pid, line in lines:  # one file per process (-ff): its calls in order
        m = call.match(line)
        if not m or not m.group(3).startswith(root):
            continue
        name, path, ret = m.group(1), m.group(3), int(m.group(4))
        if name == "pwrite64":
            written += ret
        elif name in ("pread64", "preadv", "preadv2"):
            read += ret
        open_files[(pid, path)].append(name)
        if name == "close":
            calls = open_files.pop((pid, path))
            if "pwrite64" in calls:
                last = max(i for i, c in enumerate(calls) if c == "pwrite64")
                synced_before_close.append((path, "fsync" in calls[last:] or "fdatasync" in calls[last:]))
    assert written == values["bytes_written"] == 2 * plan.checkpoint_bytes()
    assert read == values["bytes_read"]  # each piece read into a new buffer and copied: the calls' bytes counted
    assert values["read_copy_time_s"] > 0 and (values["write_crc_time_s"] > 0) == (access == "fpp")
    files = {p for p, _ in synced_before_close}
    assert len(files) == 2 * len(plan.files()) and all(ok for _, ok in synced_before_close), synced_before_close
    assert any(p.endswith(METADATA) for p in files)


def _refused(tmp_path: Path, *overrides: str) -> str:
    with initialize_config_dir(config_dir=str(ROOT / "conf"), version_base=None):
        cfg = compose("config", overrides=[f"data_root={tmp_path / 'd'}", f"db={tmp_path / 'r.db'}", *overrides])
    with pytest.raises(ConfigError) as e:
        validate(OmegaConf.to_container(cfg, resolve=True), tmp_path, tuple(overrides))
    return str(e.value)


def test_what_cannot_be_measured_is_refused_before_anything_is_written(tmp_path, sweep):
    assert "checkpoint.read_shift=1 needs two ranks or more" in _refused(
        tmp_path, "kind=checkpoint", "checkpoint.size=8MiB", "checkpoint.read_shift=1")
    assert "restores every rank's own shard (2 mod 2 = 0): use 1..1" in _refused(
        tmp_path, "kind=checkpoint", "checkpoint.size=8MiB", "ppn=2", "checkpoint.read_shift=2")
    assert "checkpoint.layout=torch writes one torch.save file per rank" in _refused(
        tmp_path, "kind=checkpoint", "checkpoint.size=8MiB", "checkpoint.layout=torch", "access=shared")
    assert "must be a positive multiple of 8" in _refused(tmp_path, "kind=checkpoint", "checkpoint=llama3_70b",
                                                          "checkpoint.size=8MiB", "ppn=2")
    free = shutil.disk_usage(tmp_path).free
    big = _refused(tmp_path, "kind=checkpoint", f"checkpoint.size={free * 2}", "ppn=2")
    assert "free: lower checkpoint.size or checkpoint.count" in big
    assert "of shards in memory" in big  # twice the free disk is more than this host's memory too
    assert "checkpoint.size=1GiB applies to kind=checkpoint only (this point is kind=train)" in _refused(
        tmp_path, "checkpoint.size=1GiB")
    assert "format=npz applies to kind=train only" in _refused(tmp_path, "kind=checkpoint", "format=npz")
    assert "checkpoint.layout='zip' is unknown: choose one of dcp, torch" in _refused(
        tmp_path, "kind=checkpoint", "checkpoint.layout=zip")
    assert "checkpoint.transfer_size" in _refused(tmp_path, "kind=checkpoint", "checkpoint.transfer_size=3GiB")

    out = sweep("kind=checkpoint", "checkpoint.read_shift=1", "checkpoint.size=8MiB")
    assert out.returncode != 0 and "Traceback" not in out.stdout + out.stderr
    assert "checkpoint.read_shift=1 needs two ranks or more" in out.stdout + out.stderr
    assert not (tmp_path / "data").exists() or not any((tmp_path / "data").iterdir())


def test_a_train_point_keeps_its_key_and_stored_form(tmp_path):
    from helpers import point

    spec = point(tmp_path)
    assert spec.checkpoint == {} and "checkpoint" not in spec.to_dict()
    assert "checkpoint" not in spec.measurement_params()


@pytest.mark.parametrize(("fault", "said"), [
    ("hang@1", "waited 3 s for the other ranks at the start of checkpoint 0's save"),
    ("crash@0:checkpoint", "crash"),
])
def test_a_hung_or_crashed_rank_fails_the_point_with_its_reason(sweep, tmp_path, fault, said):
    out = sweep(*SMALL, "cluster.hang_timeout_s=3", timeout=300, DDLIO_FAULT=fault)
    assert out.returncode == 1 and "Traceback" not in out.stdout + out.stderr, out.stdout + out.stderr
    with sqlite3.connect(tmp_path / "r.db") as c:
        [(status, error)] = c.execute("SELECT status, error FROM points").fetchall()
    assert status == "failed" and said in error, error
    assert not (tmp_path / "data" / "checkpoints").exists()


def test_only_the_files_ddlio_wrote_are_removed_from_a_points_checkpoints(tmp_path):
    from experiments.kinds.checkpoint import MARKER, _fresh, _remove

    root = tmp_path / "checkpoints" / "key"
    plan = CheckpointPlan.build(_options(count=2), 2, "fpp", 1, root)
    _fresh(root, plan)
    for k in range(2):
        plan.directory(k).mkdir()
        for name in plan.files():
            (plan.directory(k) / name).write_bytes(b"x")
    _remove(root, plan)
    assert not root.exists() and not root.parent.exists()  # all ddlio's: gone, checkpoints/ too

    _fresh(root, plan)
    plan.directory(0).mkdir()
    (plan.directory(0) / plan.files()[0]).write_bytes(b"x")
    (plan.directory(0) / "notes.txt").write_text("mine")  # a file someone else put there
    _remove(root, plan)
    assert (plan.directory(0) / "notes.txt").read_text() == "mine" and (root / MARKER).exists()
    assert not (plan.directory(0) / plan.files()[0]).exists()
    with pytest.raises(KernelError, match=r"holds files ddlio did not write \(ckpt-0/notes.txt\)"):
        _fresh(root, plan)  # a rerun refuses rather than removes it
    assert (plan.directory(0) / "notes.txt").exists()


def test_a_restore_into_the_state_reads_every_byte_without_a_copy_and_the_default_keeps_the_key(tmp_path):
    from experiments.kinds.checkpoint.plan import check_options

    plan = CheckpointPlan.build(_options(count=1, restore_into="state"), 2, "fpp", 7, tmp_path / "ck")
    assert not plan.staging
    said = _run_step(tmp_path, plan)
    for r in said["ranks"]:
        restored = r["restores"][0]
        assert restored["copy_s"] == 0 and restored["bytes"] >= plan.shard_bytes[plan.source(r["rank"])]
    problems: list[str] = []
    default = check_options(problems, _options(restore_into="staging"), 2, 2, "fpp", None, 1, None)
    assert "restore_into" not in default and not problems  # the default stays out of the stored options (the key)
    assert check_options(problems, _options(restore_into="state"), 2, 2, "fpp", None, 1, None)["restore_into"] == \
        "state"
    check_options(problems, _options(restore_into="disk"), 2, 2, "fpp", None, 1, None)
    assert problems == ["checkpoint.restore_into='disk' is unknown: choose one of staging, state (staging: each "
                        "piece into a new buffer, then copied into the state, as DCP's load does; state: straight "
                        "into the state)"]
