"""The memory work PyTorch does around a checkpoint's calls, as the checkpoint kind emulates it
(experiments/kinds/checkpoint/calls.py): a restore reads each piece into a new buffer and copies it into the state
(DCP's ``FileSystemReader.read_data``: ``torch.load`` then ``copy_``), a save checksums each piece before its first
write (``torch.save``'s CRC-32), and neither changes the calls. The claims about torch are held to torch itself
(skipped without it); the metrics' columns to the store's reading of points stored before they existed."""

from __future__ import annotations

import io
import itertools
import zipfile
import zlib
from dataclasses import asdict

import numpy as np
import pytest
from checkpoint_store import MIB, UNITS, checkpoint_store

from analysis.__main__ import main as analysis_main
from analysis.checkpoint import ALL_METRICS, checkpoint_frame
from ddlio.store import open_store_for_reading
from experiments.kinds.checkpoint import CheckpointKind
from experiments.kinds.checkpoint.calls import Counter, Phase, write_file
from experiments.kinds.checkpoint.plan import CheckpointPlan
from experiments.kinds.checkpoint.shards import PRESETS
from experiments.kinds.checkpoint.step import fill, restore, save, verify
from lustre import Layout, apply_layout
from lustre.registry import io_for


def _options(**over: object) -> dict:
    model, par, _ = PRESETS["llama3_8b"]
    return {"name": "llama3_8b", **asdict(model), **asdict(par), "zero_stage": 1, "size": 8 << 20, "layout": "dcp",
            "transfer_size": 3 << 20, "count": 1, "restore": "all", "read_shift": 0, **over}


class _OneRank:
    """The MPI communicator of a one-rank step, in this process."""

    rank, size = 0, 1

    class _Done:
        def Test(self) -> bool:  # mpi4py's names
            return True

    def Ibarrier(self) -> _Done:
        return self._Done()

    def Barrier(self) -> None:
        pass

    def bcast(self, value: object, root: int = 0) -> object:
        return value

    def gather(self, value: object, root: int = 0) -> list:
        return [value]


def _recording(root):
    """The storage's I/O seam for ``root``, recording where each read call put its bytes (the buffer's address,
    its length and the bytes the call returned) and each write call's offset and length."""
    base = type(io_for(root))

    class Recording(base):
        def __init__(self) -> None:
            super().__init__()
            self.reads: list[tuple[int, int, int]] = []
            self.writes: list[tuple[int, int]] = []

        def read_into(self, handle, buf, offset):
            got = super().read_into(handle, buf, offset)
            self.reads.append((np.frombuffer(buf, dtype=np.uint8).ctypes.data, len(buf), got))
            return got

        def write_at(self, handle, data, offset):
            self.writes.append((offset, len(memoryview(data).cast("B"))))
            return super().write_at(handle, data, offset)

    return Recording()


@pytest.mark.parametrize(("access", "layout", "into"), [("fpp", "dcp", "staging"), ("fpp", "torch", "staging"),
                                                        ("shared", "dcp", "staging"), ("fpp", "dcp", "state")])
def test_a_restore_reads_into_new_buffers_then_copies_and_a_save_checksums_each_piece(tmp_path, access, layout,
                                                                                       into):
    plan = CheckpointPlan.build(_options(layout=layout, restore_into=into), 1, access, 5, tmp_path / "ck")
    apply_layout(plan.directory(0), Layout())
    storage = _recording(tmp_path)
    buf = np.empty(plan.shard_bytes[0], dtype=np.uint8)
    fill(buf, plan.seed, 0, 0)
    saved = save(_OneRank(), storage, plan, 0, buf, Counter(storage))
    pieces = plan.pieces_of(0)
    assert len(pieces) == 2 and saved["bytes"] >= sum(pieces)
    if plan.serialised:  # each piece's CRC-32, the one zlib computes of its bytes, timed apart from the calls
        at = np.cumsum((0, *pieces))
        assert saved["crc32"] == [zlib.crc32(buf[a:b]) for a, b in itertools.pairwise(at)]
        assert saved["crc_s"] > 0 and saved["duration_s"] >= saved["io_s"] + saved["crc_s"]
    else:  # N-1 is no file torch writes
        assert saved["crc32"] == [] and saved["crc_s"] == 0

    buf[:] = 0
    storage.reads.clear()
    restored = restore(_OneRank(), storage, plan, 0, buf, Counter(storage))
    verify(plan, 0, 0, buf)  # the state holds every byte written
    lo, hi = buf.ctypes.data, buf.ctypes.data + len(buf)
    into_state = [lo <= at < hi for at, n, _ in storage.reads if n != len(plan.index())]  # the index aside
    assert into_state and all(into_state) == (into == "state") and any(into_state) == (into == "state")
    assert restored["bytes"] == sum(got for _, _, got in storage.reads) >= plan.shard_bytes[0]
    assert (restored["copy_s"] > 0) == (into == "staging")
    assert restored["io_s"] == pytest.approx(restored["meta_s"] + restored["data_s"])  # the copies are not calls
    assert restored["duration_s"] >= restored["io_s"] + restored["copy_s"]


