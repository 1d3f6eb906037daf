"""``python -m analysis predict``: the scale model (analysis/scalemodel.py) recovers known parameters; on stores of
synthetic points drawn from a known model the prediction and its interval hold the truth; the held-out check, each
refusal with its one-line reason, the accelerators, JSON, and a real sweep's store."""

from __future__ import annotations

import json

import numpy as np
import pytest
from test_analysis import build_store

from analysis.__main__ import main
from analysis.scalemodel import Fit, fit, forms_allowed, held_out, prediction_interval

# a tiny point's batch: 8 samples of 16 KiB (tests/helpers.py point(): workload=tiny)
BATCH_BYTES = 8 * 16384


def truth_rows(truth: Fit, scales: list[int], reps: int = 3, rel: float = 0.03, axis: str = "ppn",
               seed: int = 1, **config) -> list[dict]:
    """Repetitions at ``scales`` (along ``axis``; one node or one rank a node) drawn from ``truth`` with ``rel``
    relative noise (MiB/s)."""
    rng = np.random.default_rng(seed)
    rows = []
    for s in scales:
        nodes, ppn = (1, s) if axis == "ppn" else (s, 1)
        mean = float(truth.predict(nodes * ppn))
        for i in range(reps):
            rows.append(dict(nodes=nodes, ppn=ppn, repeat=i, bandwidth=mean * (1 + rel * rng.standard_normal()),
                             stripe_count=4, **config))
    return rows


def run(capsys, *args: str) -> tuple[int, str, str]:
    code = main(["predict", *args])
    out = capsys.readouterr()
    return code, out.out, out.err


# ------------------------------------------------------------------------------------------------ the model

def test_each_form_recovers_its_parameters_from_exact_data():
    r = np.repeat([1.0, 2, 4, 8, 16], 2)
    for truth in (Fit("linear", 40.0, np.inf, 0.0, 0, 0), Fit("ceiling", 100.0, 250.0, 0.0, 0, 0),
                  Fit("contention", 100.0, np.inf, 0.1, 0, 0), Fit("full", 100.0, 350.0, 0.02, 0, 0)):
        got = fit(r, truth.predict(r))
        assert got.form == truth.form
        assert got.rate == pytest.approx(truth.rate, rel=1e-3)
        assert got.ceiling == pytest.approx(truth.ceiling, rel=1e-3)
        assert got.contention == pytest.approx(truth.contention, rel=1e-2, abs=1e-6)


def test_a_form_needs_one_scale_more_than_its_parameters():
    assert forms_allowed(2) == ["linear"]
    assert forms_allowed(3) == ["linear", "ceiling", "contention"]
    assert forms_allowed(4) == ["linear", "ceiling", "contention", "full"]


def test_held_out_predicts_the_largest_scale_from_the_others():
    truth = Fit("ceiling", 100.0, 300.0, 0.0, 0, 0)
    r = np.repeat([1.0, 2, 4, 8], 2)
    check = held_out(r, truth.predict(r))
    assert check.ranks == 8 and check.measured == pytest.approx(300.0)
    assert check.error < 0.01  # 1, 2, 4 show the ceiling already
    bent = np.array([100.0, 200.0, 150.0])  # falls at the largest scale: 1 and 2 cannot foresee it
    assert held_out(np.array([1.0, 2, 4]), bent).error > 0.25


def test_the_held_out_check_refits_the_form_the_prediction_uses():
    # bandwidth bending under contention from the first rank on, measured at ppn 1, 2 and 4 (the scales):
    # the whole fit takes the contention form; on 1 and 2 alone only a line is allowed, which misses 4 by 40%
    truth = Fit("contention", 35.0, np.inf, 0.23, 0, 0)
    r = np.repeat([1.0, 2, 4], 3)
    y = truth.predict(r) * np.tile([0.98, 1.0, 1.02], 3)
    assert fit(r, y).form == "contention"
    assert held_out(r, y).error > 0.25  # a line through 1 and 2
    assert held_out(r, y, "contention").error < 0.02  # the form itself, refitted on 1 and 2
    assert held_out(r, y, "full").error > 0.25  # three parameters on two scales: not identifiable, the best allowed


