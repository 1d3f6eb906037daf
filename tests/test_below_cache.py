"""Caches below the client: every epoch says whether it was its dataset's first read since generation; a fresh
dataset is settled by untimed reads until their rate is steady (cache=cold, settle=true); storage_cold reads a
flush file before each epoch; analysis flags first reads that differ from repeats and never compares the two."""

from __future__ import annotations

import copy
import json
import os

import numpy as np
import pandas as pd
import pytest
from test_analysis import build_store, points_rows, result_record
from test_kernel import run_kernel

from analysis.below import excluded_note, first_read_frame, notes, store_notes
from analysis.query import analysis_frame
from experiments.kernel import cache as pagecache
from helpers import point


def test_the_first_read_is_claimed_once(tmp_path):
    assert pagecache.claim_first_read(tmp_path, "2026-01-01T00:00:00Z") is True
    assert pagecache.claim_first_read(tmp_path, "2026-01-01T00:00:00Z") is False
    assert pagecache.claim_first_read(tmp_path, "2026-01-01T00:00:01Z") is True  # regenerated: read anew


def test_settle_reads_until_the_rate_is_steady(tmp_path):
    files = [tmp_path / f"part-{i}" for i in range(2)]
    for i, f in enumerate(files):
        with open(f, "wb") as out:  # written durably, as generation does: dirty pages cannot be dropped
            out.write(np.random.default_rng(i).bytes(3 << 20))
            os.fsync(out.fileno())
    # any rate within 100x of the median counts as steady: the whole read, then exactly one window of probes
    s = pagecache.settle(files, probe_bytes=4 << 20, window=3, tolerance=100.0, budget_s=600)
    assert s["stable"] is True and len(s["passes_mib_s"]) == 4
    assert s["settle_bytes"] == (6 << 20) + 3 * (4 << 20)  # the probe stops at probe_bytes, inside the 2nd file
    assert pagecache.residency(files) <= 0.01  # nothing left in the page cache
    # no time for probes: only the whole read, and it says it did not get to a steady rate
    s = pagecache.settle(files, budget_s=0.0)
    assert s["stable"] is False and len(s["passes_mib_s"]) == 1 and s["settle_bytes"] == 6 << 20
    # rates that can never agree within 0%: probes until the budget runs out, then stops
    s = pagecache.settle(files, probe_bytes=1 << 20, window=3, tolerance=0.0, budget_s=0.5)
    assert s["stable"] is False and len(s["passes_mib_s"]) > 1 and s["settle_s"] < 5


def test_flush_file_and_read_through(tmp_path):
    path = tmp_path / "flush" / "f.bin"
    assert pagecache.ensure_flush_file(path, 3 << 20, block=1 << 20) is True
    assert path.stat().st_size == 3 << 20 and not list(path.parent.glob("*.tmp"))
    assert pagecache.ensure_flush_file(path, 3 << 20) is False  # reused
    data = path.read_bytes()
    assert len(set(data[:4096])) > 200  # incompressible, not zeros
    n, secs = pagecache.read_through([path])
    assert n == 3 << 20 and secs > 0
    assert pagecache.residency([path]) <= 0.01  # read through, not left in the page cache


def test_keys_of_points_measured_before_settle_existed(tmp_path):
    cold = point(tmp_path, "workload.cache=cold")
    old = point(tmp_path, "workload.cache=cold", "workload.settle=false")
    assert "settle" in cold.measurement_params() and "settle" not in old.measurement_params()
    assert cold.point_key != old.point_key and cold.dataset_key == old.dataset_key
    warm = point(tmp_path, "workload.cache=warm")
    assert "settle" not in warm.measurement_params() and "flush_size" not in warm.measurement_params()
    assert warm.point_key == point(tmp_path, "workload.cache=warm", "workload.settle=false").point_key
    # a point stored by an earlier ddlio (no settle field) keeps its key
    d = old.to_dict()
    d.pop("settle")
    d.pop("flush_size")
    from experiments.config import PointSpec

    assert PointSpec.from_dict(d).point_key == old.point_key
    sc = point(tmp_path, "workload.cache=storage_cold", "workload.flush_size=64MiB")
    assert sc.measurement_params()["flush_size"] == 64 << 20
    assert sc.point_key != point(tmp_path, "workload.cache=storage_cold", "workload.flush_size=32MiB").point_key


