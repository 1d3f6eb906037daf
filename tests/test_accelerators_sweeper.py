"""hydra/sweeper=accelerators: the search (ddlio.feeds) against fake AU curves of the rank count, counting its points
against the grid's; the sweeper's settings and refusals; and one real search through sweep.py on local MPI ranks,
run twice (the second answers from the store)."""

from __future__ import annotations

import random
import re
import sqlite3
from collections.abc import Callable, Sequence
from pathlib import Path

import pytest

from ddlio.feeds import grid_size, judge, search
from hydra_plugins.ddlio_launcher.accelerators import settings_problems, steps_of

FED, STARVED = 0.97, 0.60


def fake(curve: Callable[[int], float], noise: float = 0.0, seed: int = 0) -> tuple[Callable, list[tuple[int, int]]]:
    """A ``measure`` whose AU at n accelerators is ``curve(n)`` plus uniform noise; and the (count, repetition)
    pairs it was asked for, in order."""
    rng = random.Random(seed)
    asked: list[tuple[int, int]] = []

    def measure(i: int, reps: Sequence[int]) -> list[float]:
        asked.extend((i + 1, r) for r in reps)
        return [curve(i + 1) + rng.uniform(-noise, noise) for _ in reps]

    return measure, asked


def step_at(boundary: int) -> Callable[[int], float]:
    return lambda n: FED if n <= boundary else STARVED


@pytest.mark.parametrize("boundary", [1, 2, 5, 6, 7, 33, 63])
def test_known_boundary_in_fewer_points_than_the_grid(boundary: int) -> None:
    measure, asked = fake(step_at(boundary), noise=0.01)
    a = search(list(range(1, 65)), measure, 0.9, 3)
    assert a.decided and a.feeds == boundary
    assert a.fed is not None and a.fed.accelerators == boundary and a.fed.word == "fed"
    assert a.starved is not None and a.starved.accelerators == boundary + 1 and a.starved.word == "starved"
    assert len(asked) == len(set(asked)) == a.evaluations  # nothing asked twice
    # galloping and bisection: about 2 log2(64) single points, plus 2 x 2 more repetitions at the boundary
    assert a.evaluations <= 2 * 6 + 1 + 4 < a.grid == grid_size(range(64), 3) == 192
    assert sum(1 for n, _ in asked if n == boundary) == sum(1 for n, _ in asked if n == boundary + 1) == 3


def test_the_line_names_the_count_and_the_first_starved_one() -> None:
    measure, _ = fake(lambda n: 0.97 if n <= 6 else 0.84, noise=0.04, seed=3)
    line = search(list(range(1, 17)), measure, 0.9, 5).line()
    assert re.fullmatch(r"feeds 6 accelerators at AU ≥ 0\.90 \(7: AU 0\.8\d \[0\.\d\d, 0\.\d\d\]\)", line), line


def test_gallops_1_2_4_8_then_bisects() -> None:
    measure, asked = fake(step_at(5))
    search(list(range(1, 65)), measure, 0.9, 1)
    assert [n for n, _ in asked] == [1, 2, 4, 8, 6, 5]


def test_never_fed() -> None:
    measure, asked = fake(lambda n: 0.5, noise=0.01)
    a = search(list(range(1, 9)), measure, 0.9, 3)
    assert a.feeds == 0 and a.fed is None and a.starved is not None and a.starved.accelerators == 1
    assert asked == [(1, 0), (1, 1), (1, 2)]
    assert a.line().startswith("feeds no accelerator at AU ≥ 0.90 (1: AU 0.5")


def test_fed_at_max_says_so() -> None:
    measure, asked = fake(lambda n: 0.99)
    a = search(list(range(1, 13)), measure, 0.9, 3)
    assert a.feeds == 12 and a.starved is None
    assert [n for n, _ in asked] == [1, 2, 4, 8, 12, 12, 12]
    assert "the most tried: hydra.sweeper.max=12" in a.line()


def by_count(values: dict[int, list[float]], default: Callable[[int], float]) -> Callable:
    """A ``measure`` that answers count n's repetitions from ``values[n]`` in turn, else ``default(n)``."""
    def measure(i: int, reps: Sequence[int]) -> list[float]:
        n = i + 1
        return [values[n][r] if n in values else default(n) for r in reps]
    return measure


def test_cannot_decide_when_the_interval_straddles_the_floor() -> None:
    # 1, 2, 4 fed, 8 starved, 6 fed, 7 starved once; 6's repetitions then straddle the floor
    measure = by_count({6: [0.97, 0.85, 0.95], 7: [0.6, 0.6, 0.6]}, step_at(7))
    a = search(list(range(1, 9)), measure, 0.9, 3)
    assert not a.decided and a.undecided is not None and a.undecided.accelerators == 6
    assert a.undecided.lo < 0.9 <= a.undecided.hi
    assert "cannot decide how many accelerators it feeds at AU ≥ 0.90: 6: AU 0.92 [0.85, 0.97]" in a.line()
    assert "straddles 0.90" in a.line() and "hydra.sweeper.repeats=5" in a.line()


