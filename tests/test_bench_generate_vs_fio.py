"""bench/generate_vs_fio.py: one tiny run generates through ddlio's path beside fio and prints its ratios, for a
format of the bench's own sizes and for a workload preset's dataset (its format, sizes and files)."""

from __future__ import annotations

import shutil

import pytest

from conftest import load_bench

pytestmark = pytest.mark.skipif(shutil.which("fio") is None, reason="fio not installed (apt-get install fio)")


@pytest.fixture(scope="module")
def gen() -> object:
    return load_bench("generate_vs_fio")


def test_a_format_of_the_bench_sizes_is_generated_beside_fio(gen, tmp_path, capsys):
    rc = gen.main(["--formats", "bin", "--size", "4MiB", "--sample-size", "64KiB", "--rounds", "1",
                   "--data-root", str(tmp_path / "d")])
    out = capsys.readouterr().out
    assert rc == 0, out
    row = [ln for ln in out.splitlines() if ln.split()[:1] == ["bin"]][-1]
    assert "4 MiB" in row or "4.0 MiB" in row, row
    start = float(row.split()[-3])  # ... start s, fio beside, ratio: the forked writer's start, outside the clock
    assert 0.0 < start < 60.0, row
    assert "writer's start" in out
    assert out.splitlines()[-1].startswith("min ratio: ")


def test_a_workload_preset_is_generated_with_its_own_format_and_sizes(gen, tmp_path, capsys):
    rc = gen.main(["--workload", "tiny", "--rounds", "1", "--data-root", str(tmp_path / "d")])
    out = capsys.readouterr().out
    assert rc == 0, out
    assert "tiny at workload.scale=1: format " in out
    row = [ln for ln in out.splitlines() if ln.split()[:1] == ["tiny"]][-1]  # the table's row, after the rounds
    assert float(row.split()[-1]) > 0  # its ratio to fio, counted in the min ratio
    assert out.splitlines()[-1].startswith("min ratio: ")


def test_an_unknown_workload_is_refused_before_anything_is_written(gen, tmp_path, capsys):
    assert gen.main(["--workload", "mlperf/nope", "--data-root", str(tmp_path / "d")]) == 2
    assert "unknown workload mlperf/nope" in capsys.readouterr().err
    assert not (tmp_path / "d").exists()
