"""Checkpoint points in the analysis: their frame (analysis/checkpoint.py), ``summary``'s table of them, and train's
analyses that keep ignoring them. The stores hold SYNTHETIC checkpoint points written through the store's own writer
(tests/checkpoint_store.py), beside synthetic train points."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from checkpoint_store import MIB, add_checkpoints, add_train, checkpoint_store
from pandas.testing import assert_frame_equal

from analysis.__main__ import main as analysis_main
from analysis.checkpoint import bars_frame, checkpoint_configs, checkpoint_frame, stripe_frame
from analysis.query import analysis_frame
from ddlio.store import Store, open_store_for_reading

#: two accesses × two stripe counts × two repetitions (write MiB/s; restore 1000 MiB/s), and one torch point
GRID = [dict(write=100.0 * s + r, access=a, stripe_count=s, repeat=r) for a in ("shared", "fpp") for s in (1, 4)
        for r in (0, 1)] + [dict(write=50.0, access="fpp", layout="torch", read=None)]


@pytest.fixture
def store(tmp_path):
    return checkpoint_store(tmp_path, GRID)


def test_the_frame_joins_each_points_metrics_and_its_checkpoint_part(store, tmp_path):
    ck = checkpoint_frame(open_store_for_reading(str(tmp_path / "ck.db")))
    assert len(ck) == 9 and ck["point_key"].is_monotonic_increasing
    torch = ck[ck["layout"] == "torch"].iloc[0]
    assert torch["restore"] == "none" and np.isnan(torch["read_bandwidth_mib_s"])  # no restore: no read metrics
    assert torch["write_bandwidth_mib_s"] == 50.0 and torch["files"] == 3  # fpp: a file per rank + metadata
    assert (ck["shard_bytes"] == 32 * MIB).all() and (ck["applied_stripe_size"] == MIB).all()
    assert set(ck["label"]) == {"llama3_8b/shared 1N-2P-1OST layout=dcp restore=all",
                                "llama3_8b/shared 1N-2P-4OST layout=dcp restore=all",
                                "llama3_8b/fpp 1N-2P-1OST layout=dcp restore=all",
                                "llama3_8b/fpp 1N-2P-4OST layout=dcp restore=all",
                                "llama3_8b/fpp 1N-2P-1OST layout=torch restore=none"}


def test_where_keeps_checkpoint_points_by_their_columns_and_none_by_trains(store, tmp_path):
    reader = open_store_for_reading(str(tmp_path / "ck.db"))
    assert len(checkpoint_frame(reader, "access == 'fpp' and stripe_count > 1")) == 2
    assert len(checkpoint_frame(reader, "write_bandwidth_mib_s > 300")) == 4
    assert checkpoint_frame(reader, "format == 'hdf5'").empty  # a train column chooses train points


def test_configurations_pool_repetitions_and_the_figure_frames_follow_them():
    ck = pd.DataFrame({
        "config_key": ["a", "a", "b", "c"], "label": ["m/shared 1N-2P-1OST", "m/shared 1N-2P-1OST",
                                                      "m/shared 1N-2P-4OST", "m/fpp 1N-2P-4OST"],
        "name": "m", "layout": "dcp", "access": ["shared", "shared", "shared", "fpp"], "nodes": 1, "ppn": 2,
        "ranks": 2, "stripe_count": [1, 1, 4, 4], "stripe_size": MIB, "applied_stripe_size": float(MIB),
        "size": 0, "transfer_size": MIB, "count": 1, "restore": "all", "fs_type": "lustre",
        "striping_applicable": [True, True, True, False],
        "write_bandwidth_mib_s": [100.0, 200.0, 400.0, 50.0], "read_bandwidth_mib_s": [10.0, 10.0, 20.0, 5.0]})
    cfg = checkpoint_configs(ck, ["write_bandwidth_mib_s", "read_bandwidth_mib_s"])
    assert cfg["label"].tolist() == ["m/shared 1N-2P-1OST", "m/fpp 1N-2P-4OST", "m/shared 1N-2P-4OST"]
    assert cfg["n"].tolist() == [2, 1, 1] and cfg["write_bandwidth_mib_s_mean"].tolist() == [150.0, 50.0, 400.0]
    assert cfg["write_bandwidth_mib_s_std"].iloc[0] == pytest.approx(70.7107, rel=1e-4)
    bars = bars_frame(cfg)
    assert bars[["x", "series"]].values.tolist() == [["1N-2P-1OST", "shared dcp"], ["1N-2P-4OST", "fpp dcp"],
                                                     ["1N-2P-4OST", "shared dcp"]]
    expected = pd.DataFrame({"access": ["shared", "shared"], "nodes": [1, 1], "series": ["dcp", "dcp"],
                             "stripe_count": [1, 4], "mean": [150.0, 400.0],
                             "std": [ck["write_bandwidth_mib_s"][:2].std(), np.nan], "n": [2, 1]})
    # the fpp configuration's stripe count was not applied: no point of the stripe curve
    assert_frame_equal(stripe_frame(cfg, "write_bandwidth_mib_s"), expected, check_dtype=False)


def _summary(db: str, capsys: pytest.CaptureFixture[str], *fmt: str) -> str:
    assert analysis_main(["summary", "--db", db, *fmt]) == 0
    return capsys.readouterr().out


def test_summary_shows_checkpoint_points_in_their_own_table(tmp_path, capsys):
    db = str(tmp_path / "r.db")
    st = Store(db)
    add_train(st, [dict(bandwidth=100.0, repeat=0), dict(bandwidth=110.0, repeat=1)])
    before = _summary(db, capsys)
    before_csv = _summary(db, capsys, "--format", "csv")
    add_checkpoints(st, GRID)
    out = _summary(db, capsys)
    assert out.startswith(before)  # train's table first, as it was
    table = out[len(before):]
    head = next(line for line in table.splitlines() if line.lstrip().startswith("status"))
    assert head.split() == ["status", "label", "repeat", "bytes_written", "write_bandwidth_mib_s", "bytes_read",
                            "read_bandwidth_mib_s", "fsync_time_s", "error"]
    assert "llama3_8b/fpp 1N-2P-4OST layout=dcp restore=all" in table and "9 checkpoint points: 9 completed" in table
    row = next(line for line in table.splitlines() if "layout=torch" in line).split()
    assert row[-4:-1] == ["50", "-", "-"]  # no restore: no bytes read, no restore bandwidth
    csv = pd.read_csv(__import__("io").StringIO(_summary(db, capsys, "--format", "csv")))
    assert set(csv.columns) - set(before_csv.splitlines()[0].split(",")) == {
        "kind", "bytes_written", "write_bandwidth_mib_s", "read_bandwidth_mib_s", "fsync_time_s"}
    ckrows = csv[csv["kind"] == "checkpoint"]
    assert len(ckrows) == 9 and ckrows["format"].isna().all() and ckrows["validity"].isna().all()
    assert (ckrows["bytes_written"] == 64 * MIB).all()
    records = json.loads(_summary(db, capsys, "--format", "json"))
    assert sum(r["kind"] == "checkpoint" for r in records) == 9


def test_summary_of_checkpoint_points_alone(store, tmp_path, capsys):
    out = _summary(str(tmp_path / "ck.db"), capsys)
    assert out.startswith("checkpoint points (kind=checkpoint") and "points: " not in out.split("\n")[0]


def test_trains_analyses_leave_checkpoint_points_out(tmp_path):
    db = str(tmp_path / "r.db")
    st = Store(db)
    add_train(st, [dict(bandwidth=100.0, repeat=0)])
    add_checkpoints(st, GRID[:2])
    reader = open_store_for_reading(db)
    for analysis in ("figures", "guidelines", "diagnose"):
        assert len(analysis_frame(reader, analysis=analysis)) == 1, analysis


# ------------------------------------------------------------------------------------------------------- guidelines
def planted() -> list[dict]:
    """Writes: fpp 1.5x shared, both growing with the stripe count (8 OSTs best, fpp 8OST separated); restores:
    the same for fpp and shared at each stripe count (overlapping); three repetitions each."""
    return [dict(write=100.0 * s * (1.5 if a == "fpp" else 1.0) + 3 * r, read=800.0 + 50 * s + r, access=a,
                 stripe_count=s, repeat=r) for a in ("shared", "fpp") for s in (1, 4, 8) for r in (0, 1, 2)]


def guide(tmp_path, rows: list[dict]) -> tuple[pd.DataFrame, list[str]]:
    from analysis.guidelines.checkpoint import checkpoint_guidelines

    checkpoint_store(tmp_path, rows)
    return checkpoint_guidelines(checkpoint_frame(open_store_for_reading(str(tmp_path / "ck.db"))))


def test_the_best_write_is_recommended_and_overlapping_restores_cannot_be_decided(tmp_path):
    rows, notes = guide(tmp_path, planted())
    write, restore = rows.set_index("phase").loc["write"], rows.set_index("phase").loc["restore"]
    assert write["verdict"] == "recommend" and write["best"] == "fpp dcp 8OST" and write["best_stripe_count"] == 8
    assert (write["best_access"], write["best_layout"], write["best_n"]) == ("fpp", "dcp", 3)
    assert write["best_lo"] <= write["best_mean"] <= write["best_hi"] and write["gain_lo_pct"] > 40
    assert write["runner_up"] == "shared 8OST" and (write["nodes"], write["ppn"]) == (1, 2)
    assert restore["verdict"] == "cannot decide" and restore["reason"].startswith("intervals overlap")
    assert notes == []


def test_stripe_counts_not_applied_are_pooled_never_recommended(tmp_path):
    rows, _ = guide(tmp_path, [dict(write=100.0 + s + r, access="shared", stripe_count=s, repeat=r, lustre=False)
                               for s in (1, 4) for r in (0, 1, 2)]
                    + [dict(write=300.0 + r, access="fpp", stripe_count=s, repeat=r, lustre=False)
                       for s in (1, 4) for r in (0, 1, 2)])
    write = rows[rows["phase"] == "write"].iloc[0]
    assert write["choices"] == 2 and write["best"] == "fpp dcp stripe not applied"  # each access: both counts pooled
    assert write["best_n"] == 6 and pd.isna(write["best_stripe_count"]) and write["verdict"] == "recommend"
    assert "stripe counts were not applied on ext4" in write["reason"]


def test_one_repetition_or_one_choice_cannot_decide_and_cached_restores_are_left_out(tmp_path):
    rows, notes = guide(tmp_path, [dict(write=100.0, stripe_count=1), dict(write=400.0, stripe_count=4),
                                   dict(write=100.0, stripe_count=1, nodes=2, resident=0.9)])
    by = {(r.phase, r.nodes): r for r in rows.itertuples()}
    assert by[("write", 1)].verdict == "cannot decide" and "repetitions missing" in by[("write", 1)].reason
    assert by[("write", 2)].reason == "only one choice measured (shared 1OST)"
    assert ("restore", 2) not in by and notes == [
        "1 restore(s) left out: more than 10% of their files were in the page cache when the restore began, so "
        "they read memory, not the file system"]


def test_guidelines_command_with_checkpoint_points_alone_and_beside_train(tmp_path, capsys):
    checkpoint_store(tmp_path, planted())
    assert analysis_main(["guidelines", "--db", str(tmp_path / "ck.db")]) == 0
    out = capsys.readouterr().out
    assert out.startswith("# Guidelines\n\n## Checkpoints") and "| write | 1×2 | llama3_8b | **recommend** |" in out
    db = str(tmp_path / "r.db")
    st = Store(db)
    add_train(st, [dict(bandwidth=100.0 * s + r, stripe_count=s, repeat=r) for s in (1, 4) for r in (0, 1)])
    train_only = {}
    for fmt in ("md", "json"):
        assert analysis_main(["guidelines", "--db", db, "--format", fmt]) == 0
        train_only[fmt] = capsys.readouterr().out
        assert "heckpoint" not in train_only[fmt]  # no checkpoint point: train's output as it was
    add_checkpoints(st, planted())
    assert analysis_main(["guidelines", "--db", db]) == 0
    both = capsys.readouterr().out
    assert both.startswith(train_only["md"]) and "## Checkpoints" in both[len(train_only["md"]):]
    assert analysis_main(["guidelines", "--db", db, "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert {k: v for k, v in doc.items() if k != "checkpoints"} == json.loads(train_only["json"])
    assert {r["phase"] for r in doc["checkpoints"]["rows"]} == {"write", "restore"}


# ---------------------------------------------------------------------------------------------------------- figures
@pytest.fixture(scope="module")
def ck_figures(tmp_path_factory) -> dict[str, object]:
    """The checkpoint figures of the planted grid, a torch point without restore and an unstriped node count."""
    from analysis.figures import plan_figures

    tmp = tmp_path_factory.mktemp("ckfig")
    rows = [*planted(), dict(write=60.0, access="fpp", layout="torch", read=None),
            dict(write=70.0, nodes=2, stripe_count=4, lustre=False)]
    checkpoint_store(tmp, rows)
    ck = checkpoint_frame(open_store_for_reading(str(tmp / "ck.db")))
    jobs = plan_figures(pd.DataFrame(), pd.Series(dtype=object), np.zeros((0, 0)), checkpoints=ck)
    assert [j.name for j in jobs] == ["checkpoint_config", "checkpoint_stripe_write", "checkpoint_stripe_restore"]
    return {j.name: j.draw() for j in jobs}


def test_the_checkpoint_bars_show_write_and_restore_per_configuration(ck_figures):
    fig = ck_figures["checkpoint_config"]
    write, restore = fig.axes[:2]
    xs = [t.get_text() for t in restore.get_xticklabels()]
    assert xs == ["1N-2P-1OST", "1N-2P-4OST", "1N-2P-8OST", "2N-4P-stripe=4-not-applied"]  # 2N: not Lustre
    assert "write" in write.get_ylabel() and "MiB/s" in write.get_ylabel() and "restore" in restore.get_ylabel()
    legend = [t.get_text() for t in fig.legends[0].get_texts()]
    # what else varies tells the series apart; the stripe not applied is said by the x label, not a series
    assert legend == ["fpp dcp restore=all", "fpp torch restore=none", "shared restore=all"]
    heights = sorted(round(p.get_height()) for p in write.patches if p.get_height() == p.get_height())
    assert heights[:2] == [60, 70] and heights[-1] == 1203  # means of repetitions: fpp 8 OSTs is 1200 + 3
    assert sum(p.get_height() != p.get_height() for p in restore.patches) >= 1  # torch: no restore, no bar


def test_the_checkpoint_stripe_figures_draw_applied_stripe_counts_only(ck_figures):
    fig = ck_figures["checkpoint_stripe_write"]
    panels = [ax.get_title() for ax in fig.axes]
    assert panels == ["fpp, 1 node", "shared, 1 node"]  # the unstriped 2-node point is no point of a curve
    assert all(ax.get_ylabel() == "write bandwidth (MiB/s)" for ax in fig.axes)
    assert [t.get_text() for t in fig.axes[0].get_xticklabels()] == ["1", "4", "8"]
    shared = fig.axes[1].containers[0].lines[0].get_ydata()
    assert list(np.round(np.asarray(shared, dtype=float))) == [103, 403, 803]
    assert "restore" in ck_figures["checkpoint_stripe_restore"]._suptitle.get_text()


def test_no_text_is_clipped_in_the_checkpoint_figures(ck_figures):
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from test_analysis_figures import drawn_texts

    for name, fig in ck_figures.items():
        renderer = FigureCanvasAgg(fig).get_renderer() if fig.canvas is None else fig.canvas.get_renderer()
        canvas = fig.bbox
        for t in drawn_texts(fig):
            box = t.get_window_extent(renderer)
            assert box.x0 >= 0 and box.x1 <= canvas.x1 + 0.5 and box.y0 >= 0 and box.y1 <= canvas.y1 + 0.5, name


def test_figures_command_draws_checkpoint_figures_only_where_there_are_checkpoint_points(tmp_path, capsys):
    db = str(tmp_path / "r.db")
    st = Store(db)
    add_train(st, [dict(bandwidth=100.0 * s + r, stripe_count=s, repeat=r) for s in (1, 4) for r in (0, 1)])
    assert analysis_main(["figures", "--db", db, "--out", str(tmp_path / "a"), "--jobs", "1"]) == 0
    assert "checkpoint" not in capsys.readouterr().out
    add_checkpoints(st, planted())
    assert analysis_main(["figures", "--db", db, "--out", str(tmp_path / "b"), "--jobs", "1"]) == 0
    out = capsys.readouterr().out
    assert "and 18 checkpoint points" in out
    before = {p.name for p in (tmp_path / "a").iterdir()}
    after = {p.name for p in (tmp_path / "b").iterdir()}
    assert after - before == {f"checkpoint_{n}.{x}" for n in ("config", "stripe_write", "stripe_restore")
                              for x in ("png", "svg")}


# --------------------------------------------------------------------------------------------------------- diagnose
#: code, level, a configuration that fires it, one that keeps it quiet (keyword arguments of checkpoint_record;
#: each pair alone in its store)
CK_FINDINGS = [
    ("checkpoint-small-writes", "warn", dict(transfer=256 * 1024), dict(transfer=4 * MIB)),
    ("checkpoint-misaligned", "high", dict(checkpoint_bytes=3 * MIB), dict(checkpoint_bytes=4 * MIB)),
    ("checkpoint-fsync", "warn", dict(fsync_share=0.8), dict(fsync_share=0.2)),
    ("checkpoint-metadata", "warn", dict(access="fpp", nodes=16, ppn=4, meta_share=0.5),
     dict(access="fpp", nodes=16, ppn=4, meta_share=0.05)),
    ("checkpoint-stripe", "warn", dict(stripe_count=8, write=102.0), dict(stripe_count=8, write=300.0)),
    ("checkpoint-restore-cached", "warn", dict(resident=0.9, nodes=2), dict(resident=0.0, nodes=2)),
]


@pytest.mark.parametrize(("code", "level", "loud", "quiet"), CK_FINDINGS, ids=[c[0] for c in CK_FINDINGS])
def test_every_checkpoint_finding_fires_on_its_fixture_and_stays_quiet_on_the_other(tmp_path, code, level, loud,
                                                                                     quiet):
    from analysis.diagnose.cli import collect

    found = {}
    for name, config in (("loud", loud), ("quiet", quiet)):
        # beside a stripe count above 1, the same configuration at stripe count 1 (the lower count), 100 MiB/s
        rows = [{"write": 100.0, **config}]
        if config.get("stripe_count", 1) > 1:
            rows.append({**config, "write": 100.0, "stripe_count": 1})
        checkpoint_store(tmp_path, rows, name=f"{name}.db")
        diags = collect(open_store_for_reading(str(tmp_path / f"{name}.db")))
        assert all(d.subject.kind == "checkpoint" for d in diags)
        by_stripe = {d.subject.stripe_count: {f.code: f for f in d.findings} for d in diags}
        found[name] = by_stripe[config.get("stripe_count", 1)][code]
    fired, calm = found["loud"], found["quiet"]
    assert str(fired.level) == level and fired.value is not None and fired.threshold is not None, fired
    assert fired.fix or fired.snippet, fired
    assert str(calm.level) == "ok", calm


def test_what_the_checkpoint_findings_recommend(tmp_path):
    from analysis.diagnose.checkpoint import checkpoint_diagnoses

    checkpoint_store(tmp_path, [dict(write=100.0, stripe_count=1, transfer=256 * 1024),
                                dict(write=101.0, stripe_count=4, fsync_share=0.8, transfer=256 * 1024)])
    diags = checkpoint_diagnoses(checkpoint_frame(open_store_for_reading(str(tmp_path / "ck.db"))))
    four = {f.code: f for d in diags if d.subject.stripe_count == 4 for f in d.findings}
    assert four["checkpoint-stripe"].fix == ["stripe=1"] and four["checkpoint-stripe"].counted["useful"] == 1
    assert four["checkpoint-fsync"].fix == ["stripe=8"]
    assert four["checkpoint-small-writes"].fix == [f"checkpoint.transfer_size={MIB}"]
    one = {f.code for d in diags if d.subject.stripe_count == 1 for f in d.findings}
    assert "checkpoint-stripe" not in one  # nothing lower measured beside stripe 1: not judged


def test_no_stripe_finding_where_striping_was_not_applied(tmp_path):
    from analysis.diagnose.checkpoint import checkpoint_diagnoses

    checkpoint_store(tmp_path, [dict(write=100.0, stripe_count=1, lustre=False, transfer=256 * 1024),
                                dict(write=100.0, stripe_count=4, lustre=False, transfer=256 * 1024)])
    diags = checkpoint_diagnoses(checkpoint_frame(open_store_for_reading(str(tmp_path / "ck.db"))))
    codes = {f.code for d in diags for f in d.findings}
    assert not codes & {"checkpoint-stripe", "checkpoint-small-writes", "checkpoint-misaligned"}
    assert "checkpoint-fsync" in codes


def test_diagnose_command_shows_checkpoint_findings_beside_trains(tmp_path, capsys):
    db = str(tmp_path / "r.db")
    st = Store(db)
    add_train(st, [dict(bandwidth=100.0, repeat=0)])
    assert analysis_main(["diagnose", "--db", db, "--format", "json"]) == 0
    train_only = json.loads(capsys.readouterr().out)
    add_checkpoints(st, [dict(write=100.0, fsync_share=0.9)])
    assert analysis_main(["diagnose", "--db", db, "--fail-on", "warn"]) == 3
    text = capsys.readouterr().out
    assert "== llama3_8b/shared 1N-2P-1OST" in text and "1 checkpoint point(s)" in text
    assert "WARN checkpoint-fsync" in text
    assert analysis_main(["diagnose", "--db", db, "--format", "json"]) == 0
    both = json.loads(capsys.readouterr().out)
    assert both[:len(train_only)] == train_only and both[-1]["kind"] == "checkpoint"
    assert analysis_main(["diagnose", "--db", db, "--format", "json", "--where", "format == 'hdf5'"]) == 0
    assert all(d["kind"] != "checkpoint" for d in json.loads(capsys.readouterr().out))


# ----------------------------------------------------------------------------------------------------------- report
def test_the_report_has_a_checkpoint_section_its_figures_and_findings(tmp_path, capsys):
    db = str(tmp_path / "r.db")
    st = Store(db)
    add_train(st, [dict(bandwidth=100.0 * s + r, stripe_count=s, repeat=r) for s in (1, 4) for r in (0, 1)])
    assert analysis_main(["report", "--db", db, "--out", str(tmp_path / "a.html")]) == 0
    train_only = (tmp_path / "a.html").read_text()
    assert "checkpoint" not in train_only.lower()
    add_checkpoints(st, [*planted(), dict(write=100.0, nodes=2, fsync_share=0.9)])
    assert analysis_main(["report", "--db", db, "--out", str(tmp_path / "b.html")]) == 0
    html = (tmp_path / "b.html").read_text()
    assert "and 19 checkpoint points" in html and "<h2 id='checkpoints'>Checkpoints</h2>" in html
    assert "<b>write, 1 node × 2 ranks, llama3_8b</b>: use <b>fpp dcp 8OST</b>" in html
    assert "<b>restore, 1 node × 2 ranks, llama3_8b</b>: <b>cannot decide</b>. intervals overlap" in html
    for name in ("checkpoint_config", "checkpoint_stripe_write", "checkpoint_stripe_restore"):
        assert f"<figure id='{name}'>" in html
    assert "checkpoint-fsync" in html  # the diagnosis, checkpoint findings included
    assert html.index("<h2 id='answers'>") < html.index("<h2 id='checkpoints'>") < html.index("id='diagnosis'")
    checkpoint_store(tmp_path, planted())  # checkpoint points alone
    assert analysis_main(["report", "--db", str(tmp_path / "ck.db"), "--out", str(tmp_path / "c.html")]) == 0
    alone = (tmp_path / "c.html").read_text()
    assert "<h2 id='checkpoints'>" in alone and "<h2>Guidelines</h2>" not in alone
