"""Validation: every bad value is reported before anything runs, with the valid choices; nothing is written."""

from __future__ import annotations

import re

import pytest
from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf

from conftest import ROOT
from ddlio.errors import ConfigError
from experiments.config import LocalCluster, PointSpec, SlurmCluster, register_configs
from experiments.config.validate import validate
from experiments.formats import FORMATS

register_configs()


def composed(tmp_path, *overrides: str) -> dict:
    with initialize_config_dir(config_dir=str(ROOT / "conf"), version_base=None):
        cfg = compose("config", overrides=[f"data_root={tmp_path / 'd'}", f"db={tmp_path / 'r.db'}", *overrides])
    return OmegaConf.to_container(cfg, resolve=True)


def spec(tmp_path, *overrides: str) -> PointSpec:
    return validate(composed(tmp_path, *overrides), tmp_path)


def test_defaults_validate_to_a_point(tmp_path):
    s = spec(tmp_path)
    assert (s.format.name, s.layout.access, s.nodes, s.ppn, s.ranks, s.layout.stripe_count) == (
        "hdf5", "shared", 1, 1, 1, 1)
    assert s.workload.sample_size == 128 * 1024 and s.layout.stripe_size == 1 << 20
    assert isinstance(s.cluster, LocalCluster) and s.cluster.executor == "local"
    assert s.data_root == str(tmp_path / "d") and s.db == str(tmp_path / "r.db")
    assert not (tmp_path / "d").exists() and not (tmp_path / "r.db").exists()


def test_units_are_normalised(tmp_path):
    s = spec(tmp_path, "workload.sample_size=4M", "workload.sample_size_stdev=1KiB", "stripe_size=4MiB")
    assert (s.workload.sample_size, s.workload.sample_size_stdev, s.layout.stripe_size) == (4 << 20, 1024, 4 << 20)


def test_every_problem_is_reported_at_once(tmp_path):
    with pytest.raises(ConfigError) as e:
        spec(tmp_path, "stripe=-5", "workload.sample_size=0", "ppn=0", "workload.cache=hot", "workload.epochs=0")
    text = str(e.value)
    assert "5 problems" in text
    assert "stripe=-5 is not a Lustre stripe count: use -1 (all OSTs), 0 (the file system's default)" in text
    assert "workload.sample_size=0" in text and "at least one byte" in text
    assert "workload.cache='hot' is unknown: choose one of cold, warm" in text
    assert "ppn=0 is out of range" in text and "workload.epochs=0 is out of range" in text


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ("data_root=/proc/x", "virtual file system"),
        ("workload.sample_size=3GiB", "out of range"),
        ("workload.sample_size=lots", "is not a size"),
        ("workload.sample_size_stdev=200KiB", "must be smaller than workload.sample_size"),
        ("workload.samples=1000000000000", "larger than the whole file system"),
        ("stripe_size=100000", "multiple of 64KiB"),
        ("nodes=2", "nodes=2 needs a cluster"),
        ("cluster.launch='no-such-mpiexec -n {ranks}'", "'no-such-mpiexec' not found: install an MPI"),
        ("cluster.launch='mpiexec -n {rank}'", "placeholders"),
        ("workload.compute_time=-1", "compute_time=-1.0 must be a number of seconds >= 0"),
    ],
)
def test_bad_values(tmp_path, override, message):
    with pytest.raises(ConfigError, match=None) as e:
        spec(tmp_path, override)
    assert message in str(e.value)


def test_fewer_samples_than_ranks(tmp_path):
    with pytest.raises(ConfigError, match="fewer than the 4 ranks"):
        spec(tmp_path, "workload.samples=3", "ppn=4")


def test_unwritable_data_root(tmp_path):
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(0o500)
    import os

    if os.access(ro, os.W_OK):  # root may write anywhere: a file in the way is the portable unwritable case
        (tmp_path / "file").write_text("x")
        target = tmp_path / "file" / "sub"
        match = "is a file"
    else:
        target, match = ro / "sub", "not writable"
    with pytest.raises(ConfigError, match=match):
        spec(tmp_path, f"data_root={target}")


