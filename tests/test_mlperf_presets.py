"""MLPerf Storage's training workloads as presets (conf/workload/mlperf/): every value held to the number MLPerf's
own config file gives (mlcommons/storage ``configs/dlio/workload/*.yaml``, cited on the preset's line), the
accelerator's compute time resolved at validation, ``workload.scale``, a dry run and a real point, and MLPerf's two
validity rules (:mod:`ddlio.mlperf`) with synthetic inputs."""

from __future__ import annotations

import errno
import json
import os
import re
import shutil
from pathlib import Path

import pandas as pd
import pytest
import yaml
from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf

from analysis.validity import verdicts
from conftest import ROOT
from ddlio import mlperf
from ddlio.errors import ConfigError
from experiments.config import register_configs
from experiments.config.validate import validate
from experiments.config.validate.accelerator import scaled_samples

register_configs()
PRESETS = ROOT / "conf" / "workload" / "mlperf"
W = "configs/dlio/workload/"

#: name -> (format, samples (num_files_train x num_samples_per_file), samples_per_file, sample_size, its stdev,
#: batch, epochs, AU floor, {accelerator: (seconds a batch, the MLPerf file it comes from)}, the file of the rest)
EXPECTED = {
    "unet3d": ("npz", 168 * 1, 1, 146_600_628, 68_341_808, 7, 5, 0.90,
               {"a100": (0.636, "unet3d_a100.yaml"), "h100": (0.323, "unet3d_h100.yaml"),
                "b200": (0.162, "unet3d_b200.yaml")}, "unet3d_h100.yaml"),
    "resnet50": ("tfrecord", 1024 * 1251, 1251, 114_660, 0, 400, 5, 0.90,
                 {"a100": (0.435, "resnet50_a100.yaml"), "h100": (0.224, "resnet50_h100.yaml")},
                 "resnet50_h100.yaml"),
    "cosmoflow": ("tfrecord", 524_288 * 1, 1, 2_828_486, 71_311, 1, 5, 0.70,
                  {"a100": (0.00551, "cosmoflow_a100.yaml"), "h100": (0.00350, "cosmoflow_h100.yaml")},
                  "cosmoflow_h100.yaml"),
    "retinanet": ("jpeg", 1_170_301 * 1, 1, 322_957, 0, 24, 8, 0.85,
                  {"b200": (0.04755, "retinanet_b200.yaml")}, "retinanet_b200.yaml"),
    "flux": ("parquet", 4296 * 288, 288, 2_164_832, 0, 48, 1, 0.90,
             {"b200": (1.35, "flux_b200.yaml")}, "flux_b200.yaml"),
    "dlrm": ("parquet", 1024 * 4_718_592, 4_718_592, 761, 0, 16384, 1, 0.70,
             {"b200": (0.000375, "dlrm_b200.yaml")}, "dlrm_b200.yaml"),
}


def _format_of(text: str) -> str:
    """The format a preset picks: a plain one (``npz``) or one of conf/format/mlperf/ (MLPerf's schema of a format,
    whose ``/schema/format/<name>`` says which)."""
    choice = re.search(r"override /format: ([\w/]+)", text).group(1)
    if "/" not in choice:
        return choice
    return re.search(r"/schema/format/(\w+)@_here_", (ROOT / "conf" / "format" / f"{choice}.yaml").read_text()).group(1)


def _line(text: str, key: str, value: float) -> str:
    """The preset's line ``key: <value>`` (its comment included)."""
    got = [ln for ln in text.splitlines()
           if (m := re.match(rf"\s*{key}: ([0-9.]+)(\s|$)", ln)) and float(m.group(1)) == value]
    assert len(got) == 1, f"{key}: {value} not on one line"
    return got[0]


