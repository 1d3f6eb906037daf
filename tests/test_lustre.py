"""The Lustre layer. Lustre cannot run here, so: file-system detection runs on the real local file systems,
``lfs getstripe --yaml`` parsing runs on outputs kept as fixtures, and the Lustre code path runs against
FAKE_LFS, a stand-in script for Lustre's ``lfs`` command (named as such), at the process boundary."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

import lustre as lay
from ddlio.errors import LayoutError
from lustre import Layout, apply_layout, fs_info, is_lustre
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
    assert (Layout(count, size).problems() == []) is ok


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


FAKE_LFS = """#!/bin/sh
# FAKE_LFS: a stand-in for Lustre's lfs command (Lustre cannot run here). It logs its arguments and answers
# getstripe with a fixture; setstripe fails when asked for more OSTs than the fake file system has.
echo "$@" >> "{log}"
case "$1" in
  setstripe) if [ "$3" -gt 8 ]; then
               echo "lfs setstripe: invalid stripe count $3: Invalid argument" >&2; exit 22
             fi ;;
  getstripe) cat "{fixture}" ;;
esac
"""


@pytest.fixture
def fake_lustre(tmp_path, monkeypatch):
    """FAKE_LFS on PATH, and statfs answering with Lustre's magic for tmp_path (the one kernel fact we fake)."""
    log = tmp_path / "lfs.log"
    script = tmp_path / "bin" / "lfs"
    script.parent.mkdir()
    script.write_text(FAKE_LFS.format(log=log, fixture=FIXTURES / "dir_stripe8.yaml"))
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", f"{script.parent}{os.pathsep}{os.environ['PATH']}")
    real = lfs_fs.statfs_magic
    monkeypatch.setattr(lfs_fs, "statfs_magic", lambda p: (LUSTRE_MAGIC, *real(p)[1:]))
    return log


def test_lustre_path_sets_the_layout_before_any_file_exists(tmp_path, fake_lustre):
    rec = apply_layout(tmp_path / "ds", Layout(8, 4 << 20))
    assert rec.applicable and rec.fs_type == "lustre"
    assert rec.applied["stripe_count"] == 8
    calls = fake_lustre.read_text().splitlines()
    assert calls[0] == f"setstripe -c 8 -S 4194304 {tmp_path / 'ds'}"
    assert calls[1] == f"getstripe -d --yaml {tmp_path / 'ds'}"


def test_lfs_failure_is_wrapped_with_what_lfs_said(tmp_path, fake_lustre):
    with pytest.raises(LayoutError, match="invalid stripe count 16: Invalid argument"):
        apply_layout(tmp_path / "ds", Layout(16, 1 << 20))


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
    rec = lay.read_layout(apply_layout(tmp_path / "ds", Layout(8, 4 << 20)), [tmp_path / "ds" / "f"])
    assert rec.files["f"]["stripe_count"] == 8


def test_one_answer_to_is_this_lustre(tmp_path):
    from lustre.fs import LUSTRE_MAGIC, FsInfo

    here = fs_info(tmp_path)
    assert here.is_lustre is is_lustre(tmp_path) is (here.magic == LUSTRE_MAGIC)
    named = FsInfo("/x", "lustre", 0xEF53, "/x", "lustre", "", 1, 1)  # a mount table's name is not the test
    assert not named.is_lustre
    assert FsInfo("/x", "lustre", LUSTRE_MAGIC, "/x", "lustre", "", 1, 1).is_lustre


class StripingStub:
    """A stand-in backend for the registry test below (no real file system behind it): it claims the test's
    tmp_path file system and says it stripes."""

    name = "stub"
    stripes = True

    def detect(self, info):
        return True

    def validate(self, request):
        return [] if request.stripe_count <= 4 else ["stripe: at most 4 on the stub"]


def test_a_new_backend_is_a_registry_line(tmp_path, monkeypatch):
    """What a file system's type maps to is the registry's alone: registering a striping backend for this
    tmp_path's type makes striping apply there, for the point's validation too, with no other change."""
    from experiments.config.validate.layout import check_file_system
    from lustre import registry, striping_applies

    kind = fs_info(tmp_path).type
    assert not striping_applies(tmp_path)
    monkeypatch.setitem(registry.BACKENDS, kind, "test_lustre:StripingStub")
    monkeypatch.setattr(registry, "_loaded", {})
    assert striping_applies(tmp_path)
    assert registry.backend_for(tmp_path).name == "stub"
    assert check_file_system([], tmp_path, 4, 1024)["striping_applicable"] is True
    assert registry.validate_request(Layout(8, 0), kind) == ["stripe: at most 4 on the stub"]