def test_repetitions_that_move_the_boundary_are_searched_again() -> None:
    # 6 is fed once by luck (0.91) but starved over its five repetitions: the answer moves down to 5
    measure = by_count({6: [0.91, 0.70, 0.72, 0.71, 0.70]}, step_at(5))
    a = search(list(range(1, 9)), measure, 0.9, 5)
    assert a.feeds == 5 and a.starved is not None and a.starved.accelerators == 6 and len(a.starved.values) == 5
    assert a.fed is not None and a.fed.accelerators == 5 and len(a.fed.values) == 5
    # and the first starved one proves fed: the answer moves up
    measure = by_count({6: [0.88, 0.97, 0.96, 0.97, 0.98]}, step_at(6))
    a = search(list(range(1, 9)), measure, 0.9, 5)
    assert a.feeds == 6 and a.starved is not None and a.starved.accelerators == 7


def test_a_failed_point_ends_the_search_with_the_reason() -> None:
    a = search([1, 2, 4], lambda i, reps: [None if i == 1 else 0.97 for _ in reps], 0.9, 3)
    assert not a.decided and "2: failed" in a.line()


def test_one_repetition_is_judged_by_its_value() -> None:
    assert judge(3, [0.9], 0.9).word == "fed" and judge(3, [0.89], 0.9).word == "starved"
    assert judge(3, [None], 0.9).word == "failed"


@pytest.mark.parametrize("axis,most,nodes,ppn,per_node,expected", [
    ("ppn", 4, 1, 1, 0, [1, 2, 3, 4]),
    ("ppn", 8, 2, 1, 0, [2, 4, 6, 8]),
    ("nodes", 8, 1, 4, 0, [4, 8]),
    ("ppn_then_nodes", 16, 1, 1, 4, [1, 2, 3, 4, 8, 12, 16]),
])
def test_steps_of_each_axis(axis: str, most: int, nodes: int, ppn: int, per_node: int,
                            expected: list[int]) -> None:
    steps = steps_of(axis, most, nodes, ppn, per_node)
    assert [a for a, _ in steps] == expected
    for a, o in steps:
        assert o.get("nodes", nodes) * o.get("ppn", ppn) == a


def test_settings_problems_name_the_valid_values() -> None:
    assert settings_problems("ppn", 8, None, 3, 0) == []
    problems = settings_problems("gpus", 0, 1.5, 0, 0)
    assert any("axis='gpus' is not one of ppn | nodes | ppn_then_nodes" in p for p in problems)
    assert any(p.startswith("hydra.sweeper.max=0") for p in problems)
    assert any(p.startswith("hydra.sweeper.au=1.5") and "(0, 1]" in p for p in problems)
    assert any(p.startswith("hydra.sweeper.repeats=0") for p in problems)
    assert "per_node" in settings_problems("ppn_then_nodes", 8, None, 3, 0)[0]


@pytest.mark.parametrize("args,message", [
    (["workload=tiny"], "workload.compute_time is 0, so AU is 0 by construction"),
    (["workload=tiny", "workload.compute_time=0.01", "hydra.sweeper.axis=gpus"], "is not one of ppn | nodes"),
    (["workload=tiny", "workload.compute_time=0.01", "hydra.sweeper.au=1.5"], "hydra.sweeper.au=1.5 is out of range"),
    (["workload=tiny", "workload.compute_time=0.01", "ppn=1,2"], "ppn= is set by hydra/sweeper=accelerators"),
    (["workload=tiny", "workload.compute_time=0.01", "hydra.sweeper.axis=nodes", "hydra.sweeper.max=2"],
     "needs several nodes, which only cluster=slurm runs"),
    (["workload=tiny", "workload.compute_time=0.01", "wait=false"], "so it waits for every point"),
])
def test_refusals_are_one_line_before_anything_runs(sweep, tmp_path, args: list[str], message: str) -> None:
    r = sweep("-m", "hydra/sweeper=accelerators", *args, timeout=120)
    assert r.returncode == 2, r.stdout + r.stderr
    assert message in r.stderr and "Traceback" not in r.stderr
    assert not (tmp_path / "r.db").exists()


