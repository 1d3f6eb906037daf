"""The analysis package: frames (assert_frame_equal), figures (axes, labels, limits), guidelines on stores with
planted effects (they must be recovered), read-only query and export; stores are real SQLite files in tmp_path."""

from __future__ import annotations

import copy
import hashlib
import json
import sqlite3
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from pandas.testing import assert_frame_equal

from analysis import frames as F
from analysis import guidelines as G
from analysis.query import CONFIG_COLUMNS, analysis_frame, hist_frame, parse_hists
from analysis.validity import MIN_IO_S
from ddlio.errors import DdlioError
from ddlio.store import Store
from helpers import point

# ----------------------------------------------------------------------------------------------- store builders


def result_record(base: dict, *, bandwidth: float, lustre: bool = True, hist_bucket: int = 60,
                  run_dir: str | None = None, finished: str = "2026-01-01T00:00:00Z",
                  amplification: float | None = None, **config) -> dict:
    """A result record of the shape the kernel writes (tests/test_store.py::fake_result), for the point ``base``
    changed by ``config`` (format, access, stripe_count, nodes, ppn, repeat ...); bandwidth in MiB/s."""
    p = copy.deepcopy(base)
    p.update(striping_applicable=lustre, fs_type="lustre" if lustre else "ext4")  # the config as its layout says
    p.update(config)
    p["ranks"] = p["nodes"] * p["ppn"]
    p["point_key"] = hashlib.sha256(json.dumps(
        [p[k] for k in ("format", "access", "stripe_count", "stripe_size", "nodes", "ppn", "repeat", "sample_size")]
    ).encode()).hexdigest()[:20]
    nbytes = p["samples"] * p["sample_size"]
    # the slowest rank's timed I/O: as long as a point worth keeping measures (a shorter one is invalid: MIN_IO_S)
    io = max(nbytes / 2**20 / bandwidth, 2 * MIN_IO_S)
    hist = [0] * 160
    hist[hist_bucket] = p["samples"]
    epoch = {
        "epoch": 0, "samples": p["samples"], "bytes_read": nbytes, "bytes_planned": nbytes, "read_ops": p["samples"],
        "meta_ops": 2, "os_read_bytes": nbytes, "io_time_slowest_s": io, "io_time_mean_s": io,
        "bandwidth_mib_s": bandwidth, "iops": p["samples"] / io, "wall_time_s": io * 1.1, "compute_time_s": 0.0,
        "samples_per_s": p["samples"] / (io * 1.1), "au": 0.0, "lat_p50_us": 10.0, "lat_p90_us": 20.0,
        "lat_p99_us": 30.0, "cache": "cold", "residency_before": 1.0, "residency_after": 0.0, "cache_note": "",
        "hist": hist, "ranks": [],
    }
    if amplification is not None:  # the file-system layer: what the file system served
        epoch.update(posix_reads=p["samples"], posix_bytes_read=round(nbytes * amplification),
                     amplification=amplification)
    totals = {k: v for k, v in epoch.items() if k not in ("epoch", "hist", "ranks", "cache_note")}
    layout = {"applicable": lustre, "reason": "" if lustre else "ext4 is not Lustre: striping not applied",
              "requested": {"stripe_count": p["stripe_count"]}, "applied": {"stripe_count": p["stripe_count"]}}
    return {
        "kind": "ddlio.result", "point_key": p["point_key"], "point": p, "ranks": p["ranks"], "nodes": ["n1"],
        "hosts": ["h"], "mpi_library": "MPICH", "totals": totals, "epochs": [epoch], "run_dir": run_dir,
        "env": {"host": "h", "os": "Linux", "packages": {"numpy": "2"}, "git": {"commit": "abc123", "dirty": False}},
        "fs": {"type": "lustre" if lustre else "ext4"}, "layout": layout, "finished_utc": finished,
    }


def build_store(tmp_path: Path, rows: list[dict], name: str = "r.db") -> Store:
    """A SQLite store under tmp_path holding one completed point per row (keys as :func:`result_record`)."""
    base = point(tmp_path).to_dict()
    store = Store(str(tmp_path / name))
    for r in rows:
        assert store.record(result_record(base, **r))
    return store


PEAK_AT_8 = {1: 100.0, 2: 180.0, 4: 300.0, 8: 420.0, 16: 350.0, 32: 250.0}


def noisy(rng: np.random.Generator, value: float, reps: int, rel: float) -> list[float]:
    return list(value * (1 + rel * rng.standard_normal(reps)))


def peak_rows(reps: int = 4, rel: float = 0.03, lustre: bool = True, **config) -> list[dict]:
    """Bandwidth rising with stripe count up to 8 then falling, ``reps`` repetitions with ``rel`` relative noise."""
    rng = np.random.default_rng(7)
    return [dict(stripe_count=s, repeat=i, bandwidth=bw, lustre=lustre, **config)
            for s, v in PEAK_AT_8.items() for i, bw in enumerate(noisy(rng, v, reps, rel))]