def test_db_that_is_a_directory(tmp_path):
    with pytest.raises(ConfigError, match="is a directory"):
        spec(tmp_path, f"db={tmp_path}")


def test_keys(tmp_path):
    a = spec(tmp_path)
    assert a.dataset_key == spec(tmp_path, "repeat=1").dataset_key  # repetition: same bytes
    assert a.point_key != spec(tmp_path, "repeat=1").point_key  # ... different measurement
    assert a.dataset_key == spec(tmp_path, "stripe=4").dataset_key  # not Lustre here: striping not applied
    assert a.point_key != spec(tmp_path, "stripe=4").point_key
    assert a.dataset_key != spec(tmp_path, "format=npz").dataset_key
    assert a.dataset_key != spec(tmp_path, "seed=1").dataset_key
    assert a.dataset_key == spec(tmp_path, "access=fpp").dataset_key  # 1 rank, 1 file: the same bytes
    assert a.point_key != spec(tmp_path, "access=fpp").point_key
    assert spec(tmp_path, "access=fpp", "ppn=2").num_files == 2
    assert a.point_key == PointSpec.from_dict(a.to_dict()).point_key
    # options that change only the reading share the bytes, not the measurement
    crc = spec(tmp_path, "format=tfrecord")
    nocrc = spec(tmp_path, "format=tfrecord", "format.verify_crc=false")
    assert crc.dataset_key == nocrc.dataset_key and crc.point_key != nocrc.point_key
    raw = spec(tmp_path, "format=jpeg")
    dec = spec(tmp_path, "format=jpeg", "format.decode=true")
    assert raw.dataset_key == dec.dataset_key and raw.point_key != dec.point_key
    assert spec(tmp_path, "format=hdf5", "format.chunk_samples=4").dataset_key != a.dataset_key


def test_fpp_files_are_a_multiple_of_ranks(tmp_path):
    s = spec(tmp_path, "access=fpp", "ppn=3", "workload.samples=100", "workload.samples_per_file=10")
    assert s.num_files == 12
    s = spec(tmp_path, "access=shared", "ppn=3", "workload.samples=100", "workload.samples_per_file=10")
    assert s.num_files == 10


# ------------------------------------------------------------------------------------ the command line
@pytest.mark.parametrize(
    ("override", "words"),
    [
        ("format=orc", ["format=orc is unknown", "hdf5", "npz", "tfrecord"]),
        ("stripe=-5", ["stripe=-5", "-1 (all OSTs)"]),
        ("workload.sample_size=0", ["workload.sample_size=0", "at least one byte"]),
        ("data_root=/proc/x", ["data_root=/proc/x", "virtual file system"]),
        ("workload.samples=abc", ["workload.samples", "could not be converted to Integer"]),
        ("workload.sampels=3", ["workload.sampels is not a ddlio key: did you mean workload.samples?"]),
        ("+workload.sampels=3", ["workload.sampels is not a ddlio key: did you mean workload.samples?"]),
        ("++workload.read_thread=4", ["did you mean workload.read_threads?"]),
        ("+workload.foo=3", ["workload.foo is not a ddlio key", "workload.read_threads"]),
        ("+bogus_knob=7", ["bogus_knob is not a ddlio key"]),
        ("+format.turbo=true", ["format.turbo is not a ddlio key", "format.compression"]),
        ("+workload.stripe=4", ["did you mean stripe?"]),
        ("format=[", ["no viable alternative"]),
        ("nodes=1.5", ["nodes=1.5", "could not be converted to Integer"]),
        ("cluster=slrum", ["cluster=slrum is unknown: choose one of local, slurm"]),
        ("data_root=''", ["data_root is empty"]),
        ("db=''", ["db is empty"]),
        ("cluster.launch=''", ["cluster.launch is empty"]),
        ("workload.compute_time=1e9", ["workload.compute_time=1e+09 s x", "cluster.timeout_min=30"]),
        ("~nodes", ["nodes is missing (deleted with ~nodes?)"]),
        ("~workload", ["workload must be a config group"]),
        ("cluster=null", ["Hydra refused the overrides: Config group override must be a string"]),
        ("workload=tinyy", ["workload=tinyy is unknown: choose one of default, tiny"]),
        ("data_root=${oc.env:DDLIO_NO_SUCH_VAR}", ["Environment variable 'DDLIO_NO_SUCH_VAR' not found"]),
    ],
)
def test_cli_rejects_before_writing_anything(sweep, tmp_path, override, words):
    p = sweep(override, timeout=120)
    assert p.returncode == 2, p.stderr
    for w in words:
        assert w in p.stderr
    assert "Traceback" not in p.stderr + p.stdout
    assert len(p.stderr.strip().splitlines()) == 1, p.stderr  # one message
    assert not (tmp_path / "r.db").exists() and not (tmp_path / "data").exists()
    assert not (tmp_path / "datasets").exists() and not (tmp_path / "runs").exists()  # data_root='' is not cwd


