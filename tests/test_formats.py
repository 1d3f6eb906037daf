"""The conformance suite every format passes: round trip (exact, or for a lossy format within its PSNR; fixed
and variable sizes), sample count, bytes per read, and a clear FormatError on a truncated or corrupt file or index.
A new format needs no new test here: it is picked up from the registry."""

from __future__ import annotations

import gc
import os
import weakref
from pathlib import Path

import numpy as np
import pytest

from ddlio.errors import FormatError
from experiments.formats import FORMATS, FilePayload, get_format

SIZES = {
    "fixed": np.full(40, 4096, dtype=np.int64),
    "variable": np.array([1, 7, 4096, 100_000, 3, 65536, 12345] * 5, dtype=np.int64),
    "one": np.array([777], dtype=np.int64),
}


#: every format at its defaults, and every other layout (and NPZ/NPY's whole-file load) of the formats that have them
VARIANTS = [(name, {}) for name in sorted(FORMATS)] + [
    ("hdf5", {"layout": "array"}),
    ("hdf5", {"layout": "array", "chunk_samples": 4, "compression": "gzip"}),
    ("tfrecord", {"layout": "example"}),
    ("npz", {"layout": "array"}), ("npz", {"layout": "array", "load": "whole"}), ("npz", {"load": "whole"}),
    ("npy", {"layout": "array"}), ("npy", {"layout": "array", "load": "whole"}), ("npy", {"load": "whole"}),
    ("parquet", {"columns": ["binary*3"], "row_group_size": 7, "compression": "snappy"}),
]
#: the sample shape a shaped layout stores each SIZES kind as (None: sizes that vary have no one shape)
SHAPES = {"fixed": (16, 16, 16), "variable": None, "one": (7, 37, 3)}


def variant_id(v) -> str:
    name, options = v
    return name + "".join(f"[{k}={o}]" for k, o in options.items())


@pytest.fixture(params=VARIANTS, ids=variant_id)
def fmt(request):
    name, options = request.param
    return get_format(name, **options)


def shaped(fmt) -> bool:
    return fmt.layout in fmt.shaped_layouts


def write(fmt, tmp_path, sizes, seed=3, kind="random"):
    shape = ()
    if shaped(fmt):
        shape = next((v for k, v in SHAPES.items() if SIZES[k] is sizes), None)
        if shape is None:
            pytest.skip(f"{fmt.name} layout={fmt.layout} holds samples of one shape; these sizes vary")
    payload = FilePayload(seed, 1, sizes, kind, shape)
    path = tmp_path / f"data{fmt.suffix}"
    fmt.write(path, payload)
    return path, payload


def buffer_for(r):
    """A read buffer as the kernel sizes it: the largest record (encoded images can exceed their payload)."""
    return np.empty(max(r.record_bytes(i) for i in range(r.num_samples)), dtype=np.uint8)


def psnr_db(got: bytes, want: bytes) -> float:
    """Peak signal-to-noise ratio of ``got`` against ``want`` (uint8 samples), dB; inf when equal."""
    mse = np.mean((np.frombuffer(got, np.uint8).astype(float) - np.frombuffer(want, np.uint8).astype(float)) ** 2)
    return float("inf") if mse == 0 else float(10 * np.log10(255**2 / mse))


def assert_payload(fmt, got: bytes, want: bytes) -> None:
    """The payload read back stands for ``want``: exactly, or for a lossy format within its PSNR."""
    decoded = fmt.decode_payload(got)
    if fmt.min_psnr_db is None:
        assert decoded == want
    else:
        assert len(decoded) == len(want) and psnr_db(decoded, want) >= fmt.min_psnr_db