# ------------------------------------------------------------------------------------------------------ frames


def points_rows(rows: list[dict]) -> pd.DataFrame:
    """A points frame as analysis_frame returns it, from a few hand-written rows."""
    defaults = dict(zip(CONFIG_COLUMNS, ["hdf5", "{}", "shared", 1, 1048576, 1, 1, 1, "tiny", 64, 16384, 0, 32, 2,
                                         8, 2, 0.0, "cold", True, 42, "local"], strict=True))
    out = []
    for i, r in enumerate(rows):
        d = {**defaults, "point_key": f"k{i}", "label": "", "repeat": 0, "fs_type": "lustre",
             "striping_applicable": True, "run_dir": None, "cache": "cold", **r}
        d["ranks"] = d["nodes"] * d["ppn"]
        out.append(d)
    return pd.DataFrame(out)


def test_configs_collapse_repetitions_into_mean_std_n():
    pts = points_rows([
        dict(stripe_count=1, repeat=0, bandwidth_mib_s=100.0), dict(stripe_count=1, repeat=1, bandwidth_mib_s=110.0),
        dict(stripe_count=4, repeat=0, bandwidth_mib_s=300.0, nodes=2, ppn=2),
    ])
    got = F.configs(pts, ["bandwidth_mib_s"])
    want = pd.DataFrame({
        "label": ["1N-1P-1OST", "2N-4P-4OST"], "n": [2, 1], "bandwidth_mib_s_mean": [105.0, 300.0],
        "bandwidth_mib_s_std": [np.std([100.0, 110.0], ddof=1), np.nan],
    })
    assert_frame_equal(got[["label", "n", "bandwidth_mib_s_mean", "bandwidth_mib_s_std"]], want,
                       check_dtype=False)
    assert set(CONFIG_COLUMNS) <= set(got.columns)


def test_labels_name_what_varies_besides_nodes_ranks_stripes():
    pts = points_rows([dict(stripe_count=1, sample_size=16384, bandwidth_mib_s=1.0),
                       dict(stripe_count=1, sample_size=1048576, bandwidth_mib_s=2.0),
                       dict(stripe_count=0, sample_size=16384, bandwidth_mib_s=3.0)])
    labels = F.configs(pts, ["bandwidth_mib_s"])["label"].tolist()
    assert labels == ["1N-1P-defaultOST 16KiB", "1N-1P-1OST 16KiB", "1N-1P-1OST 1MiB"]


def test_stripe_frame_weights_repetitions():
    pts = points_rows([
        dict(stripe_count=s, repeat=r, bandwidth_mib_s=bw, format=f)
        for f, s, r, bw in [("hdf5", 1, 0, 10.0), ("hdf5", 1, 1, 20.0), ("hdf5", 8, 0, 40.0), ("npz", 1, 0, 5.0)]
    ])
    got = F.stripe_frame(F.configs(pts), "bandwidth_mib_s")
    want = pd.DataFrame({"access": ["shared"] * 3, "nodes": [1, 1, 1], "series": ["hdf5", "hdf5", "npz"],
                         "stripe_count": [1, 8, 1], "mean": [15.0, 40.0, 5.0],
                         "std": [np.std([10.0, 20.0], ddof=1), np.nan, np.nan], "n": [2, 1, 1]})
    assert_frame_equal(got, want, check_dtype=False)


def test_best_per_scale_picks_the_best_layout_at_each_node_count():
    pts = points_rows([dict(stripe_count=s, nodes=n, bandwidth_mib_s=bw)
                       for n, s, bw in [(1, 1, 50.0), (1, 4, 40.0), (2, 1, 60.0), (2, 4, 90.0)]])
    best = F.best_per_scale(F.configs(pts))
    assert_frame_equal(best[["series", "nodes", "layout", "bandwidth_mib_s_mean"]],
                       pd.DataFrame({"series": ["hdf5/shared"] * 2, "nodes": [1, 2], "layout": ["1OST", "4OST"],
                                     "bandwidth_mib_s_mean": [50.0, 90.0]}), check_dtype=False)
    values, layouts = F.heatmap_frame(best)
    assert values.loc["hdf5/shared", 2] == 90.0 and layouts.loc["hdf5/shared", 1] == "1OST"


def test_latency_frame_sums_histograms_per_series():
    pts = points_rows([dict(format="hdf5", bandwidth_mib_s=1.0), dict(format="hdf5", bandwidth_mib_s=1.0),
                       dict(format="npz", bandwidth_mib_s=1.0)])
    keys = pd.Series(["k0", "k1", "k2"])
    hists = np.zeros((3, 160), dtype=np.int64)
    hists[0, 40], hists[1, 41], hists[2, 44] = 3, 1, 2
    got = F.latency_frame(pts, keys, hists)
    want = pd.DataFrame({
        "series": ["hdf5/shared", "hdf5/shared", "npz/shared"], "bucket": [40, 41, 44],
        "latency_us": [2 ** (40.5 / 4) / 1e3, 2 ** (41.5 / 4) / 1e3, 2 ** (44.5 / 4) / 1e3],
        "upper_us": [2 ** (41 / 4) / 1e3, 2 ** (42 / 4) / 1e3, 2 ** (45 / 4) / 1e3],
        "reads": [3, 1, 2], "fraction": [0.75, 0.25, 1.0], "cdf": [0.75, 1.0, 1.0],
    })
    assert_frame_equal(got, want, check_dtype=False)


