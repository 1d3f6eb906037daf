"""What the analysis says must be true and agree: a point too short to trust, a stripe count where nothing stripes,
and the guidelines' and figures' text. Frames and records here are SYNTHETIC (hand-written rows of the shape the
store gives), never measurements."""

from __future__ import annotations

import pandas as pd
import pytest
from test_analysis import points_rows

from analysis.figures import stripe
from analysis.figures.base import Inputs
from analysis.figures.heatmap import draw_heatmap
from analysis.guidelines.compare import Settings
from analysis.guidelines.render import markdown
from analysis.guidelines.statements import statements
from analysis.validity import MIN_IO_S, valid_only, verdicts
from ddlio.identity import labels
from ddlio.records import ResultRecord
from experiments.run.progress import result_line


def frame(rows: list[dict]) -> pd.DataFrame:
    base = dict(config_key="c", cache_policy="cold", cache="cold", first_read=False, samples=64, sample_size=3072,
                ranks=1, batch_size=8, epochs=2, stripe_count=1, stripe_size=1048576, striping_applicable=True,
                fs_type="lustre", bandwidth_mib_s=100.0, env_id="e", io_time_slowest_s=1.0)
    return pd.DataFrame([{**base, **r} for r in rows])


def test_a_point_whose_timed_io_is_under_the_floor_is_invalid_and_left_out_of_the_guidelines():
    df = frame([{}, dict(config_key="s", io_time_slowest_s=0.004), dict(config_key="n", io_time_slowest_s=None)])
    v = verdicts(df)
    assert v["validity"].tolist() == ["valid", "invalid", "valid"]  # not measured: not judged
    assert "timed I/O too short (4 ms < 0.1 s)" in v["invalid_reasons"].iloc[1]
    kept, note = valid_only(df.assign(**v))
    assert len(kept) == 2 and note == "1 of 3 points left out as invalid: 1x timed I/O too short"
    assert MIN_IO_S == 0.1


def record(io_s: float = 1.0, stripe: int = 1, applicable: bool = True, fs: str = "lustre") -> ResultRecord:
    return ResultRecord.from_dict({
        "kind": "ddlio.result", "point_key": "k", "point": {"stripe_count": stripe, "stripe_size": 1048576,
                                                           "cache": "cold", "fs_type": fs},
        "totals": {"bandwidth_mib_s": 394.0, "iops": 25240.0, "io_time_slowest_s": io_s, "cache": "cold"},
        "layout": {"applicable": applicable, "requested": {"stripe_count": stripe, "stripe_size": 1048576}},
        "fs": {"type": fs}})


def test_the_points_line_warns_of_a_short_measurement_and_of_a_stripe_not_applied():
    assert "warning" not in result_line(record())
    short = result_line(record(io_s=0.004))
    assert "warning: timed I/O 4 ms is under the 0.1 s floor: too short to trust" in short
    ext4 = result_line(record(stripe=2, applicable=False, fs="ext4"))
    assert "warning: stripe=2 not applied: ext4 does not stripe" in ext4
    assert "warning" not in result_line(record(stripe=1, applicable=False, fs="ext4"))  # the default: nothing asked


def test_a_stripe_count_where_nothing_stripes_is_never_labelled_as_applied_and_is_invalid():
    cfg = dict(format="hdf5", access="shared", nodes=1, ppn=1, stripe_size=1048576, fs_type="ext4",
               striping_applicable=False)
    two, one = {**cfg, "stripe_count": 2}, {**cfg, "stripe_count": 1}
    assert labels([two]) == ["hdf5/shared 1N-1P-stripe=2-not-applied"]
    assert "2OST" not in labels([two, one])[0] and labels([two, one])[1] == "hdf5/shared 1N-1P-1OST stripe not applied"
    v = verdicts(frame([dict(stripe_count=2, striping_applicable=False, fs_type="ext4")]))
    assert "striping requested (count 2" in v["invalid_reasons"].iloc[0]


def test_stripe_figures_are_drawn_only_for_two_applied_stripe_counts_or_more():
    def plans(rows: list[dict]) -> list[str]:
        pts = points_rows(rows)
        return [j.name for j in stripe.plan(Inputs(points=pts, keys=pd.Series(dtype=str), hists=None))]

    metrics = dict(bandwidth_mib_s=100.0, iops=1.0, io_time_slowest_s=1.0, wall_time_s=1.0)
    assert plans([dict(stripe_count=s, **metrics) for s in (1, 4)]) == ["stripe_bandwidth_mib_s", "stripe_iops"]
    assert plans([dict(stripe_count=1, **metrics)]) == []  # one stripe count: no curve
    assert plans([dict(stripe_count=s, striping_applicable=False, fs_type="ext4", **metrics) for s in (1, 4)]) == []