@pytest.mark.parametrize("payload_kind", ["random", "2.0", "zeros"])
@pytest.mark.parametrize("kind", sorted(SIZES))
def test_round_trip(fmt, tmp_path, kind, payload_kind):
    path, payload = write(fmt, tmp_path, SIZES[kind], kind=payload_kind)
    with fmt.open(path) as r:
        assert r.num_samples == len(payload.sizes)
        out = buffer_for(r)
        for i in range(r.num_samples):
            assert_payload(fmt, r.payload(i, out).tobytes(), payload.sample(i))


def test_round_trip_tells_samples_apart(fmt, tmp_path):
    """The round-trip check can fail: sample 1 read back does not pass for sample 2 (nor for zeros)."""
    path, payload = write(fmt, tmp_path, SIZES["fixed"])
    with fmt.open(path) as r:
        got = r.payload(1, buffer_for(r)).tobytes()
    for wrong in (payload.sample(2), bytes(len(payload.sample(2)))):
        with pytest.raises(AssertionError):
            assert_payload(fmt, got, wrong)


def test_read_returns_the_bytes_of_one_record(fmt, tmp_path):
    if fmt.loads_whole:
        pytest.skip("load=whole reads files, not records: test_a_whole_load_returns_the_bytes_of_the_file")
    path, payload = write(fmt, tmp_path, SIZES["fixed" if shaped(fmt) else "variable"])
    want = fmt.expected_record_bytes(payload.sizes)
    with fmt.open(path) as r:
        out = buffer_for(r)
        for i in (0, 3, len(payload.sizes) - 1):
            n = r.read(i, out)
            assert n == r.record_bytes(i) > 0
            if want is not None:
                assert n == want[i]
    if want is not None and fmt.layout != "example":  # inline framing of a fixed size (Examples: see below)
        assert np.array_equal(want, payload.sizes + fmt.record_overhead)
    if want is not None:  # the records lie back to back: the file is the plan's bytes (and its headers)
        assert os.path.getsize(path) >= want.sum()


def test_a_whole_load_returns_the_bytes_of_the_file(fmt, tmp_path):
    """load=whole: a file's first read loads it whole and returns the bytes the plan knows from the file's structure
    alone; later reads of it return 0 (memory); after a release the next read loads it again."""
    if not fmt.loads_whole:
        pytest.skip("reads samples (load=whole is an option of npz and npy)")
    if fmt.name == "parquet":
        pytest.skip("loads row groups, not files: tests/test_parquet.py checks each load against the footer")
    path, payload = write(fmt, tmp_path, SIZES["fixed"])
    plan = fmt.whole_load_bytes(path)
    assert plan >= payload.sizes.sum()
    with fmt.open(path) as r:
        out = buffer_for(r)
        assert [r.read(i, out) for i in (5, 0, 39)] == [plan, 0, 0]
        assert r.payload(7, out).tobytes() == payload.sample(7)
        root = r._array
        while isinstance(root.base, np.ndarray):  # the array np.load allocated, under any reshape
            root = root.base
        whole = weakref.ref(root)
        del root
        r.release()  # frees the file: its last sample, a view of it, must not keep it alive
        gc.collect()
        assert whole() is None
        assert r.read(1, out) == plan and r.loads == 2
        assert r.record_bytes(3) == payload.sizes[3]  # the per-sample plan stays the sample's bytes


def test_samples_are_random_and_differ_between_files(fmt, tmp_path):
    a = FilePayload(3, 0, SIZES["fixed"]).sample(5)
    b = FilePayload(3, 1, SIZES["fixed"]).sample(5)
    assert a != b and len(set(a)) > 200  # incompressible bytes, not a constant fill


