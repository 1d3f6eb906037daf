"""The storage layer's seam, proven from outside the product: a stand-in backend (layouts and I/O, POSIX underneath)
plugged in by an entry point of the ``ddlio.storage`` group, recognising a tmp directory by a marker file, serves a
real point end to end (``sweep.py``: validation, the dataset's layout, generation, the kernel's ranks, the store),
with no product file touched. Its layout wording reaches the stored label and layout, and its I/O seam is asked
for the page-cache eviction, the residency checks and the counters' handles."""

from __future__ import annotations

import json
import re
import sqlite3
import textwrap
from collections import Counter
from pathlib import Path

import pytest

import lustre
from conftest import ROOT
from lustre import Layout, fs_info, registry

#: the stand-in: a subclass of the base class of defaults, overriding what a backend of its own says
STANDIN = '''
    """A stand-in storage backend (tests/test_storage_seam.py): any path below a directory holding the marker file
    is its; it "stripes" over slabs (its wording), and its I/O is POSIX's, logging every call it gets."""

    import contextlib
    import os
    from pathlib import Path

    from lustre import Layout, LayoutRecord, PosixIO, StorageBackend

    MARKER = ".standin-storage"


    def _root(path):
        p = Path(os.path.abspath(path))
        for d in (p, *p.parents):
            if (d / MARKER).is_file():
                return d
        return None


    class CountingIO(PosixIO):
        name = "standin"

        def __init__(self, log):
            self.log = log

        def _note(self, op):
            fd = os.open(self.log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
            try:
                os.write(fd, f"{op}\\n".encode())
            finally:
                os.close(fd)

        def open(self, path):
            self._note("open")
            return super().open(path)

        def evict(self, path):
            self._note("evict")
            super().evict(path)

        def resident(self, path):
            self._note("resident")
            return super().resident(path)

        def open_counter(self, path="/proc/self/io"):
            self._note("counter")
            return super().open_counter(path)

        def create(self, path, mode=0o644):
            self._note("create")
            return super().create(path, mode)

        @contextlib.contextmanager
        def staged(self, path):
            self._note("staged")
            with super().staged(path) as local:
                yield local

        def write_behind(self, path, interval_s=0.005):
            self._note("write_behind")
            return super().write_behind(path, interval_s)


    class StandinBackend(StorageBackend):
        name = "standin"
        stripes = True
        title = "Standin"
        install = "nothing to install: it is a test's"

        root = None

        def detect(self, info):
            found = _root(info.path)
            if found is not None:
                self.root = found
            return found is not None

        def validate(self, request, where=None):
            return [] if request.stripe_count >= 1 else [f"stripe={request.stripe_count}: use 1 slab or more"]

        def apply(self, directory, request):
            Path(directory).mkdir(parents=True, exist_ok=True)
            return LayoutRecord(True, self.name, request.requested(),
                                applied={"slabs": request.stripe_count, "words": self.describe(request)})

        def read_back(self, file):
            return {"slabs": 1}

        def describe(self, request, named=False):
            return f"{request.stripe_count}SLAB"

        def io(self):
            # the marker names the log of calls: every process (the driver, the job, each MPI rank) appends to it
            return CountingIO(Path((self.root / MARKER).read_text()))
'''


def _plugin(where: Path, fs_type: str) -> Path:
    """The stand-in as a distribution on ``where`` (as ``pip install`` would leave one): its module, and an entry
    point of ``ddlio.storage`` naming this file system's type."""
    where.mkdir()
    (where / "standin_storage.py").write_text(textwrap.dedent(STANDIN))
    info = where / "standin_storage-0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: standin-storage\nVersion: 0\n")
    (info / "entry_points.txt").write_text(f"[ddlio.storage]\n{fs_type} = standin_storage:StandinBackend\n")
    return where