def test_the_best_per_format_heatmap_fits_its_text_with_one_node_column():
    values = pd.DataFrame({1: [123.4, 98.7]}, index=["hdf5/shared", "npz/shared rt=4 reader=torch"])
    layouts = pd.DataFrame({1: ["any (not Lustre)", "defaultOST S4MiB"]}, index=values.index)
    fig = draw_heatmap(values, layouts)
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    box = fig.axes[0].get_window_extent(renderer)
    for t in fig.axes[0].texts:
        e = t.get_window_extent(renderer)
        assert box.x0 <= e.x0 and e.x1 <= box.x1, (t.get_text(), e, box)


LAY = ["access", "format", "setting", "nodes", "ppn", "size_class", "verdict", "reason", "layouts", "best",
       "best_mean", "best_lo", "best_hi", "best_n", "baseline", "gain_pct", "gain_lo_pct", "gain_hi_pct"]
FMT = ["access", "setting", "nodes", "ppn", "size_class", "verdict", "reason", "best", "best_layout", "best_mean",
       "best_lo", "best_hi", "best_n", "runner_up", "runner_up_layout", "gain_pct", "gain_lo_pct", "gain_hi_pct"]


def guideline_frames(layouts: int) -> tuple[pd.DataFrame, pd.DataFrame]:
    lay = pd.DataFrame([dict(access="shared", format="hdf5", setting="", nodes=1, ppn=4, size_class="small (<64KiB)",
                             verdict="cannot decide", reason="only one stripe layout measured (1OST)",
                             layouts=layouts, best="1OST", best_mean=100.0, best_lo=90.0, best_hi=110.0, best_n=3,
                             baseline=None, gain_pct=float("nan"), gain_lo_pct=float("nan"),
                             gain_hi_pct=float("nan"))], columns=LAY)
    fmt = pd.DataFrame([dict(access="shared", setting="16KiB", nodes=1, ppn=4, size_class="small (<64KiB)",
                             verdict="recommend", reason="r", best="tfrecord", best_layout="1OST", best_mean=300.0,
                             best_lo=290.0, best_hi=310.0, best_n=3, runner_up="hdf5", runner_up_layout="1OST",
                             gain_pct=50.0, gain_lo_pct=40.0, gain_hi_pct=60.0)], columns=FMT)
    return lay, fmt


def test_guidelines_text_puts_each_thing_in_its_own_column_and_heading():
    lay, fmt = guideline_frames(layouts=1)
    stmts = statements(lay, fmt, pd.DataFrame(), Settings())
    md = markdown(lay, fmt, stmts, Settings(), ["2 of 5 points left out as invalid: 2x timed I/O too short"])
    assert "| shared | 16KiB | 1×4 |" in md and "| shared 16KiB |" not in md  # the setting has a column of its own
    assert "| access | setting | nodes×ppn |" in md
    assert "No scenario measured more than one stripe layout" in md and "| hdf5 |" not in md  # no stripe row
    assert not any("stripe-layout scenarios cannot be decided" in s["text"] for s in stmts)
    assert any("(4 ranks per node" in s["text"] for s in stmts)
    left = md.index("## Points left out")
    assert left < md.index("left out as invalid") and "## Caches below the client\n" not in md


@pytest.mark.parametrize("swept", [2, 3])
def test_a_scenario_with_stripe_counts_swept_keeps_its_row(swept):
    lay, fmt = guideline_frames(layouts=swept)
    md = markdown(lay, fmt, [], Settings())
    assert "| shared | hdf5 | 1×4 |" in md and "No scenario measured" not in md


