"""ddlio.identity (configurations and labels), ddlio.evidence (best by mean of repetitions), analysis.validity and
the per-point layout request: the findings of issue 21, each pinned by a test that fails on the code before it."""

from __future__ import annotations

import copy

import pandas as pd

from analysis.validity import valid_only, verdicts
from ddlio.evidence import best_of
from ddlio.identity import cache_text, config_key, knobs, labels
from ddlio.records import ResultRecord
from experiments.kinds.train import point_layout
from experiments.run.progress import result_line

BASE = {"format": "tfrecord", "format_options": {"layout": "raw", "verify_crc": True}, "access": "shared",
        "stripe_count": 1, "stripe_size": 1048576, "nodes": 1, "ppn": 1, "repeat": 0, "seed": 42, "samples": 64,
        "sample_size": 3072, "sample_size_stdev": 0, "samples_per_file": 32, "batch_size": 8, "epochs": 2,
        "compute_time": 0.0, "cache": "cold", "workload_name": "tiny", "data_root": "/d", "db": "/r.db",
        "cluster": {"name": "local", "launch": "mpiexec -n {ranks}", "env": {}, "timeout_min": 30.0},
        "fs_type": "ext4", "striping_applicable": False, "overrides": ["repeat=0"], "reader": "native",
        "read_threads": 0, "settle": True, "flush_size": 0, "point_key": "k0", "dataset_key": "d0"}


def point(**change) -> dict:
    p = copy.deepcopy(BASE)
    for k, v in change.items():
        if k.startswith("opt_"):
            p["format_options"][k[4:]] = v
        else:
            p[k] = v
    return p


def test_repetitions_share_a_key_and_a_label_and_nothing_else_does():
    pts = [point(repeat=r, point_key=f"k{r}", overrides=[f"repeat={r}"]) for r in range(3)]
    pts += [point(opt_layout="example"), point(reader="tf"), point(read_threads=4), point(cache="storage_cold"),
            point(sample_shape=[32, 32, 3]), point(compute_time=0.01), point(cluster={**BASE["cluster"],
                                                                                        "timeout_min": 9.0})]
    keys = [config_key(p) for p in pts]
    assert len(set(keys[:3])) == 1 and keys[-1] == keys[0]  # repeat and the time limit change no configuration
    assert len(set(keys[3:-1])) == 6
    lab = labels(pts)
    assert lab[0] == lab[1] == lab[2] == lab[-1]
    assert len(set(lab[3:-1])) == 6 and not set(lab[3:-1]) & {lab[0]}
    assert lab[3].startswith("tfrecord/shared 1N-1P-1OST") and "layout=example" in lab[3]
    assert "reader=tf" in lab[4] and "rt=4" in lab[5] and "storage_cold" in lab[6] and "shape=32x32x3" in lab[7]
    assert labels([pts[0]]) == ["tfrecord/shared 1N-1P-1OST"]  # alone, the paper's label


def test_two_configurations_that_the_shown_knobs_cannot_tell_apart_still_get_two_labels():
    a, b = point(), point(cluster={**BASE["cluster"], "env": {"X": "1"}})
    la, lb = labels([a, b])
    assert la != lb


def test_a_knob_at_a_later_default_is_no_new_configuration():
    assert config_key(point()) == config_key(point(compute="sleep", compute_threads=0))
    assert knobs(point(cache="storage_cold"))["cache"] == "storage_cold"


def test_cache_is_said_as_asked_and_unknown_is_explained():
    assert cache_text("storage_cold", "cold", "ext4").startswith("storage_cold")
    assert cache_text("cold", "cold", "ext4") == "cold (verified)"
    assert "tmpfs keeps its files in memory" in cache_text("cold", "unknown", "tmpfs")
    rec = ResultRecord("k", {"bandwidth_mib_s": 1.0, "iops": 2.0, "cache": "cold"},
                       {"point": point(cache="storage_cold")})
    assert "cache storage_cold" in result_line(rec) and "cache cold" not in result_line(rec)


def test_best_is_the_mean_of_repetitions_and_overlap_is_cannot_decide():
    # issue 21's case: one lucky repetition (330.1) of a configuration whose mean is 204.3
    r = best_of({"a": [330.1, 150.0, 132.8], "b": [190.0, 200.0, 210.0]})
    assert r.configurations == 2 and r.best.key in ("a", "b")
    assert abs(r.best.mean - max(204.3, 200.0)) < 0.1 and not r.decided and r.tied
    far = best_of({"a": [100.0, 101.0, 99.0], "b": [10.0, 11.0, 9.0]})
    assert far.best.key == "a" and far.decided and far.best.text().endswith("(n=3)")
    one = best_of({"a": [5.0]})
    assert "no interval" in one.best.text() and "[" not in one.best.text()


def frame(rows: list[dict]) -> pd.DataFrame:
    base = dict(config_key="c", cache_policy="cold", cache="cold", first_read=False, samples=64, sample_size=3072,
                ranks=1, batch_size=8, epochs=2, stripe_count=1, stripe_size=1048576, striping_applicable=False,
                fs_type="ext4", bandwidth_mib_s=100.0, env_id="e")
    return pd.DataFrame([{**base, **r} for r in rows])


def test_validity_names_every_reason():
    df = frame([{}, dict(cache="unknown"), dict(first_read=True), dict(samples=4), dict(stripe_count=4,
                config_key="s"), dict(config_key="v", bandwidth_mib_s=1.0), dict(config_key="v",
                bandwidth_mib_s=500.0)])
    v = verdicts(df, {"e": 25e9})
    assert v["validity"].tolist() == ["valid"] + ["invalid"] * 6
    r = v["invalid_reasons"].tolist()
    assert "cache not verified cold" in r[1] and "fits in node memory" in r[1]
    assert r[2] == "first read after generation" and "fewer than 2 steps" in r[3]
    assert "striping requested (count 4" in r[4] and "not applied on ext4" in r[4]
    assert "repetitions vary" in r[5]
    kept, note = valid_only(df.assign(**v))
    assert len(kept) == 1 and note.startswith("6 of 7 points left out as invalid")


def test_a_point_stores_its_own_stripe_request_when_it_shares_a_dataset():
    shared = {"applicable": False, "fs_type": "ext4", "requested": {"stripe_count": 1, "stripe_size": 1048576}}
    mine = point_layout(shared, {"stripe_count": 4, "stripe_size": 1048576})
    assert mine["requested"] == {"stripe_count": 4, "stripe_size": 1048576}
    assert mine["dataset_requested"] == {"stripe_count": 1, "stripe_size": 1048576}
    assert "dataset_requested" not in point_layout(shared, shared["requested"])


def test_format_options_are_compared_within_their_format():
    a, b = point(), point(format="hdf5", format_options={"driver": "sec2"})
    assert labels([a, b]) == ["tfrecord/shared 1N-1P-1OST", "hdf5/shared 1N-1P-1OST"]
