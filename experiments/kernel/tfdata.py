"""``reader=tf``: the same epoch read through TensorFlow's tf.data instead of ddlio's own reader.

- ``tfrecord`` goes through ``tf.data.TFRecordDataset`` (TensorFlow's own C++ reader, ``num_parallel_reads`` =
  ``read_threads``). It reads whole files: with ``fpp`` a rank reads its own files; with ``shared`` the files are
  sharded among the ranks when there are at least as many files as ranks (file-level sharding), else every rank
  reads every file and keeps every P-th record (``Dataset.shard``: tf.data's record-level sharding, which reads
  P times the data — measured as such). ``shuffle=file`` permutes a rank's files each epoch; ``shuffle=sample``
  adds a seeded ``Dataset.shuffle`` over all of the rank's records (after reading, as tf.data does).
  With ``format.layout=example`` the records are ``tf.train.Example``s, parsed as an application parses them:
  after batching, ``tf.io.parse_example`` (``image`` a string, ``label`` an int64), then the images decoded with
  ``tf.io.decode_raw`` to uint8 and reshaped to ``(batch, *workload.sample_shape)`` (or ``(batch, sample_size)``
  without a shape; with variable sample sizes they stay strings), so parsing and decoding are in the measurement.
- every other format goes through ``tf.data.Dataset.from_generator`` over ddlio's readers, in the native order,
  yielding each sample as the reader hands it on: with ``workload.sample_shape`` an array of that shape (HDF5's
  ``images[i]``, a sample of an NPZ/NPY array) under a fixed ``TensorSpec``, batched regularly; else its bytes,
  batched ragged.

Then ``batch(batch_size, drop_remainder=drop_last).prefetch(prefetch)``. Bytes read are counted independently of
TensorFlow from the file system: ``/proc/self/io`` ``rchar`` (bytes returned by the process's read calls) over the
epoch, checked against the plan (the whole files read; TensorFlow's runtime may add up to TF_OTHER_READS_MAX
bytes of its own reads of /proc and /sys, which rchar cannot tell apart) for TFRecordDataset; through the
generator, ddlio's own read calls do the reading and their returned bytes are counted, as with ``reader=native``.
tf.data hides individual reads, so the latencies of ``reader=tf`` are per batch (the wait for ``next()``).

TensorFlow is imported only here, only when ``reader=tf`` is asked for.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from experiments.config import TF_INSTALL_HINT, PointSpec
from experiments.kernel.guards import inject

#: what reader=tf without TensorFlow raises (the text is the configuration's: validate reports it too)
INSTALL_HINT = TF_INSTALL_HINT
#: TensorFlow's runtime reads a little on its own while an iterator runs (/proc/cpuinfo, /sys/.../cpu/online):
#: with reader=tf, rchar may exceed the data's bytes by at most this much per rank and epoch (measured: ~0.1 KiB
#: after a first, empty iterator has paid the one-time ~2.7 KiB)
TF_OTHER_READS_MAX = 4096


def import_tf() -> Any:
    """TensorFlow, quiet, or an ImportError that says how to install it."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    try:
        import tensorflow as tf  # lazy: TensorFlow
    except ImportError as e:
        raise ImportError(INSTALL_HINT) from e
    return tf


def rank_files(plan: Any, point: PointSpec, epoch: int, ranks: int, rank: int) -> tuple[list[int], bool]:
    """(files this rank reads in order, whether it shards records) for TFRecordDataset."""
    files = np.arange(plan.num_files)
    record_shard = False
    if point.layout.access == "fpp":
        per = plan.num_files // ranks
        mine = files[rank * per : (rank + 1) * per]
    elif plan.num_files >= ranks:
        mine = files[rank::ranks]
    else:
        mine, record_shard = files, True
    if point.workload.shuffle == "file":
        rng = np.random.Generator(np.random.PCG64([point.seed, 0x7F, epoch, rank]))
        mine = rng.permutation(mine)
    return [int(f) for f in mine], record_shard


