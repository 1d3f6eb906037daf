import math
import os

import numpy as np
import pytest

from ddlio.metrics import (
    MIB,
    NUM_BUCKETS,
    RankEpoch,
    aggregate,
    aggregate_run,
    bucket_mid_ns,
    histogram,
    percentile_us,
)


def test_histograms_merge_exactly():
    rng = np.random.default_rng(0)
    a, b = rng.lognormal(10, 2, 5000), rng.lognormal(12, 1, 3000)
    assert np.array_equal(histogram(a) + histogram(b), histogram(np.concatenate([a, b])))
    assert histogram(a).sum() == 5000 and len(histogram(a)) == NUM_BUCKETS


def test_percentiles_within_one_bucket():
    lat_ns = np.concatenate([np.full(90, 10_000), np.full(10, 1_000_000)])  # 90 reads of 10 us, 10 of 1 ms
    h = histogram(lat_ns)
    assert percentile_us(h, 50) == pytest.approx(10, rel=0.1)
    assert percentile_us(h, 90) == pytest.approx(10, rel=0.1)
    assert percentile_us(h, 99) == pytest.approx(1000, rel=0.1)
    assert math.isnan(percentile_us(np.zeros(NUM_BUCKETS), 50))
    assert bucket_mid_ns(0) > 1


def _rank(rank, nbytes, ops, read_s, meta_s, compute_s, wall_s):
    return RankEpoch(rank, "n1", 0, samples=ops, bytes_read=nbytes, read_ops=ops, meta_ops=2, read_time_s=read_s,
                     meta_time_s=meta_s, compute_time_s=compute_s, wall_time_s=wall_s,
                     hist=histogram(np.full(ops, 1000)).tolist())


def test_aggregate_is_darshans_by_slowest():
    ranks = [_rank(0, 100 * MIB, 100, 1.0, 0.0, 2.0, 4.0), _rank(1, 100 * MIB, 100, 1.5, 0.5, 1.0, 4.0)]
    agg = aggregate(ranks)
    assert agg["io_time_slowest_s"] == 2.0  # rank 1: 1.5 s reading + 0.5 s metadata
    assert agg["bandwidth_mib_s"] == pytest.approx(100.0)  # 200 MiB / 2 s
    assert agg["iops"] == pytest.approx(100.0)
    assert agg["au"] == pytest.approx((2 / 4 + 1 / 4) / 2)
    assert agg["samples_per_s"] == pytest.approx(200 / 4)
    assert agg["bytes_read"] == 200 * MIB


def test_run_aggregate_sums_each_rank_over_epochs_first():
    e0 = [_rank(0, MIB, 10, 1.0, 0, 0, 1.0), _rank(1, MIB, 10, 3.0, 0, 0, 3.0)]
    e1 = [_rank(0, MIB, 10, 3.0, 0, 0, 3.0), _rank(1, MIB, 10, 0.5, 0, 0, 1.0)]
    run = aggregate_run([e0, e1])
    assert run["io_time_slowest_s"] == pytest.approx(4.0)  # rank 0: 1+3; rank 1: 3+0.5
    assert run["bytes_read"] == 4 * MIB


def test_darshan_size_bins_and_per_sample_counter_deltas():
    from ddlio import metrics
    from experiments.kernel import posix

    assert [metrics.size_bin(n) for n in (0, 100, 101, 1024, 1025, 16384, 65536, 2**20, 2**20 + 1, 2**31)] == [
        0, 0, 1, 1, 2, 3, 3, 4, 5, 9]
    assert metrics.SIZE_BIN_NAMES[3] == "POSIX_SIZE_READ_10K_100K"

    def text(calls, nbytes):
        return f"rchar: {nbytes}\nwchar: 0\nsyscr: {calls}\nsyscw: 0\nread_bytes: 0\n".encode()

    # counters as each snap saw them: a snap adds itself (1 call, its own length) to the next one's reading
    t0 = text(10, 1000)
    t1 = text(10 + 1 + 1, 1000 + len(t0) + 65536)  # one 64 KiB read between the first two snaps
    t2 = text(12 + 1 + 0, 1000 + len(t0) + 65536 + len(t1))  # nothing between the next two
    t3 = text(13 + 1 + 3, 1000 + len(t0) + 65536 + len(t1) + len(t2) + 3000)  # three reads, 3000 bytes
    assert posix.sample_deltas([t0, t1, t2, t3]) == [(1, 65536), (0, 0), (3, 3000)]
    h = posix.SizeHistogram.empty()
    for (calls, nbytes), lat in zip(posix.sample_deltas([t0, t1, t2, t3]), (5, 7, 9), strict=True):
        h.add_sample(calls, nbytes, lat)
    assert h.counts == [0, 3, 0, 1, 0, 0, 0, 0, 0, 0]  # the 3 calls of 1000 bytes on average: 100_1K
    assert h.approx == 3 and h.calls == 4 and h.time_ns == 14


def test_the_file_system_layer_aggregates_as_darshan_does():
    from ddlio.metrics import RankEpoch, aggregate, aggregate_run

    def rank(r, e, fs_bytes, t):
        return RankEpoch(r, "n", e, samples=2, bytes_read=1000, read_ops=2, read_time_s=t, hist=[0] * NUM_BUCKETS,
                         posix_reads=3, posix_bytes_read=fs_bytes, posix_read_time_s=t,
                         posix_size_hist=[0, 1, 2, 0, 0, 0, 0, 0, 0, 0], posix_size_approx=0)

    agg = aggregate([rank(0, 0, 2000, 0.5), rank(1, 0, 4000, 0.25)])
    assert (agg["posix_reads"], agg["posix_bytes_read"], agg["posix_read_time_s"]) == (6, 6000, 0.5)
    assert agg["amplification"] == 3.0 and agg["posix_size_hist"][:3] == [0, 2, 4]
    run = aggregate_run([[rank(0, 0, 2000, 0.5), rank(1, 0, 4000, 0.25)], [rank(0, 1, 2000, 0.5),
                                                                            rank(1, 1, 4000, 1.0)]])
    assert (run["posix_reads"], run["posix_bytes_read"], run["posix_read_time_s"]) == (12, 12000, 1.25)
    unseen = aggregate([RankEpoch(0, "n", 0, bytes_read=10, hist=[0] * NUM_BUCKETS)])
    assert unseen["posix_reads"] is None and unseen["amplification"] is None