def test_parse_hists_fixed_and_ragged():
    assert parse_hists(["[1, 2]", "[3, 4]"]).tolist() == [[1, 2], [3, 4]]
    assert parse_hists(["[1]", "[3, 4, 5]", None]).tolist() == [[1, 0, 0], [3, 4, 5], [0, 0, 0]]


def test_trace_frame_reads_aliases_and_names_missing_columns(tmp_path):
    p = tmp_path / "trace.csv"
    p.write_text("rank,start,duration,file,offset,bytes,op\n1,0.5,0.1,f,4096,4096,read\n0,0.2,0.1,f,0,4096,read\n"
                 "0,0.3,0.1,f,0,0,open\n")
    got = F.trace_frame(p)
    want = pd.DataFrame({"rank": [0, 1], "start_s": [0.2, 0.5], "offset": [0, 4096], "size": [4096, 4096],
                         "op": ["read", "read"], "file": ["f", "f"]})
    assert_frame_equal(got, want, check_dtype=False)
    bad = tmp_path / "trace_bad.csv"
    bad.write_text("rank,offset\n0,0\n")
    with pytest.raises(ValueError, match=r"lacks column\(s\) start_s .*size"):
        F.trace_frame(bad)


def test_analysis_frame_reads_completed_points_and_filters(tmp_path):
    store = build_store(tmp_path, [dict(stripe_count=1, repeat=0, bandwidth=100.0),
                                   dict(stripe_count=4, repeat=0, bandwidth=200.0, format="npz")])
    df = analysis_frame(store)
    assert sorted(df["bandwidth_mib_s"]) == [100.0, 200.0]
    assert df["striping_applicable"].all() and set(df["fs_type"]) == {"lustre"}
    assert analysis_frame(store, "format == 'npz'")["stripe_count"].tolist() == [4]
    with pytest.raises(DdlioError, match="unknown column `nonexistent_column`(.|\n)*e.g.(.|\n)*columns: "):
        analysis_frame(store, "nonexistent_column > 3")
    keys, hists = hist_frame(store)
    assert hists.shape == (2, 160) and hists.sum(axis=1).tolist() == [64, 64]


def test_analysis_frame_reads_per_configuration_what_one_query_of_every_point_gives(tmp_path):
    """The columns a configuration's points share are read from one of them (``config_digest``); the frame equals
    the plain read of every column of every point, rows a writer has not given a digest yet included."""
    from analysis.query import ANALYSIS_COLUMNS, DERIVED_COLUMNS, METRIC_COLUMNS, with_identity

    rows = [dict(stripe_count=c, repeat=r, bandwidth=100.0 + 10 * c + r, format=f, lustre=f == "hdf5",
                 amplification=None if f == "npz" and r == 0 else 1.25)
            for f in ("hdf5", "npz") for c in (1, 4) for r in range(3)]
    store = build_store(tmp_path, rows)
    with sqlite3.connect(tmp_path / "r.db") as conn:
        digests = dict(conn.execute("SELECT point_key, config_digest FROM points").fetchall())
        conn.execute("UPDATE points SET config_digest = NULL WHERE repeat = 2")  # as if not upgraded yet
        cols = [c for c in ANALYSIS_COLUMNS if c not in DERIVED_COLUMNS and c not in ("config", "label")]
        ref = pd.read_sql_query(f"SELECT {', '.join(cols)}, CAST(config AS TEXT) AS config FROM points "
                                "WHERE status = 'completed' ORDER BY point_key", conn)
    assert len(set(digests.values())) == 4 and None not in digests.values()  # one per configuration
    ref["striping_applicable"] = ref["striping_applicable"].astype("boolean")
    ref[METRIC_COLUMNS] = ref[METRIC_COLUMNS].astype("float64")
    ref = with_identity(ref, {})
    ref = ref[[c for c in ANALYSIS_COLUMNS if c not in DERIVED_COLUMNS] + list(DERIVED_COLUMNS)]
    got = analysis_frame(store)
    _equal_but_shared_texts(got, ref)
    assert got["config_key"].nunique() == 4 and got["label"].nunique() == 4
    # what a configuration's points share is one text object, not a copy per point: one per configuration's
    # digest (and one for each of the four rows read alone, without one)
    assert len({id(v) for v in got["format_options"]}) == 4 + 4 and len({id(v) for v in got["label"]}) == 4
    _equal_but_shared_texts(analysis_frame(store, "format == 'npz' and repeat < 2").reset_index(drop=True),
                            ref[(ref["format"] == "npz") & (ref["repeat"] < 2)].reset_index(drop=True))