def example_parser(tf: Any, plan: Any) -> Any:
    """The map a TFRecord-of-Examples application applies to a batch of records: ``tf.io.parse_example`` of
    ``image`` (string) and ``label`` (int64), the images decoded to uint8 of ``(batch, *sample_shape)`` (or
    ``(batch, sample_size)``; with variable sample sizes they stay strings, which decode_raw cannot batch).
    Returns ``(images, labels)``."""
    features = {"image": tf.io.FixedLenFeature([], tf.string), "label": tf.io.FixedLenFeature([], tf.int64)}
    shape = list(plan.sample_shape) or [int(plan.sample_size)]
    decode = plan.sample_size_stdev == 0

    def parse(records: Any) -> Any:
        ex = tf.io.parse_example(records, features)
        images = ex["image"]
        if decode:
            images = tf.reshape(tf.io.decode_raw(images, tf.uint8), [-1, *shape])
        return images, ex["label"]

    return parse


def rchar() -> int:
    with open("/proc/self/io") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("rchar:"))


def tfrecord_dataset(tf: Any, plan: Any, point: PointSpec, epoch: int, ranks: int, rank: int) -> tuple[Any, int]:
    """TFRecordDataset over this rank's files (record-sharded where there are fewer files than ranks, shuffled with
    ``shuffle=sample``), and its plan: the whole files' bytes."""
    files, record_shard = rank_files(plan, point, epoch, ranks, rank)
    paths = [plan.file_path(f) for f in files]
    ds = tf.data.TFRecordDataset(paths, num_parallel_reads=point.workload.read_threads or None)
    if record_shard:
        ds = ds.shard(ranks, rank)
    if point.workload.shuffle == "sample":
        starts = plan.file_starts
        n = int(sum(starts[f + 1] - starts[f] for f in files))
        ds = ds.shuffle(max(1, n), seed=int(point.seed) * 1000 + epoch, reshuffle_each_iteration=False)
    return ds, int(sum(os.path.getsize(p) for p in paths))


def generator_dataset(tf: Any, plan: Any, ids: np.ndarray, lane: Any, counted: list[int]) -> tuple[Any, int]:
    """``Dataset.from_generator`` over ddlio's readers (``lane``), in the native order, adding the bytes its read
    calls return to ``counted[0]``; and its plan, the record bytes of ``ids`` (load=whole: the kernel plans from
    the loads instead)."""
    starts = plan.file_starts
    file_of = (np.searchsorted(starts, ids, side="right") - 1).tolist()
    local = (ids - starts[np.asarray(file_of, dtype=np.int64)]).tolist() if len(ids) else []
    shape = tuple(plan.sample_shape)

    def gen() -> Any:
        last_f, fetch = -1, None
        for f, i in zip(file_of, local, strict=True):
            if f != last_f:  # opens (timed, counted) on first use, as the native lane; releases a whole load
                last_f, fetch = f, lane.switch_to(f).fetch
            n, sample = fetch(i, lane.buf)
            counted[0] += n
            yield sample.reshape(shape) if shape else sample

    spec = tf.TensorSpec(shape=shape or (None,), dtype=tf.uint8)
    return tf.data.Dataset.from_generator(gen, output_signature=spec), int(plan.record_bytes()[ids].sum())


def batched(tf: Any, ds: Any, plan: Any, point: PointSpec) -> Any:
    """``batch(batch_size, drop_remainder=drop_last).prefetch(prefetch)`` (ragged for samples of different sizes;
    TFRecords of Examples parsed after batching)."""
    w = point.workload
    batch, drop, prefetch, threads = w.batch_size, bool(w.drop_last), int(w.prefetch), int(w.read_threads)
    if plan.format == "tfrecord":  # records are scalar strings
        ds = ds.batch(batch, drop_remainder=drop)
        if plan.format_options.get("layout") == "example":
            ds = ds.map(example_parser(tf, plan), num_parallel_calls=threads or None)
        return ds.prefetch(prefetch)
    if plan.sample_shape:  # every sample one shape: a regular batch
        return ds.batch(batch, drop_remainder=drop).prefetch(prefetch)
    return ds.ragged_batch(batch, drop_remainder=drop).prefetch(prefetch)  # a ragged batch


