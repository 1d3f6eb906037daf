"""The conformance suite every format passes: exact round trip (fixed and variable sizes), sample count,
bytes per read, and a clear FormatError on a truncated or corrupt file. A new format needs no new test here:
it is picked up from the registry."""

from __future__ import annotations

import os

import numpy as np
import pytest

from experiments.errors import FormatError
from experiments.formats import FORMATS, FilePayload, get_format

SIZES = {
    "fixed": np.full(40, 4096, dtype=np.int64),
    "variable": np.array([1, 7, 4096, 100_000, 3, 65536, 12345] * 5, dtype=np.int64),
    "one": np.array([777], dtype=np.int64),
}


@pytest.fixture(params=sorted(FORMATS))
def fmt(request):
    return get_format(request.param)


def write(fmt, tmp_path, sizes, seed=3):
    payload = FilePayload(seed, 1, sizes)
    path = tmp_path / f"data{fmt.suffix}"
    fmt.write(path, payload)
    return path, payload


@pytest.mark.parametrize("kind", sorted(SIZES))
def test_round_trip_is_exact(fmt, tmp_path, kind):
    path, payload = write(fmt, tmp_path, SIZES[kind])
    out = np.empty(200_000, dtype=np.uint8)
    with fmt.open(path) as r:
        assert r.num_samples == len(payload.sizes)
        for i in range(r.num_samples):
            assert r.payload(i, out).tobytes() == payload.sample(i)


def test_read_returns_the_bytes_of_one_record(fmt, tmp_path):
    path, payload = write(fmt, tmp_path, SIZES["variable"])
    out = np.empty(200_000, dtype=np.uint8)
    with fmt.open(path) as r:
        for i in (0, 3, len(payload.sizes) - 1):
            n = r.read(i, out)
            assert n == r.record_bytes(i) == payload.sizes[i] + fmt.record_overhead


def test_samples_are_random_and_differ_between_files(fmt, tmp_path):
    a = FilePayload(3, 0, SIZES["fixed"]).sample(5)
    b = FilePayload(3, 1, SIZES["fixed"]).sample(5)
    assert a != b and len(set(a)) > 200  # incompressible bytes, not a constant fill


def test_truncated_file_is_a_clear_error(fmt, tmp_path):
    path, payload = write(fmt, tmp_path, SIZES["fixed"])
    with open(path, "r+b") as f:
        f.truncate(os.path.getsize(path) // 2)
    out = np.empty(200_000, dtype=np.uint8)
    with pytest.raises(FormatError, match=r"truncat|not a readable|corrupt"):
        with fmt.open(path) as r:
            for i in range(r.num_samples):
                r.read(i, out)


def test_corrupt_file_is_a_clear_error(fmt, tmp_path):
    path, _ = write(fmt, tmp_path, SIZES["fixed"])
    with open(path, "r+b") as f:
        f.write(b"\xde\xad\xbe\xef" * 16)  # the first 64 bytes: header / first record frame
    out = np.empty(200_000, dtype=np.uint8)
    with pytest.raises(FormatError, match=r"corrupt|not a readable"):
        with fmt.open(path) as r:
            r.read(0, out)


def test_unknown_format_names_the_valid_ones():
    with pytest.raises(KeyError, match="hdf5, npz, tfrecord"):
        get_format("parquet")


def test_npz_is_a_plain_numpy_archive(tmp_path):
    path, payload = write(get_format("npz"), tmp_path, SIZES["variable"])
    with np.load(path) as z:
        data, offsets = z["data"], z["offsets"]
    assert data[offsets[3] : offsets[4]].tobytes() == payload.sample(3)


def test_tfrecord_framing_is_tensorflows(tmp_path):
    """Check the frame against the format's definition, computed independently of the writer."""
    import struct

    import crc32c

    def masked(b: bytes) -> int:
        c = crc32c.crc32c(b)
        return ((((c >> 15) | (c << 17)) & 0xFFFFFFFF) + 0xA282EAD8) & 0xFFFFFFFF

    path, payload = write(get_format("tfrecord"), tmp_path, SIZES["one"])
    raw = path.read_bytes()
    (length,) = struct.unpack("<Q", raw[:8])
    assert length == 777
    assert struct.unpack("<I", raw[8:12])[0] == masked(raw[:8])
    assert raw[12 : 12 + length] == payload.sample(0)
    assert struct.unpack("<I", raw[12 + length : 16 + length])[0] == masked(raw[12 : 12 + length])
    assert len(raw) == 16 + length


def test_hdf5_chunked_and_compressed(tmp_path):
    import h5py

    fmt = get_format("hdf5", chunk_samples=4, compression="gzip")
    path, payload = write(fmt, tmp_path, SIZES["fixed"])
    with h5py.File(path) as f:
        assert f["data"].chunks == (4 * 4096,)
        assert f["data"].compression == "gzip"
    out = np.empty(8192, dtype=np.uint8)
    with fmt.open(path) as r:
        assert r.payload(7, out).tobytes() == payload.sample(7)


def test_hdf5_options_are_validated():
    from experiments.errors import ConfigError

    with pytest.raises(ConfigError, match="compression=.zstd. is unknown: choose one of none, gzip, lzf"):
        get_format("hdf5", compression="zstd", chunk_samples=2)
    with pytest.raises(ConfigError, match="needs chunked storage"):
        get_format("hdf5", compression="gzip", chunk_samples=0)