def test_best_at_the_end_of_a_sweep_counts_what_the_guidelines_count(tmp_path):
    from experiments.run.batch import Outcome
    from helpers import point
    from hydra_plugins.ddlio_launcher.launcher import print_best

    one, two, hdf = point(tmp_path, "stripe=1"), point(tmp_path, "stripe=2"), point(tmp_path, "format=npz")
    assert not two.layout.striping_applicable  # this machine's file system does not stripe
    said: list[str] = []
    print_best([(["stripe=1"], Outcome(one, "completed", 100.0)), (["stripe=2"], Outcome(two, "completed", 900.0)),
                (["format=npz"], Outcome(hdf, "completed", 50.0))], "bandwidth_mib_s", said.append)
    text = "\n".join(said)
    assert "best of 2 configurations" in text and ": 100 = mean" in text  # stripe=2's 900 is invalid: not best
    assert f"left out, as the guidelines leave them out: stripe=2 on {two.layout.fs_type}" in text
    said.clear()
    print_best([(["stripe=2"], Outcome(two, "completed", 900.0)), (["stripe=4"], Outcome(point(tmp_path, "stripe=4"),
                "completed", 800.0))], "bandwidth_mib_s", said.append)
    assert said and said[0].startswith("no best: stripe=2 on") and "invalid points count nowhere" in said[0]
    said.clear()  # a point whose timed I/O is under the floor is invalid too, and counts in no best
    print_best([(["stripe=1"], Outcome(one, "completed", 100.0, io_s=0.5)),
                (["format=npz"], Outcome(hdf, "completed", 900.0, io_s=0.004)),
                (["stripe=1", "x"], Outcome(point(tmp_path, "format=tfrecord"), "completed", 80.0, io_s=0.3))],
               "bandwidth_mib_s", said.append)
    text = "\n".join(said)
    assert ": 100 = mean" in text and "left out, as the guidelines leave them out: 1 point with timed I/O under 0.1 s" \
        in text, text


def test_summary_is_best_first_readable_narrow_and_shows_only_what_varies(tmp_path, capsys):
    from test_analysis import build_store

    from analysis.__main__ import main
    from analysis.summary import cut_at_word

    rows = [dict(stripe_count=s, repeat=r, bandwidth=bw, striping_applicable=True, fs_type="lustre")
            for s, r, bw in [(1, 0, 100.0), (4, 0, 394.2), (8, 0, 250.0), (16, 0, 25240.0)]]
    build_store(tmp_path, rows)
    assert main(["summary", "--db", str(tmp_path / "r.db")]) == 0
    out = capsys.readouterr().out
    table = out.split("\n\n")[0].splitlines()
    assert max(len(line) for line in table) <= 100, out
    assert "e+0" not in out and "25,240.0" in out  # readable numbers, not 2.524e+04
    body = [line for line in table[1:] if "OST" in line]
    assert [line.split()[1] for line in body] == ["1N-1P-16OST", "1N-1P-4OST", "1N-1P-8OST", "1N-1P-1OST"]
    assert "every point: " in out and "cache cold" in out  # the same for all: said once, not a column
    assert " cache " not in table[0] and "status" not in table[0]
    assert cut_at_word("the dataset failed verification because a shard", 30) == "the dataset failed…"


def test_status_names_an_interrupted_sweep_cuts_at_a_word_and_keeps_each_sweeps_job_id(tmp_path, capsys):
    import sqlite3
    import time

    from test_analysis import build_store

    from analysis.__main__ import main

    store = build_store(tmp_path, [dict(stripe_count=1, repeat=0, bandwidth=100.0, striping_applicable=True,
                                        fs_type="lustre")])
    db = str(tmp_path / "r.db")
    with sqlite3.connect(db) as c:
        key = c.execute("SELECT point_key FROM points").fetchone()[0]
        c.execute("UPDATE points SET status = 'failed', job_id = '222', error = ? WHERE point_key = ?",
                  ("the dataset failed verification because shard 3 of 8 was truncated while it was being "
                   "written by another driver on another node", key))
    point = {"point_key": key}
    store.begin_sweep("sweep-a", [], [point], set())  # interrupted: never ended
    time.sleep(1.1)  # the second sweep starts later (start times in whole seconds)
    store.begin_sweep("sweep-b", [], [point], set())
    store.end_sweep(0, 1)
    assert main(["status", "--db", db]) == 0
    out = capsys.readouterr().out
    a, b = out.split("\nsweep sweep-b")
    assert "interrupted before it ended" in a and "driver not finished" not in a
    assert "job - (measured again by sweep sweep-b)" in a and "job 222" in b
    assert "while it was being…" in b or "…" in b
    assert not any(line.rstrip().endswith(("writte", "wri")) for line in out.splitlines())
