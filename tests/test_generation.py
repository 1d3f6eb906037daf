"""Generation at speed, without changing a byte: the payload stream is the one every dataset on disk was made from,
the threads that generate ahead change nothing, a one-rank generation in the job's process writes what the MPI
step writes, and several ranks write what one does."""

from __future__ import annotations

import hashlib
import json
import os
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from ddlio.errors import LaunchError
from experiments.dataset import (
    DatasetPlan,
    ensure_dataset,
    environment,
    generate_here,
    load_manifest,
    verify_dataset,
    write_behind,
)
from experiments.dataset.verify import plan_sizes
from experiments.formats import FilePayload, get_format, pcg64
from experiments.formats.base import COMPRESS_BLOCK, random_bytes
from experiments.formats.ranges import write_pieces
from experiments.formats.tfrecord import frame, frame_group
from experiments.kernel import cache as pagecache
from helpers import mpi_generation, point
from lustre import Layout

#: sizes that cross group boundaries and are not multiples of 8 (the raw generator's word)
SIZES = np.array([1, 7, 8, 9, 4095, 4097, 65536, 1000003] + [3 * 1024 * 1024] * 4, dtype=np.int64)
#: sha256 of FilePayload(42, 3, SIZES, kind)'s groups back to back, as written by the code that generated the
#: datasets measured before this change (numpy's Generator.bytes): pinned, so that no change of how payloads are
#: made can silently leave the datasets in users' stores unverifiable
GOLDEN = {
    "random": "5b91b159af2428f5bbd6b6525de2c8d690c39be1475c6de4a6bb1d83773d3e9e",
    "2.0": "d3b25407a6df93678e9174a143e0d42568c1dc29ec8177f93f35b0faed6c96a0",
    "zeros": "407396c364cae50926b50617eddbc7f79687d376aad04794e4c418bc4523042d",
}


def old_group_bytes(p: FilePayload, lo: int, hi: int) -> bytes:
    """How a group's bytes were made before (``Generator.bytes``, then the compressible blocks zeroed)."""
    n = int(p.sizes[lo:hi].sum())
    if p.kind == "zeros":
        return bytes(n)
    buf = np.frombuffer(np.random.Generator(np.random.PCG64([p.seed, p.file_index, lo])).bytes(n), np.uint8).copy()
    if p.kind != "random":
        keep = max(1, round(COMPRESS_BLOCK / float(p.kind)))
        whole = n - n % COMPRESS_BLOCK
        buf[:whole].reshape(-1, COMPRESS_BLOCK)[:, keep:] = 0
        buf[whole + keep :] = 0
    return buf.tobytes()


@pytest.mark.parametrize("n", [0, 1, 7, 8, 9, 15, 16, 17, 1003, 131073])
def test_random_bytes_are_the_generator_bytes_stream(n):
    assert random_bytes((42, 3, 7), n).tobytes() == np.random.Generator(np.random.PCG64([42, 3, 7])).bytes(n)


@pytest.mark.parametrize("kind", sorted(GOLDEN))
def test_payloads_are_the_bytes_existing_datasets_hold(kind):
    p = FilePayload(42, 3, SIZES, kind)
    groups = list(p.iter_groups())
    assert len(groups) == 2  # the test crosses a group boundary
    for lo, hi, buf in groups:
        assert buf.tobytes() == old_group_bytes(p, lo, hi)
    assert hashlib.sha256(b"".join(b.tobytes() for _, _, b in groups)).hexdigest() == GOLDEN[kind]


@pytest.mark.parametrize("n", [0, 1, 7, 8, 9, 127, 128, 129, 1003, 131073])
@pytest.mark.parametrize("native", [True, False])
def test_random_bytes_fill_in_place_and_either_way_give_the_stream(monkeypatch, n, native):
    """The C fill (several lanes of the generator at once) and numpy's random_raw give the same bytes, in place or
    not; a buffer longer than asked keeps its tail."""
    if native and pcg64.FILL is None:
        pytest.skip("experiments/formats/_payload.c is not built here (no C compiler at install)")
    if not native:
        monkeypatch.setattr(pcg64, "FILL", None)
    want = np.random.Generator(np.random.PCG64([42, 3, 7])).bytes(n)
    assert random_bytes((42, 3, 7), n).tobytes() == want
    out = np.full(n + 5, 0xAB, dtype=np.uint8)
    got = random_bytes((42, 3, 7), n, out)
    assert got.tobytes() == want and np.shares_memory(got, out) | (n == 0)
    assert out[n:].tolist() == [0xAB] * 5


