import math

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
