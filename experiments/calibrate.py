"""Calibrate ``workload.compute_time`` from the user's own model: the time of its training step on a batch that is
already in memory, repeated, so the emulated compute per batch is the model's, not a guess.

    python -m experiments.calibrate --model bench/fidelity/models.py:deepgalaxy_cnn --batch 8 --shape 512,512,3

``--model`` names a function as ``path/to/file.py:function`` or ``package.module:function``. The function takes
the sample shape (a tuple; a function without parameters is called without it) and returns a compiled Keras model,
or for PyTorch (``--framework torch``, or found by ``auto`` where the function's module imports torch and not
Keras or TensorFlow) a tuple ``(module, optimizer, loss_fn)``: an ``nn.Module`` taking the uint8 batch
``(batch, *shape)`` as a DataLoader delivers it, its ``torch.optim`` optimizer and a loss of (output, integer
classes); its step is ``zero_grad``, forward, loss, ``backward``, ``step`` (``--threads``: ``torch.set_num_threads``).
A Keras model is
(``model.compile(optimizer=..., loss=...)``) whose input is one batch of samples of that shape, in the model's
input dtype (uint8 samples are drawn as random bytes, float ones in [0, 1)), and whose labels are integer classes
(one output per class) or one number per sample. The step is ``model.train_on_batch(x, y)``: forward, loss,
gradients and the optimizer's update, on the same in-memory batch every time, after ``--warmup`` untimed steps
(the first one builds the train function). The batch is moved to the device the model is on (PyTorch: its
parameters'; Keras: TensorFlow's first GPU, else the CPU) and, on an accelerator, the device is synchronised around
each timed step, so the time is the kernels' and not their launches'; the device is printed. It prints the median
and standard deviation of the step time (seconds) and the ``sweep.py`` overrides that use them; ``--json`` prints
one JSON object instead.

The step is measured alone, on every core the process may use: in a real job the input pipeline's threads take
CPU from it (see the README's Fidelity section). A step that ran on the CPU (no accelerator) and kept at least half
a core busy is emulated with CPU work rather than a sleep: the overrides then add ``workload.compute=cpu`` and
``workload.compute_threads`` (the cores it kept busy, rounded). Bad input (a missing file, a bad
``module:function``, a bad shape) is one message and exit 2. TensorFlow (or PyTorch) is imported only once the
arguments are valid.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import inspect
import json
import os
import re
import statistics
import sys
import time
from pathlib import Path
from typing import Any

from ddlio.errors import ConfigError

INSTALL_HINT = "calibration needs TensorFlow: pip install -e '.[tf]' (or pip install tensorflow-cpu)"
TORCH_HINT = "calibrating a PyTorch model needs PyTorch: pip install -e '.[torch]'"
FRAMEWORKS = ("auto", "keras", "torch")


def parse_shape(text: str) -> tuple[int, ...]:
    """``"512,512,3"`` -> ``(512, 512, 3)``; every dimension a positive integer."""
    parts = [p.strip() for p in text.replace("x", ",").split(",") if p.strip()]
    try:
        dims = tuple(int(p) for p in parts)
    except ValueError:
        dims = ()
    if not dims or any(d < 1 for d in dims):
        raise ConfigError(f"--shape {text!r} must be positive integers separated by commas, e.g. 512,512,3")
    return dims


def load_function(spec: str) -> Any:
    """The function named by ``path/file.py:function`` or ``package.module:function``."""
    where, sep, name = spec.rpartition(":")
    if not sep or not where or not name.isidentifier():
        raise ConfigError(f"--model {spec!r} must be FILE.py:function or package.module:function "
                          "(e.g. bench/fidelity/models.py:deepgalaxy_cnn)")
    try:
        if where.endswith(".py") or os.sep in where:
            path = Path(where)
            if not path.is_file():
                raise ConfigError(f"--model {spec!r}: no such file: {where}")
            mod_spec = importlib.util.spec_from_file_location(f"ddlio_calibrate_{path.stem}", path)
            if mod_spec is None or mod_spec.loader is None:
                raise ConfigError(f"--model {spec!r}: {where} is not a Python module")
            module = importlib.util.module_from_spec(mod_spec)
            mod_spec.loader.exec_module(module)
        else:
            module = importlib.import_module(where)
    except ConfigError:
        raise
    except ModuleNotFoundError as e:
        raise ConfigError(f"--model {spec!r}: cannot import {where}: {e}") from e
    except Exception as e:  # the user's module failed while importing: say where, without a traceback
        raise ConfigError(f"--model {spec!r}: importing {where} failed: {type(e).__name__}: {e}") from e
    fn = getattr(module, name, None)
    if not callable(fn):
        found = sorted(n for n, v in vars(module).items() if inspect.isfunction(v) and not n.startswith("_")
                       and getattr(v, "__module__", None) == module.__name__)
        raise ConfigError(f"--model {spec!r}: {where} has no function {name!r}"
                          + (f" (its functions: {', '.join(found)})" if found else ""))
    return fn


def call_builder(fn: Any, shape: tuple[int, ...], spec: str) -> Any:
    """Call the model function, with the shape if it takes a parameter."""
    try:
        takes = any(p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD, p.VAR_POSITIONAL)
                    for p in inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):
        takes = True
    try:
        model = fn(shape) if takes else fn()
    except Exception as e:
        raise ConfigError(f"--model {spec!r}: building the model for shape {shape} failed: "
                          f"{type(e).__name__}: {str(e).strip().splitlines()[0] if str(e).strip() else ''}") from e
    return model


def build(fn: Any, shape: tuple[int, ...], spec: str) -> Any:
    """Call the model function and check it returned a compiled Keras model."""
    model = call_builder(fn, shape, spec)
    if not hasattr(model, "train_on_batch"):
        raise ConfigError(f"--model {spec!r} returned {type(model).__name__}, not a Keras model")
    if getattr(model, "optimizer", None) is None:
        raise ConfigError(f"--model {spec!r}: the model is not compiled; call model.compile(optimizer=..., loss=...) "
                          "in the function")
    return model


def batch_of(model: Any, batch: int, shape: tuple[int, ...], seed: int = 0) -> tuple[Any, Any]:
    """One in-memory batch (x, y) the model trains on: x of the model's input dtype, y integer classes (or one
    number per sample for a single output)."""
    import numpy as np

    rng = np.random.default_rng(seed)
    dtype = np.dtype(str(getattr(model.inputs[0], "dtype", "float32")).replace("tf.", ""))
    if np.issubdtype(dtype, np.integer):
        info = np.iinfo(dtype)
        x = rng.integers(max(info.min, 0), min(info.max, 255), (batch, *shape), dtype=dtype, endpoint=True)
    else:
        x = rng.random((batch, *shape), dtype=np.float32).astype(dtype)
    out = model.output_shape
    classes = int(out[-1]) if isinstance(out, tuple) and len(out) >= 2 and out[-1] else 1
    y = rng.integers(0, classes, batch) if classes > 1 else rng.random(batch, dtype=np.float32)
    return x, y


def measure(step: Any, steps: int, warmup: int) -> tuple[list[float], float]:
    """Seconds of each of ``steps`` training steps (``step()``), after ``warmup`` untimed ones; and the process's
    CPU seconds (user + system) over the timed steps. The device is synchronised around each timed step
    (``step.sync``, where the step has one: an accelerator runs the step's kernels after their launch returns, so
    the time is the kernels', not their launches')."""
    sync = getattr(step, "sync", None) or (lambda: None)
    for _ in range(warmup):
        step()
    times = []
    c0 = os.times()
    for _ in range(steps):
        sync()
        t = time.perf_counter()
        step()
        sync()
        times.append(time.perf_counter() - t)
    c1 = os.times()
    # os.times() is in clock ticks as floats: a tiny model's difference can round to -4e-16
    return times, max(0.0, (c1.user - c0.user) + (c1.system - c0.system))


def framework_of(fn: Any) -> str:
    """``torch`` when the function's module imports torch and neither Keras nor TensorFlow (at the top or inside a
    function), else ``keras``."""
    try:
        text = Path(inspect.getsourcefile(fn) or "").read_text()
    except (OSError, TypeError, UnicodeDecodeError):
        return "keras"
    imports = set(re.findall(r"^\s*(?:import|from)\s+(torch|keras|tensorflow)\b", text, re.MULTILINE))
    return "torch" if imports == {"torch"} else "keras"


def calibrate(spec: str, batch: int, shape: tuple[int, ...], steps: int = 30, warmup: int = 3,
              threads: int = 0, framework: str = "auto") -> dict[str, Any]:
    """Build the model named by ``spec`` and measure its step: median, stdev, mean, min, max (seconds), the CPU
    seconds per step and the cores it kept busy (CPU / wall). ``threads`` > 0 sets the framework's threads
    (TensorFlow's intra- and inter-op threads before the model is built; PyTorch's ``set_num_threads``)."""
    fn = load_function(spec)
    if framework == "auto":
        framework = framework_of(fn)
    step = (torch_step if framework == "torch" else keras_step)(fn, spec, batch, shape, threads)
    try:
        times, cpu = measure(step, steps, warmup)
    except Exception as e:
        raise ConfigError(f"--model {spec!r}: a training step on a batch of {batch} x {shape} failed: "
                          f"{type(e).__name__}: {str(e).strip().splitlines()[0] if str(e).strip() else ''}") from e
    return {"model": spec, "framework": framework, "batch": batch, "shape": list(shape), "steps": steps,
            "warmup": warmup, "median_s": statistics.median(times),
            "stdev_s": statistics.stdev(times) if len(times) > 1 else 0.0,
            "mean_s": statistics.fmean(times), "min_s": min(times), "max_s": max(times), "cpus": os.cpu_count(),
            "threads": threads, "cpu_per_step_s": cpu / steps, "cores_busy": cpu / sum(times),
            "accelerators": step.accelerators, "device": step.device}


def keras_step(fn: Any, spec: str, batch: int, shape: tuple[int, ...], threads: int) -> Any:
    """The Keras model's ``train_on_batch`` on one in-memory batch, on the device TensorFlow places it on (the
    first GPU where there is one; the batch put there once), as a function with ``accelerators``, ``device`` and
    ``sync`` (``tf.test.experimental.sync_devices`` with a GPU, None on the CPU)."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    try:
        import keras  # noqa: F401  (through TensorFlow)
        import tensorflow as tf
    except ImportError as e:
        raise ConfigError(INSTALL_HINT) from e
    if threads:
        try:
            tf.config.threading.set_intra_op_parallelism_threads(threads)
            tf.config.threading.set_inter_op_parallelism_threads(threads)
        except RuntimeError as e:  # TensorFlow already running in this process (a caller's, not the command's)
            if tf.config.threading.get_intra_op_parallelism_threads() != threads:
                raise ConfigError(f"--threads {threads}: TensorFlow is already running in this process ({e})") from e
    model = build(fn, shape, spec)
    x, y = batch_of(model, batch, shape)
    gpus = tf.config.list_logical_devices("GPU")
    device = gpus[0].name if gpus else "/device:CPU:0"  # where TensorFlow places the step's ops
    with tf.device(device):  # the batch on the step's device once, as a job's input pipeline hands it over
        x, y = tf.identity(tf.constant(x)), tf.identity(tf.constant(y))

    def step() -> None:
        with tf.device(device):
            model.train_on_batch(x, y)

    def sync() -> None:
        tf.test.experimental.sync_devices()

    step.accelerators = [d.name for d in tf.config.list_physical_devices() if d.device_type != "CPU"]
    step.device = device
    step.sync = sync if gpus and hasattr(tf.test.experimental, "sync_devices") else None
    return step


