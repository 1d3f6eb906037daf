"""The checkpoint step's trainer memory (the state and the restore's new buffers) is what torch's CPU allocator
gives a tensor: fresh private anonymous memory in 4 KiB pages, never advised for transparent huge pages (numpy's
allocator advises them for large arrays, and a cold read into such pages ran at a quarter to a half of the speed
on the development VM)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from experiments.kinds.checkpoint.step import trainer_memory

THP = Path("/sys/kernel/mm/transparent_hugepage/enabled")


def smaps_of(address: int) -> dict[str, str]:
    """The /proc/self/smaps fields of the mapping that holds ``address``."""
    fields: dict[str, str] = {}
    inside = False
    for line in Path("/proc/self/smaps").read_text().splitlines():
        head = line.split()[0]
        if "-" in head and ":" not in head:
            lo, hi = (int(x, 16) for x in head.split("-"))
            inside = lo <= address < hi
        elif inside:
            key, _, value = line.partition(":")
            fields[key] = value.strip()
    return fields


def test_trainer_memory_is_writable_zeroed_and_its_own_mapping():
    a = trainer_memory(3 << 20)
    assert a.dtype == np.uint8 and a.shape == (3 << 20,) and a.flags.writeable and not a.any()
    a[:] = 7
    assert int(a[-1]) == 7
    assert trainer_memory(0).shape == (0,)


@pytest.mark.skipif(not THP.exists() or "[always]" in THP.read_text(),
                    reason="transparent huge pages are not off by default here (the kernel gives them to all memory)")
def test_trainer_memory_is_not_advised_for_huge_pages_where_numpy_memory_is():
    ours, numpys = trainer_memory(64 << 20), np.empty(64 << 20, dtype=np.uint8)
    ours[::4096], numpys[::4096] = 1, 1  # touched, as a trainer's state is
    middle = 32 << 20  # numpy advises from the first page boundary inside its block: that part is a mapping apart
    mine = smaps_of(ours.ctypes.data + middle)
    assert mine and mine.get("THPeligible") == "0", mine
    assert "hg" not in mine.get("VmFlags", "").split()  # no MADV_HUGEPAGE
    if "[madvise]" in THP.read_text():  # numpy advises its large arrays: the difference this test is about
        assert "hg" in smaps_of(numpys.ctypes.data + middle).get("VmFlags", "").split()
