"""The stripe axis on a real striping file system: the one-box CephFS of tests/cluster/cephfs.sh (8 OSDs, reads
capped per OSD, mounted with ceph-fuse). Real points run there through sweep.py; what each file really got is read
back from CephFS itself (``ceph.file.layout``) and from the monitors (``ceph osd map``), not from ddlio's records
alone. Skips with one line when the mount is not there; fails instead under CI=true (CI starts it)."""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from conftest import service_missing
from lustre import Layout, apply_layout, backend_for, validate_at
from lustre.ceph import empty_client_cache, is_cephfs
from lustre.fs import fs_info

pytestmark = pytest.mark.cephfs

SCRIPT = Path(__file__).parent / "cluster" / "cephfs.sh"
BASE = Path(os.environ.get("CEPHFS_BASE", f"{os.environ.get('TMPDIR', '/tmp')}/ddlio-cephfs-ci"))


def _missing(reason: str) -> None:
    service_missing("CephFS test mount", reason, "cephfs.sh")


@pytest.fixture(scope="module")
def mount() -> Path:
    """The mounted CephFS of tests/cluster/cephfs.sh (skips, CI: fails, when it is not mounted)."""
    if not shutil.which("bash") or not SCRIPT.exists():
        _missing("tests/cluster/cephfs.sh not found")
    out = subprocess.run(["bash", str(SCRIPT), "mountpoint"], capture_output=True, text=True, timeout=30,
                         env={**os.environ, "CEPHFS_BASE": str(BASE)})
    if out.returncode != 0:
        _missing(out.stderr.strip().splitlines()[-1] if out.stderr.strip() else f"exit {out.returncode}")
    return Path(out.stdout.strip())


@pytest.fixture
def cdir(mount: Path) -> Iterator[Path]:
    """A directory of this test's own on the CephFS mount, removed afterwards."""
    d = mount / "ddlio-tests" / uuid.uuid4().hex[:12]
    d.mkdir(parents=True)
    yield d
    shutil.rmtree(d, ignore_errors=True)


@pytest.fixture
def ceph_env() -> dict[str, str]:
    """The clients' environment: ceph.conf of the one-box cluster (ceph osd map, ceph-fuse's admin socket)."""
    return {"CEPH_CONF": str(BASE / "ceph.conf")}


def _points(db: Path) -> list[dict]:
    with sqlite3.connect(db) as c:
        c.row_factory = sqlite3.Row
        rows = c.execute("SELECT stripe_count, access, format, dataset_key, layout, status FROM points").fetchall()
    return [dict(r) for r in rows]


def test_cephfs_is_detected_by_its_layout_xattrs(mount, tmp_path):
    info = fs_info(mount)
    assert info.mount_type == "fuse.ceph-fuse" and info.magic == 0x65735546  # ceph-fuse: FUSE's statfs magic
    assert info.type == "ceph"
    assert is_cephfs(mount) and backend_for(mount / "not" / "yet").name == "ceph"
    assert not is_cephfs(tmp_path) and backend_for(tmp_path).name == "posix"