def test_bad_flush_size(tmp_path):
    from ddlio.errors import ConfigError

    with pytest.raises(ConfigError, match=r"workload.flush_size=1KiB .* out of range"):
        point(tmp_path, "workload.cache=storage_cold", "workload.flush_size=1KiB")


def test_without_settling_the_first_epoch_is_the_first_read(tmp_path):
    _, _, res = run_kernel(tmp_path, "workload.settle=false")
    assert res["settle"] is None
    assert [e["first_read"] for e in res["epochs"]] == [True, False]
    assert all(0 <= e["since_generation_s"] < 600 for e in res["epochs"])


def test_settling_reads_a_fresh_dataset_once_untimed(tmp_path):
    spec, plan, res = run_kernel(tmp_path)
    w = spec.workload
    assert res["settle"]["settled"] is True and res["settle"]["settle_bytes"] >= w.samples * w.sample_size
    assert [e["first_read"] for e in res["epochs"]] == [False, False]
    assert [e["cache"] for e in res["epochs"]] == ["cold", "cold"]
    # the dataset is no longer fresh: the next point does not settle it again
    _, _, again = run_kernel(tmp_path)
    assert again["settle"] == {"settled": False}


def test_storage_cold_reads_the_flush_file_before_every_epoch(tmp_path):
    spec, _, res = run_kernel(tmp_path, "workload.cache=storage_cold", "workload.flush_size=4MiB")
    flush = tmp_path / "data" / "flush" / f"flush-{4 << 20}.bin"
    assert flush.stat().st_size == 4 << 20
    for e in res["epochs"]:
        assert e["flush_bytes"] == 4 << 20 and e["flush_mib_s"] > 0
        assert e["cache"] == "cold" and e["residency_after"] <= 0.01  # and the client's cache evicted as cold
    assert res["settle"] is None  # every epoch is flushed: nothing to settle


def test_old_datasets_say_unknown(tmp_path):
    from experiments.dataset import DatasetPlan, ensure_dataset, load_manifest, write_json_atomic
    from experiments.run.job import step_runner as _step_runner
    from helpers import mpi_generation
    from lustre import Layout

    spec = point(tmp_path)
    plan = DatasetPlan.from_point(spec)
    ensure_dataset(plan, Layout(), mpi_generation(spec, tmp_path), spec.ranks)
    m = load_manifest(plan)
    m.pop("tracks_reads")  # as a dataset generated by an earlier ddlio
    write_json_atomic(os.path.join(plan.directory, "manifest.json"), m)
    ks = {"point": spec.to_dict(), "plan": plan.to_dict(), "result_path": str(tmp_path / "res.json")}
    write_json_atomic(tmp_path / "k.json", ks)
    _step_runner(spec, tmp_path)("experiments.kernel", [str(tmp_path / "k.json")], spec.ranks, "kernel")
    res = json.loads((tmp_path / "res.json").read_text())
    assert res["settle"] is None and [e["first_read"] for e in res["epochs"]] == [None, None]


# -------------------------------------------------------------------------------------------------- analysis
def _with_epochs(rec: dict, bandwidths: list[float], first: list[bool | None]) -> dict:
    rec = copy.deepcopy(rec)
    e0 = rec["epochs"][0]
    rec["epochs"] = [{**e0, "epoch": i, "bandwidth_mib_s": bw, "first_read": f}
                     for i, (bw, f) in enumerate(zip(bandwidths, first, strict=True))]
    return rec


def _store_with_first_reads(tmp_path, first_bw: float):
    """hdf5: repeat 0 holds the first read (epoch 0) then a repeat; repeats 1-4 repeats only; npz: repeats only."""
    store = build_store(tmp_path, [])
    base = point(tmp_path).to_dict()
    rng = np.random.default_rng(3)
    for fmt, bw in (("hdf5", 3000.0), ("npz", 2000.0)):
        for rep in range(5):
            rec = result_record(base, bandwidth=bw, lustre=False, format=fmt, repeat=rep, stripe_count=1)
            bws = [float(v) for v in rng.normal(bw, bw * 0.015, 2)]
            first = [False, False]
            if fmt == "hdf5" and rep == 0:
                bws[0], first[0] = first_bw, True
            assert store.record(_with_epochs(rec, bws, first))
    return store


