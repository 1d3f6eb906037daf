"""bench/vs_fio.py: the median's confidence interval against the binomial coverage it claims, and one tiny run of
the whole bench (the kernel under MPI and fio replaying its reads, in ABBA pairs), its table and its run log."""

from __future__ import annotations

import json
import math
import shutil

import pytest

from conftest import load_bench


@pytest.fixture(scope="module")
def vs() -> object:
    return load_bench("vs_fio")


def coverage(n: int, j: int) -> float:
    """P(the median of a continuous distribution lies in [x(j), x(n-1-j)]) for n draws (0-based ranks)."""
    return 1 - 2 * sum(math.comb(n, i) for i in range(j + 1)) / 2 ** n


@pytest.mark.parametrize("n", [6, 7, 9, 15, 30, 51])
def test_the_interval_is_the_narrowest_of_order_statistics_with_95_percent(vs, n):
    values = [float(v) for v in range(n)][::-1]  # any order: the interval is of the sorted values
    lo, hi = vs.median_ci(values)
    j = int(lo)
    assert hi == n - 1 - j and coverage(n, j) >= 0.95 > coverage(n, j + 1)


def test_too_few_values_give_their_range_and_one_value_itself(vs):
    assert vs.median_ci([3.0, 1.0, 2.0]) == (1.0, 3.0)
    assert vs.median_ci([2.5]) == (2.5, 2.5)
    assert all(math.isnan(x) for x in vs.median_ci([]))


@pytest.mark.skipif(shutil.which("fio") is None, reason="fio not installed (apt-get install fio)")
def test_a_tiny_run_pairs_kernel_and_fio_in_turn_and_prints_its_table(vs, tmp_path, capsys):
    runs = tmp_path / "runs.json"
    rc = vs.main(["--sizes", "64KiB", "--total", "8MiB", "--warm-total", "8MiB", "--patterns", "random",
                  "--caches", "warm", "--repeat", "2", "--epochs", "2", "--procs", "2", "--data", str(tmp_path / "d"),
                  "--runs", str(runs)])
    out = capsys.readouterr().out
    assert rc == 0
    assert "64.0 KiB  random  warm" in out and "min ratio:" in out.splitlines()[-1]
    (cell,) = json.loads(runs.read_text())
    assert cell["size"] == 65536 and cell["pattern"] == "random" and cell["kernel_first"] == [True, False]
    for name in ("kernel", "fio", "without_counters", "python_loop"):
        assert len(cell[name]) == 2 and all(v > 0 for v in cell[name])
    # fio replayed each epoch's own order of each rank: 128 records, each once per epoch over the two ranks
    for epoch in range(2):
        reads = [line.split()[2] for r in range(2)
                 for line in (tmp_path / "d" / f"epoch{epoch}-rank{r}.iolog").read_text().splitlines()
                 if " read " in line]
        assert sorted(int(o) for o in reads) == [i * 65536 for i in range(128)]