@pytest.mark.parametrize(("formats", "stripes", "access"), [
    ("hdf5", [1, 2, 4, 8], "shared"),
    ("tfrecord,npz", [2, 8], "fpp"),
])
def test_the_stripe_axis_is_applied_and_read_back_per_file(cdir, tmp_path, sweep, ceph_env, formats, stripes,
                                                            access):
    """stripe 1, 2, 4, 8 x shared/fpp, two ranks: every point's files got the layout asked for, as CephFS reports
    it for each file, their first objects mapped to OSDs; the stored layout is the one read back."""
    db = tmp_path / "r.db"
    p = sweep("-m", f"stripe={','.join(map(str, stripes))}", f"access={access}", f"format={formats}", "ppn=2",
              "workload=tiny", "workload.epochs=1", f"data_root={cdir}", f"db={db}", timeout=600, **ceph_env)
    assert p.returncode == 0, p.stdout + p.stderr
    points = _points(db)
    n = len(stripes) * len(formats.split(",")) * len(access.split(","))
    assert len(points) == n and {r["status"] for r in points} == {"completed"}
    for r in points:
        lay = json.loads(r["layout"])
        assert lay["applicable"] and lay["fs_type"] == "ceph"
        assert lay["requested"]["stripe_count"] == r["stripe_count"]
        assert lay["files"], "no file's layout was read back"
        for name, got in lay["files"].items():
            f = cdir / "datasets" / f"{r['format']}-{r['dataset_key']}" / name
            real = os.getxattr(f, "ceph.file.layout").decode()  # CephFS's own word, now
            assert f"stripe_count={r['stripe_count']} " in real and "stripe_unit=1048576" in real
            assert got["stripe_count"] == r["stripe_count"] and got["stripe_size"] == 1 << 20
            assert len(got["targets"]) == r["stripe_count"] and all(0 <= t < 8 for t in got["targets"])
    # cache=cold (tiny's): every epoch verified cold, ceph-fuse's object cache emptied as well as the page cache
    with sqlite3.connect(db) as c:
        assert {row[0] for row in c.execute("SELECT cache FROM epochs")} == {"cold"}
    # a dataset per layout: points of two stripe counts never share one
    by_stripe: dict[int, set[str]] = {}
    for r in points:
        by_stripe.setdefault(r["stripe_count"], set()).add(r["dataset_key"])
    keys = [k for ks in by_stripe.values() for k in ks]
    assert len(keys) == len(set(keys))


def test_checkpoints_get_their_layouts_read_back_per_file(cdir, tmp_path, sweep, ceph_env):
    """kind=checkpoint, N-1 and N-N at stripe 1 and 4, two ranks: every file of every checkpoint got the layout
    asked for, as CephFS reports it, its first objects on that many OSDs; the caches were emptied and verified."""
    db = tmp_path / "r.db"
    p = sweep("-m", "kind=checkpoint", "checkpoint.size=16MiB", "checkpoint.transfer_size=1MiB", "access=shared,fpp",
              "stripe=1,4", "ppn=2", f"data_root={cdir}", f"db={db}", timeout=600, **ceph_env)
    assert p.returncode == 0, p.stdout + p.stderr
    with sqlite3.connect(db) as c:
        rows = c.execute("SELECT access, stripe_count, layout, cache, status FROM points").fetchall()
    assert len(rows) == 4 and {r[4] for r in rows} == {"completed"} and {r[3] for r in rows} == {"cold"}
    for access, stripe, layout, _, _ in rows:
        lay = json.loads(layout)
        assert lay["applicable"] and lay["fs_type"] == "ceph" and lay["requested"]["stripe_count"] == stripe
        names = {n.split("/", 1)[1] for n in lay["files"]}
        assert names == ({"checkpoint.distcp", ".metadata"} if access == "shared"
                         else {"__0_0.distcp", "__1_0.distcp", ".metadata"}), names
        for name, got in lay["files"].items():
            assert got["stripe_count"] == stripe and got["stripe_size"] == 1 << 20, name
            if not name.endswith(".metadata"):  # a few hundred bytes: one object
                assert len(got["targets"]) == stripe, (name, got)
    assert not (cdir / "checkpoints").exists()


def test_targets_are_the_monitors_placement(cdir, ceph_env, monkeypatch):
    for k, v in ceph_env.items():
        monkeypatch.setenv(k, v)
    from lustre import read_layout

    rec = apply_layout(cdir / "ds", Layout(4, 1 << 20, 8 << 20))
    f = cdir / "ds" / "f.bin"
    f.write_bytes(os.urandom(1 << 20))
    rec = read_layout(rec, [f])
    got = rec.files["f.bin"]
    assert got["object_size"] == 8 << 20 and rec.applied["object_size"] == 8 << 20
    out = subprocess.run(["ceph", "osd", "map", "cephfs_data", f"{os.stat(f).st_ino:x}.00000002", "-f", "json"],
                         capture_output=True, text=True, timeout=60, env={**os.environ, **ceph_env})
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["up_primary"] == got["targets"][2]


