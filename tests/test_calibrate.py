"""The calibration command (`python -m experiments.calibrate`): a tiny Keras model's step measured on in-memory
batches, the overrides printed, and bad input refused with one message and exit 2."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys

import pytest

from conftest import ROOT
from experiments import calibrate

TINY = '''
def tiny(shape):
    import keras  # inside: the module imports without TensorFlow, so its bad-input tests run on any install

    model = keras.Sequential([keras.Input(shape=shape, dtype="uint8"), keras.layers.Rescaling(1 / 255),
                              keras.layers.Flatten(), keras.layers.Dense(3, activation="softmax")])
    model.compile(optimizer="sgd", loss="sparse_categorical_crossentropy")
    return model

def uncompiled(shape):
    import keras

    return keras.Sequential([keras.Input(shape=shape), keras.layers.Flatten(), keras.layers.Dense(1)])

def regressor():
    import keras

    model = keras.Sequential([keras.Input(shape=(4,)), keras.layers.Dense(1)])
    model.compile(optimizer="sgd", loss="mse")
    return model

def broken(shape):
    raise RuntimeError("no GPU here")
'''

needs_tf = pytest.mark.skipif(importlib.util.find_spec("tensorflow") is None,
                              reason="TensorFlow is not installed: pip install -e '.[tf]'")


@pytest.fixture
def models(tmp_path):
    path = tmp_path / "tiny_models.py"
    path.write_text(TINY)
    return path


@needs_tf
def test_measures_the_step_and_prints_overrides(models, capsys):
    assert calibrate.main(["--model", f"{models}:tiny", "--batch", "4", "--shape", "8,8,3", "--steps", "5"]) == 0
    out = capsys.readouterr().out
    assert "compute per batch: median" in out
    line = next(x for x in out.splitlines() if x.startswith("use: python sweep.py "))
    assert "workload.batch_size=4" in line and "workload.compute_time=" in line
    assert "workload.compute_time_stdev=" in line and "'workload.sample_shape=[8,8,3]'" in line
    value = float(line.split("workload.compute_time=")[1].split()[0])
    assert value > 0


@needs_tf
def test_json_and_a_model_without_parameters(models, capsys):
    assert calibrate.main(["--model", f"{models}:regressor", "--batch", "2", "--shape", "4", "--steps", "3",
                           "--warmup", "1", "--json"]) == 0
    r = json.loads(capsys.readouterr().out)
    assert r["batch"] == 2 and r["shape"] == [4] and r["steps"] == 3
    assert 0 < r["min_s"] <= r["median_s"] <= r["max_s"] and r["stdev_s"] >= 0
    assert r["cpu_per_step_s"] >= 0 and r["cores_busy"] >= 0


@pytest.mark.parametrize("args, message", [
    (["--model", "missing.py:tiny"], "no such file: missing.py"),
    (["--model", "{m}"], "must be FILE.py:function or package.module:function"),
    (["--model", "{m}:nothere"], "has no function 'nothere' (its functions: broken, regressor, tiny, uncompiled)"),
    (["--model", "no_such_package_xyz.mod:f"], "cannot import no_such_package_xyz.mod"),
    (["--model", "{m}:tiny", "--shape", "8,0,3"], "--shape '8,0,3' must be positive integers"),
    (["--model", "{m}:tiny", "--shape", "a,b"], "--shape 'a,b' must be positive integers"),
    (["--model", "{m}:tiny", "--batch", "0"], "--batch 0 must be at least 1"),
    (["--model", "{m}:tiny", "--threads", "-1"], "--threads -1 must be at least 0"),
])
def test_bad_input_is_one_message_and_exit_2(models, capsys, args, message):
    argv = {"--batch": "4", "--shape": "8,8,3"}
    it = iter(args)
    for k in it:
        argv[k] = next(it).format(m=models)
    flat = [x for kv in argv.items() for x in kv]
    assert calibrate.main(flat) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and message in err and "Traceback" not in err


@needs_tf
@pytest.mark.parametrize("fn, message", [
    ("uncompiled", "the model is not compiled"),
    ("broken", "building the model for shape (8, 8, 3) failed: RuntimeError: no GPU here"),
])
def test_bad_models_are_one_message(models, capsys, fn, message):
    assert calibrate.main(["--model", f"{models}:{fn}", "--batch", "4", "--shape", "8,8,3"]) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err


@needs_tf
def test_threads_are_the_steps(models, tmp_path):
    """--threads sets TensorFlow's threads for the step (a fresh process, as the command runs)."""
    p = subprocess.run([sys.executable, "-m", "experiments.calibrate", "--model", f"{models}:tiny", "--batch", "2",
                        "--shape", "4,4,1", "--steps", "3", "--threads", "1", "--json"], cwd=tmp_path,
                       capture_output=True, text=True, env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin",
                                                            "TF_CPP_MIN_LOG_LEVEL": "3"}, timeout=300)
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout.strip().splitlines()[-1])["threads"] == 1


def test_bad_input_does_not_import_tensorflow(tmp_path):
    """Arguments are checked before TensorFlow is imported (which takes seconds)."""
    code = ("import sys\nfrom experiments import calibrate\n"
            "rc = calibrate.main(['--model', 'x.py:f', '--batch', '1', '--shape', '0'])\n"
            "assert 'tensorflow' not in sys.modules, 'TensorFlow was imported'\nsys.exit(rc)\n")
    p = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True,
                       env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})
    assert p.returncode == 2, p.stderr
    assert p.stderr.count("\n") == 1 and "--shape '0' must be positive integers" in p.stderr


@pytest.mark.parametrize(("result", "suffix"), [
    ({"cores_busy": 1.7, "accelerators": []}, " workload.compute=cpu workload.compute_threads=2"),
    ({"cores_busy": 0.95, "accelerators": []}, " workload.compute=cpu workload.compute_threads=1"),
    ({"cores_busy": 0.2, "accelerators": []}, ""),  # the step barely uses a core: a sleep is close enough
    ({"cores_busy": 1.7, "accelerators": ["/physical_device:GPU:0"]}, ""),  # on an accelerator: a sleep
])
def test_overrides_ask_for_cpu_compute_when_the_step_burns_the_cpu(result, suffix):
    base = {"batch": 8, "shape": [512, 512, 3], "median_s": 0.04, "stdev_s": 0.005}
    line = calibrate.overrides({**base, **result})
    assert line == ("workload.batch_size=8 workload.compute_time=0.04 workload.compute_time_stdev=0.005 "
                    "'workload.sample_shape=[512,512,3]'" + suffix)


@needs_tf
def test_the_printed_overrides_validate(models, capsys, tmp_path):
    """What calibrate prints is accepted by the config as it stands (compute=cpu included, when chosen)."""
    import shlex

    from hydra import compose, initialize_config_dir
    from omegaconf import OmegaConf

    from experiments.config import register_configs
    from experiments.config.validate import validate

    assert calibrate.main(["--model", f"{models}:tiny", "--batch", "4", "--shape", "8,8,3", "--steps", "5"]) == 0
    line = next(x for x in capsys.readouterr().out.splitlines() if x.startswith("use: python sweep.py "))
    over = shlex.split(line.removeprefix("use: python sweep.py "))
    register_configs()
    with initialize_config_dir(config_dir=str(ROOT / "conf"), version_base=None):
        cfg = compose("config", overrides=[f"data_root={tmp_path / 'd'}", f"db={tmp_path / 'r.db'}", *over])
    s = validate(OmegaConf.to_container(cfg, resolve=True), tmp_path, tuple(over))
    assert s.workload.batch_size == 4 and s.workload.compute in ("sleep", "cpu")
