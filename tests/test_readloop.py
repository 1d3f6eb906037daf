"""The kernel's per-read loop in C (experiments/kernel/_readrun.c) against its Python loop: the same bytes into the
same buffer, the same per-sample sizes, latencies and starts on the clock of ``time.perf_counter_ns``, the same
errors, and the same progress seen by another thread while a batch is being read. (tests/test_strace.py checks
the C loop's calls against strace.)"""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from ddlio.errors import FormatError
from experiments.formats.indexed import IndexedReader, offsets_of, write_index
from experiments.kernel.lanes import Lane, int64_zeros, native_read_run

BUILT = native_read_run() is not None
needs_c = pytest.mark.skipif(not BUILT, reason="the C read loop is not built here (no C compiler at install)")


def test_the_c_loop_is_built_where_a_compiler_was():
    """.ci/run installs a C compiler and Python's headers first: there the install must have built the loop (a
    build that failed silently would leave every test below skipped)."""
    if os.environ.get("CI") != "true" and not BUILT:
        pytest.skip("not CI, and the C read loop is not built here")
    assert BUILT, "pip install -e . did not build experiments/kernel/_readrun.c (see its build output)"


class Checked(IndexedReader):
    """A reader whose records are checked on read: it has no native loop."""

    def check(self, i: int, record: np.ndarray) -> None:
        pass


class Fmt:
    """The little of a Format a Lane uses: ``open`` (files whose name holds ``checked`` get a Checked reader)."""

    loads_whole = False

    def open(self, path: str) -> IndexedReader:
        return Checked(path) if "checked" in Path(path).name else IndexedReader(path)


def dataset(tmp_path: Path, names: list[str], seed: int = 0) -> tuple[list[str], list[bytes]]:
    """Files of records of random lengths (1 B .. 96 KiB) with their indexes; each file's records' bytes."""
    rng = np.random.default_rng(seed)
    paths, records = [], []
    for name in names:
        lengths = rng.integers(1, 96 * 1024, size=int(rng.integers(5, 40))).tolist()
        recs = [rng.integers(0, 256, size=n, dtype=np.uint8).tobytes() for n in lengths]
        path = tmp_path / name
        path.write_bytes(b"".join(recs))
        write_index(path, offsets_of(lengths))
        paths.append(str(path))
        records.append(recs)
    return paths, records


def epoch(order: list[tuple[int, int]], starts: bool, sizes: bool) -> SimpleNamespace:
    """An epoch's per-sample lists (as EpochArrays holds them) for reads of (file, record) in ``order``."""
    n, fo, lo = len(order), [f for f, _ in order], [i for _, i in order]
    return SimpleNamespace(fo=fo, lo=lo, fo_arr=np.array(fo, dtype=np.int64), lo_arr=np.array(lo, dtype=np.int64),
                           lat=int64_zeros(n), start=int64_zeros(n if starts else 0),
                           size=int64_zeros(n if sizes else 0))


def lane(paths: list[str], native: bool) -> Lane:
    ln = Lane(Fmt(), paths, 96 * 1024, trace=False)
    if not native:
        ln.read_run = None
    return ln


def read_all(paths: list[str], order: list[tuple[int, int]], native: bool, starts: bool, sizes: bool,
             batch: int = 7) -> tuple[SimpleNamespace, list[int], Lane, list[bytes]]:
    """Read ``order`` in batches by one loop: the epoch's lists, the bytes per batch, the lane, and the buffer's
    head after each batch (the last record read, as long as it was)."""
    ln, ep = lane(paths, native), epoch(order, starts, sizes)
    got, heads = [], []
    for k0 in range(0, len(order), batch):
        k1 = min(k0 + batch, len(order))
        got.append(ln.read_range(k0, k1, ep))
        f, i = order[k1 - 1]
        n = ln.readers[f].record_bytes(i)
        heads.append(ln.buf[:n].tobytes())
    ln.close_all()
    return ep, got, ln, heads