def test_a_layout_cephfs_refuses_is_one_message_before_anything_runs(cdir, tmp_path, sweep):
    target = cdir / "d"
    for bad, words in (
        (["stripe_size=2MiB", "object_size=3MiB"], "object_size=3.0 MiB is not a multiple of stripe_size=2.0 MiB"),
        (["stripe=-1"], "CephFS has no 'all targets' count"),
        (["stripe_size=96KiB"], "not a CephFS stripe unit"),
        (["object_size=256MiB", "stripe_size=1MiB"], "above the cluster's osd max object size (128.0 MiB)"),
    ):
        p = sweep(*bad, "workload=tiny", f"data_root={target}", f"db={tmp_path / 'r.db'}")
        assert p.returncode == 2, p.stdout + p.stderr
        assert words in p.stderr and "Traceback" not in p.stderr, p.stderr
        assert not target.exists() and not (tmp_path / "r.db").exists()


def test_cephfs_knobs_are_refused_where_no_backend_applies_them(tmp_path, sweep):
    p = sweep("object_size=8MiB", "workload=tiny")
    assert p.returncode == 2 and "object_size=8388608 is a layout knob of CephFS only" in p.stderr, p.stderr
    assert not (tmp_path / "data").exists()


def test_the_backend_validates_where_the_layout_goes(cdir):
    # a directory whose layout has 8 MiB objects: a 3 MiB unit does not divide them, a 2 MiB one does
    os.setxattr(cdir, "ceph.dir.layout", b"object_size=8388608")
    info = fs_info(cdir / "new")
    assert validate_at(Layout(1, 2 << 20), info) == []
    assert any("not a multiple" in m for m in validate_at(Layout(1, 3 << 20), info))


def test_a_layout_is_set_only_before_any_file_exists(cdir):
    (cdir / "ds").mkdir()
    (cdir / "ds" / "f").write_bytes(b"x")
    from ddlio.errors import LayoutError

    with pytest.raises(LayoutError, match="before any file exists"):
        apply_layout(cdir / "ds", Layout(2, 1 << 20))


def test_cold_empties_ceph_fuses_own_cache(cdir, ceph_env, monkeypatch):
    """After the page cache is evicted ceph-fuse still serves a file from its object cache; the cold drop empties
    that too, as its admin socket's buffers show, and the next read goes to the OSDs (ceph-fuse's perf counters)."""
    for k, v in ceph_env.items():
        monkeypatch.setenv(k, v)
    from lustre.ceph import _buffered_bytes, admin_command, client_socket

    f = cdir / "f.bin"
    f.write_bytes(os.urandom(4 << 20))
    sock = client_socket(str(fs_info(cdir).mount_point))
    assert sock is not None
    with open(f, "rb", buffering=0) as fh:
        os.posix_fadvise(fh.fileno(), 0, 0, os.POSIX_FADV_DONTNEED)
        fh.read()
        os.posix_fadvise(fh.fileno(), 0, 0, os.POSIX_FADV_DONTNEED)
    assert _buffered_bytes(sock) >= 4 << 20  # evicted from the page cache, still in ceph-fuse's
    info = fs_info(f)
    got = empty_client_cache([f], info.mount_point, info.mount_type)
    assert "error" not in got and got["client_cache_bytes"] < 1 << 20

    def from_osds() -> int:
        return admin_command(sock, prefix="perf dump")["objectcacher-libcephfs"]["data_read"]

    before = from_osds()
    with open(f, "rb", buffering=0) as fh:
        assert len(fh.read()) == 4 << 20
    assert from_osds() - before >= 4 << 20  # every byte came from the OSDs again


