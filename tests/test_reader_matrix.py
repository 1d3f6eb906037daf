"""What validation accepts, every reader reads: each reader (where its extra is installed) × each format and layout
on a tiny shaped point (``workload.sample_shape``: the case that reshapes what a loader hands on), measured by a
real kernel step, or refused by validation in one line. reader=torch over TFRecord reshaped the framed record, and
reader=tf an encoded image (a ValueError after the point started)."""

from __future__ import annotations

import pytest
from test_kernel import run_kernel

from ddlio.errors import ConfigError
from experiments.registry import LOADER_NEEDS
from helpers import point

#: every format, with its layouts and options that change what a reader hands on
FORMATS = [("hdf5",), ("hdf5", "format.layout=array"), ("tfrecord",), ("tfrecord", "format.layout=example"),
           ("npz",), ("npz", "format.layout=array", "format.load=whole"), ("npy", "format.layout=array"),
           ("bin",), ("jpeg", "format.decode=true"), ("png",), ("parquet", "format.row_group_size=3")]
TINY = ("workload.sample_shape=[8,8,3]", "workload.samples=8", "workload.samples_per_file=4", "workload.epochs=1",
        "workload.batch_size=2")
#: what validation refuses, with the words of its one line: tf.data hands encoded images on undecoded
REFUSED = {("tf", "jpeg"): "reader=tf hands format=jpeg's samples on as encoded images",
           ("tf", "png"): "reader=tf hands format=png's samples on as encoded images"}


def _reader(name: str) -> object:
    needs = LOADER_NEEDS.get(name)
    missing = needs is not None and not needs.met()
    return pytest.param(name, marks=pytest.mark.skipif(missing, reason=needs.hint if missing else ""), id=name)


@pytest.mark.parametrize("fmt", FORMATS, ids=lambda f: "-".join(o.split("=")[-1] for o in f))
@pytest.mark.parametrize("reader", [_reader("native"), _reader("tf"), _reader("torch")])
def test_every_reader_reads_every_format_validation_accepts(tmp_path, reader, fmt):
    name, *options = fmt
    overrides = (f"reader={reader}", f"format={name}", *options, *TINY)
    if (reader, name) in REFUSED:
        with pytest.raises(ConfigError) as e:
            point(tmp_path, *overrides)
        assert len(e.value.problems) == 1 and REFUSED[reader, name] in e.value.problems[0]
        return
    spec = point(tmp_path, *overrides)  # validation accepts it (a refusal fails the test: the table is wrong)
    assert spec.workload.sample_shape == (8, 8, 3)
    _, _, res = run_kernel(tmp_path, *overrides)
    [epoch] = res["epochs"]
    assert epoch["samples"] == 8 and epoch["bytes_read"] > 0