def test_the_presets_are_the_six_mlperf_training_workloads():
    assert sorted(p.stem for p in PRESETS.glob("*.yaml")) == sorted(EXPECTED)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_every_value_is_mlperfs_and_cites_the_file_it_comes_from(name):
    fmt, samples, spf, size, stdev, batch, epochs, floor, times, source = EXPECTED[name]
    text = (PRESETS / f"{name}.yaml").read_text()
    w = yaml.safe_load(text)["workload"]
    assert _format_of(text) == fmt
    assert (w["name"], w["samples"], w["samples_per_file"], w["sample_size"], w["sample_size_stdev"],
            w["batch_size"], w["epochs"], w["au_floor"]) == (f"mlperf/{name}", samples, spf, size, stdev, batch,
                                                             epochs, floor)
    assert w["compute_time"] == 0.0  # none until accelerator= picks one
    assert w["compute_time_by_accelerator"] == {k: v for k, (v, _) in times.items()}
    assert W + source in text  # the file the dataset's values come from
    for accelerator, (seconds, path) in times.items():
        assert W + path in _line(text, accelerator, seconds), f"{accelerator}'s time cites {path}"
    assert "dataset.num_files_train" in _line(text, "samples", samples)
    assert "reader.batch_size" in _line(text, "batch_size", batch)
    assert "metric.au" in _line(text, "au_floor", floor)


def _parquet_registered() -> bool:
    return (ROOT / "conf" / "format" / "parquet.yaml").exists()


def _composed(tmp_path: Path, *overrides: str) -> dict:
    with initialize_config_dir(config_dir=str(ROOT / "conf"), version_base=None):
        cfg = compose("config", overrides=[f"data_root={tmp_path / 'd'}", f"db={tmp_path / 'r.db'}", *overrides])
    return OmegaConf.to_container(cfg, resolve=True)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_the_accelerator_gives_the_point_its_compute_time(tmp_path, name):
    fmt, samples, *_, floor, times, _ = EXPECTED[name]
    if fmt == "parquet" and not _parquet_registered():
        pytest.skip("format=parquet is not registered yet (conf/format/parquet.yaml): held at the YAML level above")
    for accelerator, (seconds, _) in times.items():
        over = (f"workload=mlperf/{name}", f"accelerator={accelerator}", "workload.scale=0.0001")
        spec = validate(_composed(tmp_path, *over), tmp_path, over)
        assert (spec.format.name, spec.workload.compute_time, spec.accelerator) == (fmt, seconds, accelerator)
        assert spec.workload.au_floor == floor and spec.workload.scale == 0.0001
        assert spec.workload.samples == max(int(samples * 0.0001), 1)
        # the accelerator is informational: the point key holds the compute time, not the name
        assert "accelerator" not in {**spec.measurement_params(), **spec.dataset_params()}
        assert spec.to_dict()["accelerator"] == accelerator


def test_the_point_key_holds_the_compute_time_not_the_accelerators_name(tmp_path):
    named = ("workload=mlperf/unet3d", "accelerator=h100", "workload.scale=0.05")
    given = ("workload=mlperf/unet3d", "workload.compute_time=0.323", "workload.scale=0.05")
    assert validate(_composed(tmp_path, *named), tmp_path, named).point_key == \
        validate(_composed(tmp_path, *given), tmp_path, given).point_key


def test_the_accelerators_name_is_matched_whatever_its_case(tmp_path):
    over = ("workload=mlperf/unet3d", "accelerator=H100", "workload.scale=0.05")
    spec = validate(_composed(tmp_path, *over), tmp_path, over)
    assert (spec.accelerator, spec.workload.compute_time) == ("h100", 0.323)


def test_a_point_without_accelerator_or_scale_keeps_its_key_and_stored_form(tmp_path):
    spec = validate(_composed(tmp_path, "workload=tiny"), tmp_path)
    stored = spec.to_dict()
    assert "accelerator" not in stored and "scale" not in stored
    assert spec.accelerator == "" and spec.workload.scale == 1.0


