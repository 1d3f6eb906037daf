"""Every reader is watched and takes the fault hooks (issue 37): a rank whose reads hang under tf.data or a
DataLoader (in its worker processes or in the rank itself) fails its point within cluster.hang_timeout_s, stored
with one sentence; a DataLoader worker's reads are binned by size as the rank's own are; each batch of
reader=torch is copied to the accelerator where there is one (chosen here with a monkeypatched check)."""

from __future__ import annotations

import re
import sqlite3
from types import SimpleNamespace

import pytest
from test_kernel import run_kernel

from ddlio.errors import KernelError

HANG = r"ddlio kernel: rank 0 made no progress for 3 s in epoch 0 \(no read returned and no batch finished"


def _failed_with(sweep, tmp_path, *overrides):
    p = sweep("workload=tiny", "cluster.hang_timeout_s=3", "+cluster.env.DDLIO_FAULT=hang@0", *overrides,
              timeout=240)
    assert p.returncode == 1, p.stdout + p.stderr
    assert "Traceback" not in p.stdout + p.stderr
    with sqlite3.connect(tmp_path / "r.db") as c:
        [(status, error)] = c.execute("SELECT status, error FROM points").fetchall()
    assert status == "failed"
    assert re.search(HANG, error), error
    return error


@pytest.mark.parametrize("workers", [0, 2])
def test_a_hung_dataloader_fails_the_point_in_the_hang_timeout(sweep, tmp_path, workers):
    pytest.importorskip("torch")
    error = _failed_with(sweep, tmp_path, "reader=torch", "format=npz", f"workload.read_threads={workers}")
    assert "the DataLoader delivered no batch after its first 0" in error, error
    if workers:
        assert re.search(r"its 2 worker processes, pids \d+, \d+: one hung, stopped or died", error), error
    else:
        assert "workload.read_threads=0" in error, error


def test_a_hung_tf_data_loop_fails_the_point_in_the_hang_timeout(sweep, tmp_path):
    pytest.importorskip("tensorflow")
    error = _failed_with(sweep, tmp_path, "reader=tf", "format=tfrecord")
    assert "tf.data delivered no batch after its first 0" in error, error


def test_dataloader_worker_reads_are_binned_by_size_as_the_ranks_own(tmp_path):
    """reader=torch with 2 workers: every read call the workers made sits in a Darshan size bin, and (format=bin:
    one call per sample) the bins hold each sample's size, as reader=native's do."""
    pytest.importorskip("torch")
    _, plan, res = run_kernel(tmp_path, "reader=torch", "format=bin", "workload.read_threads=2",
                              "workload.epochs=2")
    for e in res["epochs"]:
        assert e["posix_size_hist"] is not None, e
        assert sum(e["posix_size_hist"]) == e["posix_reads"] > 0
        assert e["posix_size_from_app"] >= e["samples"]  # each sample's read binned by its own size
        for r in e["ranks"]:
            assert sum(r["posix_size_hist"]) == r["posix_reads"]
            assert r["posix_read_time_s"] > 0


def _fake_torch(available: bool) -> SimpleNamespace:
    cuda = SimpleNamespace(is_available=lambda: available, current_device=lambda: 0)
    return SimpleNamespace(cuda=cuda, device=lambda kind, index=None: SimpleNamespace(type=kind, index=index))


def test_the_batch_goes_to_the_accelerator_where_there_is_one():
    pytest.importorskip("torch")
    from experiments.kernel.torchdata import choose_device

    assert choose_device(_fake_torch(True), "auto").type == "cuda"
    assert choose_device(_fake_torch(True), "cuda").type == "cuda"
    assert choose_device(_fake_torch(True), "cpu") is None
    assert choose_device(_fake_torch(False), "auto") is None
    with pytest.raises(KernelError, match=r"workload.device=cuda but PyTorch sees no CUDA device"):
        choose_device(_fake_torch(False), "cuda")