def _equal_but_shared_texts(got: pd.DataFrame, ref: pd.DataFrame) -> None:
    """``got`` equals ``ref`` value for value, and type for type but for text: a text column may be one of
    objects (shared among the points) where the plain read gives ``str``."""
    assert_frame_equal(got, ref, check_dtype=False)
    for c in ref.columns:
        if got[c].dtype != ref[c].dtype:
            assert got[c].dtype == object and pd.api.types.is_string_dtype(ref[c].dtype), c


def test_histograms_per_configuration_are_the_sums_of_their_points(tmp_path):
    from analysis.query import per_configuration

    rows = [dict(stripe_count=c, repeat=r, bandwidth=100.0 + r, hist_bucket=50 + 10 * c + r)
            for c in (1, 4) for r in range(3)]
    store = build_store(tmp_path, rows)
    pts = analysis_frame(store)
    keys, hists = hist_frame(store, pts["point_key"].tolist())
    ckeys, chists = hist_frame(store, pts["point_key"].tolist(), by=per_configuration(pts))
    assert len(keys) == 6 and len(ckeys) == 2 and ckeys.name == "config_key"
    of = dict(zip(pts["point_key"], pts["config_key"], strict=True))
    for i, ck in enumerate(ckeys):
        mine = [j for j, k in enumerate(keys) if of[k] == ck]
        assert len(mine) == 3 and chists[i].tolist() == hists[mine].sum(axis=0).tolist()
    assert_frame_equal(F.latency_frame(pts, keys, hists), F.latency_frame(pts, ckeys, chists))
    some = pts["point_key"].tolist()[:2]  # a subset (as --where leaves): only its points are summed
    sk, sh = hist_frame(store, some, by=per_configuration(pts))
    assert int(sh.sum()) == int(hists[[keys.tolist().index(k) for k in some]].sum())


def test_bare_config_is_the_same_by_literal_search_as_by_substitution():
    from analysis.configs import bare as _bare
    from analysis.configs import bare_slow as _bare_slow

    base = {"format": "hdf5", "repeat": 3, "cluster": {"name": "slurm"}, "overrides": ["a=1", 'b="x"'],
            "dataset_key": "d01", "samples": 8, "point_key": "00ff"}
    keys = list(base)
    texts = [json.dumps(base), json.dumps({k: base[k] for k in reversed(keys)}), json.dumps({"repeat": 1}),
             json.dumps({**base, "cluster": {"repeat": 2}}), json.dumps({"a": 1, "repeat": "x"}), "{}",
             json.dumps({k: base[k] for k in keys if k != "overrides"}),
             json.dumps({k: base[k] for k in ["format", "samples", "repeat", "point_key"]})]
    for t in texts:
        assert _bare(t) == _bare_slow(t)
    assert json.loads(_bare(texts[0])) == {"format": "hdf5", "cluster": {"name": "slurm"}, "samples": 8}
    twice = json.dumps({**base, "cluster": {"repeat": 2, "x": 1}})  # "repeat" twice as a member: left as it is
    assert _bare(twice) == _bare_slow(twice) == twice


def test_failed_points_are_labelled_as_summary_labels_them(tmp_path):
    from analysis.query import failed_frame, status_counts, summary_frame

    store = build_store(tmp_path, [dict(stripe_count=1, repeat=0, bandwidth=100.0),
                                   dict(stripe_count=4, repeat=0, bandwidth=200.0, format="npz")])
    with sqlite3.connect(tmp_path / "r.db") as conn:  # one of them failed
        conn.execute("UPDATE points SET status = 'failed', error = 'boom' WHERE format = 'npz'")
    summary = summary_frame(store)
    want = summary[summary["status"] == "failed"][["point_key", "label", "repeat", "error"]].reset_index(drop=True)
    for completed in (None, analysis_frame(store)):
        got = failed_frame(store, completed)
        assert got["label"].tolist() == want["label"].tolist()
        assert got["label"].iloc[0].startswith("npz/shared 1N-1P-4OST")
        assert got["point_key"].tolist() == want["point_key"].tolist() and got["error"].tolist() == ["boom"]
    assert status_counts(store) == {"completed": 1, "failed": 1}


# ----------------------------------------------------------------------------------------------- guidelines


def test_guideline_recovers_a_peak_at_stripe_8(tmp_path):
    store = build_store(tmp_path, peak_rows())
    lay = G.layout_guidelines(analysis_frame(store))
    assert len(lay) == 1
    r = lay.iloc[0]
    assert (r["verdict"], r["best"], r["best_stripe_count"], r["baseline"]) == ("recommend", "8OST", 8, "1OST")
    assert r["runner_up"] == "16OST"
    assert r["gain_lo_pct"] < 320 < r["gain_hi_pct"]  # planted: 420 / 100 - 1 = +320%
    assert r["gain_lo_pct"] > 250 and r["best_lo"] < r["best_mean"] < r["best_hi"]


