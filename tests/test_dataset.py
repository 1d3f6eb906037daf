from __future__ import annotations

import json
import os

import numpy as np
import pytest

from experiments.dataset import MANIFEST, DatasetPlan, ensure_dataset, load_manifest, sample_sizes
from experiments.formats import get_format
from helpers import mpi_generation, point
from lustre import Layout


def test_sample_sizes_are_deterministic_and_vary_per_sample():
    a = sample_sizes(7, 1000, 4096, 1024)
    assert np.array_equal(a, sample_sizes(7, 1000, 4096, 1024))
    assert not np.array_equal(a, sample_sizes(8, 1000, 4096, 1024))
    assert len(np.unique(a)) > 100 and a.min() >= 1 and a.max() <= 8192
    assert abs(a.mean() - 4096) < 150 and abs(a.std() - 1024) < 150
    assert np.all(sample_sizes(7, 10, 100, 0) == 100)


@pytest.mark.parametrize(("samples", "files"), [(64, 2), (100, 7), (5, 5)])
def test_files_hold_contiguous_ranges_covering_every_sample(samples, files):
    plan = DatasetPlan("k", "/x", "hdf5", {}, samples, 100, 0, files, 1)
    starts = plan.file_starts
    assert starts[0] == 0 and starts[-1] == samples and len(starts) == files + 1
    assert np.all(np.diff(starts) >= 1) and np.ptp(np.diff(starts)) <= 1


@pytest.mark.parametrize("fmt", ["hdf5", "tfrecord", "npz"])
def test_generation_with_two_mpi_ranks(tmp_path, fmt):
    spec = point(tmp_path, f"format={fmt}", "access=fpp", "ppn=2", "workload.sample_size_stdev=4KiB")
    plan = DatasetPlan.from_point(spec)
    gen = mpi_generation(spec, tmp_path)
    info = ensure_dataset(plan, Layout(1, 1 << 20), gen, spec.ranks)
    assert info.generated and gen.calls == [2]
    manifest = json.loads((tmp_path / "data" / "datasets" / f"{fmt}-{plan.key}" / MANIFEST).read_text())
    assert manifest["payload_bytes"] == int(plan.sizes().sum())
    assert manifest["layout"]["applicable"] is False
    # every sample is there, with the bytes its payload stream defines
    reader_fmt = get_format(fmt)
    sizes = plan.sizes()
    out = np.empty(int(sizes.max()) + 64, dtype=np.uint8)
    for f in range(plan.num_files):
        payload = plan.file_payload(f, sizes)
        with reader_fmt.open(plan.file_path(f)) as r:
            assert r.num_samples == len(payload.sizes)
            for i in (0, r.num_samples - 1):
                assert r.payload(i, out).tobytes() == payload.sample(i)


def test_a_complete_dataset_is_reused_and_an_incomplete_one_rebuilt(tmp_path):
    spec = point(tmp_path, "format=tfrecord")
    plan = DatasetPlan.from_point(spec)
    gen = mpi_generation(spec, tmp_path)
    ensure_dataset(plan, Layout(), gen, 1)
    again = ensure_dataset(plan, Layout(), gen, 1)
    assert not again.generated and gen.calls == [1]

    # a file shorter than the manifest says: not read, rebuilt
    victim = plan.file_path(0)
    with open(victim, "r+b") as f:
        f.truncate(os.path.getsize(victim) - 1)
    assert load_manifest(plan) is None
    assert ensure_dataset(plan, Layout(), gen, 1).generated and gen.calls == [1, 1]

    # no manifest (generation died before the end): rebuilt
    os.unlink(os.path.join(plan.directory, MANIFEST))
    assert ensure_dataset(plan, Layout(), gen, 1).generated and len(gen.calls) == 3
    assert load_manifest(plan) is not None


def test_generation_failure_is_reported_with_what_the_ranks_said(tmp_path):
    from ddlio.errors import LaunchError

    spec = point(tmp_path)
    plan = DatasetPlan.from_point(spec)
    gen = mpi_generation(spec, tmp_path)

    def broken(plan_path: str, ranks: int) -> None:
        with open(plan_path, "w") as f:
            f.write("{not a plan")
        gen(plan_path, ranks)

    with pytest.raises(LaunchError, match=r"(?s)generate step failed.*JSONDecodeError"):
        ensure_dataset(plan, Layout(), broken, 1)
    assert load_manifest(plan) is None


def test_a_file_the_generation_finds_wrong_fails_the_point_in_the_job(tmp_path, monkeypatch):
    """The generation checks the files it wrote (experiments/dataset/verify.py); what it finds wrong reaches the
    job as a DatasetError naming the file, and no manifest is written."""
    from ddlio.errors import DatasetError
    from experiments.dataset import generate_here
    from experiments.formats.bin import Bin

    spec = point(tmp_path, "format=bin")
    plan = DatasetPlan.from_point(spec)
    # a stand-in for a writer gone wrong: the plan now expects one byte more per record than the files hold
    monkeypatch.setattr(Bin, "expected_record_bytes", lambda self, sizes: sizes + 1)
    with pytest.raises(DatasetError, match=r"part-00000\.bin: holds \d+ samples / \d+ bytes, planned"):
        ensure_dataset(plan, Layout(), lambda plan_path, ranks: generate_here(plan_path), 1)
    assert load_manifest(plan) is None
    with open(os.path.join(plan.directory, "verified.json")) as f:
        assert "error" in json.load(f)


def test_a_generation_that_left_no_verification_fails_the_point(tmp_path):
    from ddlio.errors import DatasetError
    from experiments.dataset import generate_here

    spec = point(tmp_path, "format=bin")
    plan = DatasetPlan.from_point(spec)

    def forgetful(plan_path: str, ranks: int) -> None:  # an older generation program: files, no verification
        generate_here(plan_path)
        os.unlink(os.path.join(plan.directory, "verified.json"))

    with pytest.raises(DatasetError, match="generation left no verification"):
        ensure_dataset(plan, Layout(), forgetful, 1)
    assert load_manifest(plan) is None


def test_the_lock_falls_back_to_a_lock_file_where_flock_is_refused(tmp_path, monkeypatch):
    """Lustre mounted without -o flock answers flock() with ENOSYS (a stand-in for that kernel answer here):
    the lock then is a file created with O_EXCL, removed on release."""
    import errno

    from experiments.dataset import lock as dataset

    def refuse(*_a):
        raise OSError(errno.ENOSYS, "Function not implemented")

    monkeypatch.setattr(dataset.fcntl, "flock", refuse)
    lock = tmp_path / "ds.lock"
    with dataset.exclusive(lock):
        assert (tmp_path / "ds.lock.excl").read_text().split()[1] == str(os.getpid())
    assert not (tmp_path / "ds.lock.excl").exists()