@needs_c
@pytest.mark.parametrize(("starts", "sizes"), [(False, False), (False, True), (True, False), (True, True)])
def test_the_c_loop_reads_what_the_python_loop_reads(tmp_path, starts, sizes):
    paths, records = dataset(tmp_path, ["a.bin", "b.bin", "c.bin"])
    rng = np.random.default_rng(1)
    order = [(f, i) for f in range(3) for i in range(len(records[f]))]
    order = [order[j] for j in rng.permutation(len(order))] + order  # shuffled: runs of one, then whole files
    t0 = time.perf_counter_ns()
    c_ep, c_got, c_lane, c_heads = read_all(paths, order, True, starts, sizes)
    t1 = time.perf_counter_ns()
    p_ep, p_got, p_lane, p_heads = read_all(paths, order, False, starts, sizes)
    assert c_got == p_got and sum(c_got) == sum(len(records[f][i]) for f, i in order)
    assert c_heads == p_heads == [records[f][i] for f, i in (order[min(k + 6, len(order) - 1)]
                                                              for k in range(0, len(order), 7))]
    assert c_lane.reads == {"native": len(order), "python": 0}
    assert p_lane.reads == {"native": 0, "python": len(order)}
    assert c_ep.size == p_ep.size
    if sizes:
        assert list(c_ep.size) == [len(records[f][i]) for f, i in order]
    assert all(isinstance(x, int) and x > 0 for x in c_ep.lat)
    if starts:  # on perf_counter_ns's clock, one read after the other
        assert t0 <= c_ep.start[0] and c_ep.start[-1] + c_ep.lat[-1] <= t1
        assert all(c_ep.start[k] + c_ep.lat[k] <= c_ep.start[k + 1] for k in range(len(order) - 1))
    assert c_lane.opens == p_lane.opens == 3


@needs_c
def test_a_reader_without_a_native_loop_is_read_by_its_own_read_in_a_native_batch(tmp_path):
    paths, records = dataset(tmp_path, ["a.bin", "checked.bin", "c.bin"], seed=2)
    order = [(f, i) for i in range(5) for f in range(3)]  # every batch mixes the three files
    c_ep, c_got, c_lane, _ = read_all(paths, order, True, starts=True, sizes=True, batch=6)
    p_ep, p_got, _, _ = read_all(paths, order, False, starts=True, sizes=True, batch=6)
    assert c_got == p_got and c_ep.size == p_ep.size
    assert list(c_ep.size) == [len(records[f][i]) for f, i in order]
    assert c_lane.reads == {"native": 10, "python": 5}
    assert all(x > 0 for x in c_ep.lat)


@pytest.mark.parametrize("native", [pytest.param(True, marks=needs_c), False])
def test_a_truncated_record_is_the_same_error_by_either_loop(tmp_path, native):
    paths, records = dataset(tmp_path, ["a.bin"], seed=3)
    ln, ep = lane(paths, native), epoch([(0, i) for i in range(len(records[0]))], False, True)
    ln.read_range(0, 1, ep)  # opens the file
    keep = sum(len(r) for r in records[0][:3]) + 5
    os.truncate(paths[0], keep)  # record 3 now ends after 5 bytes
    with pytest.raises(FormatError) as e:
        ln.read_range(1, len(records[0]), ep)
    assert str(e.value) == f"{paths[0]}: record 3 truncated: read 5 of {len(records[0][3])} bytes at {keep - 5}"
    assert list(ep.size[:3]) == [len(r) for r in records[0][:3]] and list(ep.lat[3:]) == [0] * (len(records[0]) - 3)
    assert all(ep.lat[:3])
    ln.close_all()


@pytest.mark.parametrize("native", [pytest.param(True, marks=needs_c), False])
def test_a_failing_read_raises_the_os_error(tmp_path, native):
    paths, records = dataset(tmp_path, ["a.bin"], seed=4)
    ln, ep = lane(paths, native), epoch([(0, i) for i in range(len(records[0]))], False, False)
    ln.read_range(0, 1, ep)
    os.close(ln.readers[0]._fd)  # the descriptor closed under the reader
    with pytest.raises(OSError) as e:
        ln.read_range(1, 3, ep)
    assert e.value.errno == 9  # EBADF
    ln.readers.clear()


