"""A store written by an earlier release is read by this one: the same sweep measures nothing again.

The store under tests/fixtures/stores/ was written by ``sweep.py`` at the commit its name gives (see the README
there). The point and dataset keys it holds must be the keys the current code derives for the same command line,
so a rerun after an upgrade skips every point instead of measuring it twice.
"""

from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path

import pytest

from conftest import ROOT

FIXTURES = ROOT / "tests" / "fixtures" / "stores"

#: store file -> (the command line that wrote it, its data_root: part of the dataset key, so named again here)
STORES = {
    "store-f89f3ac.db": (
        ["-m", "format=hdf5,tfrecord,npz", "access=shared,fpp", "workload=tiny"],
        "/tmp/ddlio-store-fixture-f89f3ac/d",
    ),
}


def _keys(db: Path) -> list[tuple[str, str]]:
    with sqlite3.connect(db) as c:
        return sorted(c.execute("SELECT point_key, status FROM points").fetchall())


@pytest.mark.parametrize("name", sorted(STORES))
def test_the_same_sweep_skips_every_point_of_an_earlier_store(name, sweep, tmp_path):
    overrides, data_root = STORES[name]
    assert not Path(data_root).exists(), f"{data_root} exists: the test would read or write a stranger's files"
    db = tmp_path / name
    shutil.copyfile(FIXTURES / name, db)
    before = _keys(db)
    assert before and all(status == "completed" for _, status in before)

    p = sweep(*overrides, f"data_root={data_root}", f"db={db}")

    assert p.returncode == 0, p.stdout + p.stderr
    n = len(before)
    assert f"{n} of {n} points already measured: skipped" in p.stdout, p.stdout
    assert "measured," not in p.stdout  # no "done: N measured" line: nothing ran
    assert _keys(db) == before  # no new point, none re-measured
    assert not Path(data_root).exists()  # every point skipped: not a byte written where the keys point