def torch_step(fn: Any, spec: str, batch: int, shape: tuple[int, ...], threads: int) -> Any:
    """A PyTorch model's training step (zero_grad, forward, loss, backward, optimizer step) on one in-memory
    uint8 batch and integer classes (as many as the model's outputs), on the device the model is on (the batch
    moved there once), as a function with ``accelerators``, ``device`` and ``sync`` (``torch.cuda.synchronize``
    on CUDA, None on the CPU)."""
    try:
        import torch  # lazy: PyTorch
    except ImportError as e:
        raise ConfigError(TORCH_HINT) from e
    if threads:
        torch.set_num_threads(threads)
    built = call_builder(fn, shape, spec)
    if not (isinstance(built, tuple) and len(built) == 3 and isinstance(built[0], torch.nn.Module)
            and isinstance(built[1], torch.optim.Optimizer) and callable(built[2])):
        raise ConfigError(f"--model {spec!r} returned {type(built).__name__}, not (nn.Module, optimizer, loss_fn)")
    model, opt, loss_fn = built
    device = model_device(torch, model)
    gen = torch.Generator().manual_seed(0)
    x = torch.randint(0, 256, (batch, *shape), dtype=torch.uint8, generator=gen).to(device)
    model.train()
    with torch.no_grad():
        out = model(x)
    classes = int(out.shape[-1]) if out.ndim >= 2 else 1
    y = torch.randint(0, classes, (batch,), generator=gen) if classes > 1 else torch.rand(batch, generator=gen)
    y = y.to(device)

    def step() -> None:
        opt.zero_grad()
        loss = loss_fn(model(x), y)
        loss.backward()
        opt.step()

    def sync() -> None:
        torch.cuda.synchronize(device)

    step.device = str(device)
    step.accelerators = [] if device.type == "cpu" else [str(device)]
    step.sync = sync if device.type == "cuda" else None
    return step