def test_a_first_read_unlike_its_repeats_is_flagged(tmp_path):
    store = _store_with_first_reads(tmp_path, first_bw=650.0)
    pts = analysis_frame(store)
    assert pts.groupby("format")["first_read"].sum().to_dict() == {"hdf5": 1, "npz": 0}
    said = store_notes(store, pts)
    assert len(said) == 1
    assert said[0].startswith("hdf5/shared 1N-1P-1OST")
    assert "a cache below the client served the repeats: first read 650 MiB/s, repeats 29" in said[0]
    # within the repeats' noise: nothing to say
    (tmp_path / "b").mkdir()
    close = _store_with_first_reads(tmp_path / "b", first_bw=3010.0)
    assert store_notes(close, analysis_frame(close)) == []


def test_first_read_frame_numbers():
    pts = points_rows([{"format": "hdf5", "repeat": r, "bandwidth_mib_s": 1.0} for r in range(3)])
    ep = pd.DataFrame({"point_key": ["k0", "k0", "k1", "k1", "k2", "k2"], "epoch": [0, 1] * 3,
                       "first_read": [True, False, False, False, False, None],
                       "bandwidth_mib_s": [600.0, 3000.0, 3100.0, 2900.0, 3000.0, 1.0]})
    got = first_read_frame(pts, ep)
    assert len(got) == 1
    r = got.iloc[0]
    assert (r["first_n"], r["repeats_n"]) == (1, 4)  # the epoch of unknown state is left out
    assert r["first_mib_s"] == 600.0 and r["repeats_mib_s"] == 3000.0
    assert r["repeats_std"] == pytest.approx(np.std([3000, 3100, 2900, 3000], ddof=1))
    assert r["ratio"] == pytest.approx(5.0) and bool(r["flagged"])
    assert len(notes(got)) == 1


def test_first_read_frame_names_the_configuration_that_holds_the_first_read():
    """Two configurations listed in another order than their columns sort (nodes before stripe count): each
    epoch is counted in its own point's configuration, and the flagged one is named."""
    rows = [{"stripe_count": 1, "nodes": 2, "repeat": r, "bandwidth_mib_s": 1.0} for r in range(3)]
    rows += [{"stripe_count": 4, "nodes": 1, "repeat": r, "bandwidth_mib_s": 1.0} for r in range(3)]
    pts = points_rows(rows)
    ep = pd.DataFrame({"point_key": [f"k{i}" for i in range(6) for _ in (0, 1)], "epoch": [0, 1] * 6,
                       "first_read": [True] + [False] * 11,
                       "bandwidth_mib_s": [600.0] + [3000.0] * 5 + [2000.0] * 6})
    got = first_read_frame(pts, ep).set_index("label")
    assert list(got.index) == ["hdf5/shared 2N-2P-1OST"]  # only it has a first read
    assert (got.iloc[0]["first_mib_s"], got.iloc[0]["repeats_mib_s"], got.iloc[0]["repeats_n"]) == (600.0, 3000.0, 5)


def test_guidelines_never_compare_a_first_read_with_repeats(tmp_path):
    from analysis import guidelines as G

    store = _store_with_first_reads(tmp_path, first_bw=650.0)
    pts = analysis_frame(store)
    kept, said = excluded_note(pts)
    assert len(kept) == len(pts) - 1 and "1 point(s) include their dataset's first read" in said
    lay, fmt, _ = G.compute(pts, G.Settings(n_boot=200))
    hdf5 = fmt.iloc[0]
    assert hdf5["best"] == "hdf5"  # 4 repetitions of repeats, not dragged down by the first read
    text = G.markdown(lay, fmt, [], G.Settings(n_boot=200), G.below_notes(store, pts))
    assert "## Points left out, and caches below the client" in text and "first read 650 MiB/s" in text


def test_summary_and_report_say_it(tmp_path, analysis):
    _store_with_first_reads(tmp_path, first_bw=650.0)
    p = analysis("summary", "--db", str(tmp_path / "r.db"))
    assert p.returncode == 0, p.stderr
    assert "note: hdf5/shared 1N-1P-1OST: a cache below the client served the repeats" in p.stdout
    p = analysis("report", "--db", str(tmp_path / "r.db"), "--out", str(tmp_path / "r.html"))
    assert p.returncode == 0, p.stderr
    html = (tmp_path / "r.html").read_text()
    assert "Cache below the client." in html and "first read 650 MiB/s" in html