def test_the_interval_widens_with_the_noise():
    truth = Fit("linear", 50.0, np.inf, 0.0, 0, 0)
    rng = np.random.default_rng(3)
    r = np.repeat([1.0, 2, 4], 3)
    widths = []
    for rel in (0.01, 0.1):
        y = truth.predict(r) * (1 + rel * rng.standard_normal(len(r)))
        lo, hi = prediction_interval(r, y, "linear", 8, draws=400)
        assert lo <= 400 <= hi
        widths.append(hi - lo)
    assert widths[1] > 3 * widths[0]


# ------------------------------------------------------------------------------------------------ the command

def test_prediction_and_its_interval_hold_the_truth(tmp_path, capsys):
    truth = Fit("ceiling", 100.0, 300.0, 0.0, 0, 0)
    build_store(tmp_path, truth_rows(truth, [1, 2, 4, 8]))
    code, out, err = run(capsys, "--at", "ppn=16", "--db", str(tmp_path / "r.db"), "--format", "json")
    assert code == 0, err
    (p,) = json.loads(out)["predictions"]
    assert p["refused"] is None and p["ppn"] == 16 and p["ranks"] == 16
    assert p["lo_mib_s"] <= 300.0 <= p["hi_mib_s"]
    assert p["bandwidth_mib_s"] == pytest.approx(300.0, rel=0.05)
    assert p["model"]["form"] == "ceiling" and p["model"]["ceiling_mib_s"] == pytest.approx(300.0, rel=0.05)
    assert p["model"]["targets"] == 4 and p["model"]["per_target_mib_s"] == pytest.approx(75.0, rel=0.05)
    assert p["held_out"]["ppn"] == 8 and p["held_out"]["error"] < 0.1
    assert [m["ppn"] for m in p["measured"]] == [1, 2, 4, 8] and {m["n"] for m in p["measured"]} == {3}
    assert p["accelerators"] is None  # no compute time: no accelerators to feed


def test_nodes_axis_and_the_validation_shape_of_three_scales(tmp_path, capsys):
    """Measured at 1, 2 and 4 nodes, predicted at 8 (as the CephFS validation measures ppn 1, 2, 4 for 8)."""
    truth = Fit("linear", 50.0, np.inf, 0.0, 0, 0)
    build_store(tmp_path, truth_rows(truth, [1, 2, 4], reps=2, axis="nodes"))
    code, out, err = run(capsys, "--at", "nodes=8", "--db", str(tmp_path / "r.db"))
    assert code == 0, err
    head, line, model, check = out.splitlines()[:4]
    assert "prediction intervals" in head and "8N-8P" in line and "at nodes=8 (8 ranks)" in line
    lo, hi = (float(v) for v in line.split("[")[1].split("]")[0].split(", "))
    assert lo <= 400.0 <= hi
    assert model.strip().startswith("model linear") and "fitted on nodes 1, 2, 4 (6 repetitions)" in model
    assert "held-out: nodes=4 predicted from the smaller scales" in check


def test_refusals_say_why_in_one_line(tmp_path, capsys):
    db = str(tmp_path / "r.db")
    build_store(tmp_path, truth_rows(Fit("linear", 50.0, np.inf, 0.0, 0, 0), [1, 2, 4]))
    code, out, _ = run(capsys, "--at", "ppn=9", "--db", db)
    assert code == 1
    assert out.splitlines()[1].endswith("refused: ppn=9 is beyond 2× the largest measured scale (ppn=4: at most "
                                        "ppn=8)")
    bent = [dict(nodes=1, ppn=p, repeat=i, bandwidth=bw, stripe_count=4)
            for p, bw in ((1, 100.0), (2, 200.0), (4, 150.0)) for i in range(2)]
    build_store(tmp_path, bent, name="bent.db")
    code, out, _ = run(capsys, "--at", "ppn=8", "--db", str(tmp_path / "bent.db"))
    assert code == 1
    # the whole fit's form (a ceiling) refitted on ppn 1 and 2 puts its ceiling at 200: it cannot foresee the fall
    assert "refused: the held-out check failed: ppn=4 predicted from the smaller scales at 200 MiB/s, measured " \
           "150 MiB/s (error 33% > 25%)" in out
    build_store(tmp_path, truth_rows(Fit("linear", 50.0, np.inf, 0.0, 0, 0), [1, 2]), name="two.db")
    code, out, _ = run(capsys, "--at", "ppn=4", "--db", str(tmp_path / "two.db"))
    assert code == 1 and "refused: measured at 2 scales (ppn 1, 2); a prediction needs at least 3" in out
    code, out, _ = run(capsys, "--at", "ppn=4", "--db", str(tmp_path / "two.db"), "--format", "json")
    assert "at least 3" in json.loads(out)["predictions"][0]["refused"]