@pytest.mark.parametrize("overrides, message", [
    (("workload=mlperf/unet3d", "accelerator=v100"),
     "accelerator=v100: workload 'mlperf/unet3d' has no compute time for it; choose one of a100 (0.636 s), "
     "h100 (0.323 s), b200 (0.162 s)"),
    (("workload=mlperf/retinanet", "accelerator=h100", "workload.scale=0.001"),
     "choose one of b200 (0.04755 s)"),
    (("workload=tiny", "accelerator=h100"),
     "accelerator=h100: workload 'tiny' has no compute time by accelerator"),
    (("workload=mlperf/unet3d", "accelerator=h100", "workload.compute_time=0.5"),
     "workload.compute_time=0.5 disagrees with accelerator=h100's 0.323 s a batch"),
    (("workload=mlperf/unet3d", "workload.scale=0"), "workload.scale=0.0 must be a fraction in (0, 1]"),
    (("workload=mlperf/unet3d", "workload.scale=1.5"), "workload.scale=1.5 must be a fraction in (0, 1]"),
    (("workload=tiny", "+workload.compute_time_by_accelerator.h100=-1", "accelerator=h100"),
     "workload.compute_time_by_accelerator.h100=-1.0 must be seconds per batch > 0"),
])
def test_refusals_name_the_problem_and_the_choices(tmp_path, overrides, message):
    with pytest.raises(ConfigError) as e:
        validate(_composed(tmp_path, *overrides), tmp_path, overrides)
    assert any(message in p for p in e.value.problems), e.value.problems


def test_the_command_line_refuses_an_unknown_accelerator_before_writing_anything(sweep, tmp_path):
    r = sweep("workload=mlperf/unet3d", "accelerator=v100", timeout=120)
    assert r.returncode != 0 and "Traceback" not in r.stderr
    assert "choose one of a100 (0.636 s), h100 (0.323 s), b200 (0.162 s)" in r.stderr + r.stdout
    assert not (tmp_path / "data").exists() and not (tmp_path / "r.db").exists()


@pytest.mark.parametrize("samples, scale, ranks, access, want", [
    (168, 0.05, 1, "shared", 8),         # floor(8.4): a whole number
    (168, 0.001, 4, "shared", 4),        # at least one sample per rank
    (1000, 0.0101, 4, "fpp", 8),         # fpp: a multiple of the ranks (10 -> 8), so each rank owns a file
    (5, 0.5, 3, "fpp", 3),
    (168, 1.0, 4, "fpp", 168),           # scale 1: the preset's count as it is
])
def test_scale_shrinks_the_sample_count_to_a_whole_number_per_rank(samples, scale, ranks, access, want):
    assert scaled_samples(samples, scale, ranks, access) == want


def test_a_scaled_fpp_point_keeps_a_file_per_rank(tmp_path):
    over = ("workload=mlperf/resnet50", "accelerator=a100", "workload.scale=0.0001", "access=fpp", "ppn=4")
    spec = validate(_composed(tmp_path, *over), tmp_path, over)
    assert spec.workload.samples == 128 and spec.num_files == 4 and spec.workload.sample_size == 114_660


def test_the_dry_run_shows_mlperfs_numbers(sweep, tmp_path):
    if shutil.disk_usage(tmp_path).total < 168 * 146_600_628:
        pytest.skip("the whole unet3d dataset (22.9 GiB) is refused on a file system smaller than it")
    r = sweep("workload=mlperf/unet3d", "accelerator=h100", "dry_run=true", timeout=120)
    assert r.returncode == 0, r.stderr
    assert ("mlperf/unet3d: 168 samples x 139.8 MiB ± 65.2 MiB, 1 a file, npz; batch 7, 5 epoch(s), 0.323 s compute "
            "a batch (h100); fed at AU >= 0.9") in r.stdout
    assert "not an MLPerf-sized run" in r.stdout and "24 steps an epoch < 500" in r.stdout


