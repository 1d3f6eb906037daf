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


def train(app: str, model: Any, dataset: Any, files: list[str], samples: int, batch: int,
          epochs: int) -> list[dict[str, Any]]:
    """Train ``epochs`` epochs of ``samples`` samples, each from a cold page cache; print and return one record
    per epoch (samples, seconds, samples/s, the fraction of the files still cached after eviction). The steps
    fit ran are counted and must be ceil(samples / batch): the pipeline delivered the whole epoch."""
    import keras

    class Steps(keras.callbacks.Callback):
        def on_epoch_begin(self, epoch: int, logs: Any = None) -> None:
            self.n = 0

        def on_train_batch_end(self, step: int, logs: Any = None) -> None:
            self.n += 1

    steps = Steps()
    rows = []
    for epoch in range(epochs):
        left = pagecache.evict(files)
        t0 = time.perf_counter()
        model.fit(dataset, epochs=1, verbose=0, callbacks=[steps])
        seconds = time.perf_counter() - t0
        if steps.n != -(-samples // batch):
            raise SystemExit(f"{app}: epoch {epoch} ran {steps.n} steps, expected {-(-samples // batch)}")
        row = {"app": app, "epoch": epoch, "samples": samples, "seconds": round(seconds, 4),
               "samples_per_s": round(samples / seconds, 2), "resident_after_evict": round(left, 4)}
        print(json.dumps(row), flush=True)
        rows.append(row)
    return rows
