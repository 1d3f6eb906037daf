"""The Lustre layer. Lustre cannot run here, so: file-system detection runs on the real local file systems,
``lfs getstripe --yaml`` parsing runs on outputs kept as fixtures, and the Lustre code path runs against
FAKE_LFS, a stand-in script for Lustre's ``lfs`` command (named as such), at the process boundary."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

import lustre as lay
from ddlio.errors import LayoutError
from lustre import Layout, apply_layout, fs_info, is_lustre, validate_request
from lustre import fs as lfs_fs
from lustre.fs import LUSTRE_MAGIC
from lustre.lfs import parse_getstripe_yaml

FIXTURES = Path(__file__).parent / "fixtures" / "lfs"


def _mount_types() -> dict[str, str]:
    out = {}
    for line in Path("/proc/self/mounts").read_text().splitlines():
        dev, mnt, typ = line.split()[:3]
        out[mnt] = typ
    return out


def test_fs_info_on_a_real_local_file_system(tmp_path):
    info = fs_info(tmp_path)
    assert info.type != "lustre" and not is_lustre(tmp_path)
    assert _mount_types()[info.mount_point] == info.mount_type
    assert info.free_bytes > 0 and info.total_bytes >= info.free_bytes


def test_fs_info_of_a_path_not_yet_created_uses_its_ancestor(tmp_path):
    assert fs_info(tmp_path / "a" / "b").magic == fs_info(tmp_path).magic


def test_proc_is_recognised():
    assert fs_info("/proc/x").type == "proc"


def test_not_lustre_means_no_striping_and_says_why(tmp_path):
    rec = apply_layout(tmp_path / "ds", Layout(4, 1 << 20))
    assert (tmp_path / "ds").is_dir()
    assert rec.applicable is False
    assert "not Lustre" in rec.reason and rec.fs_type == fs_info(tmp_path).type
    assert rec.requested == {"stripe_count": 4, "stripe_size": 1 << 20}


@pytest.mark.parametrize(
    ("count", "size", "ok"),
    [(1, 1 << 20, True), (-1, 4 << 20, True), (0, 0, True), (-5, 1 << 20, False), (4, 100_000, False),
     (2001, 1 << 20, False), (4, 4 << 30, False)],
)
def test_layout_limits(count, size, ok):
    assert (validate_request(Layout(count, size)) == []) is ok


def test_parse_file_layout():
    d = parse_getstripe_yaml((FIXTURES / "file_stripe4.yaml").read_text())
    assert d["stripe_count"] == 4 and d["stripe_size"] == 1048576 and d["pattern"] == "raid0"
    assert d["osts"] == [3, 0, 1, 2] and d["components"] == []


def test_parse_directory_layout():
    d = parse_getstripe_yaml((FIXTURES / "dir_stripe8.yaml").read_text())
    assert d["stripe_count"] == 8 and d["stripe_size"] == 4194304 and d["stripe_offset"] == -1


def test_parse_composite_layout():
    d = parse_getstripe_yaml((FIXTURES / "file_pfl.yaml").read_text())
    assert len(d["components"]) == 2
    assert d["stripe_count"] == 1 and d["components"][1]["stripe_count"] == 4
    assert d["components"][1]["osts"] == [1, 2, 3, 0]


def test_parse_garbage_is_a_layout_error():
    with pytest.raises(LayoutError, match="no stripe count|unexpected"):
        parse_getstripe_yaml("hello: world\n")


FAKE_LFS = FIXTURES / "fake_lfs.py"  # the stand-in for Lustre's lfs (named as a fake; sources in its README)


@pytest.fixture
def fake_lustre(tmp_path, monkeypatch):
    """FAKE_LFS on PATH as ``lfs`` with tmp_path as its Lustre mount (8 OSTs, OST 7 inactive, pool ``flash``),
    and statfs answering with Lustre's magic for tmp_path (the one kernel fact we fake). Returns its log."""
    log = tmp_path / "lfs.log"
    bindir = tmp_path / "bin"
    bindir.mkdir()
    (bindir / "lfs").write_text(f"#!/bin/sh\nexec {sys.executable} {FAKE_LFS} \"$@\"\n")
    (bindir / "lfs").chmod(0o755)
    monkeypatch.setenv("PATH", f"{bindir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("FAKE_LFS_ROOT", str(tmp_path))
    monkeypatch.setenv("FAKE_LFS_LOG", str(log))
    monkeypatch.setenv("FAKE_LFS_INACTIVE", "7")
    monkeypatch.setenv("FAKE_LFS_POOLS", "flash")
    real = lfs_fs.statfs_magic
    monkeypatch.setattr(lfs_fs, "statfs_magic", lambda p: (LUSTRE_MAGIC, *real(p)[1:]))
    return log


def _lfs(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(["lfs", *args], capture_output=True, text=True, timeout=30, cwd=cwd)


def test_lustre_path_sets_the_layout_before_any_file_exists(tmp_path, fake_lustre):
    rec = apply_layout(tmp_path / "ds", Layout(4, 4 << 20))
    assert rec.applicable and rec.fs_type == "lustre"
    assert rec.applied["stripe_count"] == 4 and rec.applied["stripe_size"] == 4 << 20
    assert rec.applied["active_osts"] == 7 and "stripe_count_capped" not in rec.applied
    calls = fake_lustre.read_text().splitlines()
    assert calls[0] == f"setstripe -c 4 -S 4194304 {tmp_path / 'ds'}"
    assert calls[1] == f"getstripe -d --yaml {tmp_path / 'ds'}"
    assert calls[2] == f"df {tmp_path / 'ds'}"


def test_files_report_the_layout_they_got_with_their_osts(tmp_path, fake_lustre):
    rec = apply_layout(tmp_path / "ds", Layout(4, 1 << 20, pool="flash"))
    (tmp_path / "ds" / "f").write_bytes(b"x")
    rec = lay.read_layout(rec, [tmp_path / "ds" / "f"])
    got = rec.files["f"]
    assert got["stripe_count"] == 4 and len(set(got["osts"])) == 4 and 7 not in got["osts"]
    assert got["pool"] == "flash" and got["pattern"] == "raid0"


def test_a_count_above_the_active_osts_is_capped_and_recorded(tmp_path, fake_lustre):
    rec = apply_layout(tmp_path / "ds", Layout(-1, 1 << 20))
    assert rec.applied["stripe_count_capped"] == 7
    (tmp_path / "ds" / "f").write_bytes(b"x")
    assert lay.read_layout(rec, [tmp_path / "ds" / "f"]).files["f"]["stripe_count"] == 7


@pytest.mark.parametrize(("args", "rc", "said"), [
    (["-c", "2001"], 22, "lfs setstripe: invalid stripe count '2001'"),
    (["-S", "100000"], 22, "bad stripe_size 100000, must be an even multiple of 65536 bytes"),
    (["-p", "nvme"], 22, "pool 'testfs.nvme' does not exist"),
])
def test_the_fake_refuses_as_lfs_does(tmp_path, fake_lustre, args, rc, said):
    p = _lfs("setstripe", *args, str(tmp_path))
    assert p.returncode == rc and said in p.stderr


def test_the_fake_knows_stripe_already_set_and_non_lustre_paths(tmp_path, fake_lustre):
    (tmp_path / "f").write_bytes(b"data")
    p = _lfs("setstripe", "-c", "2", str(tmp_path / "f"))
    assert p.returncode == 17 and p.stderr.strip().endswith("stripe already set")
    p = _lfs("getstripe", "/proc/self")
    assert p.returncode == 19 and "is not on a Lustre filesystem" in p.stderr


def test_the_fake_answers_in_lfs_formats(tmp_path, fake_lustre):
    d = tmp_path / "d"
    d.mkdir()
    assert _lfs("setstripe", "-c", "3", "-S", "2097152", str(d)).returncode == 0
    one_line = _lfs("getstripe", "-d", str(d)).stdout.strip()
    assert one_line == "stripe_count:  3 stripe_size:   2097152 pattern:       raid0 stripe_offset: -1"
    (d / "f").write_bytes(b"x")
    assert _lfs("getstripe", "-c", str(d / "f")).stdout.strip() == "3"
    assert _lfs("getstripe", "-S", str(d / "f")).stdout.strip() == "2097152"
    plain = _lfs("getstripe", str(d / "f")).stdout
    assert plain.startswith(f"{d / 'f'}\nlmm_stripe_count:  3\n") and "obdidx" in plain
    df = _lfs("df", str(d)).stdout
    assert "OST0007             : inactive device" in df and "filesystem_summary:" in df
    assert parse_getstripe_yaml(_lfs("getstripe", "--yaml", str(d / "f")).stdout)["stripe_count"] == 3


def test_lfs_failure_is_wrapped_with_what_lfs_said(tmp_path, fake_lustre):
    with pytest.raises(LayoutError, match="pool 'testfs.nvme' does not exist"):
        apply_layout(tmp_path / "ds", Layout(2, 1 << 20, pool="nvme"))


@pytest.mark.parametrize("fixture", ["file_pfl.yaml", "file_pfl_pre216.yaml"])
def test_both_composite_forms_are_recorded_by_component(fixture):
    d = parse_getstripe_yaml((FIXTURES / fixture).read_text())
    assert [c["stripe_count"] for c in d["components"]] == [1, 4]
    assert d["components"][0]["extent_end"] == 64 << 20 and d["components"][1]["extent_end"] is None
    assert d["components"][1]["osts"] == [1, 2, 3, 0]


def test_data_on_mdt_is_recognised(tmp_path, fake_lustre, monkeypatch):
    monkeypatch.setenv("FAKE_LFS_FILE_YAML", str(FIXTURES / "file_dom.yaml"))
    rec = apply_layout(tmp_path / "ds", Layout(2, 1 << 20))
    (tmp_path / "ds" / "f").write_bytes(b"x")
    got = lay.read_layout(rec, [tmp_path / "ds" / "f"]).files["f"]
    assert got["dom_bytes"] == 1 << 20 and got["components"][0]["pattern"] == "mdt"
    assert got["stripe_count"] == 2 and got["osts"] == [5, 6]  # the top-level figures: the first on OSTs


def test_missing_lfs_on_lustre_says_how_to_get_it(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setattr(lfs_fs, "statfs_magic", lambda p: (LUSTRE_MAGIC, 1 << 30, 1 << 40))
    with pytest.raises(LayoutError, match="'lfs' not found.*Lustre client"):
        lay.apply_layout(tmp_path / "ds", Layout(2, 1 << 20))


def test_the_registry_picks_the_backend_by_file_system(tmp_path, fake_lustre):
    from lustre import backend, backend_for, describe

    assert backend_for(tmp_path).name == "lustre"
    assert backend("ext4").name == "posix" and backend("ext4").validate(Layout(-5, 100)) == []
    assert describe(Layout(4, 1 << 20)) == describe(Layout(4, 1 << 20), "ext4") == "4OST"
    rec = apply_layout(tmp_path / "ds", Layout(6, 4 << 20))
    (tmp_path / "ds" / "f").write_bytes(b"x")
    assert lay.read_layout(rec, [tmp_path / "ds" / "f"]).files["f"]["stripe_count"] == 6


def test_one_answer_to_is_this_lustre(tmp_path):
    from lustre.fs import LUSTRE_MAGIC, FsInfo

    here = fs_info(tmp_path)
    assert here.is_lustre is is_lustre(tmp_path) is (here.magic == LUSTRE_MAGIC)
    named = FsInfo("/x", "lustre", 0xEF53, "/x", "lustre", "", 1, 1)  # a mount table's name is not the test
    assert not named.is_lustre
    assert FsInfo("/x", "lustre", LUSTRE_MAGIC, "/x", "lustre", "", 1, 1).is_lustre


class StripingStub(lay.StorageBackend):
    """A stand-in backend for the registry test below (no real file system behind it): it claims the test's
    tmp_path file system and says it stripes (every other answer is the base class's default)."""

    name = "stub"
    stripes = True
    knobs = frozenset()

    def detect(self, info):
        return True

    def validate(self, request, where=None):
        return [] if request.stripe_count <= 4 else ["stripe: at most 4 on the stub"]


def test_a_new_backend_is_a_registry_line(tmp_path, monkeypatch):
    """What a file system's type maps to is the registry's alone: registering a striping backend for this
    tmp_path's type makes striping apply there, for the point's validation too, with no other change."""
    from experiments.config.validate.layout import check_file_system
    from lustre import registry, striping_applies

    kind = fs_info(tmp_path).type
    assert not striping_applies(tmp_path)
    monkeypatch.setattr(registry, "_registered", {})
    registry.register(kind, StripingStub())
    assert striping_applies(tmp_path)
    assert registry.backend_for(tmp_path).name == "stub"
    assert check_file_system([], tmp_path, 4, 1024)["striping_applicable"] is True
    assert registry.validate_request(Layout(8, 0), kind) == ["stripe: at most 4 on the stub"]
    assert registry.describe(Layout(8, 0), kind) == "8OST"  # no words of its own: the default striping backend's


def test_layout_knobs_are_refused_where_the_backend_has_none():
    from lustre import validate_request

    said = validate_request(Layout(1, 1 << 20, 8 << 20), "lustre")
    assert said == ["object_size=8388608 is a layout knob of CephFS only, and data_root is on lustre: leave "
                    "object_size at its default (0) here"]
    assert validate_request(Layout(1, 1 << 20, pool="flash"), "lustre") == []  # Lustre has OST pools
    assert "pool='flash' is a layout knob of CephFS and Lustre only" in validate_request(
        Layout(1, 1 << 20, pool="flash"), "ext4")[0]