def prime(tf: Any) -> None:
    """TF's one-time runtime reads happen outside the window: a first, empty iterator pays them."""
    if not getattr(tf, "_ddlio_primed", False):
        for _ in tf.data.TFRecordDataset([]).batch(1).prefetch(1):
            pass
        tf._ddlio_primed = True


def iterate(ds: Any, compute: list[float], step: Any = None, watch: Any = None,
            fault: Callable[[], None] | None = None) -> tuple[list[int], int, int, float]:
    """The training loop over ``ds``: per batch the wait for ``next()`` (ns), then its compute (``compute``, s;
    ``step(seconds)`` does it, default a sleep). ``watch``: the progress guard told of each batch and its compute
    (:class:`~experiments.kernel.guards.ProgressWatch`, its epoch started by the caller); ``fault``: called after the
    first batch (fault injection). Returns (waits per batch ns, samples, total wait ns, compute s)."""
    perf = time.perf_counter_ns
    lat: list[int] = []
    samples = wait = 0
    compute_s = 0.0
    it = iter(ds)
    b = 0
    while True:
        t = perf()
        try:
            x = next(it)
        except StopIteration:
            wait += perf() - t
            break
        dt = perf() - t
        wait += dt
        lat.append(dt)
        samples += int((x[0] if isinstance(x, tuple) else x).shape[0])
        if fault is not None and b == 0:
            fault()
        c = compute[b] if b < len(compute) else (compute[-1] if compute else 0.0)
        if c > 0:
            if watch is not None:
                watch.computing(c)
            if step is None:
                t = perf()
                time.sleep(c)
                compute_s += (perf() - t) / 1e9
            else:
                compute_s += step(c)
        if watch is not None:
            watch.batch_done()
        b += 1
    return lat, samples, wait, compute_s


def run_epoch(tf: Any, plan: Any, point: PointSpec, epoch: int, ranks: int, rank: int, ids: np.ndarray,
              lane: Any, compute: list[float], step: Any = None, watch: Any = None, ep: Any = None,
              fault: str | None = None) -> dict[str, Any]:
    """Read one epoch through tf.data; returns bytes (rchar), the plan, samples, per-batch latencies (ns), the
    loop's wait (ns) and compute (s). ``step(seconds)`` is the emulated compute of a batch, returning its wall
    time in seconds (:meth:`experiments.kernel.compute.Compute.run`; default a sleep). ``watch`` (with ``ep``, the
    kernel's arrays of the epoch): the progress guard, told of every batch tf.data delivers; ``fault``: the
    ``DDLIO_FAULT`` this rank injects in its first epoch (``hang`` before the first batch, the others after it)."""
    counted = [0]  # generator path: the bytes ddlio's read calls returned (rchar would add index/metadata reads)
    if plan.format == "tfrecord":
        ds, planned = tfrecord_dataset(tf, plan, point, epoch, ranks, rank)
    else:
        ds, planned = generator_dataset(tf, plan, ids, lane, counted)
    ds = batched(tf, ds, plan, point)
    prime(tf)
    r0 = rchar()
    if watch is not None:
        folder = os.path.dirname(lane.paths[0]) if lane.paths else "?"
        watch.start_epoch(epoch, ep, [], window=1, where=lambda: (
            f"tf.data delivered no batch after its first {watch.batches} (its reading threads hung or stalled "
            f"on the {plan.format} files in {folder})"))
    after: Callable[[], None] | None = None
    if fault is not None:
        if fault == "hang":
            inject(fault, rank)

        def after() -> None:
            inject(fault, rank)

    lat, samples, wait, compute_s = iterate(ds, compute, step, watch, after)
    nbytes = rchar() - r0 if plan.format == "tfrecord" else counted[0]
    return {"bytes": nbytes, "rchar": rchar() - r0, "planned": planned, "samples": samples, "lat": lat, "wait_ns": wait,
            "compute_s": compute_s}