def test_truncated_file_is_a_clear_error(fmt, tmp_path):
    path, payload = write(fmt, tmp_path, SIZES["fixed"])
    if fmt.name == "npz":  # keep the zip's central directory (at its end) so that the data, not it, is cut short
        data = path.read_bytes()
        path.write_bytes(data[: len(data) // 4] + data[len(data) // 2 :])
    else:
        with open(path, "r+b") as f:
            f.truncate(os.path.getsize(path) // 2)
    out = np.empty(200_000, dtype=np.uint8)
    with pytest.raises(FormatError, match=r"truncat|not a readable|corrupt"):
        with fmt.open(path) as r:
            for i in range(r.num_samples):
                r.read(i, out)


def test_corrupt_file_is_a_clear_error(fmt, tmp_path):
    if not fmt.detects_corrupt_data:
        pytest.skip(f"{fmt.name} records are raw bytes with no header, framing or checksum (its index is checked)")
    path, _ = write(fmt, tmp_path, SIZES["fixed"])
    with open(path, "r+b") as f:
        f.write(b"\xde\xad\xbe\xef" * 16)  # the first 64 bytes: header / first record frame
    out = np.empty(200_000, dtype=np.uint8)
    with pytest.raises(FormatError, match=r"corrupt|not a readable"):
        with fmt.open(path) as r:
            r.read(0, out)


def test_corrupt_or_missing_index_is_a_clear_error(fmt, tmp_path):
    path, _ = write(fmt, tmp_path, SIZES["fixed"])
    sidecars = fmt.sidecars(path)
    if not sidecars:
        pytest.skip(f"{fmt.name} keeps its offsets inside the data file")
    for damage in ("corrupt", "delete"):
        write(fmt, tmp_path, SIZES["fixed"])
        if damage == "delete":
            sidecars[0].unlink()
        else:
            with open(sidecars[0], "r+b") as f:
                f.write(b"\xde\xad\xbe\xef" * 16)
        with pytest.raises(FormatError, match=r"index .* (is )?(missing|corrupt|unreadable)"):
            with fmt.open(path) as r:
                r.read(0, np.empty(200_000, dtype=np.uint8))


def test_unknown_format_names_the_valid_ones():
    with pytest.raises(KeyError, match="bin, hdf5, jpeg, npy, npz, parquet, png, tfrecord"):
        get_format("orc")


# ------------------------------------------------------------------------------------------------- payloads
def test_payload_kinds_are_what_they_say(tmp_path):
    import zlib

    sizes = np.full(64, 65536, dtype=np.int64)
    data = {k: b"".join(FilePayload(3, 0, sizes, k).sample(i) for i in range(64)) for k in ("random", "zeros", "2.0",
                                                                                          "4.0")}
    assert data["zeros"] == bytes(len(data["zeros"]))
    ratio = {k: len(v) / len(zlib.compress(v, 6)) for k, v in data.items()}
    assert ratio["random"] < 1.01
    assert 1.9 < ratio["2.0"] < 2.1 and 3.7 < ratio["4.0"] < 4.2
    assert ratio["zeros"] > 500
    # deterministic in the seed, and the random part of a ratio payload is the random payload's own bytes
    assert FilePayload(3, 0, sizes, "2.0").sample(5) == FilePayload(3, 0, sizes, "2.0").sample(5)
    assert FilePayload(3, 0, sizes, "2.0").sample(5) != FilePayload(4, 0, sizes, "2.0").sample(5)
    assert FilePayload(3, 0, sizes, "2.0").sample(5)[:2048] == FilePayload(3, 0, sizes).sample(5)[:2048]


@pytest.mark.parametrize("value, want", [("random", "random"), ("zeros", "zeros"), (2, "2.0"), ("2.0", "2.0"),
                                         (" 3.5 ", "3.5")])
def test_parse_payload_normalises(value, want):
    from experiments.formats.base import parse_payload

    assert parse_payload(value) == want


@pytest.mark.parametrize("value", ["ones", "1", "0.5", "-2", "inf", "nan", ""])
def test_parse_payload_names_the_choices(value):
    from experiments.formats.base import parse_payload

    with pytest.raises(ValueError, match=r"choose random \(incompressible\), zeros, or a compressibility ratio > 1"):
        parse_payload(value)
    with pytest.raises(ValueError, match="choose random"):
        FilePayload(3, 0, SIZES["one"], value)


def test_gzip_hdf5_size_follows_the_payload(tmp_path):
    """Compression is only meaningful on compressible payloads: the knob makes the difference measurable."""
    fmt = get_format("hdf5", chunk_samples=4, compression="gzip")
    sizes = np.full(64, 65536, dtype=np.int64)
    on_disk = {}
    for kind in ("random", "2.0", "zeros"):
        path = tmp_path / f"{kind}.h5"
        fmt.write(path, FilePayload(3, 0, sizes, kind))
        on_disk[kind] = os.path.getsize(path)
    assert on_disk["random"] >= sizes.sum()  # incompressible: gzip stores it as is (plus its framing)
    assert 0.45 < on_disk["2.0"] / on_disk["random"] < 0.56
    assert on_disk["zeros"] < 0.02 * on_disk["random"]


def test_npy_is_a_plain_numpy_array(tmp_path):
    path, payload = write(get_format("npy"), tmp_path, SIZES["variable"])
    data, offsets = np.load(path), np.load(f"{path}.idx")
    assert data.dtype == np.uint8 and data.shape == (int(payload.sizes.sum()),)
    assert data[offsets[3] : offsets[4]].tobytes() == payload.sample(3)


def test_bin_is_the_raw_bytes_and_an_index(tmp_path):
    """What fio would read: the payloads back to back and nothing else, so the two read the same requests."""
    path, payload = write(get_format("bin"), tmp_path, SIZES["variable"])
    assert path.read_bytes() == b"".join(payload.sample(i) for i in range(len(payload.sizes)))
    assert np.array_equal(np.load(f"{path}.idx"), np.concatenate([[0], np.cumsum(payload.sizes)]))


@pytest.mark.parametrize("name, pil_format", [("jpeg", "JPEG"), ("png", "PNG")])
def test_images_are_real_images_sized_by_the_payload(tmp_path, name, pil_format):
    """Each record is a complete image another tool decodes; its pixels hold the sample's nominal bytes."""
    import io

    from PIL import Image

    fmt = get_format(name)
    path, payload = write(fmt, tmp_path, np.array([65536, 150528, 10], dtype=np.int64))
    with fmt.open(path) as r:
        out = buffer_for(r)
        shapes = []
        for i in range(r.num_samples):
            with Image.open(io.BytesIO(r.payload(i, out).tobytes())) as img:
                assert img.format == pil_format and img.mode == "RGB"
                shapes.append(img.size)
    assert shapes == [(148, 148), (224, 224), (2, 2)]  # ceil(n/3) pixels, square-ish (W, H)
    with Image.open(path) as first:  # a packed file opens as its first image, as a plain image file
        assert first.size == (148, 148)


@pytest.mark.parametrize("name", ["jpeg", "png"])
def test_decode_decodes_inside_the_read(tmp_path, name):
    """decode=true does the decoding inside read(): damage past the signature check passes a plain read and
    fails a decoding one; the bytes returned are the encoded bytes either way."""
    path, _ = write(get_format(name), tmp_path, SIZES["fixed"])
    with get_format(name).open(path) as r:
        out = buffer_for(r)
        n = r.read(0, out)
    with get_format(name, decode=True).open(path) as r:
        assert r.read(0, out) == n == r.record_bytes(0)
    with open(path, "r+b") as f:
        f.seek(40)
        f.write(b"\xde\xad\xbe\xef" * 10)
    with get_format(name).open(path) as r:
        assert r.read(0, out) == n
    with pytest.raises(FormatError, match="record 0 is corrupt: decoding failed"):
        with get_format(name, decode=True).open(path) as r:
            r.read(0, out)


def test_image_options_are_validated():
    from ddlio.errors import ConfigError

    with pytest.raises(ConfigError, match="format.decode='yes' must be true or false"):
        get_format("jpeg", decode="yes")


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
    from ddlio.errors import ConfigError

    with pytest.raises(ConfigError, match="compression=.zstd. is unknown: choose one of none, gzip, lzf"):
        get_format("hdf5", compression="zstd", chunk_samples=2)
    with pytest.raises(ConfigError, match="needs chunked storage"):
        get_format("hdf5", compression="gzip", chunk_samples=0)
    with pytest.raises(ConfigError, match=r"driver='mpio' is unknown: choose one of sec2, stdio, core"):
        get_format("hdf5", driver="mpio")
    with pytest.raises(ConfigError, match="page_buf_size needs files written with paged space management"):
        get_format("hdf5", page_buf_size=65536)
    with pytest.raises(ConfigError, match=r"sieve_buf_size=-1 must be a whole number of bytes >= 0"):
        get_format("hdf5", sieve_buf_size=-1)


@pytest.mark.parametrize("options", [
    {"driver": "stdio"}, {"driver": "core"}, {"sieve_buf_size": 4096}, {"rdcc_nbytes": 0, "chunk_samples": 4},
    {"rdcc_nslots": 1009, "rdcc_nbytes": 4 << 20, "chunk_samples": 4},
    {"fs_strategy": "page", "fs_page_size": 8192, "page_buf_size": 65536},
    {"alignment": 65536, "alignment_threshold": 4096},
])
def test_hdf5_knobs_read_back_every_sample(tmp_path, options):
    fmt = get_format("hdf5", **options)
    path, payload = write(fmt, tmp_path, SIZES["variable"])
    with fmt.open(path) as r:
        out = buffer_for(r)
        for i in range(r.num_samples):
            assert r.payload(i, out).tobytes() == payload.sample(i)


def test_hdf5_knobs_that_change_the_file_do_and_the_others_reach_the_library(tmp_path):
    import h5py

    aligned, _ = write(get_format("hdf5", alignment=65536, alignment_threshold=4096), tmp_path, SIZES["fixed"])
    with h5py.File(aligned) as f:
        assert f["data"].id.get_offset() % 65536 == 0  # the data starts on an alignment boundary
    fmt = get_format("hdf5", fs_strategy="page", fs_page_size=8192, sieve_buf_size=4096, rdcc_nbytes=2 << 20,
                     rdcc_nslots=1009, page_buf_size=65536)
    (tmp_path / "paged").mkdir()
    path, _ = write(fmt, tmp_path / "paged", SIZES["fixed"])
    with h5py.File(path) as f:
        fcpl = f.id.get_create_plist()
        assert fcpl.get_file_space_strategy()[0] == h5py.h5f.FSPACE_STRATEGY_PAGE
        assert fcpl.get_file_space_page_size() == 8192
    with fmt.open(path) as r:
        fapl = r._f.id.get_access_plist()
        assert fapl.get_sieve_buf_size() == 4096
        assert fapl.get_cache()[1:3] == (1009, 2 << 20)
        assert fapl.get_page_buffer_size()[0] == 65536
    with get_format("hdf5", driver="stdio").open(aligned) as r:
        assert r._f.driver == "stdio"


def test_payload_is_validated_and_keys_the_dataset(tmp_path):
    from ddlio.errors import ConfigError
    from experiments.dataset import DatasetPlan
    from helpers import point

    a = point(tmp_path)
    b = point(tmp_path, "workload.payload=2")
    assert a.workload.payload == "random" and b.workload.payload == "2.0" and b.dataset_key != a.dataset_key
    assert point(tmp_path, "workload.payload=2.0").dataset_key == b.dataset_key  # same payload, same bytes
    assert point(tmp_path, "workload.payload=zeros").dataset_key not in (a.dataset_key, b.dataset_key)
    assert DatasetPlan.from_point(b).file_payload(0).kind == "2.0"  # generation gets it
    assert b.to_dict()["payload"] == "2.0"  # and the result records it with the point's config
    with pytest.raises(ConfigError, match=r"workload.payload='ones' is unknown: choose random \(incompressible\)"):
        point(tmp_path, "workload.payload=ones")


# ------------------------------------------------------------------ layouts as applications write them
SHAPE = (16, 16, 16)


def shaped_write(fmt, tmp_path, n=12):
    sizes = np.full(n, int(np.prod(SHAPE)), dtype=np.int64)
    return write_payload(fmt, tmp_path, FilePayload(3, 1, sizes, "random", SHAPE))


def write_payload(fmt, tmp_path, payload):
    path = tmp_path / f"data{fmt.suffix}"
    fmt.write(path, payload)
    return path, payload


@pytest.mark.parametrize("options", [{"chunk_samples": 0}, {"chunk_samples": 4, "compression": "lzf"}])
def test_hdf5_array_is_images_and_labels_that_h5py_reads(tmp_path, options):
    import h5py

    path, payload = shaped_write(get_format("hdf5", layout="array", **options), tmp_path)
    with h5py.File(path) as f:
        assert set(f) == {"images", "labels"}
        images, labels = f["images"], f["labels"]
        assert images.shape == (12, *SHAPE) and images.dtype == np.uint8
        assert images.chunks == ((4, *SHAPE) if options["chunk_samples"] else None)
        assert images.compression == options.get("compression")
        assert labels.dtype == np.int64 and list(labels[:]) == [i % 10 for i in range(12)]
        assert images[5].tobytes() == payload.sample(5) and images[5].shape == SHAPE


@pytest.mark.parametrize("name", ["npz", "npy"])
def test_npz_npy_arrays_are_what_np_load_reads(tmp_path, name):
    """As DLIO's generators write them: npz ``x`` (samples) and ``y`` (labels), npy the samples' array alone;
    a positioned read of sample i and np.load agree."""
    fmt = get_format(name, layout="array")
    path, payload = shaped_write(fmt, tmp_path)
    if name == "npz":
        with np.load(path) as z:
            assert sorted(z.files) == ["x", "y"]
            x, y = z["x"], z["y"]
        assert y.dtype == np.int64 and list(y) == [i % 10 for i in range(12)]
    else:
        x = np.load(path)
        assert fmt.sidecars(path) == []
    assert x.shape == (12, *SHAPE) and x.dtype == np.uint8
    with fmt.open(path) as r:
        out = buffer_for(r)
        for i in (0, 7, 11):
            assert r.payload(i, out).tobytes() == x[i].tobytes() == payload.sample(i)


@pytest.mark.parametrize(("name", "layout"), [("npz", "samples"), ("npz", "array"), ("npy", "samples"),
                                              ("npy", "array")])
def test_whole_load_bytes_are_what_np_load_reads(tmp_path, name, layout):
    """The plan of a whole load comes from the file's structure; np.load through the counting file reads exactly
    it: for .npy, numpy's 6-byte peek and the file; for .npz, the peek, the zip directory and the member."""
    from experiments.formats.whole import CountingFile

    fmt = get_format(name, layout=layout, load="whole")
    if layout == "array":
        path, payload = shaped_write(fmt, tmp_path)
    else:
        path, payload = write(fmt, tmp_path, SIZES["variable"])
    plan = fmt.whole_load_bytes(path)
    with CountingFile(path) as f:
        loaded = np.load(f)
        if name == "npz":
            with loaded as z:
                arr = z["x" if layout == "array" else "data"]
        else:
            arr = loaded
    assert f.nbytes == plan
    size = os.path.getsize(path)
    if name == "npy":
        assert plan == size + 6
    else:  # the member's bytes and the directory, not the labels/offsets member
        assert arr.nbytes < plan < size + 6
    assert arr.reshape(-1)[: payload.sizes[0]].tobytes() == payload.sample(0)


def test_layouts_and_loads_are_validated():
    from ddlio.errors import ConfigError
    from experiments.formats import FORMATS

    with pytest.raises(ConfigError, match=r"format.layout='grid' is unknown for hdf5: choose one of bytes, array"):
        get_format("hdf5", layout="grid")
    with pytest.raises(ConfigError, match=r"layout='array' is unknown for tfrecord: choose one of raw, example"):
        get_format("tfrecord", layout="array")
    with pytest.raises(ConfigError, match=r"format.load='mmap' is unknown: choose one of sample, whole"):
        get_format("npz", load="mmap")
    for name in ("hdf5", "npz", "npy"):
        assert any("needs workload.sample_shape" in p for p in FORMATS[name].problems({"layout": "array"}, ()))
        assert FORMATS[name].problems({"layout": "array"}, (4, 4)) == []
    with pytest.raises(ValueError, match="needs workload.sample_shape"):  # and the writer refuses, had it slipped
        write_payload(get_format("hdf5", layout="array"), Path("/nonexistent"), FilePayload(3, 0, SIZES["fixed"]))
    with pytest.raises(ValueError, match=r"samples of shape \[3, 3\] hold 9 bytes"):
        FilePayload(3, 0, SIZES["fixed"], "random", (3, 3))


def test_example_records_have_the_planned_size(tmp_path):
    """Record bytes = payload + the Example's protobuf overhead + the frame, known before writing."""
    from experiments.formats.tfrecord import HEADER, example_overhead

    fmt = get_format("tfrecord", layout="example")
    path, payload = write(fmt, tmp_path, SIZES["variable"])
    want = fmt.expected_record_bytes(payload.sizes)
    assert np.array_equal(np.diff(np.load(f"{path}.idx")), want)
    assert os.path.getsize(path) == want.sum()
    # worked by hand: a 1-byte image is Example{features{image entry (16 bytes), label entry (16)}}: 2 + 32 bytes
    assert example_overhead(1, 0) == 33 and example_overhead(100_000, 0) == 43  # 100000: 3-byte varint lengths
    with fmt.open(path) as r:
        out = buffer_for(r)
        n = r.read(3, out)
        assert n == want[3] and out[HEADER] == 0x0A  # Example field 1 (features), length-delimited
        assert r.payload(3, out).tobytes() == payload.sample(3)


def test_example_records_are_what_tensorflow_parses(tmp_path):
    """Real TensorFlow reads the file: TFRecordDataset, then parse_example after batching, image decoded to the
    sample shape; and our encoding is byte for byte what tf.train.Example serializes."""
    tf = pytest.importorskip("tensorflow")
    fmt = get_format("tfrecord", layout="example")
    path, payload = shaped_write(fmt, tmp_path, n=10)
    features = {"image": tf.io.FixedLenFeature([], tf.string), "label": tf.io.FixedLenFeature([], tf.int64)}
    ds = tf.data.TFRecordDataset([str(path)]).batch(4).map(lambda r: tf.io.parse_example(r, features))
    images, labels = [], []
    for b in ds:
        images.append(tf.reshape(tf.io.decode_raw(b["image"], tf.uint8), [-1, *SHAPE]).numpy())
        labels += b["label"].numpy().tolist()
    images = np.concatenate(images)
    assert images.shape == (10, *SHAPE) and labels == [i % 10 for i in range(10)]
    assert all(images[i].tobytes() == payload.sample(i) for i in range(10))
    raw = next(iter(tf.data.TFRecordDataset([str(path)]).skip(3))).numpy()
    ref = tf.train.Example(features=tf.train.Features(feature={
        "image": tf.train.Feature(bytes_list=tf.train.BytesList(value=[payload.sample(3)])),
        "label": tf.train.Feature(int64_list=tf.train.Int64List(value=[3]))}))
    assert raw == ref.SerializeToString(deterministic=True)
    single = tf.io.parse_single_example(raw, features)
    assert single["image"].numpy() == payload.sample(3) and int(single["label"]) == 3
