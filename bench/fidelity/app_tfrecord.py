"""A TFRecord training program: files of ``tf.train.Example`` records (``image``: the raw uint8 bytes of one
H x W x C image, ``label``: int64), read by ``tf.data.TFRecordDataset`` with ``num_parallel_reads`` over the files
in a new order every epoch, batched, parsed with ``tf.io.parse_example`` and ``tf.io.decode_raw`` (a ``map`` with
``num_parallel_calls=AUTOTUNE``), prefetched, and fed to a small Keras CNN trained with ``model.fit``; a cold page
cache each epoch.

    python bench/fidelity/app_tfrecord.py FILE.tfrecord... --shape 512,512,3 --threads 2 --epochs 3 --batch 8

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
    ap.add_argument("files", nargs="+")
    ap.add_argument("--shape", required=True, help="H,W,C of an image")
    ap.add_argument("--samples", type=int, required=True, help="records in all the files")
    ap.add_argument("--threads", type=int, default=2, help="num_parallel_reads")
    train.add_arguments(ap)
    ap.add_argument("--model", default="record_cnn")
    a = ap.parse_args(argv)
    shape = tuple(int(x) for x in a.shape.split(","))

    tf = train.configure(a)

    features = {"image": tf.io.FixedLenFeature([], tf.string), "label": tf.io.FixedLenFeature([], tf.int64)}

    def parse(serialized):
        ex = tf.io.parse_example(serialized, features)
        return tf.reshape(tf.io.decode_raw(ex["image"], tf.uint8), (-1, *shape)), ex["label"]

    files = tf.data.Dataset.from_tensor_slices(a.files).shuffle(len(a.files), seed=a.seed,
                                                               reshuffle_each_iteration=True)
    ds = (tf.data.TFRecordDataset(files, num_parallel_reads=a.threads or None)
          .batch(a.batch).map(parse, num_parallel_calls=tf.data.AUTOTUNE).prefetch(a.prefetch))
    train.run("tfrecord", a, a.model, ds, list(a.files), a.samples, shape)
    return 0


if __name__ == "__main__":
    sys.exit(main())