def test_a_stand_in_backend_serves_a_real_point(tmp_path, sweep):
    data = tmp_path / "d"
    data.mkdir()
    log = tmp_path / "standin-calls.log"
    (data / ".standin-storage").write_text(str(log))
    plug = _plugin(tmp_path / "plug", fs_info(tmp_path).type)
    p = sweep("workload=tiny", f"data_root={data}", f"db={tmp_path / 'r.db'}",
              PYTHONPATH=f"{plug}:{ROOT}")
    assert p.returncode == 0, p.stdout + p.stderr
    with sqlite3.connect(tmp_path / "r.db") as db:
        rows = db.execute("SELECT status, label, fs_type, striping_applicable, layout, bandwidth_mib_s, config "
                          "FROM points").fetchall()
    assert len(rows) == 1
    status, label, fs_type, applicable, layout, bandwidth, config = rows[0]
    assert status == "completed" and bandwidth > 0
    assert label.endswith("1N-1P-1SLAB") and "OST" not in label, label
    # the file system is what it is; the point's layout is the stand-in's, which stripes
    assert fs_type == fs_info(tmp_path).type and applicable
    assert json.loads(config)["fs_type"] == "standin"
    layout = json.loads(layout)
    assert layout["applied"] == {"slabs": 1, "words": "1SLAB"}
    assert layout["files"] and all(v == {"slabs": 1} for v in layout["files"].values())
    calls = Counter(log.read_text().split())
    assert calls["evict"] >= 2, calls  # cache=cold: before each of the tiny workload's two epochs
    assert calls["resident"] >= 2 and calls["counter"] >= 1, calls
    # generation wrote every file of the dataset through the seam: staged where the store wants it, written behind
    assert calls["staged"] == calls["write_behind"] == len(layout["files"]), calls


@pytest.fixture
def clean_registry(monkeypatch):
    monkeypatch.setattr(registry, "_registered", {})


def test_register_puts_a_backend_first_for_its_type(tmp_path, clean_registry):
    """In the process: :func:`lustre.register` makes a backend the first candidate for a file-system type; one
    that does not recognise the path leaves it to the next candidate; every answer it does not give is the base
    class's default."""
    kind = fs_info(tmp_path).type

    class Shy(lustre.StorageBackend):
        name = "shy"

        def detect(self, info):
            return False

    class Eager(lustre.StorageBackend):
        name = "eager"

        def describe(self, request, named=False):
            return f"{request.stripe_count}X"

    lustre.register(kind, Shy)
    assert [b.name for b in lustre.candidates(kind)][:1] == ["shy"]
    assert lustre.backend_for(tmp_path).name == "posix"  # shy declines: the next candidate serves
    lustre.register(kind, Eager())
    assert lustre.backend_for(tmp_path).name == "eager"
    assert lustre.describe(Layout(3), kind) == "3X" and lustre.describe(Layout(3), "eager") == "3X"
    assert lustre.describe(Layout(3)) == "3OST" and lustre.label_words(-1, named=True) == "allOST"
    eager = lustre.backend_for(tmp_path)
    assert eager.read_back(tmp_path) == {} and eager.drop_client_cache([tmp_path], fs_info(tmp_path)) == {}
    assert isinstance(lustre.io_for(tmp_path), lustre.PosixIO)


def test_fuse_tries_ceph_then_posix():
    assert [b.name for b in lustre.candidates("fuse")] == ["ceph", "posix"]
    assert lustre.backend("fuse").name == "ceph" and lustre.backend("ext4").name == "posix"


def test_the_posix_io_seam(tmp_path):
    io = lustre.PosixIO()
    h = io.create(tmp_path / "f")
    assert io.write(h, b"abcdef") == 6
    io.sync(h)
    io.close(h)
    h = io.open(tmp_path / "f")
    buf = bytearray(4)
    assert io.read_into(h, buf, 2) == 4 and bytes(buf) == b"cdef" and io.size(h) == 6
    io.close(h)
    assert io.listdir(tmp_path) == ["f"]
    io.evict(tmp_path / "f")
    resident, total = io.resident(tmp_path / "f")
    assert total == 1 and resident <= 1
    c = io.open_counter()
    assert b"rchar" in io.read_counter(c)
    io.close(c)


def test_no_caller_probes_a_backend():
    """Optional capabilities are methods with defaults: nothing in the product asks a backend with getattr."""
    bad = []
    for top in ("lustre", "experiments", "ddlio", "analysis"):
        for f in (ROOT / top).rglob("*.py"):
            for n, line in enumerate(f.read_text().splitlines(), 1):
                if "getattr(" in line and ("backend" in line or "chosen" in line):
                    bad.append(f"{f.relative_to(ROOT)}:{n}")
    assert bad == []


def test_only_lustre_words_a_target():
    """The label's wording of a storage target belongs to Lustre's backend alone."""
    word = re.compile(r"(?<![A-Z])O" + "ST")  # 4OST, allOST, OSTs; not LOST, POSTGRES or HOST
    found = [str(f.relative_to(ROOT)) for top in ("lustre", "ddlio") for f in sorted((ROOT / top).rglob("*.py"))
             if word.search(f.read_text())]
    assert found == ["lustre/lfs.py"]