def test_cli_reports_each_problem_of_a_sweep_once(sweep, tmp_path):
    p = sweep("-m", "format=hdf5,npz", "stripe=-5", "workload=tiny,default", timeout=120)
    assert p.returncode == 2
    assert p.stderr.count("stripe=-5 is not a Lustre stripe count") == 1
    assert not (tmp_path / "r.db").exists()


def test_help_is_fast_and_does_not_import_heavy_modules(tmp_path):
    import subprocess
    import sys

    code = (
        "import sys, runpy; sys.argv=['sweep.py','--help']\n"
        f"try:\n    runpy.run_path({str(ROOT / 'sweep.py')!r}, run_name='__main__')\n"
        "except SystemExit: pass\n"
        "bad=[m for m in ('tensorflow','h5py','pandas','matplotlib','sqlalchemy','mpi4py') if m in sys.modules]\n"
        "print('HEAVY', bad)\n"
    )
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, cwd=tmp_path)
    assert f"format: {', '.join(sorted(FORMATS))}" in p.stdout
    assert "HEAVY []" in p.stdout


def test_a_bad_override_in_a_sweep_stops_it_before_anything_runs(sweep, tmp_path):
    p = sweep("-m", "format=hdf5,npz", "workload.sampels=1,2", timeout=120)
    assert p.returncode == 2 and "workload.sampels is not a ddlio key: did you mean workload.samples?" in p.stderr
    assert not (tmp_path / "r.db").exists() and not (tmp_path / "data").exists()


@pytest.mark.parametrize(("overrides", "dataset_key", "point_key"), [
    ((), "f11af5c5fdcfe3c06266", "faa326f064ee9e991fb8"),
    (("format=hdf5", "format.chunk_samples=4"), "95b595a517f9e053afb0", "10a29cf74852a2c48b0d"),
    (("format=tfrecord",), "55683060740cc18fb71f", "8861175d7b2f5a89ec2f"),
    (("format=bin", "workload=tiny"), "c2008a73a3a62639b096", "11520cc3e40996ff2c13"),
])
def test_keys_of_existing_points_never_change(tmp_path, overrides, dataset_key, point_key):
    """Keys computed before HDF5's own knobs existed: with the knobs at their defaults, a point keeps them (a store
    recognises what it measured)."""
    d = spec(tmp_path, *overrides).to_dict()
    d.update(data_root="/pinned/data", db="/pinned/r.db")
    p = PointSpec.from_dict(d)
    assert (p.dataset_key, p.point_key) == (dataset_key, point_key)


def test_hdf5_knobs_key_the_dataset_only_when_they_change_its_bytes(tmp_path):
    a = spec(tmp_path, "format=hdf5")
    for read_knob in ("format.sieve_buf_size=4096", "format.driver=stdio", "format.rdcc_nbytes=0",
                      "format.rdcc_nslots=1009"):
        b = spec(tmp_path, "format=hdf5", read_knob)
        assert b.dataset_key == a.dataset_key and b.point_key != a.point_key, read_knob
    for bytes_knob in ("format.alignment=1048576", "format.fs_strategy=page"):
        assert spec(tmp_path, "format=hdf5", bytes_knob).dataset_key != a.dataset_key, bytes_knob
    same = spec(tmp_path, "format=hdf5", "format.sieve_buf_size=65536")  # the default, said out loud
    assert (same.dataset_key, same.point_key) == (a.dataset_key, a.point_key)


