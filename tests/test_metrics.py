import math

import numpy as np
import pytest

from experiments.metrics import (
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
