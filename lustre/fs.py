"""File-system detection: which file system holds a path, and how much room it has.

The type comes from ``statfs(2)``'s ``f_type`` magic (Lustre clients report ``0x0BD00BD0``), cross-checked with
the mount table for a readable name and the mount point.
"""

from __future__ import annotations

import ctypes
import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path

from ddlio.libc import libc

LUSTRE_MAGIC = 0x0BD00BD0

#: statfs magics of the file systems an HPC user meets (linux/magic.h and the vendors' headers).
FS_MAGICS: dict[int, str] = {
    LUSTRE_MAGIC: "lustre",
    0xEF53: "ext4",
    0x58465342: "xfs",
    0x9123683E: "btrfs",
    0x01021994: "tmpfs",
    0x794C7630: "overlay",
    0x6969: "nfs",
    0xFF534D42: "cifs",
    0x47504653: "gpfs",
    0x19830326: "beegfs",
    0x2FC12FC1: "zfs",
    0x65735546: "fuse",
    0x9FA0: "proc",
    0x62656572: "sysfs",
    0x1373: "devtmpfs",
    0x27E0EB: "cgroup",
    0x63677270: "cgroup2",
    0x64626720: "debugfs",
    0x1CD1: "devpts",
    0xAAD7AAEA: "panfs",
    0x13661366: "ceph",
    0x00C36400: "ceph",
}

#: File systems that hold no user data: a data_root or database there is always a mistake.
PSEUDO_FS = frozenset({"proc", "sysfs", "devtmpfs", "cgroup", "cgroup2", "debugfs", "devpts"})


class _Statfs(ctypes.Structure):
    # struct statfs on 64-bit Linux (all fields are word-sized there).
    _fields_ = [
        ("f_type", ctypes.c_long),
        ("f_bsize", ctypes.c_long),
        ("f_blocks", ctypes.c_ulong),
        ("f_bfree", ctypes.c_ulong),
        ("f_bavail", ctypes.c_ulong),
        ("f_files", ctypes.c_ulong),
        ("f_ffree", ctypes.c_ulong),
        ("f_fsid", ctypes.c_int * 2),
        ("f_namelen", ctypes.c_long),
        ("f_frsize", ctypes.c_long),
        ("f_flags", ctypes.c_long),
        ("f_spare", ctypes.c_long * 4),
    ]


_libc = libc()
_libc.statfs.argtypes = [ctypes.c_char_p, ctypes.POINTER(_Statfs)]


@dataclass(frozen=True)
class FsInfo:
    """What holds a path: ``type`` (``lustre``, ``ext4``, ... or ``unknown-0x...``), the raw statfs ``magic``,
    the ``mount_point`` and the mount table's ``mount_type`` and ``source``, and free space in bytes."""

    path: str
    type: str
    magic: int
    mount_point: str
    mount_type: str
    source: str
    free_bytes: int
    total_bytes: int

    @property
    def is_lustre(self) -> bool:
        """The one test of "is this Lustre?" (striping applies, lfs works): the statfs magic of a Lustre client."""
        return self.magic == LUSTRE_MAGIC

    def to_dict(self) -> dict:
        return asdict(self)


def existing_ancestor(path: str | os.PathLike) -> Path:
    """The nearest ancestor of ``path`` (or ``path`` itself) that exists."""
    p = Path(os.path.abspath(path))
    while not p.exists():
        p = p.parent
    return p


def statfs_magic(path: str | os.PathLike) -> tuple[int, int, int]:
    """``(f_type, free bytes for unprivileged users, total bytes)`` of the file system holding ``path``."""
    buf = _Statfs()
    if _libc.statfs(os.fsencode(str(path)), ctypes.byref(buf)) != 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err), str(path))
    magic = buf.f_type & 0xFFFFFFFF
    return magic, buf.f_bavail * buf.f_bsize, buf.f_blocks * buf.f_bsize


def _mount_of(path: Path) -> tuple[str, str, str]:
    """``(mount point, fs type, source)`` of the deepest mount in /proc/self/mountinfo containing ``path``."""
    best = ("/", "unknown", "")
    try:
        lines = Path("/proc/self/mountinfo").read_text().splitlines()
    except OSError:
        return best
    resolved = str(path.resolve())
    for line in lines:
        left, _, right = line.partition(" - ")
        fields, rfields = left.split(), right.split()
        if len(fields) < 5 or len(rfields) < 2:
            continue
        mnt = fields[4].encode().decode("unicode_escape")
        inside = resolved == mnt or resolved.startswith(mnt.rstrip("/") + "/")
        if inside and len(mnt) >= len(best[0]):
            best = (mnt, rfields[0], rfields[1])
    return best


#: path -> its FsInfo while :func:`facts_held` is on (None: every call asks the kernel)
_held: dict[str, FsInfo] | None = None


@contextmanager
def facts_held() -> Iterator[None]:
    """Within the block, :func:`fs_info` answers each path as it first did: a batch of 10,000 points checks one
    data_root with one statfs and one read of the mount table, not 30,000 (nothing is written while a batch is
    checked, so the answers hold). Nested blocks share the outer one's answers."""
    global _held
    if _held is not None:
        yield
        return
    _held = {}
    try:
        yield
    finally:
        _held = None


def fs_info(path: str | os.PathLike) -> FsInfo:
    """Describe the file system that holds ``path`` (or would hold it: the nearest existing ancestor is used);
    sizes in bytes."""
    if _held is not None:
        got = _held.get(str(path))
        if got is None:
            got = _held[str(path)] = _fs_info(path)
        return got
    return _fs_info(path)


def _fs_info(path: str | os.PathLike) -> FsInfo:
    anc = existing_ancestor(path)
    magic, free, total = statfs_magic(anc)
    mnt, mtype, source = _mount_of(anc)
    name = FS_MAGICS.get(magic)
    if name == "fuse" and mtype == "fuse.ceph-fuse":
        name = "ceph"  # ceph-fuse reports the generic FUSE magic; the mount table names the client (lustre.ceph
        # detects CephFS by its xattrs, whatever the name)
    if name is None:
        name = mtype if mtype != "unknown" else f"unknown-{magic:#x}"
    return FsInfo(str(path), name, magic, mnt, mtype, source, free, total)


def is_lustre(path: str | os.PathLike) -> bool:
    """True when ``path`` (or its nearest existing ancestor) is on a Lustre client mount."""
    return fs_info(path).is_lustre