# ------------------------------------------------------------------------------ sample shapes and layouts
def test_sample_shape_gives_the_size_and_keys_the_dataset_only_when_given(tmp_path):
    a = spec(tmp_path)
    assert a.workload.sample_shape == () and "sample_shape" not in a.dataset_params()
    s = spec(tmp_path, "workload.sample_shape=[64,64,3]")
    assert s.workload.sample_shape == (64, 64, 3)
    assert s.workload.sample_size == 64 * 64 * 3  # the preset's 128KiB is replaced
    assert s.dataset_key != spec(tmp_path, "workload.sample_size=12288").dataset_key  # same bytes, other shape
    assert s.to_dict()["sample_shape"] == (64, 64, 3)  # recorded with the result
    assert PointSpec.from_dict(__import__("json").loads(__import__("json").dumps(s.to_dict()))) == s
    from experiments.dataset import DatasetPlan

    plan = DatasetPlan.from_point(s)
    assert DatasetPlan.from_dict(__import__("json").loads(__import__("json").dumps(plan.to_dict()))) == plan
    assert plan.file_payload(0).shape == (64, 64, 3)


def test_layouts_key_only_when_not_at_their_default(tmp_path):
    for name, default, other in (("hdf5", "bytes", "array"), ("tfrecord", "raw", "example"),
                                 ("npz", "samples", "array"), ("npy", "samples", "array")):
        a = spec(tmp_path, f"format={name}")
        same = spec(tmp_path, f"format={name}", f"format.layout={default}")
        assert (same.dataset_key, same.point_key) == (a.dataset_key, a.point_key)
        b = spec(tmp_path, f"format={name}", f"format.layout={other}", "workload.sample_shape=[8,8,4]")
        c = spec(tmp_path, f"format={name}", "workload.sample_shape=[8,8,4]")
        assert b.dataset_key != c.dataset_key and b.format.options["layout"] == other
    for name in ("npz", "npy"):  # load: a read option, in the point key only when not at its default
        a = spec(tmp_path, f"format={name}")
        w = spec(tmp_path, f"format={name}", "format.load=whole")
        assert w.dataset_key == a.dataset_key and w.point_key != a.point_key
        assert spec(tmp_path, f"format={name}", "format.load=sample").point_key == a.point_key


@pytest.mark.parametrize(("overrides", "words"), [
    (("format.layout=array",), "format.layout=array stores each sample as an N-d array: it needs "
                               "workload.sample_shape"),
    (("format=npz", "format.layout=arr"), "format.layout='arr' is unknown for npz: choose one of samples, array"),
    (("format=tfrecord", "format.layout=array"), "choose one of raw, example"),
    (("format=npy", "format.load=all"), "format.load='all' is unknown: choose one of sample, whole"),
    (("workload.sample_shape=[8,8]", "workload.sample_size_stdev=1KiB"),
     "workload.sample_size_stdev=1KiB cannot vary the size of samples of workload.sample_shape=[8, 8]"),
    (("workload.sample_shape=[8,0]",), "workload.sample_shape=[8, 0] must be a list of whole dimensions >= 1"),
    (("format.layout=array", "format.chunk_samples=2000", "workload.sample_shape=[1024,1024,3]"),
     "HDF5 chunks are under 4 GiB"),
])
def test_bad_layout_combinations_are_named(tmp_path, overrides, words):
    with pytest.raises(ConfigError) as e:
        spec(tmp_path, *overrides)
    assert any(words in p for p in e.value.problems), e.value.problems


def test_a_given_sample_size_that_disagrees_with_the_shape_is_named(tmp_path):
    overrides = ("workload.sample_shape=[64,64,3]", "workload.sample_size=10KiB")
    with pytest.raises(ConfigError, match=r"workload.sample_size=10KiB \(10240 bytes\) disagrees with "
                                          r"workload.sample_shape=\[64, 64, 3\] \(12288 bytes"):
        validate(composed(tmp_path, *overrides), tmp_path, overrides)
    agree = ("workload.sample_shape=[64,64,3]", "workload.sample_size=12288")
    assert validate(composed(tmp_path, *agree), tmp_path, agree).workload.sample_size == 12288


