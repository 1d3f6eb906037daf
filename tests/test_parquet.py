"""format=parquet: what pyarrow itself reads back from the files is the payload ddlio generated; row groups are
loaded whole, once for the rows that follow in them, each load's bytes those its footer gives the column chunks;
a ``read`` subset of columns reads fewer bytes; the codecs are what the footer says; bad options are refused in one
line; the application's bytes are exact against strace; and a real point runs."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import numpy as np
import pytest
from test_kernel import run_kernel
from test_strace import STRACE, data_calls_by_epoch, run_traced

from ddlio.errors import ConfigError
from experiments.formats import FilePayload, get_format
from experiments.formats.parquet import ParquetReader, column_widths
from experiments.registry import LOADER_NEEDS
from helpers import point

pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")

#: a schema of every type: numbers and a vector first, the rest of each sample in two binary columns
MIXED = ["int64", "float32*2", "int32", "float64", "int8", "float16:3", "binary*2"]
#: MLPerf Storage's dlrm schema by type (mlcommons/storage configs/dlio/workload/dlrm_b200.yaml: 200 columns,
#: 761 bytes a row) and flux's vectors (flux_b200.yaml: float32 t5_encodings, clip_encodings, mean, logvar,
#: timestamp of 524328, 409, 8232, 8232 and 7 values: 2,164,832 bytes a row)
DLRM = ["float32*56", "float16*50", "float64*49", "int8*45"]
FLUX = ["float32:524328", "float32:409", "float32:8232*2", "float32:7"]


def write(tmp_path: Path, sizes, seed: int = 3, kind: str = "random", name: str = "d.parquet", **options):
    fmt = get_format("parquet", **options)
    payload = FilePayload(seed, 1, np.asarray(sizes, dtype=np.int64), kind)
    path = tmp_path / name
    fmt.write(path, payload)
    return fmt, path, payload


def row_bytes(table, i: int) -> bytes:
    """Row ``i`` of a table pyarrow read, its columns' values back to back as bytes (numbers little-endian)."""
    out = b""
    for col in table.slice(i, 1).columns:
        arr = col.combine_chunks()
        if pa.types.is_binary(arr.type):
            out += arr[0].as_py()
        else:  # numbers, or a vector's numbers
            values = arr.flatten() if pa.types.is_fixed_size_list(arr.type) else arr
            out += values.to_numpy(zero_copy_only=False).tobytes()
    return out


def test_what_pyarrow_reads_is_the_payload(tmp_path):
    sizes = [4096] * 12 + [100, 5000, 40]
    fmt, path, payload = write(tmp_path, sizes, columns=MIXED, row_group_size=5, compression="zstd")
    table = pq.read_table(path)
    assert table.num_rows == len(sizes)
    assert [str(t) for t in table.schema.types] == ["int64", "float", "float", "int32", "double", "int8",
                                                    "fixed_size_list<element: halffloat>[3]", "binary", "binary"]
    for i in range(len(sizes)):
        assert row_bytes(table, i) == payload.sample(i)
    assert row_bytes(table, 1) != payload.sample(2)  # the comparison tells rows apart
    meta = pq.ParquetFile(path).metadata
    assert meta.num_row_groups == 3 and [meta.row_group(g).num_rows for g in range(3)] == [5, 5, 5]
    # each binary column holds half of what the numbers leave: (4096 - 35) / 2 bytes a row, the first one more
    assert column_widths(fmt.types, 4096) == [8, 4, 4, 4, 8, 1, 6, 2031, 2030]
    with fmt.open(path) as r:  # and ddlio's reader hands the same rows on
        out = np.empty(5000, dtype=np.uint8)
        assert [r.payload(i, out).tobytes() for i in range(len(sizes))] == [payload.sample(i) for i in
                                                                             range(len(sizes))]


def test_same_seed_same_bytes(tmp_path):
    _, a, _ = write(tmp_path, [761] * 50, name="a.parquet", columns=MIXED)
    _, b, _ = write(tmp_path, [761] * 50, name="b.parquet", columns=MIXED)
    _, c, _ = write(tmp_path, [761] * 50, seed=4, name="c.parquet", columns=MIXED)
    assert a.read_bytes() == b.read_bytes() != c.read_bytes()