@pytest.mark.parametrize("kind", sorted(GOLDEN))
@pytest.mark.parametrize("threads", [0, 2])
def test_reused_buffers_yield_the_bytes_fresh_arrays_do(kind, threads):
    """``reuse=True`` fills a few buffers again and again: each group, read before the next is asked for, is
    what a fresh array holds (a sample larger than a group gets a buffer of its own size)."""
    sizes = np.concatenate([SIZES, np.array([9 * 1024 * 1024, 17], dtype=np.int64)])
    p = FilePayload(42, 3, sizes, kind)
    fresh = [(lo, hi, b.tobytes()) for lo, hi, b in p.iter_groups(threads=threads)]
    reused = [(lo, hi, b.tobytes()) for lo, hi, b in p.iter_groups(threads=threads, reuse=True)]
    assert len(fresh) >= 3 and reused == fresh


#: sha256 of every data file (and sidecar) of a small dataset per format and layout, as the code before the payload's
#: C fill, reused buffers and writev framing wrote them (commit 7636746): the files users' stores hold
GOLDEN_FILES = {
    "bin": ("b752be2b0f30e23d1f050c63a7e6fa62b5acca17a84410c1435c2316a4d9f279", ["format=bin"]),
    "npy": ("c223b47d18e76c0e9cc0e276621b856f1635bb9c2222ab70e0ad12e9cf245c56", ["format=npy"]),
    "npy-array": ("80f04816d2d0dabf4b5dbcce59a879525d9ab0050ecfa53944f412aa50fef14d",
                  ["format=npy", "format.layout=array"]),
    "npz": ("3e7edc585dfc4d1839cbbd9fbb1c24855b99eebdc18d117ad1d5a7f52c1851a9", ["format=npz"]),
    "npz-array": ("e68fc6bede5b725760deab3fadcdbf4c403097cbcdddcca0b07697207e02c651",
                  ["format=npz", "format.layout=array"]),
    "tfrecord": ("bfbe6e11224e92656fdcf2ed4d7bf87a100aba649329be6bc1525bd7d38e7dae", ["format=tfrecord"]),
    "tfrecord-example": ("2a2da4b25a87de14d9b39f62a83ba4a243601fbaa355752df09453f890e37e42",
                         ["format=tfrecord", "format.layout=example"]),
    "hdf5": ("b3b47ecc10db3b9c2386ded028acaab7365257029d5081b414077dbda816819f", ["format=hdf5"]),
    "hdf5-chunked": ("388d5a157fb6d3a599cf456cca1376cbb1223c8f9a8556934470de1a67c33f76",
                     ["format=hdf5", "format.chunk_samples=4"]),
    "hdf5-array": ("7104d191594500c5b4798e94bf3f35199711c48a98d6e0dcf083fe661dbbaafa",
                   ["format=hdf5", "format.layout=array"]),
}


@pytest.mark.parametrize("case", sorted(GOLDEN_FILES))
def test_generated_files_are_the_bytes_earlier_code_wrote(tmp_path, case):
    digest, overrides = GOLDEN_FILES[case]
    shape = ["workload.sample_shape=[24,24,3]", "workload.sample_size_stdev=0"] if case.endswith("-array") else []
    spec = point(tmp_path, "workload.samples=40", "workload.samples_per_file=20", "workload.sample_size=3001",
                 "workload.sample_size_stdev=700", *overrides, *shape)
    plan = DatasetPlan.from_point(spec)
    os.makedirs(plan.directory)
    plan_sizes(plan)
    plan_path = Path(plan.directory) / "plan.json"
    plan_path.write_text(json.dumps(plan.to_dict()))
    generate_here(plan_path)
    h = hashlib.sha256()
    for name in sorted(os.listdir(plan.directory)):
        if name.startswith("part-"):
            h.update(name.encode())
            h.update(Path(plan.directory, name).read_bytes())
    assert h.hexdigest() == digest