def test_deepgalaxy_preset_is_the_nd_layout(tmp_path):
    s = spec(tmp_path, "+experiment=deepgalaxy", "reader=native")
    assert s.workload.sample_shape == (512, 512, 3) and s.workload.sample_size == 786432
    assert s.format.name == "hdf5" and s.format.options["layout"] == "array" and s.format.options["chunk_samples"] == 1


# ------------------------------------------------------------------------------------------ the stored form
POINTS = ROOT / "tests" / "fixtures" / "points"
#: the parts of a stored point that depend on the machine and directory it was composed in (pinned in the fixtures)
_PINNED = ("data_root", "db", "fs_type", "striping_applicable")


def _fixture(name: str) -> list[dict]:
    import json

    return [json.loads(line) for line in (POINTS / name).read_text().splitlines() if line.strip()]


@pytest.mark.parametrize("case", _fixture("stored-ef5ca75.jsonl") + _fixture("stored-0dae8e7.jsonl"),
                         ids=lambda c: " ".join(c["overrides"]) or "defaults")
def test_a_point_is_stored_as_before(tmp_path, case):
    """``to_dict`` (the ``points.config`` column, run folders, the kernel's spec) is byte for byte what ddlio stored
    at ef5ca75 (and at 0dae8e7, the last commit before the seams) for the same composition, and gives the same
    label and keys (tests/fixtures/points/README.md)."""
    import json

    from experiments.config import tf_available

    if "reader=tf" in case["overrides"] and not tf_available():
        pytest.skip("TensorFlow is not installed (pip install -e '.[tf]'): validation refuses reader=tf without it")
    stored = json.loads(case["stored"])
    d = validate(composed(tmp_path, "workload=tiny", *case["overrides"]), tmp_path,
                 overrides=tuple(case["overrides"])).to_dict()
    d.update({k: stored[k] for k in _PINNED})
    for k in ("dataset_key", "point_key"):
        d.pop(k), stored.pop(k)
    assert json.dumps(d) == json.dumps(stored)
    p = PointSpec.from_dict(json.loads(case["stored"]))
    assert (p.label, p.dataset_key, p.point_key) == (case["label"], case["dataset_key"], case["point_key"])
    assert json.dumps(p.to_dict()) == case["stored"]


@pytest.mark.parametrize("name", ["stored-e960f8f.jsonl", "stored-627fa5f.jsonl", "stored-ef5ca75.jsonl",
                                  "stored-0dae8e7.jsonl"])
def test_points_stored_by_earlier_versions_keep_their_keys(name):
    """A point as an earlier ddlio stored it (in the store's ``config`` column or a run folder's record), read back:
    the same label and keys, so the store still recognises what it measured. e960f8f stored neither ``settle`` nor
    ``flush_size`` and no ``vanish_after_s``/``cancel_unrunnable`` in the cluster; 627fa5f no ``sample_shape`` and
    no format ``layout``."""
    import json

    for case in _fixture(name):
        stored = json.loads(case["stored"])
        p = PointSpec.from_dict(stored)
        assert (p.label, p.dataset_key, p.point_key) == (case["label"], case["dataset_key"], case["point_key"])
        assert (p.dataset_key, p.point_key) == (stored["dataset_key"], stored["point_key"])
        again = PointSpec.from_dict(p.to_dict())
        assert (again.dataset_key, again.point_key) == (p.dataset_key, p.point_key)


def test_the_point_is_typed_by_concern(tmp_path):
    s = spec(tmp_path, "cluster=slurm", "cluster.partition=compute", "+cluster.sbatch.exclusive=true", "nodes=2")
    assert isinstance(s.cluster, SlurmCluster) and s.cluster.executor == "slurm"
    assert (s.cluster.partition, s.cluster.sbatch, s.cluster.array_parallelism) == ("compute", {"exclusive": True}, 4)
    local = spec(tmp_path).cluster
    assert not hasattr(local, "partition") and not hasattr(local, "array_parallelism")
    # the stored form keeps a local cluster's Slurm keys at their defaults, as earlier ddlio stored them
    assert local.to_dict()["partition"] == "" and local.to_dict()["vanish_after_s"] == 120.0
    assert PointSpec.from_dict(s.to_dict()) == s


