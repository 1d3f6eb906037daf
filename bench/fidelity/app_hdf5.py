"""A DeepGalaxy-like training program: one HDF5 file holding ``images`` (N, H, W, C) uint8, chunked per image,
and ``labels`` (N,) int64; tf.data from a Python generator that reads ``images[i]`` with h5py in a new random
order every epoch; batch, prefetch; a small Keras CNN trained with ``model.fit``; a cold page cache each epoch.

    python bench/fidelity/app_hdf5.py FILE.h5 --epochs 3 --batch 8 --prefetch 2

Prints one JSON line per epoch (samples/s). It shares no code with ddlio.
"""

from __future__ import annotations

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import train


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("file")
    train.add_arguments(ap)
    ap.add_argument("--model", default="deepgalaxy_cnn")
    ap.add_argument("--images", default="images")
    ap.add_argument("--labels", default="labels")
    a = ap.parse_args(argv)

    import h5py
    import numpy as np
    tf = train.configure(a)

    f = h5py.File(a.file, "r")
    images = f[a.images]
    labels = f[a.labels][:]  # a few KiB: read once, as training scripts do
    n, shape = images.shape[0], tuple(images.shape[1:])
    rng = np.random.default_rng(a.seed)

    def samples():  # a new permutation every epoch (every time fit iterates the dataset)
        for i in rng.permutation(n):
            yield images[i], labels[i]

    spec = (tf.TensorSpec(shape, tf.uint8), tf.TensorSpec((), tf.int64))
    ds = tf.data.Dataset.from_generator(samples, output_signature=spec).batch(a.batch).prefetch(a.prefetch)
    train.run("hdf5", a, a.model, ds, [a.file], n, shape)
    f.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