def test_a_row_group_is_loaded_once_for_the_rows_that_follow_in_it(tmp_path):
    fmt, path, payload = write(tmp_path, [1000] * 10, row_group_size=4)
    meta = pq.ParquetFile(path).metadata
    chunk = [meta.row_group(g).column(0).total_compressed_size for g in range(3)]
    assert chunk[0] > 4 * 1000  # whole pages: the rows' bytes and their framing
    with fmt.open(path) as r:
        out = np.empty(1000, dtype=np.uint8)
        assert [r.read(i, out) for i in range(10)] == [chunk[0], 0, 0, 0, chunk[1], 0, 0, 0, chunk[2], 0]
        assert r.loads == sum(chunk)
        # a shuffled order loads a group again for nearly every row: the amplification of random access
        assert [r.read(i, out) for i in (0, 5, 1, 9, 9)] == [chunk[0], chunk[1], chunk[0], chunk[2], 0]
        r.release()
        assert r.read(9, out) == chunk[2] and r.payload(8, out).tobytes() == payload.sample(8)
        assert r.record_bytes(3) == 1000


def test_reading_a_column_subset_reads_fewer_bytes(tmp_path):
    _, path, _ = write(tmp_path, [4000] * 8, columns=["binary*4"], row_group_size=8)
    table = pq.read_table(path)
    got = {}
    for read in ([], [2]):
        with ParquetReader(path, ["binary"] * 4, read) as r:
            out = np.empty(4000, dtype=np.uint8)
            got[len(read)] = sum(r.read(i, out) for i in range(8))
            assert got[len(read)] == r.loads  # each load read exactly its chunks' bytes, as the footer gives them
            if read:
                assert r.payload(5, out).tobytes() == table.column("c2")[5].as_py()
    assert 8 * 1000 <= got[1] < got[0] / 3


@pytest.mark.parametrize("codec", ["snappy", "zstd", "lz4"])
def test_compression_is_the_codec_asked_for(tmp_path, codec):
    _, plain, _ = write(tmp_path, [4096] * 16, kind="zeros", name="plain.parquet")
    fmt, path, payload = write(tmp_path, [4096] * 16, kind="zeros", compression=codec)
    col = pq.ParquetFile(path).metadata.row_group(0).column(0)
    assert col.compression.lower().startswith(codec)
    assert pq.ParquetFile(plain).metadata.row_group(0).column(0).compression == "UNCOMPRESSED"
    assert path.stat().st_size < plain.stat().st_size / 4
    with fmt.open(path) as r:
        out = np.empty(4096, dtype=np.uint8)
        assert r.read(3, out) == col.total_compressed_size and r.payload(3, out).tobytes() == payload.sample(3)


@pytest.mark.parametrize("override, words", [
    ("format.compression=gzip", "format.compression='gzip' is unknown: choose one of none, snappy, zstd, lz4"),
    ("format.columns=[int16]", "'int16' is unknown: choose one of binary, int8, int32, int64, float16, float32"),
    ("format.columns=[binary:4]", "'binary:4' is unknown"),
    ("format.read=[3]", "format.read=[3] must list distinct column indices 0..0"),
    ("format.row_group_size=0", "format.row_group_size=0 must be a number of rows >= 1"),
])
def test_bad_options_are_refused_in_one_line(tmp_path, override, words):
    with pytest.raises(ConfigError) as e:
        point(tmp_path, "format=parquet", override)
    assert len(e.value.problems) == 1 and words in e.value.problems[0]


def test_scalars_that_do_not_fill_a_shaped_sample_are_refused(tmp_path):
    with pytest.raises(ConfigError) as e:
        point(tmp_path, "format=parquet", "format.columns=[int64]", "workload.sample_shape=[4,4]")
    assert len(e.value.problems) == 1 and "hold 8 bytes a row but a sample is 16 bytes" in e.value.problems[0]
    point(tmp_path, "format=parquet", "format.columns=[int64*2]", "workload.sample_shape=[4,4]")  # they fill it


def test_mlperf_row_sizes_write_and_read(tmp_path):
    """dlrm's 761-byte rows of 200 numbers in 16384-row groups; flux's 2,164,832-byte rows of five vectors: MLPerf's
    schemas fill their rows exactly, with no binary column."""
    assert sum(column_widths(get_format("parquet", columns=DLRM).types, 761)) == 761
    fmt, path, payload = write(tmp_path, [761] * 32768, columns=DLRM, row_group_size=16384, compression="snappy")
    with fmt.open(path) as r:
        out = np.empty(761, dtype=np.uint8)
        n = sum(r.read(i, out) for i in range(32768))
        assert n == r.loads > 32768 * 761 * 0.99 and r.payload(20000, out).tobytes() == payload.sample(20000)
    fmt, path, payload = write(tmp_path, [2_164_832] * 3, name="flux.parquet", columns=FLUX, row_group_size=2)
    assert pq.ParquetFile(path).metadata.num_columns == 5
    with fmt.open(path) as r:
        assert r.payload(2, np.empty(2_164_832, dtype=np.uint8)).tobytes() == payload.sample(2)


