"""The reader kernel on real files with 2 real MPI ranks."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest

from experiments.config import PointSpec
from experiments.dataset import DatasetPlan, ensure_dataset, write_json_atomic
from experiments.formats import FORMATS, get_format
from experiments.kernel import epoch_ids
from helpers import mpi_generation, point
from lustre import Layout


def pt(access="shared", shuffle="none", drop_last=False, batch=4, seed=7, **workload):
    """A typed point (what the kernel reads), from a stored form holding what sampling needs."""
    return PointSpec.from_dict({
        "format": "hdf5", "access": access, "stripe_count": 1, "stripe_size": 0, "nodes": 1, "ppn": 1, "repeat": 0,
        "seed": seed, "samples": 1, "sample_size": 1, "sample_size_stdev": 0, "samples_per_file": 1,
        "batch_size": batch, "epochs": 1, "compute_time": 0.0, "cache": "warm", "data_root": "/x", "db": "",
        "shuffle": shuffle, "drop_last": drop_last, **workload})


CASES = [(a, sh, r, f) for a, r, f in (("shared", 2, 1), ("shared", 3, 4), ("fpp", 2, 4), ("fpp", 3, 3))
         for sh in ("none", "file", "sample")]


@pytest.mark.parametrize(("access", "shuffle", "ranks", "files"), CASES)
def test_every_sample_is_read_exactly_once_per_epoch(access, shuffle, ranks, files):
    plan = DatasetPlan("k", "/x", "hdf5", {}, 101, 10, 0, files, 1)
    for epoch in (0, 1):
        got = [epoch_ids(plan, pt(access, shuffle), epoch, ranks, r) for r in range(ranks)]
        assert np.array_equal(np.sort(np.concatenate(got)), np.arange(101))
        if access == "fpp":  # each rank reads only its own files
            per = files // ranks
            for r in range(ranks):
                owned = set(np.searchsorted(plan.file_starts, got[r], side="right") - 1)
                assert owned == set(range(r * per, (r + 1) * per))


def test_shuffles_shuffle_and_change_every_epoch_but_not_between_reruns():
    plan = DatasetPlan("k", "/x", "hdf5", {}, 1000, 10, 0, 10, 1)
    e0 = epoch_ids(plan, pt(shuffle="sample"), 0, 2, 0)
    assert not np.array_equal(e0, np.sort(e0))  # not in id order
    assert not np.array_equal(e0, epoch_ids(plan, pt(shuffle="sample"), 1, 2, 0))  # a new order each epoch
    assert np.array_equal(e0, epoch_ids(plan, pt(shuffle="sample"), 0, 2, 0))  # deterministic in (seed, epoch)
    assert not np.array_equal(e0, epoch_ids(plan, pt(shuffle="sample", seed=8), 0, 2, 0))
    # a global permutation: both ranks draw from the whole id range, not from halves
    assert e0.min() < 100 and e0.max() > 900
    # file shuffle: whole files in a new order, samples within a file in order
    f0 = epoch_ids(plan, pt(shuffle="file"), 0, 1, 0)
    files = np.searchsorted(plan.file_starts, f0, side="right") - 1
    order = files[np.r_[True, np.diff(files) != 0]]
    assert sorted(order) == list(range(10)) and list(order) != list(range(10))
    assert all(np.all(np.diff(f0[files == f]) == 1) for f in range(10))
    assert np.array_equal(epoch_ids(plan, pt(shuffle="none"), 0, 1, 0), np.arange(1000))


@pytest.mark.parametrize("access", ["shared", "fpp"])
def test_drop_last_gives_every_rank_the_same_whole_batches(access):
    plan = DatasetPlan("k", "/x", "hdf5", {}, 103, 10, 0, 6, 1)
    got = [epoch_ids(plan, pt(access, "sample", drop_last=True, batch=4), 0, 3, r) for r in range(3)]
    assert [len(g) for g in got] == [32, 32, 32]  # 103 / 3 ranks = 34 or 35; whole batches of 4 -> 32 each
    flat = np.concatenate(got)
    assert len(np.unique(flat)) == len(flat)  # still never a sample twice


def run_kernel(tmp_path, *overrides, evict_first=False):
    from experiments.dataset import data_files
    from experiments.kernel.cache import evict
    from experiments.run.job import step_runner as _step_runner

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
    if fmt.loads_whole:  # parquet: row groups loaded whole, each load planned from its file's footer (test_parquet)
        per_epoch = res["epochs"][0]["bytes_planned"]
        assert per_epoch >= int(plan.sizes().sum())
    assert res["ranks"] == 2 and len(res["rank_info"]) == 2 and len({r["pid"] for r in res["rank_info"]}) == 2
    assert res["totals"]["bytes_read"] == res["totals"]["bytes_planned"] == 2 * per_epoch
    for e in res["epochs"]:
        assert e["bytes_read"] == e["bytes_planned"] == per_epoch
        assert e["read_ops"] == spec.workload.samples and e["samples"] == spec.workload.samples
        assert sum(r["bytes_read"] for r in e["ranks"]) == per_epoch
        assert all(r["bytes_read"] > 0 for r in e["ranks"])  # both ranks did read
        assert sum(e["hist"]) == spec.workload.samples
        assert e["io_time_slowest_s"] == max(r["io_time_s"] for r in e["ranks"])
        assert e["bandwidth_mib_s"] == pytest.approx(per_epoch / e["io_time_slowest_s"] / 2**20)
    assert res["totals"]["bandwidth_mib_s"] > 0 and res["totals"]["iops"] > 0
    assert "MPICH" in res["mpi_library"] or "Open MPI" in res["mpi_library"]
    # the file-system layer: every read call of an epoch fell inside a sample (its size binned), and the file
    # system served at least what the readers returned
    for e in res["epochs"]:
        for r in e["ranks"]:
            assert r["posix_reads"] == sum(r["posix_size_hist"]) > 0
            assert r["posix_bytes_read"] >= r["bytes_read"]
        assert e["amplification"] == pytest.approx(e["posix_bytes_read"] / e["bytes_read"])


def test_the_file_system_layer_sees_what_each_format_asks_of_the_file_system(tmp_path):
    """bin: one read call per sample of exactly its size (plus the index, read once per open file): amplification
    1 within 1% at 16 KiB samples; HDF5 serves each 16 KiB sample from a 64 KiB sieve-buffer read: ~3.5x."""
    _, _, b = run_kernel(tmp_path / "bin", "format=bin", "ppn=2", "workload.shuffle=sample", "workload.samples=256",
                         "workload.samples_per_file=128")
    assert b["totals"]["amplification"] == pytest.approx(1.0, abs=0.01)
    for e in b["epochs"]:
        hist = e["posix_size_hist"]
        assert hist[3] == 256  # 16 KiB reads: POSIX_SIZE_READ_10K_100K, one per sample
        assert e["posix_reads"] == 256 + sum(hist[:3])  # and the small index reads, nothing else
    _, _, h = run_kernel(tmp_path / "h5", "format=hdf5", "ppn=2", "workload.shuffle=sample")
    assert 2.5 < h["totals"]["amplification"] < 4.5
    assert h["totals"]["posix_reads"] < 2 * h["totals"]["read_ops"]


def test_a_smaller_hdf5_sieve_buffer_lowers_amplification(tmp_path):
    """HDF5 serves a contiguous read smaller than its sieve buffer by filling the buffer (one read of the
    buffer's size); a read at least as large as the buffer goes straight to the file. 16 KiB samples: 64 KiB
    (default) reads ~3.5x the bytes, a 32 KiB buffer ~2x, a 4 KiB one reads each sample exactly."""
    amp = {}
    for sieve in (65536, 32768, 4096):
        _, _, res = run_kernel(tmp_path / str(sieve), "format=hdf5", "workload.shuffle=sample",
                               f"format.sieve_buf_size={sieve}", "workload.epochs=1")
        amp[sieve] = res["totals"]["amplification"]
        if sieve == 4096:  # one pread of each 16 KiB sample: POSIX_SIZE_READ_10K_100K
            assert res["totals"]["posix_size_hist"][3] >= res["totals"]["read_ops"]
    assert amp[65536] > amp[32768] > amp[4096]
    assert amp[65536] > 2.5 and amp[32768] < 2.5 and amp[4096] == pytest.approx(1.0, abs=0.1)


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


def test_the_prime_leaves_a_cached_dataset_cached(tmp_path):
    """The read path's run before epoch 0 (file 0's first record) evicts file 0 to leave no trace, unless file 0
    was wholly cached before it: then a warm dataset is found warm, not evicted and read again in full."""
    from experiments.dataset import data_files
    from experiments.kernel.cache import residency, warm

    spec = point(tmp_path, "workload.cache=warm", "workload.epochs=1")
    plan = DatasetPlan.from_point(spec)
    ensure_dataset(plan, Layout(), mpi_generation(spec, tmp_path), spec.ranks)
    warm(data_files(plan))
    if residency(data_files(plan)) < 1.0:
        pytest.skip("this file system does not keep a just-read file resident")
    _, _, res = run_kernel(tmp_path, "workload.cache=warm", "workload.epochs=1")
    assert res["epochs"][0]["residency_before"] == 1.0 and res["totals"]["os_read_bytes"] == 0
    _, _, res = run_kernel(tmp_path, "workload.cache=warm", "workload.epochs=1", evict_first=True)
    assert res["epochs"][0]["residency_before"] <= 0.01  # file 0 read by the prime, then evicted again


def test_compute_time_gives_accelerator_utilisation(tmp_path):
    _, _, res = run_kernel(tmp_path, "workload.compute_time=0.02", "workload.batch_size=16", "workload.epochs=1")
    e = res["epochs"][0]
    assert e["compute_time_s"] == pytest.approx(4 * 0.02, rel=0.5)  # 64 samples / 16 = 4 batches
    assert 0.2 < e["au"] <= 1.0
    assert e["wall_time_s"] >= e["compute_time_s"]


def test_corrupt_data_fails_the_kernel_with_the_reason(tmp_path):
    from ddlio.errors import LaunchError

    spec = point(tmp_path, "format=tfrecord")
    plan = DatasetPlan.from_point(spec)
    ensure_dataset(plan, Layout(), mpi_generation(spec, tmp_path), 1)
    with open(plan.file_path(0), "r+b") as f:
        f.seek(5000)
        f.write(b"\0" * 16)
    ks = {"point": spec.to_dict(), "plan": plan.to_dict(), "result_path": str(tmp_path / "res.json")}
    write_json_atomic(tmp_path / "k.json", ks)
    from experiments.run.job import step_runner as _step_runner

    with pytest.raises(LaunchError, match="(?s)kernel step failed.*checksum mismatch"):
        _step_runner(spec, tmp_path)("experiments.kernel", [str(tmp_path / "k.json")], 1, "kernel")
    assert not (tmp_path / "res.json").exists()


def read_traces(tmp_path, ranks):
    import pandas as pd

    frames = [pd.read_csv(tmp_path / f"trace-rank{r:05d}.csv") for r in range(ranks)]
    return pd.concat(frames, ignore_index=True)


@pytest.mark.parametrize("fmt", ["tfrecord", "hdf5", "bin"])
def test_access_log_shows_a_true_shuffle_read_exactly_once(tmp_path, fmt):
    """With 2 real ranks, shuffle=sample and variable sample sizes, the access logs show: every record of the
    dataset read exactly once per epoch, by two ranks, in a different order every epoch, each read as large as
    the record it asked for."""
    spec, plan, res = run_kernel(tmp_path, f"format={fmt}", "ppn=2", "workload.shuffle=sample",
                                 "workload.sample_size_stdev=6KiB", "workload.epochs=2", "workload.trace=true")
    tr = read_traces(tmp_path, 2)
    reads = tr[tr.op == "read"]
    assert set(tr.op) == {"read", "open", "close"}
    assert set(reads["rank"]) == {0, 1}
    record = plan.record_bytes()
    orders = []
    for epoch, e in reads.groupby("epoch"):
        # (file, offset) identifies a record: every one of the dataset exactly once per epoch
        keys = list(zip(e.file, e.offset, strict=True))
        assert len(keys) == len(set(keys)) == spec.workload.samples
        assert e["size"].sum() == int(record.sum()) == res["epochs"][epoch]["bytes_read"]
        assert e["size"].nunique() > 10  # variable sizes per sample, not per file
        orders.append([k for _, k in sorted(zip(e.start_s, keys, strict=True))])
    assert orders[0] != orders[1]  # a new order each epoch
    if fmt != "hdf5":  # offsets are file offsets: a shuffled epoch does not read them in increasing order
        first = reads[(reads.epoch == 0) & (reads["rank"] == 0)].sort_values("start_s")
        assert not first.offset.is_monotonic_increasing


def test_read_threads_read_ahead_while_compute_runs(tmp_path):
    _, _, inline = run_kernel(tmp_path / "a", "workload.compute_time=0.01", "workload.batch_size=4",
                              "workload.epochs=1", "workload.cache=warm")
    _, _, ahead = run_kernel(tmp_path / "b", "workload.compute_time=0.01", "workload.batch_size=4",
                             "workload.epochs=1", "workload.cache=warm", "workload.read_threads=2",
                             "workload.prefetch=4")
    for res in (inline, ahead):
        assert res["totals"]["bytes_read"] == res["totals"]["bytes_planned"]
    e_in, e_ahead = inline["epochs"][0], ahead["epochs"][0]
    # inline, the loop waits for every read; read ahead, it waits for less than the reads took
    assert e_in["wait_time_s"] >= e_in["io_time_slowest_s"] * 0.9
    assert e_ahead["wait_time_s"] < e_ahead["io_time_slowest_s"]


def test_compute_time_can_vary_per_batch(tmp_path):
    from experiments.kernel import compute_times

    p = pt(seed=1, compute_time=0.01, compute_time_stdev=0.004)
    c = compute_times(p, 0, 0, 2000)
    assert abs(c.mean() - 0.01) < 0.001 and abs(c.std() - 0.004) < 0.001 and c.min() >= 0
    assert not np.array_equal(c, compute_times(p, 1, 0, 2000))
    assert np.all(compute_times(pt(seed=1, compute_time=0.01, compute_time_stdev=0), 0, 0, 5) == 0.01)


def test_drop_last_in_a_real_run(tmp_path):
    spec, plan, res = run_kernel(tmp_path, "ppn=2", "workload.samples=67", "workload.batch_size=8",
                                 "workload.drop_last=true", "workload.shuffle=sample", "workload.epochs=1")
    e = res["epochs"][0]
    assert e["samples"] == 64 and all(r["samples"] == 32 for r in e["ranks"])
    assert e["bytes_read"] == e["bytes_planned"]


def test_reader_tf_without_tensorflow_says_how_to_install_it(tmp_path):
    import subprocess
    import sys

    from conftest import ROOT

    code = (
        "import sys; sys.modules['tensorflow'] = None\n"  # TensorFlow not importable, as where it is not installed
        "sys.path[:0] = [{!r}, {!r}]\n"
        "from helpers import point\n"
        "from ddlio.errors import ConfigError\n"
        "try:\n    point(__import__('pathlib').Path({!r}), 'reader=tf')\n"
        "except ConfigError as e:\n    print('ERROR', e)\n"
    ).format(str(ROOT), str(ROOT / "tests"), str(tmp_path))
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert "ERROR reader=tf needs TensorFlow: pip install -e '.[tf]'" in p.stdout, p.stderr


tf_installed = pytest.mark.skipif(
    not __import__("experiments.config", fromlist=["tf_available"]).tf_available(),
    reason="TensorFlow is not installed (pip install -e '.[tf]'); .ci/run installs it",
)


@tf_installed
@pytest.mark.parametrize(("fmt", "access"), [("tfrecord", "shared"), ("tfrecord", "fpp"), ("hdf5", "shared"),
                                             ("png", "fpp")])
def test_reader_tf_reads_the_plan_with_two_ranks(tmp_path, fmt, access):
    from experiments.kernel.tfdata import TF_OTHER_READS_MAX

    spec, plan, res = run_kernel(tmp_path, "reader=tf", f"format={fmt}", f"access={access}", "ppn=2",
                                 "workload.shuffle=sample", "workload.sample_size_stdev=2KiB",
                                 "workload.read_threads=2")
    for e in res["epochs"]:
        assert e["samples"] == spec.workload.samples
        if fmt == "tfrecord":  # counted by the file system (rchar): whole files, plus TF's own few reads
            assert e["bytes_planned"] == sum(os.path.getsize(plan.file_path(f)) for f in range(plan.num_files))
            assert e["bytes_planned"] <= e["bytes_read"] <= e["bytes_planned"] + 2 * TF_OTHER_READS_MAX
        else:  # from_generator over ddlio's readers: their reads, counted exactly
            assert e["bytes_read"] == e["bytes_planned"] == int(plan.record_bytes().sum())
        assert all(r["bytes_read"] > 0 for r in e["ranks"])


SHAPED = ("workload.sample_shape=[16,16,16]", "workload.samples=96", "workload.samples_per_file=24")


@pytest.mark.parametrize("layout", [("format=hdf5", "format.layout=array", "format.chunk_samples=1"),
                                    ("format=tfrecord", "format.layout=example"),
                                    ("format=npz", "format.layout=array"), ("format=npy", "format.layout=array")],
                         ids=lambda o: o[0][7:])
def test_layouts_read_exactly_the_plan(tmp_path, layout):
    spec, plan, res = run_kernel(tmp_path, *layout, *SHAPED, "ppn=2", "workload.shuffle=sample")
    fmt = get_format(plan.format, **plan.format_options)
    per_epoch = int(fmt.expected_record_bytes(plan.sizes()).sum())  # images, or Examples framed, from the plan
    assert int(plan.record_bytes().sum()) == per_epoch
    assert res["totals"]["bytes_read"] == res["totals"]["bytes_planned"] == 2 * per_epoch
    for e in res["epochs"]:
        assert e["read_ops"] == e["samples"] == spec.workload.samples
        assert all(r["bytes_read"] > 0 for r in e["ranks"])


@pytest.mark.parametrize("fmt", ["npz", "npy"])
@pytest.mark.parametrize("layout", ["samples", "array"])
def test_whole_loads_read_whole_files_as_planned(tmp_path, fmt, layout):
    """load=whole: in file order a rank loads each of its files once (the plan is the files' whole-load bytes);
    with sample shuffling and reader threads a file is loaded again whenever a lane comes back to it, and the bytes
    still equal the plan (loads x whole-load bytes)."""
    shape = SHAPED if layout == "array" else ("workload.samples=96", "workload.samples_per_file=24")
    opts = (f"format={fmt}", f"format.layout={layout}", "format.load=whole", *shape)
    spec, plan, res = run_kernel(tmp_path / "order", *opts, "ppn=2")
    loads = plan.load_bytes()
    assert len(loads) == plan.num_files == 4
    for e in res["epochs"]:
        assert e["bytes_read"] == e["bytes_planned"] == int(loads.sum())  # every file loaded once, by its rank
        assert e["samples"] == spec.workload.samples
    _, _, shuffled = run_kernel(tmp_path / "shuffled", *opts, "ppn=2", "workload.shuffle=sample",
                                "workload.read_threads=2")
    for e in shuffled["epochs"]:
        assert e["bytes_read"] == e["bytes_planned"] > int(loads.sum())  # files come back: loaded again
        assert len(set(loads.tolist())) == 1 and e["bytes_planned"] % int(loads[0]) == 0  # whole loads only


@tf_installed
@pytest.mark.parametrize("layout", [("format=hdf5", "format.layout=array", "format.chunk_samples=1"),
                                    ("format=tfrecord", "format.layout=example"),
                                    ("format=npz", "format.layout=array", "format.load=whole")],
                         ids=lambda o: o[0][7:])
def test_reader_tf_reads_the_layouts_as_applications_do(tmp_path, layout):
    """reader=tf: Examples through TFRecordDataset + parse_example after batching; HDF5 images and NPZ arrays
    from a generator of sample-shaped arrays in regular batches; the bytes are still the plan."""
    from experiments.kernel.tfdata import TF_OTHER_READS_MAX

    spec, plan, res = run_kernel(tmp_path, "reader=tf", *layout, *SHAPED, "ppn=2", "workload.shuffle=sample",
                                 "workload.read_threads=2")
    for e in res["epochs"]:
        assert e["samples"] == spec.workload.samples and all(r["bytes_read"] > 0 for r in e["ranks"])
        if plan.format == "tfrecord":
            assert e["bytes_planned"] == sum(os.path.getsize(plan.file_path(f)) for f in range(plan.num_files))
            assert e["bytes_planned"] <= e["bytes_read"] <= e["bytes_planned"] + 2 * TF_OTHER_READS_MAX
        elif plan.format == "npz":  # whole loads: at least every file once
            assert e["bytes_read"] == e["bytes_planned"] >= int(plan.load_bytes().sum())
        else:
            assert e["bytes_read"] == e["bytes_planned"] == int(plan.record_bytes().sum())


@tf_installed
def test_reader_tf_batches_are_what_an_application_gets(tmp_path):
    """The pipelines reader=tf builds hand on uint8 batches of the sample shape (Examples parsed and decoded)."""
    import types

    from experiments.formats import get_format
    from experiments.kernel.tfdata import example_parser, import_tf

    tf = import_tf()
    fmt = get_format("tfrecord", layout="example")
    from experiments.formats.base import FilePayload

    payload = FilePayload(3, 0, np.full(6, 16 * 16 * 16, dtype=np.int64), "random", (16, 16, 16))
    fmt.write(tmp_path / "a.tfrecord", payload)
    plan = types.SimpleNamespace(sample_shape=(16, 16, 16), sample_size=4096, sample_size_stdev=0)
    images, labels = next(iter(tf.data.TFRecordDataset([str(tmp_path / "a.tfrecord")]).batch(4)
                               .map(example_parser(tf, plan))))
    assert images.dtype == tf.uint8 and tuple(images.shape) == (4, 16, 16, 16)
    assert images[2].numpy().tobytes() == payload.sample(2) and labels.numpy().tolist() == [0, 1, 2, 3]


# ------------------------------------------------------------------------------- compute=cpu (CPU work per batch)
def test_compute_cpu_burns_about_the_planned_cpu_on_an_idle_run():
    """compute=cpu does a fixed amount of work calibrated to take compute_time on the idle node: the CPU it
    consumes is of the order of the planned compute (loose bounds: the machine is shared), and its threads
    release the GIL (a Python thread keeps running beside them)."""
    import resource
    import threading
    import time

    from experiments.kernel.compute import Compute

    def cpu_s() -> float:
        return sum(resource.getrusage(resource.RUSAGE_SELF)[:2])

    for threads in (1, 2):
        c = Compute("cpu", threads)
        cal = c.calibrate()
        assert cal["threads"] == threads and cal["units_per_s"] > 0 and cal["rate_min"] <= cal["rate_max"]
        c0, wall = cpu_s(), 0.0
        for _ in range(5):
            wall += c.run(0.04)
        used = cpu_s() - c0
        assert used > 0.5 * 5 * 0.04, (threads, used, cal)
        assert used < threads * wall + 0.05, (threads, used, wall)  # no thread pool of BLAS's own on top
        assert c.run(0) == 0.0
        c.close()
    # the GIL stays free while the burner works: a pure-Python thread advances alongside
    c = Compute("cpu", 1)
    c.calibrate()
    ticks, stop = [0], threading.Event()

    def spin() -> None:
        while not stop.is_set():
            ticks[0] += 1

    th = threading.Thread(target=spin)
    th.start()
    time.sleep(0.01)
    before = ticks[0]
    c.run(0.1)
    stop.set()
    th.join()
    assert ticks[0] - before > 1000
    c.close()


def test_compute_mode_unknown_is_refused():
    from experiments.kernel.compute import Compute

    with pytest.raises(ValueError, match="choose one of sleep, cpu"):
        Compute("gpu")


@pytest.mark.parametrize("reader", ["native", pytest.param("tf", marks=pytest.mark.skipif(
    not __import__("experiments.config", fromlist=["tf_available"]).tf_available(), reason="TensorFlow missing"))])
def test_kernel_runs_with_compute_cpu(tmp_path, reader):
    """Both readers run the CPU work per batch: the calibration is recorded with the result, the compute time is
    the work's wall time, the rank used at least about the planned compute in CPU, and the bytes are exact."""
    extra = ("format=hdf5", "format.layout=array", "format.chunk_samples=1", *SHAPED) if reader == "tf" else ()
    spec, plan, res = run_kernel(tmp_path, f"reader={reader}", "workload.compute=cpu", "workload.compute_threads=1",
                                 "workload.compute_time=0.02", "workload.batch_size=8", "workload.epochs=1",
                                 "workload.cache=warm", *extra)
    assert spec.workload.compute == "cpu" and spec.measurement_params()["compute"] == "cpu"
    info = res["rank_info"][0]
    assert info["compute"]["mode"] == "cpu" and info["compute"]["threads"] == 1
    assert info["compute"]["units_per_s"] > 0
    e = res["epochs"][0]
    batches = -(-spec.workload.samples // 8)
    assert e["bytes_read"] == e["bytes_planned"]
    assert e["compute_time_s"] > 0.5 * batches * 0.02
    assert info["cpu_s"] > 0.5 * batches * 0.02


@pytest.mark.parametrize("fmt", sorted(FORMATS))
@pytest.mark.parametrize("reader", ["native", pytest.param("tf", marks=tf_installed)])
def test_io_time_never_exceeds_the_epoch_it_lies_in(tmp_path, fmt, reader):
    """Stored I/O time (reads + opens, per rank and the slowest rank's) is at most the epoch's wall time, for every
    reader and format; with reader threads (native) and through tf.data (whose generator opens files while it
    reads), where overlapping calls once summed to more than the epoch (hdf5: 0.2607 s in a 0.2527 s epoch)."""
    spec, _, res = run_kernel(tmp_path, f"reader={reader}", f"format={fmt}", "ppn=2", "workload.read_threads=2")
    for e in res["epochs"]:
        assert 0 < e["io_time_slowest_s"] <= e["wall_time_s"], e
        for r in e["ranks"]:
            assert r["io_time_s"] == pytest.approx(r["read_time_s"] + r["meta_time_s"])
            assert 0 < r["io_time_s"] <= r["wall_time_s"], r


def test_warm_policy_reads_nothing_more_when_the_dataset_is_already_cached(tmp_path, monkeypatch):
    """cache=warm's pass before epoch 0 is made only when some page is not resident: a just-written (cached)
    dataset is not read an extra time (what bench/vs_dlio.py found), an evicted one is warmed."""
    from experiments.kernel import cache as pagecache
    from experiments.kernel.cachepolicy import prepare_cache

    f = tmp_path / "data.bin"
    f.write_bytes(os.urandom(1 << 20))
    with open(f, "rb") as fh:
        fh.read()
    if pagecache.residency([f]) < 1.0:
        pytest.skip("this file system does not keep a just-read file resident")
    passes: list[int] = []
    real = pagecache.warm
    monkeypatch.setattr(pagecache, "warm", lambda files: passes.append(real(files)) or passes[-1])
    report = prepare_cache("warm", 0, [f], leader=True)
    assert passes == [] and report is not None and report["before"] == 1.0
    pagecache.evict([f])
    if pagecache.residency([f]) >= 1.0:
        pytest.skip("eviction does not work on this file system")
    report = prepare_cache("warm", 0, [f], leader=True)
    assert passes == [1 << 20] and report is not None and report["after"] > 0.99


def test_io_time_fits_the_epoch_as_floats_not_only_as_reals():
    """A read time cut to ``wall - meta`` sums back to one ulp above ``wall`` for some values (CI once stored
    0.0038211220000000006 s of I/O in a 0.003821122 s epoch); the cut keeps the stored sum within the epoch."""
    from experiments.kernel.lanes import within_epoch

    wall, meta = 0.003549434, 0.00049083
    assert (wall - meta) + meta > wall  # the rounding the cut is for
    read = within_epoch(wall, meta, wall)
    assert read + meta <= wall and wall - read - meta < 1e-15
    assert within_epoch(0.001, meta, wall) == 0.001  # a read time already inside is left alone
    assert within_epoch(1.0, wall * 2, wall) == 0.0  # opens alone longer than the epoch: no read time left