def test_guideline_separates_scenarios_by_nodes_and_keeps_a_falling_baseline(tmp_path):
    rng = np.random.default_rng(3)
    falling = [dict(stripe_count=s, repeat=i, bandwidth=bw, nodes=4)
               for s, v in {1: 400.0, 4: 200.0, 16: 100.0}.items() for i, bw in enumerate(noisy(rng, v, 3, 0.02))]
    lay = G.layout_guidelines(analysis_frame(build_store(tmp_path, peak_rows() + falling)))
    got = lay.set_index("nodes")[["verdict", "best"]]
    assert got.loc[1].tolist() == ["recommend", "8OST"]
    assert got.loc[4].tolist() == ["keep baseline", "1OST"]


def test_guideline_cannot_decide_on_overlap_missing_repeats_or_not_lustre(tmp_path):
    same = [dict(stripe_count=s, repeat=i, bandwidth=bw, access="fpp")
            for s, values in ((1, (280.0, 300.0, 320.0)), (4, (290.0, 310.0, 300.0))) for i, bw in enumerate(values)]
    once = [dict(stripe_count=s, repeat=0, bandwidth=v, nodes=2) for s, v in PEAK_AT_8.items()]
    ext4 = peak_rows(lustre=False, format="npz")
    lay = G.layout_guidelines(analysis_frame(build_store(tmp_path, same + once + ext4)))
    by = {(r.access, r.format, r.nodes): r for r in lay.itertuples()}
    assert by["fpp", "hdf5", 1].verdict == "cannot decide" and "intervals overlap" in by["fpp", "hdf5", 1].reason
    assert by["shared", "hdf5", 2].verdict == "cannot decide"
    assert "repetitions missing" in by["shared", "hdf5", 2].reason
    assert by["shared", "npz", 1].verdict == "cannot decide"
    assert "striping not applicable on ext4" in by["shared", "npz", 1].reason
    stmts = G.statements(lay, G.format_guidelines(analysis_frame(build_store(tmp_path, ext4, "b.db"))),
                         analysis_frame(build_store(tmp_path, ext4, "c.db")))
    assert any("cannot be decided" in s["text"] for s in stmts)


def test_format_guideline_recovers_a_lead_from_two_nodes(tmp_path):
    rng = np.random.default_rng(11)
    rows = []
    for n in (1, 2, 4):
        for fmt, v in (("hdf5", 200.0), ("tfrecord", 200.0 if n == 1 else 400.0)):
            for s in (1, 4):
                rows += [dict(format=fmt, nodes=n, stripe_count=s, repeat=i, bandwidth=bw)
                         for i, bw in enumerate(noisy(rng, v * (1.2 if s == 4 else 1.0), 4, 0.03))]
    pts = analysis_frame(build_store(tmp_path, rows))
    lay, fmt, stmts = G.compute(pts, G.Settings())
    by = fmt.set_index("nodes")
    assert by.loc[1, "verdict"] == "cannot decide" and "overlap" in by.loc[1, "reason"]
    assert by.loc[2, ["verdict", "best", "best_layout", "runner_up"]].tolist() == ["recommend", "tfrecord", "4OST",
                                                                                    "hdf5"]
    assert by.loc[4, "gain_lo_pct"] < 100 < by.loc[4, "gain_hi_pct"]  # planted: 400 / 200 - 1 = +100%
    lead = [s for s in stmts if "leads" in s["text"]]
    assert len(lead) == 1 and lead[0]["text"].startswith("tfrecord leads shared small-sample reads")
    assert "from 2 nodes" in lead[0]["text"] and len(lead[0]["evidence"]) == 2
    assert (lay["best"] == "4OST").all() and (lay["verdict"] == "recommend").all()
    layout_stmts = [s for s in stmts if "stripe 4OST is best" in s["text"]]
    assert len(layout_stmts) == 2  # one per format, each backed by its scenarios' numbers
    assert all("+20%" in e or "+19%" in e or "+21%" in e for s in layout_stmts for e in s["evidence"])


def test_format_guideline_never_pools_stripe_counts_off_lustre_as_repetitions(tmp_path):
    # off Lustre stripe=1 and stripe=4 are two configurations (the stripe not applied), not four repetitions
    rows = [dict(format=f, stripe_count=s, repeat=i, bandwidth=v + i + s, lustre=False)
            for f, v in (("hdf5", 50.0), ("tfrecord", 500.0)) for s in (1, 4) for i in range(2)]
    fmt = G.format_guidelines(analysis_frame(build_store(tmp_path, rows)))
    r = fmt.iloc[0]
    assert (r["verdict"], r["best"], r["best_layout"], r["best_n"]) == ("recommend", "tfrecord",
                                                                         "striping not applied", 2)