def test_accelerators_fed_and_starved(tmp_path, capsys):
    """Each rank needs 8 × 16 KiB / 0.01 s = 12.5 MiB/s; 8 ranks get 25 MiB/s each (fed) under a 200 MiB/s
    ceiling, 7.5 MiB/s each (AU 0.6: starved) under a 60 MiB/s one."""
    assert BATCH_BYTES / 0.01 / 2**20 == 12.5
    for ceiling, word in ((200.0, "feeds 8 accelerators at AU ≥ 0.90: AU 1.00"), (60.0, "starves 8 accelerators")):
        name = f"{int(ceiling)}.db"
        build_store(tmp_path, truth_rows(Fit("ceiling", 20.0, ceiling, 0.0, 0, 0), [1, 2, 4, 8], rel=0.01,
                                         compute_time=0.01), name=name)
        code, out, err = run(capsys, "--at", "ppn=8", "--db", str(tmp_path / name))
        assert code == 0, err
        assert word in out and "(each needs 12.5 MiB/s)" in out
        code, out, _ = run(capsys, "--at", "ppn=8", "--db", str(tmp_path / name), "--format", "json")
        acc = json.loads(out)["predictions"][0]["accelerators"]
        assert acc["au_floor"] == 0.9 and acc["accelerators"] == 8
        assert acc["verdict"] == ("fed" if ceiling == 200.0 else "starved")
        if ceiling == 60.0:
            assert acc["au_lo"] <= 0.6 <= acc["au_hi"]


def test_where_picks_the_points_and_bad_input_is_one_message(tmp_path, capsys):
    db = str(tmp_path / "r.db")
    build_store(tmp_path, truth_rows(Fit("linear", 50.0, np.inf, 0.0, 0, 0), [1, 2, 4, 8]))
    code, out, _ = run(capsys, "--at", "ppn=8", "--db", db, "--where", "ppn <= 4", "--format", "json")
    assert code == 0 and [m["ppn"] for m in json.loads(out)["predictions"][0]["measured"]] == [1, 2, 4]
    for bad in ("gpus=4", "ppn=0", "ppn=x", "ppn"):
        code, _, err = run(capsys, "--at", bad, "--db", db)
        assert code == 2 and err.startswith("error: --at") and "nodes, ppn, ranks" in err


def test_no_traceback_on_an_empty_store_or_one_scale(tmp_path, capsys):
    from ddlio.store import Store

    Store(str(tmp_path / "empty.db"))
    code, out, err = run(capsys, "--at", "nodes=2", "--db", str(tmp_path / "empty.db"))
    assert code == 1 and out == "" and "nothing to predict from" in err and "Traceback" not in err
    code, out, _ = run(capsys, "--at", "nodes=2", "--db", str(tmp_path / "empty.db"), "--format", "json")
    assert code == 1 and json.loads(out)["predictions"] == []
    build_store(tmp_path, truth_rows(Fit("linear", 50.0, np.inf, 0.0, 0, 0), [2]), name="one.db")
    code, out, err = run(capsys, "--at", "ppn=4", "--db", str(tmp_path / "one.db"))
    assert code == 1 and "refused: measured at 1 scale (ppn 2)" in out and "Traceback" not in err


def test_a_real_sweeps_store(tmp_path, sweep, analysis):
    """``sweep.py -m ppn=1,2,4 repeat=0,1`` then ``predict --at ppn=8``: an answer (or a refusal that says why)
    for the one configuration, from the points as the sweep stored them (those too short to trust left out)."""
    done = sweep("-m", "ppn=1,2,4", "repeat=0,1", "workload=tiny", "workload.samples=4096")
    assert done.returncode == 0, done.stderr[-2000:]
    db = str(tmp_path / "r.db")
    got = analysis("predict", "--at", "ppn=8", "--db", db, "--format", "json")
    assert got.returncode in (0, 1) and "Traceback" not in got.stderr and not got.stderr, got.stderr
    doc = json.loads(got.stdout)
    assert doc["at"] == {"ppn": 8}
    for p in doc["predictions"]:
        assert p["ppn"] == 8 and p["ranks"] == 8 and "1N-8P" in p["configuration"]
        assert {m["ppn"] for m in p["measured"]} <= {1, 2, 4}
        assert p["refused"] or p["lo_mib_s"] <= p["bandwidth_mib_s"] <= p["hi_mib_s"]
    assert doc["predictions"] or doc["notes"]  # nothing measured to trust is said, not silently empty
    table = analysis("predict", "--at", "ppn=8", "--db", db)
    assert table.returncode == got.returncode and "Traceback" not in table.stderr
    assert "1N-8P" in table.stdout or "nothing to predict from" in table.stderr


