"""A store written by an earlier release is read by this one: the same sweep measures nothing again.

The stores under tests/fixtures/stores/ were written by ``sweep.py`` at the commits their names give (see the
README there). The point and dataset keys they hold are the keys the current code derives for the same command
line, or, for a point measured by an earlier method (84a48dd: cold without settling), the key that method gave it:
a rerun after an upgrade skips every point instead of measuring it twice, and says which were measured how.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import sqlite3
from pathlib import Path

import pytest

from conftest import ROOT

FIXTURES = ROOT / "tests" / "fixtures" / "stores"

#: stores whose points were measured by an earlier method (cold cache without settling), and how many
EARLIER = {"store-84a48dd.db": 6}
#: store file -> (the command line that wrote it, its data_root: part of the dataset key, so named again here)
STORES = {
    "store-84a48dd.db": (
        ["-m", "format=hdf5,tfrecord,npz", "access=shared,fpp", "workload=tiny"],
        "/tmp/ddlio-store-fixture-84a48dd/d",
    ),
    "store-627fa5f.db": (
        ["-m", "format=hdf5,tfrecord,npz", "access=shared,fpp", "workload=tiny"],
        "/tmp/ddlio-store-fixture-627fa5f/d",
    ),
    "store-f89f3ac.db": (
        ["-m", "format=hdf5,tfrecord,npz", "access=shared,fpp", "workload=tiny"],
        "/tmp/ddlio-store-fixture-f89f3ac/d",
    ),
    "store-0dae8e7.db": (
        ["-m", "format=hdf5,tfrecord,npz", "access=shared,fpp", "workload=tiny"],
        "/tmp/ddlio-store-fixture-0dae8e7/d",
    ),
}


def _keys(db: Path) -> list[tuple[str, str]]:
    with sqlite3.connect(db) as c:
        return sorted(c.execute("SELECT point_key, status FROM points").fetchall())


@pytest.mark.parametrize("name", sorted(STORES))
def test_the_same_sweep_skips_every_point_of_an_earlier_store(name, sweep, tmp_path, capsys):
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
    earlier = EARLIER.get(name, 0)
    if earlier:
        assert f"{earlier} of them measured by an earlier method: cold cache without settling" in p.stdout
        assert "remeasure_earlier=true" in p.stdout
    else:
        assert "earlier method" not in p.stdout
    _summary_labels_every_point_once(name, db, capsys)


def _summary_labels_every_point_once(name: str, db: Path, capsys: pytest.CaptureFixture) -> None:
    from analysis.summary import main as summary

    assert summary(argparse.Namespace(db=str(db), format="json")) == 0
    rows = json.loads(capsys.readouterr().out)
    labels = [r["label"] for r in rows]
    assert len(labels) == 6 and len(set(labels)) == 6, labels
    assert all(r["settle"] is (None if name in EARLIER else True) for r in rows), rows
    assert summary(argparse.Namespace(db=str(db), format="table")) == 0
    table = capsys.readouterr().out
    assert table.count("(unsettled)") == EARLIER.get(name, 0), table
    assert ("measured by an earlier method" in table) is (name in EARLIER), table


def _as_measured_before_settling(db: Path) -> dict[str, str]:
    """Make the store's points what ddlio before b63f0f0 stored for the same command: the point key that method
    gave them, no settle in the stored config or its column; returns {today's key: that key}."""
    from experiments.config import PointSpec

    moved = {}
    with sqlite3.connect(db) as c:
        for key, config in c.execute("SELECT point_key, config FROM points").fetchall():
            cfg = json.loads(config)
            [old] = PointSpec.from_dict(cfg).earlier_keys()
            cfg.pop("settle")
            cfg["point_key"] = old
            c.execute("PRAGMA foreign_keys=OFF")
            for table in ("points", "epochs", "measurements", "sweep_points"):
                c.execute(f"UPDATE {table} SET point_key=? WHERE point_key=?", (old, key))
            c.execute("UPDATE points SET config=?, settle=NULL WHERE point_key=?", (json.dumps(cfg), old))
            moved[key] = old
    return moved


def test_remeasure_earlier_measures_only_the_points_of_an_earlier_method(sweep, tmp_path, capsys):
    from analysis.summary import main as summary

    args = ("-m", "format=hdf5,npz", "workload=tiny", "workload.epochs=1")
    assert sweep(*args).returncode == 0
    moved = _as_measured_before_settling(tmp_path / "r.db")
    assert sweep(*args, "format=npy").returncode == 0  # a point of today's method beside them

    again = sweep(*args)
    assert again.returncode == 0 and "2 of 2 points already measured: skipped" in again.stdout, again.stdout
    assert "2 of them measured by an earlier method" in again.stdout and "[1/" not in again.stdout

    p = sweep("-m", "format=hdf5,npz,npy", "workload=tiny", "workload.epochs=1", "remeasure_earlier=true")
    assert p.returncode == 0, p.stdout + p.stderr
    assert "done: 2 measured" in p.stdout and "1 of 3 points already measured: skipped" in p.stdout, p.stdout
    keys = {k for k, _ in _keys(tmp_path / "r.db")}
    assert set(moved) | set(moved.values()) <= keys and len(keys) == 5  # the earlier two stay beside the new

    assert summary(argparse.Namespace(db=str(tmp_path / "r.db"), format="table")) == 0
    table = capsys.readouterr().out
    # each point's row: its configuration (right-aligned), then MiB/s and IOPS
    rows = [re.match(r"\s*(\S.*?)\s+\d[\d.]*\s+\d[\d,]*\s", ln) for ln in table.splitlines() if "/shared " in ln]
    labels = [m.group(1) for m in rows if m]
    assert len(labels) == 5 and len(set(labels)) == 5, table  # told apart: "(unsettled)"
    assert "2 point(s) were measured by an earlier method" in table