@pytest.mark.parametrize("chunk", [1, 7, 64, 1000, 5000, 10**6])
def test_write_at_writes_pieces_in_calls_of_at_most_a_chunk_each_told(tmp_path, chunk):
    """A group larger than WRITE_CHUNK (one big sample) goes in the fewest calls of at most ``chunk`` bytes, all of
    one size within a byte (no small remainder written behind on its own), back to back from the offset, across the
    pieces' boundaries; each call is told (offset, bytes), so its range can be written behind at once; the file
    holds the pieces' bytes."""
    from experiments.formats.ranges import write_at

    pieces = [bytes([i % 251]) * (i * 37 % 300) for i in range(40)] + [np.arange(500, dtype=np.uint8),
                                                                        memoryview(b"tail")]
    want = b"".join(bytes(p) for p in pieces)
    told: list[tuple[int, int]] = []
    with open(tmp_path / "f", "wb", buffering=0) as f:
        n = write_at(f.fileno(), pieces, 11, lambda fd, at, k: told.append((at, k)), chunk=chunk)
    assert n == len(want)
    assert (tmp_path / "f").read_bytes() == bytes(11) + want
    assert all(0 < k <= chunk for _, k in told)
    assert len(told) == -(-len(want) // chunk)
    assert max(k for _, k in told) - min(k for _, k in told) <= 1
    assert [at for at, _ in told] == [11 + sum(k for _, k in told[:i]) for i in range(len(told))]
    assert sum(k for _, k in told) == len(want)


def test_write_pieces_writes_more_pieces_than_one_writev_takes(tmp_path):
    pieces = [bytes([i % 251]) * (i % 7) for i in range(3000)] + [memoryview(b"tail")]
    with open(tmp_path / "f", "wb", buffering=0) as f:
        assert write_pieces(f.fileno(), pieces) == sum(len(p) for p in pieces)
    assert (tmp_path / "f").read_bytes() == b"".join(pieces)
    with open(tmp_path / "g", "wb", buffering=0) as f:  # at an offset (pwritev): the position stays
        assert write_pieces(f.fileno(), pieces, 5) == sum(len(p) for p in pieces)
        assert f.tell() == 0
    assert (tmp_path / "g").read_bytes() == bytes(5) + b"".join(pieces)


@pytest.mark.parametrize("threads", [1, 2, 3])
def test_generating_ahead_in_threads_yields_what_the_caller_s_thread_does(threads):
    sizes = np.array([100_000] * 300 + [5, 9, 3_000_000], dtype=np.int64)
    p = FilePayload(7, 1, sizes, "3.0")
    serial = [(lo, hi, b.tobytes()) for lo, hi, b in p.iter_groups(threads=0)]
    assert len(serial) > 3
    assert [(lo, hi, b.tobytes()) for lo, hi, b in p.iter_groups(threads=threads)] == serial
    seen: list[tuple[int, int]] = []

    def prepare(lo: int, hi: int, buf: np.ndarray) -> int:
        seen.append((lo, hi))
        return len(buf)

    assert [(lo, hi, n) for lo, hi, n in p.iter_groups(threads, prepare)] == [
        (lo, hi, len(b)) for lo, hi, b in serial
    ]
    assert sorted(seen) == [(lo, hi) for lo, hi, _ in serial]


def test_a_writer_that_stops_early_leaves_no_generator_thread():
    p = FilePayload(7, 1, np.full(64, 1 << 20, dtype=np.int64))
    before = threading.active_count()
    it = p.iter_groups(threads=2)
    next(it)
    assert threading.active_count() > before
    it.close()
    assert threading.active_count() == before


def test_framing_a_group_at_once_is_framing_each_record():
    sizes = [1, 12, 16, 4096, 4097, 3]
    payload = random_bytes((1, 2, 3), sum(sizes))
    want, pos = b"", 0
    for s in sizes:
        want += frame(payload[pos : pos + s])
        pos += s
    assert frame_group(payload, sizes).tobytes() == want


def test_write_behind_leaves_the_file_as_written_and_stops(tmp_path):
    path = tmp_path / "f.bin"
    before = threading.active_count()
    with write_behind(path, interval_s=0.001):
        with open(path, "wb") as f:
            for i in range(20):
                f.write(random_bytes((i,), 1 << 20))
    assert path.read_bytes() == b"".join(random_bytes((i,), 1 << 20).tobytes() for i in range(20))
    with write_behind(tmp_path / "never-written", interval_s=0.001):
        pass
    assert threading.active_count() == before


def test_environment_is_set_while_generating_and_restored(monkeypatch):
    monkeypatch.setenv("DDLIO_T_SET", "before")
    monkeypatch.delenv("DDLIO_T_NEW", raising=False)
    with environment({"DDLIO_T_SET": "during", "DDLIO_T_NEW": "1"}):
        assert os.environ["DDLIO_T_SET"] == "during" and os.environ["DDLIO_T_NEW"] == "1"
    assert os.environ["DDLIO_T_SET"] == "before" and "DDLIO_T_NEW" not in os.environ


def file_contents(plan: DatasetPlan) -> dict[str, bytes]:
    """What each data file and sidecar of a dataset holds (for HDF5, its datasets: the file carries timestamps)."""
    out = {}
    for name in sorted(os.listdir(plan.directory)):
        path = os.path.join(plan.directory, name)
        if name.endswith(".h5"):
            import h5py

            with h5py.File(path, "r") as f:
                out[name] = f["data"][:].tobytes() + f["offsets"][:].tobytes()
        elif name.startswith("part-"):
            with open(path, "rb") as f:
                out[name] = f.read()
    return out


@pytest.mark.parametrize("fmt", ["bin", "npy", "tfrecord", "npz", "hdf5"])
def test_one_rank_in_process_and_two_mpi_ranks_write_what_one_mpi_rank_writes(tmp_path, fmt):
    from experiments.run import generation_runner

    spec = point(tmp_path, f"format={fmt}", "workload.samples=48", "workload.samples_per_file=24",
                 "workload.sample_size_stdev=4KiB", "ppn=2")
    plan = DatasetPlan.from_point(spec)
    assert plan.num_files == 2
    contents = []
    for how in ("mpi-1", "mpi-2", "here"):
        run_dir = tmp_path / how
        run_dir.mkdir()
        gen = generation_runner(spec, run_dir) if how == "here" else mpi_generation(spec, run_dir)
        ranks = 2 if how == "mpi-2" else 1
        info = ensure_dataset(plan, Layout(), gen, ranks)
        assert info.generated and info.manifest["generation_ranks"] == ranks
        assert (run_dir / "generate.out").exists() == (how != "here")  # no MPI step in the job's process
        # the ranks' own checks (experiments/dataset/verify.py) find what one check of every file finds
        entries, records = verify_dataset(plan, plan.sizes())
        assert info.manifest["files"] == [{k: v for k, v in e.items() if k != "file"} for e in entries]
        assert np.array_equal(np.load(os.path.join(plan.directory, "records.npy")), records)
        assert info.manifest["record_bytes"] == int(records.sum()) > 0
        contents.append(file_contents(plan))
        os.unlink(os.path.join(plan.directory, "manifest.json"))  # the next round rebuilds it
    assert len(contents[0]) >= 2 and contents[0] == contents[1] == contents[2]


def test_a_one_rank_generation_failure_reads_as_the_step_s(tmp_path):
    from experiments.run import generation_runner

    spec = point(tmp_path)
    plan = DatasetPlan.from_point(spec)
    gen = generation_runner(spec, tmp_path)

    def broken(plan_path: str, ranks: int) -> None:
        Path(plan_path).write_text("{not a plan")
        gen(plan_path, ranks)

    with pytest.raises(LaunchError, match=r"(?s)^generate step failed: JSONDecodeError"):
        ensure_dataset(plan, Layout(), broken, 1)
    assert load_manifest(plan) is None


def test_generate_here_writes_the_plan_s_files(tmp_path):
    spec = point(tmp_path, "format=bin")
    plan = DatasetPlan.from_point(spec)
    os.makedirs(plan.directory)
    np.save(os.path.join(plan.directory, "sizes.npy"), plan.sizes())
    plan_path = os.path.join(plan.directory, "plan.json")
    with open(plan_path, "w") as f:
        json.dump(plan.to_dict(), f)
    assert generate_here(plan_path, {"DDLIO_T_GEN": "1"}) == [plan.file_name(f) for f in range(plan.num_files)]
    with get_format("bin").open(plan.file_path(0)) as r:
        out = np.empty(plan.sample_size, dtype=np.uint8)
        assert r.payload(0, out).tobytes() == plan.file_payload(0).sample(0)
    assert "DDLIO_T_GEN" not in os.environ


def test_write_behind_drops_what_is_written_from_the_page_cache(tmp_path):
    """Drop-behind: while a file is written, what was written back is dropped from the page cache, so generation
    recycles a little memory instead of filling the page cache with the whole dataset; the bytes are intact."""
    path = tmp_path / "f.bin"
    chunks = [np.random.default_rng(i).bytes(1 << 20) for i in range(48)]
    with write_behind(path), open(path, "wb") as f:
        for c in chunks:
            f.write(c)
            f.flush()
            time.sleep(0.01)  # a slow writer: the watcher gets many turns
        os.fsync(f.fileno())
    assert pagecache.residency([path]) < 0.5  # without drop-behind all of it stays cached after the writes
    assert hashlib.sha256(path.read_bytes()).digest() == hashlib.sha256(b"".join(chunks)).digest()


def test_a_writer_forked_ahead_and_never_asked_ends_and_is_reaped(tmp_path):
    """generation_runner forks a one-rank point's writer ahead (it loads numpy and the format's library while the
    caller gets to generation); when the dataset turns out complete it is never asked, and it ends with its
    runner, reaped (no process, no zombie, left behind)."""
    import gc

    from experiments.run import generation_runner
    from experiments.run.forked import ForkedGenerator

    spec = point(tmp_path, "format=hdf5")
    assert spec.ranks == 1
    gen = generation_runner(spec, tmp_path)
    forked = gen._ahead
    pid = forked.pid
    assert isinstance(forked, ForkedGenerator)
    del gen, forked
    gc.collect()
    with pytest.raises(ChildProcessError):
        os.waitpid(pid, os.WNOHANG)
    other = ForkedGenerator("bin", {})
    other.close()
    with pytest.raises(ChildProcessError):
        os.waitpid(other.pid, os.WNOHANG)
    with pytest.raises(RuntimeError, match="used or closed"):
        other.generate(str(tmp_path / "plan.json"))


def test_a_writer_forked_ahead_says_when_it_is_ready_and_what_its_start_cost(tmp_path):
    """ready() returns once the forked writer has loaded numpy and h5py, with the CPU seconds that took (what the
    child's own rusage says: nothing much when this process had them loaded already), the same number when asked
    again; the writer then generates as before, and a runner whose writer was used has nothing ahead any more
    (ready() says 0.0)."""
    from experiments.dataset import DatasetPlan, ensure_dataset
    from experiments.run import generation_runner
    from lustre import Layout

    spec = point(tmp_path, "format=hdf5")
    gen = generation_runner(spec, tmp_path / "run")
    cpu = gen.ready(timeout=60)
    assert 0.0 <= cpu < 60.0
    assert gen.ready() == cpu
    plan = DatasetPlan.from_point(spec)
    info = ensure_dataset(plan, Layout(spec.layout.stripe_count, spec.layout.stripe_size), gen, spec.ranks)
    assert info.generated
    assert gen.ready() == 0.0  # nothing forked ahead any more: the writer was used
    gen.close()


_THREADS_OF_A_WRITER_FORKED_AHEAD = """
import os, sys
from experiments.run.forked import ForkedGenerator
assert "numpy" not in sys.modules  # as in a job's process: the child loads it
g = ForkedGenerator("bin", dict(a.split("=", 1) for a in sys.argv[1:]))
g.ready(timeout=60)
print(len(os.listdir(f"/proc/{g.pid}/task")))
g.close()
"""


@pytest.mark.skipif(not Path("/proc/self/task").is_dir(), reason="counts a process's threads in /proc")
def test_a_writer_forked_ahead_loads_numpy_without_blas_threads_unless_the_ranks_env_asks(tmp_path):
    """numpy's OpenBLAS starts a thread per core at import, which spins a core for ~0.1 s: the writer forked ahead
    (from a job's process, which has no numpy) loads numpy with one BLAS thread, its own, unless ``cluster.env``
    sets OPENBLAS_NUM_THREADS (then numpy gets that)."""
    import subprocess
    import sys

    root = Path(__file__).resolve().parent.parent
    env = {k: v for k, v in os.environ.items() if k != "OPENBLAS_NUM_THREADS"}
    env["PYTHONPATH"] = str(root)

    def threads(*given: str) -> int:
        out = subprocess.run([sys.executable, "-c", _THREADS_OF_A_WRITER_FORKED_AHEAD, *given], cwd=tmp_path,
                             env=env, capture_output=True, text=True, timeout=120)
        assert out.returncode == 0, out.stderr
        return int(out.stdout.split()[-1])

    assert threads() == 1
    if (os.cpu_count() or 1) >= 2 and "openblas" in np.__config__.CONFIG["Build Dependencies"]["blas"]["name"]:
        assert threads("OPENBLAS_NUM_THREADS=2") == 2


@pytest.mark.parametrize(("la", "lb"), [(0, 0), (0, 5), (5, 0), (1, 1), (100, 8 * 1024 * 1024 + 3), (7, 12345)])
def test_zip_crc32_of_two_pieces_combines_into_the_crc32_of_both(la, lb):
    import zlib

    from experiments.formats.npz import crc32_combine

    a, b = random_bytes((1, la), la).tobytes(), random_bytes((2, lb), lb).tobytes()
    assert crc32_combine(zlib.crc32(a), zlib.crc32(b), lb) == zlib.crc32(a + b)


def test_npz_with_its_crc32_computed_by_the_generating_threads_is_what_np_savez_writes(tmp_path, monkeypatch):
    """``layout=array`` is DLIO's ``np.savez(path, x=records, y=labels)``: numpy and zipfile write the reference,
    with zipfile's own CRC-32; ddlio's groups' CRCs (16 KiB groups here: many) are combined into the same bytes."""
    from experiments.formats import base as base_mod

    monkeypatch.setattr(base_mod, "GROUP_BYTES", 16 * 1024)
    p = FilePayload(42, 3, np.full(40, 24 * 24 * 3, dtype=np.int64), "random", (24, 24, 3))
    assert len(p.groups()) >= 5
    get_format("npz", layout="array").write(tmp_path / "ddlio.npz", p)
    x = np.frombuffer(b"".join(b.tobytes() for _, _, b in p.iter_groups()), np.uint8).reshape(40, 24, 24, 3)
    np.savez(tmp_path / "numpy.npz", x=x, y=p.labels)
    assert (tmp_path / "ddlio.npz").read_bytes() == (tmp_path / "numpy.npz").read_bytes()


def test_npz_generation_crc32_is_zlibs_function():
    """NPZ generation checksums each group with ISA-L's crc32 where isal is installed: the values zlib.crc32 gives
    (what zipfile checks), for numpy arrays and bytes, of any length."""
    import importlib.util
    import zlib

    from experiments.formats.npz import _fast_crc32

    crc32 = _fast_crc32()
    if importlib.util.find_spec("isal") is not None:
        assert crc32 is not zlib.crc32
    for n in (0, 1, 15, 4096, 8 * 1024 * 1024 + 3):
        a = random_bytes((9, n), n)
        assert crc32(a) == zlib.crc32(a) == crc32(a.tobytes())