def test_reader_torch_on_cpu_copies_nothing_and_says_so(tmp_path):
    """No accelerator here: the batches stay in host memory, the rank's info says cpu and has no copy time."""
    pytest.importorskip("torch")
    _, _, res = run_kernel(tmp_path, "reader=torch", "format=bin", "workload.read_threads=0")
    info = res["rank_info"][0]["torch"]
    assert info["device"] == "cpu" and "device_copy_time_s" not in info


def test_the_copy_to_a_device_is_timed_apart(monkeypatch):
    """The copy path itself, on the CPU device standing in for an accelerator: each batch moved with
    ``non_blocking`` from pinned memory, its time counted."""
    torch = pytest.importorskip("torch")
    from experiments.kernel.torchdata import TorchLoader

    moved = []

    class Batch:
        def to(self, device, non_blocking=False):
            moved.append((device, non_blocking))
            return self

    loader = TorchLoader.__new__(TorchLoader)
    loader.torch, loader.device, loader.non_blocking = torch, torch.device("cpu"), True
    assert loader._to_device([Batch(), Batch()]) > 0
    assert moved == [(torch.device("cpu"), True)] * 2



def test_the_device_knob_is_checked_and_stays_out_of_the_keys_at_auto(tmp_path):
    """workload.device=auto (the default) leaves the stored form and keys as they were; cpu/cuda key the
    measurement only; a bad value, or the knob with another reader, gets one line naming the choices."""
    from ddlio.errors import ConfigError
    from helpers import point

    base, t = point(tmp_path), point(tmp_path, "reader=torch")
    assert point(tmp_path, "workload.device=auto").point_key == base.point_key
    assert "device" not in t.to_dict() and "device" not in t.measurement_params()
    cpu = point(tmp_path, "reader=torch", "workload.device=cpu")
    assert cpu.point_key != t.point_key and cpu.dataset_key == t.dataset_key
    assert cpu.measurement_params()["device"] == "cpu"
    with pytest.raises(ConfigError, match=r"workload.device.*auto, cpu, cuda"):
        point(tmp_path, "reader=torch", "workload.device=tpu")
    with pytest.raises(ConfigError, match="workload.device applies only to reader=torch"):
        point(tmp_path, "workload.device=cuda")


def test_a_dataloader_worker_that_dies_fails_the_point_saying_so(sweep, tmp_path):
    """DDLIO_FAULT=crash reaches the DataLoader's workers: the first one to read exits, and the point fails at once
    with PyTorch's own line, not at the time limit."""
    pytest.importorskip("torch")
    p = sweep("workload=tiny", "reader=torch", "format=npz", "workload.read_threads=2",
              "+cluster.env.DDLIO_FAULT=crash@0", timeout=240)
    assert p.returncode == 1, p.stdout + p.stderr
    assert "Traceback" not in p.stdout + p.stderr
    with sqlite3.connect(tmp_path / "r.db") as c:
        [(status, error)] = c.execute("SELECT status, error FROM points").fetchall()
    assert status == "failed"
    assert re.search(r"epoch 0: the DataLoader failed after 0 batches: DataLoader worker \(pid", error), error


def test_a_reader_torch_point_stores_size_bins_as_many_as_its_read_calls(sweep, tmp_path):
    """In the store (what diagnose's small-read findings read): the point's and each epoch's size bins hold every
    read call its DataLoader workers made."""
    import json

    pytest.importorskip("torch")
    p = sweep("workload=tiny", "reader=torch", "format=npz", "workload.read_threads=2")
    assert p.returncode == 0, p.stdout + p.stderr
    with sqlite3.connect(tmp_path / "r.db") as c:
        [(hist, calls)] = c.execute("SELECT posix_size_hist, posix_reads FROM points").fetchall()
        epochs = c.execute("SELECT posix_size_hist, posix_reads FROM epochs").fetchall()
    assert hist is not None and sum(json.loads(hist)) == calls > 0
    assert epochs and all(h is not None and sum(json.loads(h)) == n > 0 for h, n in epochs)