def model_device(torch: Any, model: Any) -> Any:
    """The device the model is on: its first parameter's (or buffer's); the CPU for a model with neither."""
    for t in (*model.parameters(), *model.buffers()):
        return t.device
    return torch.device("cpu")


#: a step that keeps at least this many cores busy, on a node without an accelerator, is emulated with CPU work
#: (workload.compute=cpu): a sleep would leave those cores to the input pipeline
CPU_BOUND_CORES = 0.5


def cpu_compute(result: dict[str, Any]) -> tuple[bool, int]:
    """(emulate with ``workload.compute=cpu``?, its ``compute_threads``): yes when the step ran on the CPU (no
    accelerator) and kept at least :data:`CPU_BOUND_CORES` cores busy; threads = the cores it kept busy, rounded
    (at least 1)."""
    busy = float(result.get("cores_busy", 0.0))
    cpu_only = not result.get("accelerators")
    return cpu_only and busy >= CPU_BOUND_CORES, max(1, round(busy))


def overrides(result: dict[str, Any]) -> str:
    """The ``sweep.py`` overrides that emulate the measured compute, with its batch and sample shape (quoted for
    the shell: brackets are glob characters); with ``workload.compute=cpu`` when the step burns the CPU
    (:func:`cpu_compute`)."""
    shape = ",".join(str(d) for d in result["shape"])
    cpu, threads = cpu_compute(result)
    return (f"workload.batch_size={result['batch']} workload.compute_time={result['median_s']:.4g} "
            f"workload.compute_time_stdev={result['stdev_s']:.3g} 'workload.sample_shape=[{shape}]'"
            + (f" workload.compute=cpu workload.compute_threads={threads}" if cpu else ""))