def test_a_batch_is_binned_from_the_application_layer_only_where_the_layers_agree():
    from experiments.kernel import posix

    h = posix.SizeHistogram.empty()
    h.add_batch(3, 50 + 4096 + 2**20, [50, 4096, 2**20], [1, 2, 3])  # one call per sample of its size
    assert h.counts[:5] == [1, 0, 1, 0, 1] and (h.from_app, h.approx, h.calls, h.time_ns) == (3, 0, 3, 6)
    h.add_batch(2, 2 * 65536, [16384] * 4, [5] * 4)  # a sieve buffer: fewer, larger calls than samples
    assert h.counts[3] == 2 and (h.from_app, h.approx, h.calls, h.time_ns) == (3, 2, 5, 26)
    h.add_batch(4, 4 * 16384 + 100, [16384] * 4, [1] * 4)  # as many calls, more bytes: not the samples' sizes
    assert (h.from_app, h.approx) == (3, 6)
    h.add_batch(0, 0, [0, 0], [7, 7])  # served from memory (load=whole): no call, no file-system time
    assert (h.calls, h.time_ns) == (9, 30)


def _bin_file(tmp_path, count, size):
    from experiments.formats import FilePayload, get_format

    fmt = get_format("bin")
    path = tmp_path / f"d{fmt.suffix}"
    fmt.write(path, FilePayload(1, 0, np.full(count, size, dtype=np.int64), "random"))
    return fmt, path


@pytest.mark.parametrize(("span", "batches", "spans"), [
    (256, [(0, 32), (32, 64), (64, 96), (96, 100)], [(0, 100)]),  # 100 samples < one span: read at the close
    (32, [(0, 32), (32, 64), (64, 96), (96, 100)], [(0, 32), (32, 64), (64, 96), (96, 100)]),  # once per batch
    (64, [(0, 32), (32, 64), (64, 96), (96, 100)], [(0, 64), (64, 100)]),
    # batches out of order (a reader thread's): a batch that does not follow on ends the span before it
    (256, [(0, 32), (64, 96), (96, 100), (32, 64)], [(0, 32), (64, 100), (32, 64)]),
])
def test_a_lane_reads_its_thread_counters_per_span_of_batches_and_around_opens(tmp_path, span, batches, spans):
    from experiments.kernel import posix
    from experiments.kernel.lanes import EpochArrays, Lane

    if not posix.available():
        pytest.skip("no /proc I/O accounting here")
    fmt, path = _bin_file(tmp_path, 100, 16384)

    class OneFile:
        file_starts = np.array([0, 100])

    ids = np.random.default_rng(0).permutation(100)
    lane = Lane(fmt, [str(path)], 16384, trace=False, fs_layer=True)
    lane.span_samples = span
    ep = EpochArrays(OneFile(), ids, False, sizes_needed=True)
    proc = posix.IOCounter()
    io0 = proc.snap()
    got = sum(lane.read_range(k0, k1, ep) for k0, k1 in batches)
    lane.close_all()
    io1 = proc.snap()
    snaps = lane.take_snaps()
    texts, got_spans = snaps
    # the first text, one after the file's open (at the first batch's start: no text before), one per span
    assert len(texts) == 1 + 1 + len(spans) and got_spans == [(-1, -1), *spans]
    m = RankEpoch(0, "n", 0)
    posix.epoch_layer(m, io0, io1, [snaps], ep.lat, ep.size, per_sample=True)
    assert got == 100 * 16384 and list(ep.size) == [16384] * 100
    assert m.posix_size_from_app == 100 and m.posix_size_hist[3] == 100  # every sample: one 16 KiB call
    assert m.posix_reads == sum(m.posix_size_hist) and m.posix_bytes_read >= got  # and the index read at the open
    assert m.posix_read_time_s == pytest.approx(sum(ep.lat) / 1e9)
    os.close(lane.io_fd)


@pytest.mark.parametrize("kind", ["array", "list"])  # EpochArrays' int64 array; torch's epoch rebuilt as lists
def test_the_progress_watch_counts_returned_reads_over_its_window(kind):
    from array import array
    from types import SimpleNamespace

    from experiments.kernel.guards import ProgressWatch

    def lats(values: list[int]) -> list[int] | array:
        return array("q", values) if kind == "array" else list(values)

    def returned(ks: range | list[int]) -> None:
        for k in ks:
            ep.lat[k] = 5

    w = ProgressWatch(SimpleNamespace(rank=0), 60, [], tick_s=60)
    ep = SimpleNamespace(lat=lats([0] * 100))
    w.start_epoch(0, ep, [], window=8)
    assert w.returned(ep) == 0
    returned(range(10))
    returned([12])  # a read ahead of one still in flight (reader threads)
    assert w.returned(ep) == 11 and w._first == (ep, 10)
    returned([10, 11])
    returned(range(13, 100))
    assert w.returned(ep) == 100
    other = SimpleNamespace(lat=lats([5, 0, 0]))  # a new epoch's arrays start from their own first read
    assert w.returned(other) == 1
    w.stop()
