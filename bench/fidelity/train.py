"""The training loop both fidelity applications share (and nothing of ddlio): a warmed-up Keras model trained
one epoch at a time with ``model.fit``, the dataset's files evicted from the page cache before every epoch, each
epoch's samples/s printed as one JSON line."""

from __future__ import annotations

import json
import os
import sys
import time
from typing import Any

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import models
import pagecache


def build_model(name: str, shape: tuple[int, ...]) -> Any:
    """A builder of :mod:`models` by name, called with the sample shape."""
    return getattr(models, name)(shape)


def warm_up(model: Any, shape: tuple[int, ...], batch: int) -> None:
    """Trace and run the model's train step on an in-memory dataset of the pipeline's element spec, so the first
    timed epoch does not pay for building the train function (which ddlio's calibration excludes too)."""
    import numpy as np
    import tensorflow as tf

    x = np.zeros((2 * batch, *shape), dtype=np.uint8)
    y = np.zeros(2 * batch, dtype=np.int64)
    model.fit(tf.data.Dataset.from_tensor_slices((x, y)).batch(batch), epochs=1, verbose=0)


def add_arguments(ap: Any) -> None:
    """The options both applications take."""
    ap.add_argument("--epochs", type=int, default=3)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--prefetch", type=int, default=2)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--compute-threads", type=int, default=0, metavar="N",
                    help="TensorFlow's intra- and inter-op threads for the model (0: TensorFlow's default, every "
                    "core); tf.data's own threads are not limited by it")
    ap.add_argument("--sleep", type=float, default=None, metavar="SECONDS",
                    help="no model: iterate the pipeline and sleep SECONDS per batch instead of training (to "
                    "separate the input pipeline from the contention of real compute)")


def configure(a: Any) -> Any:
    """Import TensorFlow with the compute threads asked for (before anything initialises its runtime)."""
    import tensorflow as tf

    if a.compute_threads:
        tf.config.threading.set_intra_op_parallelism_threads(a.compute_threads)
        tf.config.threading.set_inter_op_parallelism_threads(a.compute_threads)
    return tf


def run(app: str, a: Any, model_name: str, dataset: Any, files: list[str], samples: int,
        shape: tuple[int, ...]) -> list[dict[str, Any]]:
    """Build and warm the model (unless ``--sleep``), then train the epochs."""
    model = None
    if a.sleep is None:
        model = build_model(model_name, shape)
        warm_up(model, shape, a.batch)
    return train(app, model, dataset, files, samples, a.batch, a.epochs, a.sleep or 0.0)


def train(app: str, model: Any, dataset: Any, files: list[str], samples: int, batch: int,
          epochs: int, sleep: float = 0.0) -> list[dict[str, Any]]:
    """Train ``epochs`` epochs of ``samples`` samples, each from a cold page cache; print and return one record
    per epoch (samples, seconds, samples/s, the process's CPU seconds (user + system), the fraction of the files
    still cached after eviction). The steps are counted and must be ceil(samples / batch): the pipeline
    delivered the whole epoch. Without a model, iterate the dataset and sleep ``sleep`` seconds per batch."""
    import warnings

    import keras

    warnings.filterwarnings("ignore", message="Your input ran out of data")  # fit on a dataset of unknown length

    class Steps(keras.callbacks.Callback):
        def on_epoch_begin(self, epoch: int, logs: Any = None) -> None:
            self.n = 0

        def on_train_batch_end(self, step: int, logs: Any = None) -> None:
            self.n += 1

    steps = Steps()
    rows = []
    for epoch in range(epochs):
        left = pagecache.evict(files)
        t0, cpu0 = time.perf_counter(), os.times()
        if model is not None:
            model.fit(dataset, epochs=1, verbose=0, callbacks=[steps])
        else:
            steps.n = 0
            for _ in dataset:
                steps.n += 1
                if sleep > 0:
                    time.sleep(sleep)
        seconds, cpu1 = time.perf_counter() - t0, os.times()
        if steps.n != -(-samples // batch):
            raise SystemExit(f"{app}: epoch {epoch} ran {steps.n} steps, expected {-(-samples // batch)}")
        row = {"app": app, "mode": "train" if model is not None else f"sleep {sleep:g}", "epoch": epoch,
               "samples": samples, "seconds": round(seconds, 4), "samples_per_s": round(samples / seconds, 2),
               "cpu_s": round(cpu1.user + cpu1.system - cpu0.user - cpu0.system, 3),
               "resident_after_evict": round(left, 4)}
        print(json.dumps(row), flush=True)
        rows.append(row)
    return rows