def test_the_checksums_leave_the_write_calls_as_they_were(tmp_path):
    storage = _recording(tmp_path)
    data = np.arange(10 << 20, dtype=np.uint64).view(np.uint8)[:10 << 20]
    calls = []
    for pieces in ((), (1 << 20, 6 << 20, 3 << 20)):
        storage.writes.clear()
        phase = Phase()
        write_file(storage, phase, tmp_path / "f", data, 0, 4 << 20, False, pieces)
        calls.append(list(storage.writes))
        assert len(phase.crcs) == len(pieces) and phase.bytes == len(data)
    assert calls[0] == calls[1] == [(0, 4 << 20), (4 << 20, 4 << 20), (8 << 20, 2 << 20)]


def test_torch_save_checksums_each_storage_writes_it_uncopied_and_torch_load_checks_nothing():
    torch = pytest.importorskip("torch")
    piece = np.empty(3 << 20, dtype=np.uint8)
    fill(piece, 9, 0, 1)
    phase = Phase()
    phase.checksum(piece)

    class Stream(io.RawIOBase):  # records what torch.save hands its stream
        def __init__(self) -> None:
            self.out, self.given = io.BytesIO(), []

        def writable(self) -> bool:
            return True

        def write(self, b) -> int:
            self.given.append((type(b), memoryview(b).nbytes))
            return self.out.write(b)

    stream = Stream()
    torch.save(torch.from_numpy(piece), stream)
    record = next(i for i in zipfile.ZipFile(io.BytesIO(stream.out.getvalue())).infolist()
                  if i.filename.endswith("/data/0"))
    assert phase.crcs[0] == record.CRC  # the CRC-32 torch.save computed and stored is the one the step computes
    assert (memoryview, piece.nbytes) in stream.given  # one write of the storage's own memory: no copy to emulate

    raw = bytearray(stream.out.getvalue())
    at = record.header_offset + 30 + len(record.filename) + len(record.extra)  # the record's data, uncompressed
    raw[at + 1000] ^= 0xFF
    loaded = torch.load(io.BytesIO(bytes(raw)), weights_only=True).numpy()
    assert int((loaded != piece).sum()) == 1  # loaded as it is: a restore computes no checksum


def test_the_kinds_metrics_are_columns_and_points_stored_before_the_new_ones_read_as_they_were(tmp_path):
    declared = {m.name: m.unit for m in CheckpointKind.metrics}
    assert set(declared) <= set(ALL_METRICS) and declared == UNITS
    old = dict(write=100.0, access="fpp", repeat=0)  # a point stored before the checksums and copies were timed
    new = dict(write=90.0, access="fpp", repeat=1, write_crc_time_s=0.25, read_copy_time_s=0.5)
    checkpoint_store(tmp_path, [old, new])
    ck = checkpoint_frame(open_store_for_reading(str(tmp_path / "ck.db"))).set_index("repeat")
    assert np.isnan(ck.loc[0, "write_crc_time_s"]) and np.isnan(ck.loc[0, "read_copy_time_s"])
    assert ck.loc[1, "write_crc_time_s"] == 0.25 and ck.loc[1, "read_copy_time_s"] == 0.5
    assert ck.loc[0, "write_bandwidth_mib_s"] == 100.0 and ck.loc[0, "bytes_written"] == 64 * MIB
    out = tmp_path / "r.html"
    assert analysis_main(["report", "--db", str(tmp_path / "ck.db"), "--out", str(out)]) == 0
    assert "save checksums s" in out.read_text() and "restore copies s" in out.read_text()
