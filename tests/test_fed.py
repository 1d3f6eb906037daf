"""AU as the answer once a step time is known: objective=auto, the fed/starved verdict against workload.au_floor
(ddlio.evidence.fed), AU ties broken by bandwidth, and the verdict in the end-of-sweep line, summary and the
guidelines."""

from __future__ import annotations

import json
import re
import sqlite3

import pandas as pd
import pytest

from analysis.guidelines.fed import fed_headline, fed_markdown, fed_rows
from ddlio.evidence import AU_FLOOR, best_of, fed, objective_of


def test_auto_is_au_with_a_compute_time_and_bandwidth_without():
    assert objective_of("auto", 0.05) == "au"
    assert objective_of("auto", 0.0) == "bandwidth_mib_s" and objective_of("auto", None) == "bandwidth_mib_s"
    assert objective_of("iops", 0.05) == "iops"  # an objective asked for is kept


@pytest.mark.parametrize(("values", "floor", "word"), [
    ([0.95, 0.96, 0.97], 0.9, "fed"),
    ([0.60, 0.62, 0.61], 0.9, "starved"),
    ([0.80, 0.95, 0.99], 0.9, "undecided"),   # the interval straddles the floor
    ([0.91], 0.9, "fed"), ([0.89], 0.9, "starved"),   # one repetition: its value
    ([0.75, 0.76], 0.7, "fed"),               # CosmoFlow's floor
])
def test_the_verdict_is_the_interval_against_the_floor(values, floor, word):
    v = fed(values, floor)
    assert v is not None and v.word == word and v.floor == floor
    assert v.text().startswith({"fed": "fed: AU", "starved": "starved: AU", "undecided": "fed or starved?"}[word])


def test_no_value_no_verdict_and_the_default_floor():
    assert fed([], 0.9) is None and fed([float("nan")]) is None
    assert fed([0.95]).floor == AU_FLOOR == 0.9


def test_au_ties_are_broken_by_bandwidth():
    groups = {"slow": [0.999, 0.998], "fast": [0.995, 0.996], "starved": [0.5, 0.52]}
    by_au = best_of(groups)
    assert by_au is not None and by_au.best.key == "slow"
    tied = best_of(groups, tiebreak={"slow": 100.0, "fast": 900.0, "starved": 2000.0}, near=0.01)
    assert tied is not None and tied.best.key == "fast"  # both fed; the faster has headroom
    assert [e.key for e in tied.ranked] == ["fast", "slow", "starved"]  # a starved one never wins on bandwidth


def _points(rows: list[tuple[str, float, float, float]]) -> pd.DataFrame:
    """An analysis frame of (config_key, au, compute_time_s, bandwidth) points, valid, not first reads."""
    return pd.DataFrame([{
        "point_key": f"p{i}", "config_key": k, "label": f"cfg-{k}", "status": "completed", "validity": "valid",
        "invalid_reasons": "", "first_read": False, "nodes": 1, "ppn": 2, "ranks": 2, "au": au,
        "compute_time_s": step, "bandwidth_mib_s": bw, "config": json.dumps({"au_floor": 0.7} if k == "c" else {}),
    } for i, (k, au, step, bw) in enumerate(rows)])


def test_guidelines_rows_fed_first_each_against_its_own_floor():
    pts = _points([("a", 0.95, 0.1, 500), ("a", 0.97, 0.1, 510), ("b", 0.5, 0.1, 90), ("b", 0.52, 0.1, 95),
                   ("c", 0.75, 0.1, 80), ("c", 0.74, 0.1, 82), ("d", 0.0, 0.0, 3000)])
    rows = fed_rows(pts)
    assert rows["label"].tolist() == ["cfg-a", "cfg-c", "cfg-b"]  # d has no compute time: not judged
    assert rows["verdict"].tolist() == ["fed", "fed", "starved"]
    assert rows.loc[rows["label"] == "cfg-c", "floor"].item() == 0.7
    assert fed_headline(rows).startswith("2 of 3 configurations keep their accelerators fed")
    md = fed_markdown(rows)
    assert "## Accelerators: fed or starved" in md and "| cfg-b | 2 (1×2) |" in md and "**starved**" in md
    assert fed_markdown(fed_rows(_points([("d", 0.0, 0.0, 3000)]))) == ""  # nothing to say without a step time


def test_a_sweep_with_a_compute_time_ranks_by_au_and_says_fed_or_starved(sweep, analysis, tmp_path):
    # 512 MiB: timed I/O long enough to trust; 0.01 s a batch of 8 MiB keeps a rank well under its floor here
    args = ("-m", "format=hdf5,npz", "workload=tiny", "workload.samples=512", "workload.sample_size=1MiB",
            "workload.samples_per_file=64", "workload.epochs=1", "workload.compute_time=0.01")
    p = sweep(*args, timeout=600)
    assert p.returncode == 0, p.stdout + p.stderr
    assert re.search(r"best of 2 configurations by au \(maximised, AU within 0.01 of the best ranked by "
                     r"bandwidth_mib_s\): (\S+) = mean of 1 repetition", p.stdout), p.stdout
    verdict = re.search(r"^  (fed|starved): AU (\S+) \(n=1, no interval\) [≥<] 0\.90, with 1 accelerator", p.stdout,
                        re.M)
    assert verdict, p.stdout
    assert "of 2 configurations:" in p.stdout and "at AU ≥ 0.90 (workload.au_floor)" in p.stdout
    assert re.search(r"\[1/2\] hdf5/shared \S+: [\d.]+ MiB/s, \d+ IOPS, AU [\d.]+ \((fed, ≥|starved, <) 0\.90\)",
                     p.stdout), p.stdout
    with sqlite3.connect(tmp_path / "r.db") as c:
        aus = dict(c.execute("SELECT format, au FROM points").fetchall())
    best_au = float(re.search(r"\): (\S+) = mean", p.stdout).group(1))
    assert best_au == pytest.approx(max(aus.values()), abs=0.0101)  # AU within 0.01 of the best: by bandwidth
    assert verdict.group(1) == ("fed" if best_au >= 0.9 else "starved")

    table = analysis("summary", "--db", str(tmp_path / "r.db"))
    assert table.returncode == 0 and re.search(r"\d\.\d\d (fed|starved)", table.stdout), table.stdout
    js = json.loads(analysis("summary", "--db", str(tmp_path / "r.db"), "--format", "json").stdout)
    assert {r["fed"] for r in js} <= {"fed", "starved"} and all(r["au_floor"] == 0.9 for r in js)
    g = analysis("guidelines", "--db", str(tmp_path / "r.db"), "--bootstrap", "200")
    assert "## Accelerators: fed or starved" in g.stdout and "accelerator utilisation" in g.stdout, g.stdout
    status = analysis("status", "--db", str(tmp_path / "r.db"))
    assert re.search(r"accelerators: \d points? fed, \d starved", status.stdout), status.stdout