@needs_c
def test_another_thread_sees_each_read_return_during_a_batch(tmp_path):
    """The C loop lets go of the GIL around each call, as os.preadv does, and stores each latency as its read
    returns: the hang guard's thread sees a batch's reads return one by one, not the batch at its end."""
    paths, records = dataset(tmp_path, ["a.bin"], seed=5)
    n = 20000
    order = [(0, i % len(records[0])) for i in range(n)]
    ln, ep = lane(paths, True), epoch(order, False, False)
    ln.read_range(0, 1, ep)  # opened
    done = threading.Event()
    seen: list[int] = []

    def watch() -> None:
        while not done.is_set():
            seen.append(sum(1 for x in ep.lat if x))
            time.sleep(0.0005)

    t = threading.Thread(target=watch)
    t.start()
    ln.read_range(1, n, ep)  # one batch, one call of the C loop
    done.set()
    t.join(5)
    assert ln.reads["native"] == n
    assert any(1 < c < n for c in seen), seen[:20]  # the watcher ran mid-batch and saw part of it returned
    ln.close_all()


@needs_c
def test_the_c_loop_takes_int64_arrays_and_names_a_wrong_argument(tmp_path):
    """Every array reaches the C loop as a contiguous int64 buffer (one load per lookup: a shuffled epoch's
    offsets lie all over the index; the figures written without the GIL); a list, another width or a read-only
    buffer is refused by name, and a record beyond the index too."""
    paths, records = dataset(tmp_path, ["a.bin"], seed=6)
    run = native_read_run()
    starts = np.asarray(offsets_of([len(r) for r in records[0]]), dtype=np.int64)
    n = len(records[0])
    fo, lo = np.zeros(n, dtype=np.int64), np.arange(n, dtype=np.int64)[::-1].copy()
    buf = np.empty(96 * 1024, dtype=np.uint8)
    fd = os.open(paths[0], os.O_RDONLY)
    try:
        lat, size = int64_zeros(n), np.zeros(n, dtype=np.int64)  # array.array or numpy: any int64 buffer
        assert run(fd, buf, starts, fo, lo, 0, 0, n, lat, int64_zeros(0), size) == (n, sum(map(len, records[0])), -1)
        assert buf[:len(records[0][0])].tobytes() == records[0][0] and all(lat)
        assert size.tolist() == [len(records[0][i]) for i in lo.tolist()]
        none = int64_zeros(0)
        for name, bad in [("starts", (starts.tolist(), fo, lo, lat, none, none)),
                          ("starts", (starts.astype(float), fo, lo, lat, none, none)),
                          ("fo", (starts, fo.astype(np.int32), lo, lat, none, none)),
                          ("lo", (starts, fo, lo[::2], lat, none, none)),
                          ("lat", (starts, fo, lo, [0] * n, none, none)),
                          ("start", (starts, fo, lo, lat, bytes(8 * n), none))]:  # read-only
            with pytest.raises(TypeError, match=f"read_run: {name} must be a contiguous"):
                run(fd, buf, bad[0], bad[1], bad[2], 0, 0, n, *bad[3:])
        with pytest.raises(IndexError, match="out of the epoch's arrays"):
            run(fd, buf, starts, fo[:3], lo, 0, 0, n, int64_zeros(n), none, none)
        with pytest.raises(IndexError, match="record 99 out of the file's index"):
            run(fd, buf, starts, fo, np.full(n, 99, dtype=np.int64), 0, 0, n, int64_zeros(n), none, none)
    finally:
        os.close(fd)


def test_an_epochs_arrays_and_lists_agree():
    from experiments.kernel.lanes import EpochArrays

    class Plan:
        file_starts = np.array([0, 4, 10, 11])

    ids = np.array([10, 0, 5, 3, 4, 9], dtype=np.int64)
    ep = EpochArrays(Plan(), ids, trace=False)
    assert ep.fo == [2, 0, 1, 0, 1, 1] and ep.lo == [0, 0, 1, 3, 0, 5]
    assert ep.fo_arr.dtype == ep.lo_arr.dtype == np.int64 and ep.fo_arr.flags.c_contiguous
    assert ep.fo_arr.tolist() == ep.fo and ep.lo_arr.tolist() == ep.lo