@pytest.mark.parametrize("fmt, overrides", [
    ("parquet", ()),
    # MLPerf's DLRM schema (conf/format/mlperf/dlrm.yaml: 200 columns, 40 read) on 761-byte rows, a group a file
    ("mlperf/dlrm", ("workload.sample_size=761", "workload.samples=4096", "workload.samples_per_file=2048",
                     "workload.batch_size=256")),
    # MLPerf's Flux schema (conf/format/mlperf/flux.yaml: five float32 vectors, all read) on its 2,164,832-byte rows
    ("mlperf/flux", ("workload.sample_size=2164832", "workload.samples=8", "workload.samples_per_file=4",
                     "workload.batch_size=2")),
])
def test_application_bytes_are_exact_against_strace(tmp_path, fmt, overrides):
    """Under strace, every read call of an epoch on the dataset is a row-group load the rank counted, or one of the
    footer reads pyarrow makes at each file's open: strace's bytes = bytes_read + the footers of the files opened."""
    if STRACE is None:
        pytest.skip("strace is not installed (apt-get install strace)")
    plan, res, traces = run_traced(tmp_path, fmt, *overrides)
    fmt = get_format("parquet", **plan.format_options)
    footer = {}
    for f in range(plan.num_files):
        with fmt.open(plan.file_path(f)) as r:
            footer[str(Path(plan.file_path(f)).resolve())] = r._file.nbytes
    for rank, epoch, calls in data_calls_by_epoch(plan, res, traces):
        stored = next(r for r in res["epochs"][epoch]["ranks"] if r["rank"] == rank)
        opened = {path for _, path, _ in calls}
        assert stored["bytes_read"] > 0
        assert sum(n for _, _, n in calls) == stored["bytes_read"] + sum(footer[p] for p in opened)


def test_a_real_point_runs(tmp_path, sweep):
    p = sweep("format=parquet", "workload=tiny", "format.row_group_size=8", "format.columns=[int64,binary]",
              "format.compression=zstd", "workload.shuffle=sample")
    assert p.returncode == 0, p.stderr[-3000:]
    with sqlite3.connect(tmp_path / "r.db") as db:
        [(status, read, planned, posix, result)] = db.execute(
            "SELECT status, bytes_read, bytes_planned, posix_bytes_read, CAST(result AS TEXT) FROM points").fetchall()
    assert status == "completed" and json.loads(result)["totals"]["bytes_read"] == read
    # shuffled rows reload their 8-row groups: more than the payload (64 x 16 KiB an epoch) is read, exactly as
    # planned; the file system also serves the footers
    assert read == planned > 64 * 16384 and posix > read


def test_the_read_subset_is_in_the_point_key_not_the_datasets(tmp_path):
    from experiments.dataset import DatasetPlan

    cols = "format.columns=[int64,binary]"
    all_cols, one = point(tmp_path, "format=parquet", cols), point(tmp_path, "format=parquet", cols, "format.read=[1]")
    assert DatasetPlan.from_point(all_cols).key == DatasetPlan.from_point(one).key
    assert all_cols.point_key != one.point_key


@pytest.mark.parametrize("reader", ["native", "torch"])
def test_shuffled_rows_reload_their_groups_exactly_as_planned(tmp_path, reader):
    """Every reader's kernel step plans each row-group load from the footer and reads exactly that: with rows in a
    random order a group is loaded again and again (more than the payload), in the loop or in DataLoader workers."""
    needs = LOADER_NEEDS.get(reader)
    if needs is not None and not needs.met():
        pytest.skip(needs.hint)
    threads = ["workload.read_threads=2"] if reader == "torch" else []
    _, plan, res = run_kernel(tmp_path, "format=parquet", f"reader={reader}", "format.row_group_size=8",
                              "workload.shuffle=sample", "ppn=2", *threads)
    for e in res["epochs"]:
        assert e["bytes_read"] == e["bytes_planned"] > 2 * int(plan.sizes().sum())
        assert e["samples"] == plan.samples