def test_format_verdicts_cite_amplification_where_it_differs_from_1(tmp_path):
    rows = [dict(format=f, repeat=i, bandwidth=v + i, lustre=False, amplification=a)
            for f, v, a in (("hdf5", 50.0, 3.6), ("bin", 500.0, 1.0)) for i in range(3)]
    pts = analysis_frame(build_store(tmp_path, rows))
    r = G.format_guidelines(pts).iloc[0]
    assert r["best"] == "bin" and r["reason"].endswith(
        "; amplification (file-system bytes / bytes returned): hdf5 3.60x")  # bin's 1.00 is not cited
    assert F.amplification_frame(F.configs(pts))[["format", "mean"]].values.tolist() == [["bin", 1.0],
                                                                                          ["hdf5", 3.6]]
    same = analysis_frame(build_store(tmp_path, [dict(r, amplification=1.0) for r in rows], name="one.db"))
    assert "amplification" not in G.format_guidelines(same).iloc[0]["reason"]


def test_amplification_figure_and_its_absence(tmp_path):
    from analysis.figures import draw_amplification, plan_figures

    rows = [dict(format=f, repeat=i, bandwidth=100.0, lustre=False, amplification=a + 0.1 * i)
            for f, a in (("hdf5", 3.5), ("bin", 1.0)) for i in range(2)]
    pts = analysis_frame(build_store(tmp_path, rows))
    frame = F.amplification_frame(F.configs(pts))
    fig = draw_amplification(frame)
    ax = fig.axes[0]
    assert ax.get_xlabel() == "amplification (file-system bytes / bytes returned)"
    assert [p.get_width() for p in ax.patches] == pytest.approx([1.05, 3.55])
    assert [t.get_text() for t in ax.get_yticklabels()] == ["bin/shared 1N-1P-1OST", "hdf5/shared 1N-1P-1OST"]
    assert any(list(line.get_xdata()) == [1.0, 1.0] for line in ax.get_lines())  # the line at 1
    keys, hists = hist_frame(Store(str(tmp_path / "r.db")), pts["point_key"].tolist())
    jobs = {j.name: j for j in plan_figures(pts, keys, hists, traces=False)}
    assert jobs["amplification"].draw is not None
    old = analysis_frame(build_store(tmp_path, [dict(r, amplification=None) for r in rows], name="old.db"))
    jobs = {j.name: j for j in plan_figures(old, keys, hists, traces=False)}
    assert "no file-system layer stored" in jobs["amplification"].skipped


def test_amplification_figure_of_many_configurations_draws_those_furthest_from_one():
    from analysis.figures.amplification import MAX_BARS, furthest_from_one

    n = MAX_BARS + 40
    amp = pd.DataFrame({"format": "hdf5", "access": "shared", "label": [f"c{i}" for i in range(n)],
                        "mean": [1.0 + (0.01 * i if i % 2 else -0.001 * i) for i in range(n)], "std": 0.0, "n": 2})
    shown = furthest_from_one(amp)
    far = (amp["mean"] - 1).abs()
    assert len(shown) == MAX_BARS and list(shown["label"]) == [c for c in amp["label"] if c in set(shown["label"])]
    assert (shown["mean"] - 1).abs().min() >= far.drop(far.nlargest(MAX_BARS).index).max()  # none further left out
    assert furthest_from_one(amp.head(5)).equals(amp.head(5))


def test_guidelines_compare_configurations_folded_from_their_points_in_point_order(tmp_path):
    """The comparisons read the points folded per configuration (a million points are a few hundred rows): each
    configuration's values are its points' own, in the points' order, however the configurations interleave,
    and the points the mask leaves out (or without the metric) are in none."""
    from analysis.guidelines.compare import compared

    pts = analysis_frame(build_store(tmp_path, peak_rows(reps=3) + peak_rows(reps=3, format="npz")))
    pts = pts.sample(frac=1.0, random_state=3).reset_index(drop=True)  # configurations interleaved
    pts.loc[5, "bandwidth_mib_s"] = np.nan
    keep = np.ones(len(pts), dtype=bool)
    keep[7] = False
    c = compared(pts, G.Settings(), keep)
    kept = pts[keep & pts["bandwidth_mib_s"].notna().to_numpy()]
    assert len(c.groups) == kept["config_key"].nunique() and c.groups["n"].sum() == len(kept)
    for i, g in c.groups.iterrows():
        mine = kept[(kept["config"] == g["config"]) & (kept["stripe_count"] == g["stripe_count"])]
        assert c.values([i]).tolist() == mine["bandwidth_mib_s"].tolist()
    both = c.groups.index[c.groups["format"] == "npz"]
    assert c.values(both).tolist() == kept.loc[kept["format"] == "npz", "bandwidth_mib_s"].tolist()


def test_bootstrap_is_seeded(tmp_path):
    pts = analysis_frame(build_store(tmp_path, peak_rows()))
    a = G.layout_guidelines(pts, G.Settings(seed=1))
    assert_frame_equal(a, G.layout_guidelines(pts, G.Settings(seed=1)))
    assert a.iloc[0]["gain_lo_pct"] != G.layout_guidelines(pts, G.Settings(seed=2)).iloc[0]["gain_lo_pct"]


