"""The reader kernel on real files with 2 real MPI ranks."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest

from experiments.dataset import DatasetPlan, ensure_dataset, write_json_atomic
from experiments.formats import FORMATS, get_format
from experiments.kernel import rank_samples
from helpers import mpi_generation, point
from lustre.layout import Layout


@pytest.mark.parametrize(
    ("access", "ranks", "files"), [("shared", 2, 1), ("shared", 3, 4), ("fpp", 2, 4), ("fpp", 3, 3)]
)
def test_every_sample_is_read_exactly_once_per_epoch(access, ranks, files):
    plan = DatasetPlan("k", "/x", "hdf5", {}, 101, 10, 0, files, 1)
    got = np.concatenate([rank_samples(plan, access, ranks, r) for r in range(ranks)])
    assert np.array_equal(np.sort(got), np.arange(101))
    if access == "fpp":  # each rank reads only its own files
        starts = plan.file_starts
        for r in range(ranks):
            owned = set(np.searchsorted(starts, rank_samples(plan, access, ranks, r), side="right") - 1)
            per = files // ranks
            assert owned == set(range(r * per, (r + 1) * per))


def run_kernel(tmp_path, *overrides, evict_first=False):
    from experiments.cache import evict
    from experiments.dataset import data_files
    from experiments.launch import _step_runner

    spec = point(tmp_path, *overrides)
    plan = DatasetPlan.from_point(spec)
    ensure_dataset(plan, Layout(), mpi_generation(spec, tmp_path), spec.ranks)
    if evict_first:
        evict(data_files(plan))
    ks = {"point": spec.to_dict(), "plan": plan.to_dict(), "result_path": str(tmp_path / "res.json")}
    write_json_atomic(tmp_path / "k.json", ks)
    _step_runner(spec, tmp_path)("experiments.kernel", [str(tmp_path / "k.json")], spec.ranks, "kernel")
    return spec, plan, json.loads((tmp_path / "res.json").read_text())


@pytest.mark.parametrize("fmt", sorted(FORMATS))
@pytest.mark.parametrize("access", ["shared", "fpp"])
def test_two_ranks_read_exactly_the_plan(tmp_path, fmt, access):
    spec, plan, res = run_kernel(tmp_path, f"format={fmt}", f"access={access}", "ppn=2",
                                 "workload.sample_size_stdev=3KiB", "workload.epochs=2")
    fmt = get_format(fmt)
    want = fmt.expected_record_bytes(plan.sizes())  # payloads + framing, from first principles
    if want is None:  # encoded images: the data files hold the encoded records back to back, nothing else
        per_epoch = sum(os.path.getsize(plan.file_path(f)) for f in range(plan.num_files))
        assert int(plan.record_bytes().sum()) == per_epoch and np.all(plan.record_bytes() > 0)
    else:
        per_epoch = int(want.sum())
        assert np.array_equal(plan.record_bytes(), want)
    assert res["ranks"] == 2 and len(res["rank_info"]) == 2 and len({r["pid"] for r in res["rank_info"]}) == 2
    assert res["totals"]["bytes_read"] == res["totals"]["bytes_planned"] == 2 * per_epoch
    for e in res["epochs"]:
        assert e["bytes_read"] == e["bytes_planned"] == per_epoch
        assert e["read_ops"] == spec.samples and e["samples"] == spec.samples
        assert sum(r["bytes_read"] for r in e["ranks"]) == per_epoch
        assert all(r["bytes_read"] > 0 for r in e["ranks"])  # both ranks did read
        assert sum(e["hist"]) == spec.samples
        assert e["io_time_slowest_s"] == max(r["io_time_s"] for r in e["ranks"])
        assert e["bandwidth_mib_s"] == pytest.approx(per_epoch / e["io_time_slowest_s"] / 2**20)
    assert res["totals"]["bandwidth_mib_s"] > 0 and res["totals"]["iops"] > 0
    assert "MPICH" in res["mpi_library"] or "Open MPI" in res["mpi_library"]


def test_cold_cache_is_evicted_and_verified(tmp_path):
    _, _, res = run_kernel(tmp_path, "workload.cache=cold")
    for e in res["epochs"]:
        assert e["cache"] == "cold" and e["residency_after"] <= 0.01
        assert e["os_read_bytes"] >= 0.9 * e["bytes_read"]  # the device, not memory, served the reads
    # the second epoch found the data cached by the first, and evicted it
    assert res["epochs"][1]["residency_before"] > 0.5


def test_warm_cache_reads_from_memory(tmp_path):
    _, _, res = run_kernel(tmp_path, "workload.cache=warm", evict_first=True)
    assert [e["cache"] for e in res["epochs"]] == ["warm", "warm"]
    assert res["epochs"][0]["residency_before"] <= 0.01  # evicted before the run ...
    assert res["epochs"][0]["residency_after"] == pytest.approx(1.0)  # ... warmed before the first epoch
    assert res["totals"]["os_read_bytes"] == 0  # so no epoch read from the device


def test_compute_time_gives_accelerator_utilisation(tmp_path):
    _, _, res = run_kernel(tmp_path, "workload.compute_time=0.02", "workload.batch_size=16", "workload.epochs=1")
    e = res["epochs"][0]
    assert e["compute_time_s"] == pytest.approx(4 * 0.02, rel=0.5)  # 64 samples / 16 = 4 batches
    assert 0.2 < e["au"] <= 1.0
    assert e["wall_time_s"] >= e["compute_time_s"]


def test_corrupt_data_fails_the_kernel_with_the_reason(tmp_path):
    from experiments.errors import LaunchError

    spec = point(tmp_path, "format=tfrecord")
    plan = DatasetPlan.from_point(spec)
    ensure_dataset(plan, Layout(), mpi_generation(spec, tmp_path), 1)
    with open(plan.file_path(0), "r+b") as f:
        f.seek(5000)
        f.write(b"\0" * 16)
    ks = {"point": spec.to_dict(), "plan": plan.to_dict(), "result_path": str(tmp_path / "res.json")}
    write_json_atomic(tmp_path / "k.json", ks)
    from experiments.launch import _step_runner

    with pytest.raises(LaunchError, match="(?s)kernel step failed.*checksum mismatch"):
        _step_runner(spec, tmp_path)("experiments.kernel", [str(tmp_path / "k.json")], 1, "kernel")
    assert not (tmp_path / "res.json").exists()