@pytest.mark.parametrize("override", ["cluster.partition=compute", "cluster.array_parallelism=8",
                                      "cluster.setup=[module load x]", "cluster.cancel_unrunnable=false"])
def test_slurm_settings_on_the_local_cluster_are_refused(tmp_path, override):
    """cluster=local's conf has no Slurm key (ClusterConf; cluster=slurm's SlurmClusterConf inherits it): Hydra
    refuses one while it composes, and the user reads which executor takes it; added with ``+`` it is refused
    while validating, as a stored point's Slurm key away from its default is."""
    import sweep as sweep_module

    key = override.split("=", 1)[0]
    with pytest.raises(Exception) as e:
        spec(tmp_path, override)
    assert re.fullmatch(rf"{re.escape(override)} applies to Slurm only \(.*\): drop it, or use cluster=slurm",
                        sweep_module.refused(e.value) or "")
    with pytest.raises(ConfigError, match=rf"{key}=.* applies to Slurm only .*use cluster=slurm"):
        spec(tmp_path, "+" + override)


# ------------------------------------------------------------------------------------------- compute modes
@pytest.mark.parametrize(("overrides", "dataset_key", "point_key"), [
    ((), "f11af5c5fdcfe3c06266", "faa326f064ee9e991fb8"),
    (("workload.compute=sleep",), "f11af5c5fdcfe3c06266", "faa326f064ee9e991fb8"),
    (("workload.compute=sleep", "workload.compute_threads=3"), "f11af5c5fdcfe3c06266", "faa326f064ee9e991fb8"),
    (("format=bin", "workload=tiny", "workload.compute=sleep"), "c2008a73a3a62639b096", "11520cc3e40996ff2c13"),
])
def test_compute_sleep_leaves_keys_and_stored_form_unchanged(tmp_path, overrides, dataset_key, point_key):
    """compute=sleep (the default) is what every point measured before the knob did: same keys, and the stored form
    carries no compute keys (compute_threads does nothing with a sleep: normalised away)."""
    d = spec(tmp_path, *overrides).to_dict()
    assert "compute" not in d and "compute_threads" not in d
    d.update(data_root="/pinned/data", db="/pinned/r.db")
    p = PointSpec.from_dict(d)
    assert (p.workload.compute, p.workload.compute_threads) == ("sleep", 0)
    assert (p.dataset_key, p.point_key) == (dataset_key, point_key)


def test_compute_cpu_keys_the_measurement_not_the_dataset(tmp_path):
    a = spec(tmp_path)
    c = spec(tmp_path, "workload.compute=cpu")
    assert (c.workload.compute, c.workload.compute_threads) == ("cpu", 0)
    assert c.dataset_key == a.dataset_key and c.point_key != a.point_key
    assert c.measurement_params()["compute"] == "cpu" and c.measurement_params()["compute_threads"] == 0
    t2 = spec(tmp_path, "workload.compute=cpu", "workload.compute_threads=2")
    assert t2.point_key not in (a.point_key, c.point_key)
    d = t2.to_dict()
    assert (d["compute"], d["compute_threads"]) == ("cpu", 2)
    assert PointSpec.from_dict(__import__("json").loads(__import__("json").dumps(d))) == t2


@pytest.mark.parametrize(("override", "message"), [
    ("workload.compute=gpu", "workload.compute='gpu' is unknown: choose one of sleep, cpu"),
    ("workload.compute_threads=-1", "workload.compute_threads=-1 is out of range: must be in 0..1024"),
    ("workload.compute_threads=100000", "workload.compute_threads=100000 is out of range"),
])
def test_bad_compute(tmp_path, override, message):
    with pytest.raises(ConfigError) as e:
        spec(tmp_path, "workload.compute=cpu", override)
    assert message in str(e.value)