def test_cold_drops_give_back_the_configured_cache_size_even_beside_or_after_another(cdir, ceph_env, monkeypatch):
    """A drop killed between shrinking ceph-fuse's cache and restoring it left 64 KiB behind, and drops run at once
    (Slurm's nodes of this host share the mount) took each other's shrunken size for the one to restore: every cold
    read after it ran without ceph-fuse's read cache (a third of the bandwidth here). The next drop heals it, and
    drops side by side end with the configured size."""
    from concurrent.futures import ThreadPoolExecutor

    for k, v in ceph_env.items():
        monkeypatch.setenv(k, v)
    from lustre.ceph import _TINY_CACHE, admin_command, client_socket

    f = cdir / "g.bin"
    f.write_bytes(os.urandom(1 << 20))
    info = fs_info(f)
    sock = client_socket(str(info.mount_point))
    assert sock is not None

    def size() -> int:
        return int(admin_command(sock, prefix="config get", var="client_oc_size")["client_oc_size"])

    configured = size()
    assert configured != _TINY_CACHE
    try:
        admin_command(sock, prefix="config set", var="client_oc_size", val=[str(_TINY_CACHE)])  # a killed drop
        assert "error" not in empty_client_cache([f], info.mount_point, info.mount_type)
        assert size() == configured
        with ThreadPoolExecutor(4) as pool:
            got = list(pool.map(lambda _: empty_client_cache([f], info.mount_point, info.mount_type), range(8)))
        assert all("error" not in g for g in got) and size() == configured
    finally:
        admin_command(sock, prefix="config unset", var="client_oc_size")


def test_cold_empties_data_ceph_fuse_has_not_written_yet(cdir, ceph_env, monkeypatch):
    """Data just written sits dirty in ceph-fuse's cache (closing a file does not send it to the OSDs) and dirty
    buffers are not trimmed: the cold drop fsyncs the files and empties the cache all the same."""
    for k, v in ceph_env.items():
        monkeypatch.setenv(k, v)
    from lustre.ceph import _buffered_bytes, client_socket

    f = cdir / "dirty.bin"
    fd = os.open(f, os.O_WRONLY | os.O_CREAT, 0o644)
    try:
        os.write(fd, os.urandom(4 << 20))
        sock = client_socket(str(fs_info(cdir).mount_point))
        assert sock is not None and _buffered_bytes(sock) >= 4 << 20
        info = fs_info(f)
        got = empty_client_cache([f], info.mount_point, info.mount_type)
    finally:
        os.close(fd)
    assert "error" not in got and got["client_cache_bytes"] < 1 << 20
    assert f.stat().st_size == 4 << 20


@pytest.mark.slurm
def test_paper_scaling_runs_on_the_slurm_cluster_over_cephfs(slurm_cluster, cdir, tmp_path, sweep, ceph_env):
    """+experiment=paper_scaling on the project's Slurm cluster (nodes n1, n2 on this host share the mount), nodes
    1-2 with the stripe count equal to the node count, as the paper does; a tiny workload, one repetition."""
    db = tmp_path / "r.db"
    p = sweep("-m", "+experiment=paper_scaling", "nodes=1,2", "~hydra.sweeper.params.stripe", "stripe=${nodes}",
              "repeat=0", "format=hdf5", "workload.samples=256", "workload.sample_size=16KiB",
              "workload.samples_per_file=64", "workload.batch_size=8", "workload.epochs=1", f"data_root={cdir}",
              f"db={db}", timeout=900, **ceph_env)
    assert p.returncode == 0, p.stdout + p.stderr
    points = _points(db)
    assert {r["status"] for r in points} == {"completed"} and len(points) == 4
    with sqlite3.connect(db) as c:
        rows = c.execute("SELECT nodes, stripe_count, layout FROM points").fetchall()
    for nodes, stripe, layout in rows:
        assert stripe == nodes
        assert {f["stripe_count"] for f in json.loads(layout)["files"].values()} == {nodes}  # as CephFS applied it