def test_band_on_the_scaling_figure(tmp_path):
    """The scaling figure draws each configuration's prediction beyond its largest node count: a shaded
    interval about a dashed line on the bandwidth panel, the predicted node counts among the ticks."""
    from analysis import frames as F
    from analysis.figures import draw_scaling
    from analysis.predict import band
    from analysis.query import analysis_frame

    truth = Fit("ceiling", 100.0, 300.0, 0.0, 0, 0)
    store = build_store(tmp_path, truth_rows(truth, [1, 2, 4, 8], axis="nodes"))
    points = analysis_frame(store)
    b = band(points, "nodes")
    assert list(b["nodes"]) == [8, 10, 12, 14, 16] and b["key"].nunique() == 1
    assert ((b["lo"] <= 300.0) & (b["hi"] >= 300.0)).all()
    fig = draw_scaling(F.best_per_scale(F.configs(points)), b)
    ax = fig.axes[0]
    assert ax.get_ylabel() == F.METRICS["bandwidth_mib_s"][0]
    assert len(ax.collections) >= 1 and any(line.get_linestyle() == "--" for line in ax.get_lines())
    assert 16 in list(ax.get_xticks())
    assert band(points[points["nodes"] <= 2], "nodes").empty  # two node counts: nothing predicted, nothing drawn


def test_report_says_the_prediction(tmp_path, capsys):
    """The report's section beyond the measured scale: measured at nodes 1, 2, 4, 8, predicted at 16."""
    db, out = str(tmp_path / "r.db"), tmp_path / "report.html"
    build_store(tmp_path, truth_rows(Fit("ceiling", 100.0, 300.0, 0.0, 0, 0), [1, 2, 4, 8], axis="nodes"))
    assert main(["report", "--db", db, "--out", str(out)]) == 0
    text = out.read_text(encoding="utf-8")
    assert ">Beyond the measured scale<" in text and "Bandwidth at nodes=16" in text
    item = text.split("<li class='recommend'><b>")[-1].split("</li>")[0]
    assert "16N-16P" in item and "MiB/s [" in item and "(ceiling model; held-out error" in item
    lo, hi = (float(v) for v in item.split("MiB/s [")[1].split("]")[0].split(", "))
    assert lo <= 300.0 <= hi


def test_ranks_axis_pools_nodes_and_ppn_and_a_stored_au_floor_counts(tmp_path, capsys):
    """Along ranks, 2 nodes × 2 and 1 node × 4 are one scale of 4 ranks; a point's own workload.au_floor (0.5)
    judges the accelerators in place of 0.90: 16 ranks at 60 MiB/s get 3.75 MiB/s each of 12.5 (AU 0.3)."""
    truth = Fit("ceiling", 20.0, 60.0, 0.0, 0, 0)
    rows = truth_rows(truth, [1, 2, 8], reps=2, rel=0.01, compute_time=0.01, au_floor=0.5)
    rows += [dict(r, nodes=2, ppn=2, bandwidth=60.0 * (1 + 0.01 * i)) for i, r in enumerate(rows[:2])]
    build_store(tmp_path, rows)
    code, out, err = run(capsys, "--at", "ranks=16", "--db", str(tmp_path / "r.db"), "--format", "json")
    assert code == 0, err
    (p,) = json.loads(out)["predictions"]
    assert [(m["ranks"], m["n"]) for m in p["measured"]] == [(1, 2), (2, 2), (4, 2), (8, 2)]
    assert p["ranks"] == 16 and p["lo_mib_s"] <= 60.0 <= p["hi_mib_s"]
    acc = p["accelerators"]
    assert acc["au_floor"] == 0.5 and acc["verdict"] == "starved" and acc["au"] == pytest.approx(0.3, rel=0.05)