def test_a_scaled_unet3d_point_runs_here_and_its_verdict_names_mlperfs_rules(sweep, tmp_path):
    from analysis.query import analysis_frame
    from ddlio.store import open_store_for_reading

    r = sweep("workload=mlperf/unet3d", "accelerator=h100", "workload.scale=0.05", "workload.sample_size=256KiB",
              "workload.sample_size_stdev=64KiB", "workload.epochs=1", timeout=240)
    assert r.returncode == 0, r.stdout + r.stderr
    df = analysis_frame(open_store_for_reading(str(tmp_path / "r.db")))
    assert len(df) == 1
    row = df.iloc[0]
    assert (row["workload"], row["samples"], row["compute_time_s"], row["batch_size"]) == ("mlperf/unet3d", 8, 0.323,
                                                                                           7)
    config = json.loads(row["config"])
    assert (config["accelerator"], config["scale"]) == ("h100", 0.05)
    # data_root, the run folders and the store all lie under tmp_path: one file system, and the probe says so
    assert row["validity"] == "invalid"
    assert "not an MLPerf-sized run: the dataset" in row["invalid_reasons"]
    assert "1 steps an epoch < 500" in row["invalid_reasons"]
    assert ("results on the storage under test: the run folder (records, logs) and results store on the datasets' "
            "file system") in row["invalid_reasons"]


# ------------------------------------------------------------------------------------ the rules, synthetic inputs
GIB = 1024**3


def _points(**kw) -> pd.DataFrame:
    base = dict(cache_policy="cold", cache="cold", samples=200_000, sample_size=2 * 1024**2, first_read=False,
                ranks=4, batch_size=7, epochs=5, stripe_count=1, stripe_size=1 << 20, striping_applicable=False,
                fs_type="ext4", env_id="e1", io_time_slowest_s=30.0, workload="mlperf/unet3d", nodes=1)
    return pd.DataFrame([{**base, **kw}])


def test_an_mlperf_sized_run_apart_from_its_results_is_valid():
    v = verdicts(_points(), {"e1": 64 * GIB}, {"e1": {"run_dir": "apart", "store": "server"}})
    assert v["validity"].tolist() == ["valid"], v["invalid_reasons"].tolist()


def test_a_dataset_under_five_times_the_nodes_memory_is_not_an_mlperf_sized_run():
    v = verdicts(_points(nodes=2), {"e1": 64 * GIB})  # 390.6 GiB < 5 x 2 x 64 GiB
    assert v["invalid_reasons"][0] == ("not an MLPerf-sized run: the dataset (390.6 GiB) is less than 5 x the "
                                       "nodes' memory (2 x 64.0 GiB: needs 640.0 GiB)")


def test_an_epoch_under_500_steps_is_not_an_mlperf_sized_run():
    v = verdicts(_points(samples=13_999, sample_size=64 * 1024**2), {"e1": 64 * GIB})
    assert v["invalid_reasons"][0] == ("not an MLPerf-sized run: 499 steps an epoch < 500 (13999 samples / (batch 7 "
                                       "x 4 ranks); needs 14000 samples)")


def test_results_on_the_datasets_file_system_break_the_rule():
    v = verdicts(_points(), {"e1": 64 * GIB}, {"e1": {"run_dir": "apart", "store": "same"}})
    assert v["invalid_reasons"][0].startswith("results on the storage under test: the results store on the datasets'")
    unknown = verdicts(_points(), {"e1": 64 * GIB}, {"e1": {"run_dir": "unknown (EPERM linking into d)"}})
    assert unknown["validity"].tolist() == ["valid"]  # a probe that could not tell is no evidence


def test_the_rules_apply_to_mlperf_presets_only():
    v = verdicts(_points(workload="default", samples=16), {"e1": 64 * GIB}, {"e1": {"run_dir": "same"}})
    assert "MLPerf" not in v["invalid_reasons"][0] and "storage under test" not in v["invalid_reasons"][0]