def test_dry_run_says_what_it_would_do(sweep, tmp_path) -> None:
    r = sweep("-m", "hydra/sweeper=accelerators", "hydra.sweeper.max=4", "workload=tiny",
              "workload.compute_time=0.01", "dry_run=true", timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "would search the most of 1..4 accelerators (axis=ppn) at AU ≥ 0.90" in r.stdout
    assert "the grid it replaces has 12 points" in r.stdout
    assert not (tmp_path / "r.db").exists()


def test_end_to_end_and_a_rerun_measures_nothing(sweep, tmp_path: Path) -> None:
    # 64 samples of 16 KiB, batch 8, 2 epochs: 8 steps a rank of 20 ms compute; the local disk keeps a few ranks
    # fed at 50%, so the search gallops 1, 2, 4 and repeats the boundary: a handful of ~1 s points
    args = ("-m", "hydra/sweeper=accelerators", "hydra.sweeper.max=4", "hydra.sweeper.au=0.5",
            "hydra.sweeper.repeats=2", "workload=tiny", "workload.compute_time=0.02")
    first = sweep(*args, timeout=300)
    assert first.returncode == 0, first.stdout + first.stderr
    [line] = [ln for ln in first.stdout.splitlines() if ln.startswith("workload=tiny workload.compute_time=0.02: ")]
    assert re.search(r": (feeds (\d+ accelerators?|no accelerator) at AU ≥ 0\.50 \(\d: AU|cannot decide)", line), line
    [count] = [ln for ln in first.stdout.splitlines() if ln.startswith("accelerators sweeper: ")]
    n = int(re.match(r"accelerators sweeper: (\d+) points for 1 configuration", count).group(1))
    assert 2 <= n <= 8 and "a grid over the same counts with 2 repetitions has 8" in count
    assert f"; {n} measured now" in count
    # the search's lines are the answer: no "best of N configurations" ranking the counts
    assert not any(ln.startswith(("best of", "no best")) for ln in first.stdout.splitlines())
    assert stored(tmp_path / "r.db") == (n, n)  # read with sqlite3: n points, each measured once
    again = sweep(*args, timeout=300)
    assert again.returncode == 0, again.stdout + again.stderr
    assert line in again.stdout.splitlines()  # the same answer, from the store
    assert f"accelerators sweeper: {n} points" in again.stdout and "; 0 measured now" in again.stdout
    assert stored(tmp_path / "r.db") == (n, n)


def stored(db: Path) -> tuple[int, int]:
    """(points, measurements) rows of the store, read with sqlite3 itself."""
    con = sqlite3.connect(db)
    try:
        return tuple(con.execute(f"SELECT count(*) FROM {t}").fetchone()[0] for t in ("points", "measurements"))
    finally:
        con.close()


def test_the_figure_docs_give_for_1_to_64() -> None:
    # docs/configuration.md: "3 to 16 points for any boundary in 1-64 with 3 repetitions, against the grid's 192"
    counts = []
    for boundary in range(0, 65):
        measure, _ = fake(step_at(boundary))
        a = search(list(range(1, 65)), measure, 0.9, 3)
        assert a.feeds == boundary
        counts.append(a.evaluations)
    assert (min(counts), max(counts), a.grid) == (3, 16, 192)


class FakeLauncher:
    """Answers each point's AU from its overrides (``format=`` picks the curve, ``ppn=`` the count) and keeps the
    batches it was given."""

    def __init__(self, curves: dict[str, Callable[[int], float]]) -> None:
        self.curves, self.batches = curves, []

    def launch(self, batch: Sequence[Sequence[str]], initial_job_idx: int) -> list:
        from types import SimpleNamespace

        self.batches.append([list(o) for o in batch])
        out = []
        for o in batch:
            kv = dict(x.split("=", 1) for x in o)
            assert kv["objective"] == "au"
            out.append(SimpleNamespace(return_value=self.curves[kv["format"]](int(kv["ppn"]))))
        return out


def test_a_grid_of_configurations_is_searched_in_lockstep() -> None:
    from hydra_plugins.ddlio_launcher.accelerators import AcceleratorsSweeper

    sweeper = AcceleratorsSweeper(max=16, repeats=3)
    sweeper.launcher = FakeLauncher({"hdf5": step_at(6), "npz": step_at(11)})  # type: ignore[assignment]
    plans = [([f"format={f}"], steps_of("ppn", 16, 1, 1, 0), 0.9) for f in ("hdf5", "npz")]
    sweeper._search_all(plans)
    assert [a.feeds for a in sweeper.answers] == [6, 11]
    batches = sweeper.launcher.batches  # type: ignore[attr-defined]
    # the first rounds carry a point of each configuration: one batch, not one per configuration
    assert {o[0] for o in batches[0]} == {"format=hdf5", "format=npz"}
    assert sum(len(b) for b in batches) == sum(a.evaluations for a in sweeper.answers)
    assert len(batches) < sum(a.evaluations for a in sweeper.answers)