# -------------------------------------------------------------------------------------------------- figures


def test_config_bars_axes_labels_and_limits():
    from analysis.figures import draw_config_bars

    pts = points_rows([dict(stripe_count=s, repeat=r, bandwidth_mib_s=bw, iops=bw * 10, io_time_slowest_s=1 / bw,
                            wall_time_s=2 / bw) for s, r, bw in [(1, 0, 100.0), (1, 1, 120.0), (8, 0, 400.0)]])
    frame = F.config_bars_frame(F.configs(pts), "hdf5", "shared")
    fig = draw_config_bars(frame, "hdf5, shared")
    axes = fig.axes
    assert len(axes) == 4
    assert [a.get_ylabel() for a in axes] == ["bandwidth (MiB/s)", "IOPS (reads/s)", "I/O time, slowest rank (s)",
                                              "runtime (s)"]
    assert [t.get_text() for t in axes[3].get_xticklabels()] == ["1N-1P-1OST", "1N-1P-8OST"]
    assert axes[3].get_xlabel() == "configuration (nodes-ranks-stripe count)"
    heights = [p.get_height() for p in axes[0].patches]
    assert heights == pytest.approx([110.0, 400.0])
    assert axes[0].get_ylim()[1] >= 400.0 and axes[0].get_ylim()[0] == 0
    assert "n = 1–2" in fig.get_suptitle()


def test_stripe_and_scaling_figures():
    from analysis.figures import draw_scaling, draw_stripe

    pts = points_rows([dict(stripe_count=s, nodes=n, access=a, format=f, bandwidth_mib_s=float(s * n),
                            iops=1.0, io_time_slowest_s=1.0, wall_time_s=1.0)
                       for s in (0, 1, 8) for n in (1, 4) for a in ("shared", "fpp") for f in ("hdf5", "npz")])
    cfg = F.configs(pts)
    fig = draw_stripe(F.stripe_frame(cfg, "bandwidth_mib_s"), "bandwidth_mib_s")
    assert len(fig.axes) == 4
    ax = fig.axes[0]
    assert ax.get_title() == "fpp, 1 node" and ax.get_xlabel() == "stripe count (OSTs)"
    assert [t.get_text() for t in ax.get_xticklabels()] == ["default", "1", "8"]
    assert len(ax.get_lines()) >= 2 and [t.get_text() for t in fig.legends[0].get_texts()] == ["hdf5", "npz"]
    fig = draw_scaling(F.best_per_scale(cfg))
    assert fig.axes[0].get_xlabel() == "nodes" and fig.axes[0].get_ylabel() == "bandwidth (MiB/s)"
    assert fig.axes[0].get_ylim()[1] >= 32.0  # best at 4 nodes: stripe 8 -> 32 MiB/s
    assert "8OST" in [t.get_text() for t in fig.axes[0].texts]


def test_latency_and_access_pattern_figures(tmp_path):
    from analysis.figures import draw_access_pattern, draw_latency

    lat = pd.DataFrame({"series": ["a", "a"], "bucket": [40, 41], "latency_us": [1.0, 1.2],
                        "upper_us": [1.1, 1.3], "reads": [1, 1], "fraction": [0.5, 0.5], "cdf": [0.5, 1.0]})
    ax = draw_latency(lat).axes[0]
    assert ax.get_xscale() == "log" and ax.get_xlabel() == "read latency (µs)" and ax.get_ylim() == (0, 1.02)
    tr = pd.DataFrame({"rank": [0, 0, 1], "start_s": [1.0, 2.0, 1.5], "offset": [0, 2**20, 2**21],
                       "size": [4096, 8192, 4096], "op": "read", "file": "f"})
    fig = draw_access_pattern(tr, "x")
    assert [a.get_ylabel() for a in fig.axes[:2]] == ["rank 0\noffset (MiB)", "rank 1\noffset (MiB)"]
    assert fig.axes[1].get_xlabel() == "time since first read (s)"
    assert fig.axes[2].get_ylabel() == "request size (KiB)"  # the colour bar


def test_figures_command_writes_png_and_svg_and_says_what_it_skipped(tmp_path, capsys):
    from analysis.__main__ import main

    run = tmp_path / "run"
    run.mkdir()
    (run / "trace.csv").write_text("rank,start_s,offset,size,op\n0,0.0,0,4096,read\n0,0.1,4096,4096,read\n")
    rows = [*peak_rows(reps=2), dict(stripe_count=1, repeat=0, bandwidth=50.0, nodes=2, run_dir=str(run))]
    build_store(tmp_path, rows)
    out = tmp_path / "fig"
    assert main(["figures", "--db", str(tmp_path / "r.db"), "--out", str(out)]) == 0
    assert "wrote" in capsys.readouterr().out
    names = sorted(p.name for p in out.iterdir())
    assert {"config_hdf5.png", "config_hdf5.svg", "stripe_bandwidth_mib_s.png", "scaling.svg",
            "best_heatmap.png", "latency.png"} <= set(names)
    assert any(n.startswith("access_") and n.endswith(".png") for n in names)
    assert (out / "latency.png").read_bytes()[:4] == b"\x89PNG"
    assert (out / "latency.svg").read_text().lstrip().startswith("<?xml")
    main(["figures", "--db", str(tmp_path / "r.db"), "--out", str(out), "--where", "nodes == 1"])
    assert "skipped access_pattern: no access logs" in capsys.readouterr().out