def test_the_probe_tells_one_file_system_from_two(tmp_path, monkeypatch):
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    assert mlperf.apart(tmp_path / "a", tmp_path / "b") == mlperf.SAME
    assert not list(tmp_path.rglob(".ddlio-exdev-probe-*"))  # both names removed
    shm = Path("/dev/shm")
    if shm.is_dir() and os.access(shm, os.W_OK) and os.stat(shm).st_dev != os.stat(tmp_path).st_dev:
        assert mlperf.apart(tmp_path / "a", shm) == mlperf.APART  # the kernel's own EXDEV, two real file systems

    def exdev(src, dst):
        raise OSError(errno.EXDEV, os.strerror(errno.EXDEV))

    monkeypatch.setattr(os, "link", exdev)
    assert mlperf.apart(tmp_path / "a", tmp_path / "b") == mlperf.APART
    assert not list(tmp_path.rglob(".ddlio-exdev-probe-*"))
    assert mlperf.apart(tmp_path / "missing", tmp_path / "b").startswith("unknown (ENOENT")


def test_the_store_of_a_database_server_is_not_probed(tmp_path):
    (tmp_path / "runs").mkdir()
    (tmp_path / "datasets").mkdir()
    got = mlperf.results_apart(tmp_path / "runs", tmp_path / "datasets", "postgresql://u:***@host/db")
    assert got == {"run_dir": mlperf.SAME, "store": "server"}
    got = mlperf.results_apart(tmp_path / "runs", tmp_path / "datasets", f"sqlite:///{tmp_path / 'r.db'}")
    assert got["store"] == mlperf.SAME


#: MLPerf's DLRM columns, feature_000..feature_199 of configs/dlio/workload/dlrm_b200.yaml, one letter each (h
#: float16, f float32, d float64, b int8), transcribed a second time, apart from conf/format/mlperf/dlrm.yaml
DLRM_TYPES = ("hhddfhfbhbffdfbhfffhddddhffhhfdfdfhhdbbbhfhfdbdddffbbfffbfhfdhdbfhbfhfhfhffdhbfdbbffhbhbfbffhfddfhbh"
              "hdhfdhhfdfddbhhbbdfbhhbbbhbbfbhfdhhdhfddhfbbdfdfddbbbddffbfhfhfhdhdhfbdhbdbbbbhhbdddhdbbhfdbdfdffddh")
#: the features that file marks ``read: true``
DLRM_READ = [11, 17, 18, 20, 25, 31, 41, 43, 49, 53, 58, 59, 67, 68, 71, 74, 75, 88, 90, 91, 92, 93, 94, 96, 97, 116,
             117, 137, 141, 147, 154, 155, 158, 160, 162, 169, 180, 186, 189, 195]


@pytest.mark.parametrize("name, columns, read, row_group, size", [
    ("dlrm", [{"h": "float16", "f": "float32", "d": "float64", "b": "int8"}[c] for c in DLRM_TYPES], DLRM_READ,
     6144, 761),
    # flux_b200.yaml: t5_encodings, clip_encodings, mean, logvar, timestamp (float32, sizes as given), no group size
    ("flux", ["float32:524328", "float32:409", "float32:8232", "float32:8232", "float32:7"], [], 1024, 2_164_832),
])
def test_the_parquet_presets_carry_mlperfs_schema(tmp_path, name, columns, read, row_group, size):
    from experiments.formats.parquet import column_widths, expand_columns

    over = (f"workload=mlperf/{name}", "accelerator=b200", "workload.scale=0.00001")
    cfg = _composed(tmp_path, *over)
    fmt = cfg["format"]
    assert (fmt["name"], expand_columns(fmt["columns"]), fmt["read"], fmt["row_group_size"], fmt["compression"]) == \
        ("parquet", columns, read, row_group, "none")
    assert len(DLRM_TYPES) == 200 and sum(column_widths(columns, size)) == size  # the columns fill the sample
    spec = validate(cfg, tmp_path, over)
    assert spec.format.name == "parquet" and spec.workload.sample_size == size
    # another format given after the preset takes its place whole: no parquet option follows it
    other = (f"workload=mlperf/{name}", "format=npz", "workload.scale=0.00001")
    assert validate(_composed(tmp_path, *other), tmp_path, other).format.name == "npz"
