"""Calibration on the model's device (issue 37): the batch is moved to the device the model is on, the device is
synchronised around each timed step (not the warm-up ones), and the device used is said. No accelerator here:
the CPU path runs for real, the synchronisation is checked on a step that counts it."""

from __future__ import annotations

import importlib.util
import json

import pytest
from test_calibrate import TINY as TINY_KERAS  # the Keras model the calibrate tests use

from experiments import calibrate

TINY_TORCH = '''
import torch
from torch import nn

def tiny(shape):
    m = nn.Sequential(nn.Flatten(), nn.Linear(int(torch.tensor(shape).prod()), 3))
    forward = m.forward
    m.forward = lambda x: forward(x.float() / 255)
    return m, torch.optim.SGD(m.parameters(), lr=0.1), nn.CrossEntropyLoss()
'''



def test_the_device_is_synchronised_around_each_timed_step_only():
    events: list[str] = []

    def step() -> None:
        events.append("step")

    step.sync = lambda: events.append("sync")
    times, _ = calibrate.measure(step, steps=3, warmup=2)
    assert len(times) == 3
    assert events == ["step", "step"] + ["sync", "step", "sync"] * 3


def test_a_pytorch_model_is_calibrated_on_its_device_and_says_which(tmp_path, capsys):
    torch = pytest.importorskip("torch")
    path = tmp_path / "tiny_torch.py"
    path.write_text(TINY_TORCH)
    assert calibrate.main(["--model", f"{path}:tiny", "--batch", "4", "--shape", "8,8,3", "--steps", "3"]) == 0
    assert "device: cpu (the batch moved there before the steps; no accelerator)" in capsys.readouterr().out
    assert calibrate.main(["--model", f"{path}:tiny", "--batch", "4", "--shape", "8,8,3", "--steps", "3",
                           "--json"]) == 0
    result = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert result["device"] == "cpu" and result["accelerators"] == []
    # the device is the model's: a model on another device (meta: shapes only) is found there
    assert calibrate.model_device(torch, torch.nn.Linear(2, 2, device="meta")).type == "meta"
    assert calibrate.model_device(torch, torch.nn.ReLU()).type == "cpu"


def test_a_pytorch_step_on_cuda_synchronises_that_device(tmp_path, monkeypatch):
    """The step's sync is torch.cuda.synchronize on the model's device when that is CUDA (the model's device
    monkeypatched: no CUDA here), none on the CPU."""
    torch = pytest.importorskip("torch")
    path = tmp_path / "tiny_torch.py"
    path.write_text(TINY_TORCH)
    fn = calibrate.load_function(f"{path}:tiny")
    cpu = calibrate.torch_step(fn, "tiny", 2, (4,), 0)
    assert cpu.sync is None and cpu.device == "cpu"
    synced = []
    monkeypatch.setattr(calibrate, "model_device", lambda torch_, model: _Cuda())
    monkeypatch.setattr(torch.Tensor, "to", lambda self, device, *a, **k: self)
    monkeypatch.setattr(torch.cuda, "synchronize", lambda device=None: synced.append(device))
    step = calibrate.torch_step(fn, "tiny", 2, (4,), 0)
    assert step.device == "cuda:0" and step.accelerators == ["cuda:0"]
    step.sync()
    assert len(synced) == 1 and str(synced[0]) == "cuda:0"


class _Cuda:
    type = "cuda"

    def __str__(self) -> str:
        return "cuda:0"


@pytest.mark.skipif(importlib.util.find_spec("tensorflow") is None, reason="TensorFlow is not installed")
def test_a_keras_model_says_its_device(tmp_path, capsys):
    path = tmp_path / "tiny_keras.py"
    path.write_text(TINY_KERAS)
    assert calibrate.main(["--model", f"{path}:tiny", "--batch", "4", "--shape", "8,8,3", "--steps", "3",
                           "--json"]) == 0
    result = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert result["device"].endswith("CPU:0") and result["median_s"] > 0
