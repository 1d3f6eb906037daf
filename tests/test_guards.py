"""A rank that hangs inside an epoch fails its point within cluster.hang_timeout_s, naming the rank, the epoch,
the file and the offset it was reading (DDLIO_FAULT=hang@RANK hangs a rank before its first read); locally here,
on Slurm in tests/test_slurm.py."""

from __future__ import annotations

import re
import sqlite3

import pytest

HANG = r"ddlio kernel: rank {rank} made no progress for 3 s in epoch 0 \(no read returned and no batch finished"
WHERE = r"it was reading \S+/part-0000{file}\.{suffix} at offset (\d+) \(record 0 of that file\)"


@pytest.mark.parametrize(("ppn", "fault", "fmt", "access", "rank", "file", "suffix"), [
    ("1", "hang@0", "hdf5", "shared", 0, 0, "h5"),
    ("2", "hang@1", "npz", "fpp", 1, 1, "npz"),
])
def test_a_rank_hung_inside_an_epoch_fails_the_point_naming_where(sweep, tmp_path, ppn, fault, fmt, access, rank,
                                                                   file, suffix):
    p = sweep("workload=tiny", f"ppn={ppn}", f"format={fmt}", f"access={access}", "cluster.hang_timeout_s=3",
              f"+cluster.env.DDLIO_FAULT={fault}", timeout=240)
    assert p.returncode == 1, p.stdout + p.stderr
    assert "Traceback" not in p.stdout + p.stderr
    with sqlite3.connect(tmp_path / "r.db") as c:
        [(status, error)] = c.execute("SELECT status, error FROM points").fetchall()
    assert status == "failed"
    assert re.search(HANG.format(rank=rank), error), error
    m = re.search(WHERE.format(file=file, suffix=suffix), error)
    assert m and int(m.group(1)) > 0, error  # a real offset inside the file, past its header