def main(argv: list[str] | None = None) -> int:
    """``python -m experiments.calibrate``; exit 0, 2 on bad input."""
    ap = argparse.ArgumentParser(prog="python -m experiments.calibrate",
                                 description="Measure a Keras or PyTorch model's compute time per batch on in-memory "
                                 "batches, for workload.compute_time.")
    ap.add_argument("--model", required=True, help="FILE.py:function or package.module:function returning a "
                    "compiled Keras model, or (nn.Module, optimizer, loss_fn), for a sample shape")
    ap.add_argument("--batch", type=int, required=True, help="samples per batch (workload.batch_size)")
    ap.add_argument("--shape", required=True, help="shape of one sample, e.g. 512,512,3")
    ap.add_argument("--steps", type=int, default=30, help="timed steps (default 30)")
    ap.add_argument("--warmup", type=int, default=3, help="untimed steps first (default 3)")
    ap.add_argument("--threads", type=int, default=0, help="the framework's threads for the step (TensorFlow's "
                    "intra- and inter-op threads, PyTorch's set_num_threads; 0, the default: its own choice, every "
                    "core); use what the training job's step uses")
    ap.add_argument("--framework", choices=FRAMEWORKS, default="auto", help="keras or torch (auto: torch when the "
                    "model's module imports torch and not Keras/TensorFlow)")
    ap.add_argument("--json", action="store_true", help="print one JSON object")
    try:
        a = ap.parse_args(argv)
    except SystemExit as e:
        return 2 if e.code else 0
    try:
        problems = []
        if a.batch < 1:
            problems.append(f"--batch {a.batch} must be at least 1")
        if a.steps < 2:
            problems.append(f"--steps {a.steps} must be at least 2 (a standard deviation needs two)")
        if a.warmup < 0:
            problems.append(f"--warmup {a.warmup} must be at least 0")
        if a.threads < 0:
            problems.append(f"--threads {a.threads} must be at least 0 (0: TensorFlow's default)")
        try:
            shape = parse_shape(a.shape)
        except ConfigError as e:
            problems.append(str(e))
        if problems:
            raise ConfigError(problems)
        result = calibrate(a.model, a.batch, shape, a.steps, a.warmup, a.threads, a.framework)
    except ConfigError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    if a.json:
        print(json.dumps(result))
        return 0
    print(f"{result['model']}: training step on an in-memory batch of {result['batch']} x {tuple(result['shape'])}, "
          f"{result['steps']} steps after {result['warmup']} untimed, {result['cpus']} CPUs, "
          + (f"{result['threads']} {result['framework']} threads" if result["threads"]
             else f"{result['framework']}'s default threads"))
    print(f"device: {result['device']} (the batch moved there before the steps; "
          + ("the device synchronised around each timed step)" if result["accelerators"] else "no accelerator)"))
    print(f"compute per batch: median {result['median_s']:.4f} s, stdev {result['stdev_s']:.4f} s "
          f"(mean {result['mean_s']:.4f}, min {result['min_s']:.4f}, max {result['max_s']:.4f}); CPU "
          f"{result['cpu_per_step_s']:.4f} s per step: {result['cores_busy']:.2f} cores busy, which a sleep leaves "
          "to the input pipeline")
    cpu, threads = cpu_compute(result)
    if cpu:
        print(f"the step ran on the CPU and kept {result['cores_busy']:.2f} cores busy: emulate it with CPU work "
              f"(workload.compute=cpu, {threads} thread{'s' if threads > 1 else ''}), not a sleep")
    elif result.get("accelerators"):
        print(f"the step ran on {', '.join(result['accelerators'])}: a sleep (workload.compute=sleep) emulates it")
    print(f"use: python sweep.py {overrides(result)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