# ---------------------------------------------------------------------------------------------- CLI: the rest


def test_help_of_every_command_without_importing_matplotlib():
    import subprocess
    import sys

    code = ("import sys\nfrom analysis.__main__ import build_parser\nprint(build_parser().format_help())\n"
            "print('matplotlib' in sys.modules)")
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    assert all(c in p.stdout for c in ("figures", "guidelines", "report", "query", "export"))
    assert p.stdout.strip().endswith("False")
    for command in ("figures", "guidelines", "report", "query", "export"):
        p = subprocess.run([sys.executable, "-m", "analysis", command, "--help"], capture_output=True, text=True,
                           timeout=60)
        assert p.returncode == 0 and "--db" in p.stdout, (command, p.stderr)


def test_guidelines_command_md_and_json(tmp_path, capsys):
    from analysis.__main__ import main

    build_store(tmp_path, peak_rows())
    assert main(["guidelines", "--db", str(tmp_path / "r.db")]) == 0
    md = capsys.readouterr().out
    assert "| shared | hdf5 | 1×1 | small (<64KiB) | **recommend** | 8OST |" in md
    assert main(["guidelines", "--db", str(tmp_path / "r.db"), "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["layouts"][0]["best"] == "8OST" and doc["confidence"] == 0.95
    assert main(["guidelines", "--db", str(tmp_path / "r.db"), "--where", "nodes > 10"]) == 1
    assert main(["guidelines", "--db", str(tmp_path / "r.db"), "--where", "nodes >"]) == 2
    assert "not a valid expression" in capsys.readouterr().err


def test_query_is_read_only(tmp_path, capsys):
    from analysis.__main__ import main

    build_store(tmp_path, peak_rows(reps=1))
    db = str(tmp_path / "r.db")
    assert main(["query", "SELECT stripe_count, bandwidth_mib_s FROM points ORDER BY stripe_count", "--db", db,
                 "--format", "csv"]) == 0
    df = pd.read_csv(pd.io.common.StringIO(capsys.readouterr().out))
    assert df["stripe_count"].tolist() == [1, 2, 4, 8, 16, 32]
    assert main(["query", "DELETE FROM points", "--db", db]) == 2
    assert "read-only: DELETE is refused" in capsys.readouterr().err
    assert main(["query", "WITH x AS (SELECT 1) DELETE FROM points", "--db", db]) == 2
    assert "tried to write" in capsys.readouterr().err
    assert main(["query", "SELECT 1; DROP TABLE points", "--db", db]) == 2
    with sqlite3.connect(tmp_path / "r.db") as c:
        assert c.execute("select count(*) from points").fetchone() == (6,)
    assert main(["query", "SELECT nope FROM points", "--db", db]) == 2
    assert "no such column" in capsys.readouterr().err


def test_export_csv_and_parquet(tmp_path, capsys):
    from analysis.__main__ import main

    build_store(tmp_path, peak_rows(reps=2))
    db = str(tmp_path / "r.db")
    assert main(["export", "--db", db, "--format", "parquet", "--out", str(tmp_path / "p.parquet")]) == 0
    pq = pd.read_parquet(tmp_path / "p.parquet")
    assert len(pq) == 12 and {"point_key", "bandwidth_mib_s", "layout", "fs_type"} <= set(pq.columns)
    assert json.loads(pq["layout"].iloc[0])["applicable"] is True
    assert main(["export", "--db", db, "--out", str(tmp_path / "p.csv")]) == 0
    csv = pd.read_csv(tmp_path / "p.csv")
    assert sorted(csv["bandwidth_mib_s"]) == pytest.approx(sorted(pq["bandwidth_mib_s"]))
    assert main(["export", "--db", db, "--format", "parquet"]) == 2
    assert "needs --out" in capsys.readouterr().err
    assert main(["export", "--db", db, "--table", "epochs", "--out", str(tmp_path / "e.csv")]) == 0
    assert len(pd.read_csv(tmp_path / "e.csv")) == 12


def test_best_layout_off_lustre_names_no_stripe_count():
    pts = points_rows([dict(stripe_count=s, bandwidth_mib_s=bw, fs_type="ext4", striping_applicable=False)
                       for s, bw in [(1, 50.0), (4, 55.0)]])
    best = F.best_per_scale(F.configs(pts))
    assert best["layout"].tolist() == ["any (not Lustre)"]
