"""The CephFS backend: a directory layout set with the ``ceph.dir.layout`` virtual xattr before any file exists,
read back per file from ``ceph.file.layout``; the targets of a file are the OSDs its first objects map to
(``ceph osd map``, where a ``ceph`` CLI and a key are at hand).

CephFS is detected by its layout xattrs, whatever the client (ceph-fuse reports the generic FUSE statfs magic, the
kernel client 0x00c36400): a CephFS directory answers ``ceph.dir.layout`` (or, when it has no layout of its own,
``ceph.dir.rbytes``), a file ``ceph.file.layout``. The xattrs are not listed; they are asked for by name.

``stripe`` and ``stripe_size`` mean what they mean on Lustre (``stripe_count`` objects written round robin in
``stripe_unit`` = ``stripe_size`` pieces); ``object_size`` (bytes) and ``pool`` are CephFS's own. CephFS's rules
(``ceph_file_layout_is_valid``): the stripe unit is a multiple of 64 KiB, the object size a multiple of the stripe
unit and at most the OSDs' ``osd max object size``; a stripe count of at least 1. Sizes are in bytes.
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
import shutil
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, ClassVar

from ddlio.errors import LayoutError
from ddlio.units import format_size
from lustre.base import Layout, LayoutRecord, StorageBackend
from lustre.fs import FsInfo, existing_ancestor

#: CephFS's minimum stripe unit (CEPH_MIN_STRIPE_UNIT): stripe units and object sizes are multiples of it
STRIPE_UNIT = 64 * 1024
#: the object size of a layout that names none (CephFS's default layout: 4 MiB objects, 4 MiB units, count 1)
DEFAULT_OBJECT_SIZE = 4 * 1024**2
#: Ceph's default ``osd max object size`` (used when the cluster's own value cannot be read)
DEFAULT_MAX_OBJECT = 128 * 1024**2
#: how many files' objects :meth:`CephBackend.read_back` maps to OSDs (each map asks the monitors)
MAP_OBJECTS_MAX = 16


def _xattr(path: str | os.PathLike, name: str) -> str | None:
    """The virtual xattr ``name`` of ``path`` as text, or None when the path has none (not CephFS, or no layout of
    its own)."""
    try:
        return os.getxattr(path, name).decode()
    except OSError as e:
        if e.errno in (errno.ENODATA, errno.ENOTSUP, errno.EOPNOTSUPP, errno.EINVAL, errno.ENOENT, errno.EPERM,
                       errno.EACCES):
            return None
        raise


def is_cephfs(path: str | os.PathLike) -> bool:
    """True when ``path`` (or its nearest existing ancestor) lies on CephFS: it answers CephFS's xattrs."""
    p = existing_ancestor(path)
    if p.is_dir():
        return _xattr(p, "ceph.dir.layout") is not None or _xattr(p, "ceph.dir.rbytes") is not None
    return _xattr(p, "ceph.file.layout") is not None


def inherited_layout(path: str | os.PathLike) -> dict[str, Any]:
    """The layout a new directory at ``path`` would inherit: that of the nearest ancestor with a layout of its
    own (the file system's root always has one); {} off CephFS."""
    p = existing_ancestor(path)
    for d in (p, *p.parents):
        text = _xattr(d, "ceph.dir.layout")
        if text:
            return parse_layout(text)
        if _xattr(d, "ceph.dir.rbytes") is None:
            return {}
    return {}


def parse_layout(text: str) -> dict[str, Any]:
    """``stripe_unit=1048576 stripe_count=4 object_size=8388608 pool=cephfs_data`` as ``{stripe_count,
    stripe_size, object_size, pool}`` (sizes in bytes; ``pool_namespace`` kept when present)."""
    fields = dict(kv.split("=", 1) for kv in text.split() if "=" in kv)
    out: dict[str, Any] = {}
    for key, name in (("stripe_count", "stripe_count"), ("stripe_unit", "stripe_size"), ("object_size", "object_size")):
        if key in fields:
            out[name] = int(fields[key])
    if "pool" in fields:
        out["pool"] = fields["pool"]
    if fields.get("pool_namespace"):
        out["pool_namespace"] = fields["pool_namespace"]
    if "stripe_count" not in out:
        raise LayoutError(f"unexpected CephFS layout {text!r}: no stripe_count")
    return out


def max_object_size() -> int:
    """The OSDs' ``osd max object size`` in bytes, as this client's ceph.conf sets it (``ceph-conf``), else
    Ceph's default (128 MiB)."""
    exe = shutil.which("ceph-conf")
    if exe:
        try:
            proc = subprocess.run([exe, "-n", "osd.0", "--show-config-value", "osd_max_object_size"],
                                  capture_output=True, text=True, timeout=10, check=False)
            if proc.returncode == 0 and proc.stdout.strip().isdigit():
                return int(proc.stdout.strip())
        except (OSError, subprocess.TimeoutExpired):
            pass
    return DEFAULT_MAX_OBJECT


def layout_problems(request: Layout, inherited_object_size: int = DEFAULT_OBJECT_SIZE,
                    max_object: int | None = None) -> list[str]:
    """Every reason ``request`` is not a CephFS layout, each naming what is valid (``inherited_object_size``: the
    object size a request without one keeps, bytes)."""
    out = []
    if request.stripe_count < 0:
        out.append(f"stripe={request.stripe_count} is not a CephFS stripe count: use N >= 1 objects at a time "
                   "(or 0 to keep the directory's layout); CephFS has no 'all targets' count")
    unit = request.stripe_size
    if unit and unit % STRIPE_UNIT:
        out.append(f"stripe_size={unit} bytes is not a CephFS stripe unit: use a multiple of 64KiB "
                   "(64KiB, 1MiB, 4MiB ...) or 0 to keep the directory's")
    obj = request.object_size or inherited_object_size
    if request.object_size and request.object_size % STRIPE_UNIT:
        out.append(f"object_size={request.object_size} bytes is not a CephFS object size: use a multiple of 64KiB")
    elif unit and not out and obj % unit:
        out.append(f"object_size={format_size(obj)} is not a multiple of stripe_size={format_size(unit)}: CephFS "
                   "needs whole stripe units per object; set object_size to a multiple of stripe_size")
    limit = max_object if max_object is not None else (max_object_size() if request.object_size else obj)
    if request.object_size and request.object_size > limit:
        out.append(f"object_size={format_size(request.object_size)} is above the cluster's osd max object size "
                   f"({format_size(limit)}): use at most that")
    return out


def layout_value(request: Layout) -> str:
    """The ``ceph.dir.layout`` value that sets ``request`` (fields at 0 / "" are left to the parent's layout)."""
    parts = []
    if request.stripe_size:
        parts.append(f"stripe_unit={request.stripe_size}")
    if request.stripe_count:
        parts.append(f"stripe_count={request.stripe_count}")
    if request.object_size:
        parts.append(f"object_size={request.object_size}")
    if request.pool:
        parts.append(f"pool={request.pool}")
    return " ".join(parts)


_MAP = re.compile(r"object '([^']+)' -> pg \S+ \(([^)]+)\) -> up \(\[([\d,]*)\], p(-?\d+)\)")


def map_objects(pool: str, names: list[str], timeout_s: float = 30.0) -> dict[str, int] | None:
    """The primary OSD of each object ``names`` of ``pool`` (one ``ceph`` process reads all the ``osd map``
    commands from stdin), or None when no ``ceph`` CLI can ask the monitors."""
    exe = shutil.which("ceph")
    if exe is None or not names:
        return None
    script = "".join(f"osd map {pool} {n}\n" for n in names)
    try:
        proc = subprocess.run([exe, "--connect-timeout", "10"], input=script, capture_output=True, text=True,
                              timeout=timeout_s, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    found = {m.group(1): int(m.group(4)) for m in _MAP.finditer(proc.stdout)}
    return found if len(found) == len(names) else None


class CephBackend(StorageBackend):
    """CephFS (see the module's docstring): :class:`lustre.base.StorageBackend`. It labels layouts in the default
    wording (Lustre's, the paper's: CephFS points compare with Lustre's)."""

    name: ClassVar[str] = "ceph"
    stripes: ClassVar[bool] = True
    #: the layout knobs beyond stripe/stripe_size this backend applies
    knobs: ClassVar[frozenset[str]] = frozenset({"object_size", "pool"})
    title: ClassVar[str] = "CephFS"
    install: ClassVar[str] = ("the 'ceph' and 'ceph-conf' commands (OSD maps, the OSDs' object size limit) come with "
                              "the ceph-common package; a key for the client in /etc/ceph")

    def detect(self, info: FsInfo) -> bool:
        return is_cephfs(info.path)

    def validate(self, request: Layout, where: str | os.PathLike | None = None) -> list[str]:
        return layout_problems(request, inherited_layout(where).get("object_size", DEFAULT_OBJECT_SIZE)
                               if where is not None else DEFAULT_OBJECT_SIZE)

    def apply(self, directory: str | os.PathLike, request: Layout) -> LayoutRecord:
        """Create ``directory`` and set its layout, before any file exists in it; a layout CephFS refuses is a
        :class:`~ddlio.errors.LayoutError` with its reason."""
        d = Path(directory)
        d.mkdir(parents=True, exist_ok=True)
        if any(d.iterdir()):
            raise LayoutError(f"{d} already holds files: a CephFS layout must be set before any file exists in it")
        value = layout_value(request)
        if value:
            try:
                os.setxattr(d, "ceph.dir.layout", value.encode())
            except OSError as e:
                raise LayoutError(f"setting ceph.dir.layout={value!r} on {d} failed: {e.strerror}"
                                  + (" (the client needs the MDS cap 'p' to set layouts)"
                                     if e.errno == errno.EACCES else "")) from e
        text = _xattr(d, "ceph.dir.layout")
        applied = parse_layout(text) if text else {"inherited": True}
        return LayoutRecord(True, self.name, request.requested(), applied=applied)

    def read_back(self, file: str | os.PathLike) -> dict[str, Any]:
        text = _xattr(file, "ceph.file.layout")
        if text is None:
            raise LayoutError(f"{file} has no ceph.file.layout: not on CephFS")
        out = parse_layout(text)
        out["inode"] = os.stat(file).st_ino
        return out

    def add_targets(self, files: dict[str, dict[str, Any]]) -> None:
        """Add ``targets`` (the primary OSD of each of a file's first ``stripe_count`` objects, named
        ``<inode hex>.<index as 8 hex digits>``) to read-back layouts, in one ``ceph`` call; where the monitors
        cannot be asked, ``targets_reason`` says so."""
        wanted: dict[str, list[str]] = {}
        for name, lay in files.items():
            n = min(int(lay.get("stripe_count", 1)), MAP_OBJECTS_MAX)
            wanted[name] = [f"{int(lay['inode']):x}.{i:08x}" for i in range(n)]
        pools = {lay.get("pool", "") for lay in files.values()}
        objs = [o for names in wanted.values() for o in names]
        osds = map_objects(pools.pop(), objs) if len(pools) == 1 and "" not in pools else None
        for name, lay in files.items():
            if osds is None:
                lay["targets_reason"] = "no 'ceph' CLI with a key could ask the monitors (ceph osd map)"
            else:
                lay["targets"] = [osds[o] for o in wanted[name]]

    def drop_client_cache(self, files: list[Path], info: FsInfo) -> dict[str, Any]:
        """cache=cold: empty ceph-fuse's object cache (:func:`empty_client_cache`); the page cache is the
        caller's."""
        return empty_client_cache(files, info.mount_point, info.mount_type)


# ------------------------------------------------------------------ ceph-fuse's own cache (cache=cold)
#: bytes of data buffers ceph-fuse may still hold after a drop for the read to count cold
CLIENT_CACHE_TOLERANCE = 1 << 20
#: seconds a drop may take to bring ceph-fuse's buffers under the tolerance before it is reported as failed
CLIENT_CACHE_TIMEOUT_S = 10.0
#: the object-cache size a drop shrinks ceph-fuse to for an instant (the cache trims to it at the next read)
_TINY_CACHE = 65536


def admin_command(sock: str | os.PathLike, **cmd: Any) -> Any:
    """One command on a Ceph daemon's admin socket (the protocol of ``ceph daemon``: the JSON command and a NUL,
    answered by a 4-byte big-endian length and the JSON reply)."""
    import json  # lazy: stdlib, only where a socket is asked
    import socket
    import struct

    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(10)
        s.connect(str(sock))
        s.sendall(json.dumps(cmd).encode() + b"\0")
        head = b""
        while len(head) < 4:
            chunk = s.recv(4 - len(head))
            if not chunk:
                raise OSError(f"{sock}: closed before answering")
            head += chunk
        size, body = struct.unpack(">I", head)[0], b""
        while len(body) < size:
            chunk = s.recv(size - len(body))
            if not chunk:
                raise OSError(f"{sock}: answer cut short")
            body += chunk
    return json.loads(body or b"null")


def _socket_dirs() -> list[Path]:
    dirs = [Path("/var/run/ceph"), Path("/run/ceph")]
    exe = shutil.which("ceph-conf")
    if exe:
        try:
            proc = subprocess.run([exe, "--show-config-value", "run_dir"], capture_output=True, text=True,
                                  timeout=10, check=False)
            if proc.returncode == 0 and proc.stdout.strip():
                dirs.insert(0, Path(proc.stdout.strip()))
        except (OSError, subprocess.TimeoutExpired):
            pass
    return dirs


def client_socket(mount_point: str) -> Path | None:
    """The admin socket of the ceph-fuse serving ``mount_point`` (``$DDLIO_CEPH_ASOK``, else the client sockets in
    ceph.conf's run dir and /var/run/ceph whose ``status`` names that mount point), or None."""
    if os.environ.get("DDLIO_CEPH_ASOK"):
        return Path(os.environ["DDLIO_CEPH_ASOK"])
    for d in _socket_dirs():
        for sock in sorted(d.glob("*client*.asok")) if d.is_dir() else []:
            try:
                if admin_command(sock, prefix="status").get("metadata", {}).get("mount_point") == mount_point:
                    return sock
            except (OSError, ValueError, AttributeError):
                continue
    return None


def _buffered_bytes(sock: Path) -> int:
    pools = admin_command(sock, prefix="dump_mempools")["mempool"]["by_pool"]
    return int(pools.get("buffer_anon", {}).get("bytes", 0))


def _trim_read(file: Path) -> None:
    """Read one byte of ``file`` past the page cache, so that it reaches ceph-fuse (which trims its cache then)."""
    with open(file, "rb", buffering=0) as f:
        os.posix_fadvise(f.fileno(), 0, 0, os.POSIX_FADV_DONTNEED)
        f.read(1)
        os.posix_fadvise(f.fileno(), 0, 0, os.POSIX_FADV_DONTNEED)


def _flush(files: list[Path]) -> None:
    """fsync the files: ceph-fuse cannot trim dirty buffers (data written and not yet sent to the OSDs)."""
    for path in files:
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def empty_client_cache(files: list[Path], mount_point: str, mount_type: str,
                       timeout_s: float = CLIENT_CACHE_TIMEOUT_S) -> dict[str, Any]:
    """Empty ceph-fuse's own object cache (``client_oc``, 200 MiB by default, kept after the kernel's pages are
    evicted) and measure what is left: through its admin socket, shrink the cache to 64 KiB, read one byte of a
    dataset file (the cache trims at the next read), restore the size (:func:`_restore_size`: never a size a
    drop running beside it or killed before it left; drops through one client are one at a time on a host),
    then read the bytes of data buffers it
    still holds (``dump_mempools``: ``buffer_anon``). The trim is not always done at the first read (the new size
    reaches the cache through a config observer; dirty buffers are kept until written): while more than
    :data:`CLIENT_CACHE_TOLERANCE` bytes are left the files are fsync'd once and the read repeated, for up to
    ``timeout_s`` seconds. The kernel client keeps file data in the page cache only: nothing to do.
    ``{"client_cache_bytes": N}``, or ``{"error": ...}`` when it cannot be done or verified."""
    if mount_type != "fuse.ceph-fuse" or not files:
        return {}
    sock = client_socket(mount_point)
    if sock is None:
        return {"error": f"ceph-fuse's object cache could not be emptied: no admin socket of the client mounted "
                         f"at {mount_point} (set DDLIO_CEPH_ASOK to its path)"}
    try:
        with _one_drop_at_a_time(sock):
            return _drop(sock, files, timeout_s)
    except (OSError, ValueError, KeyError, TypeError) as e:
        return {"error": f"ceph-fuse's object cache could not be emptied through {sock}: {e}"}


@contextlib.contextmanager
def _one_drop_at_a_time(sock: Path) -> Iterator[None]:
    """Hold this host's lock for drops through ``sock``: points running at once on one client (Slurm's nodes of
    one host share its mount) would otherwise each take the other's shrunken size for the one to put back."""
    import fcntl  # lazy: only where a cold drop is asked
    import hashlib
    import tempfile

    name = f"ddlio-ceph-oc-{hashlib.sha1(str(sock).encode()).hexdigest()[:12]}.lock"
    fd = os.open(Path(tempfile.gettempdir()) / name, os.O_RDWR | os.O_CREAT, 0o666)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def _restore_size(sock: Path) -> Callable[[], None]:
    """How to put ``client_oc_size`` back after the drop: the runtime override found before it, or, where there
    was none or it is the drop's own tiny size (a drop killed before its end left it), no override at all (``config
    unset``: ceph.conf's or the default size), so that a killed drop is healed by the next one."""
    override = (admin_command(sock, prefix="config diff").get("diff", {}).get("client_oc_size") or {}).get("override")
    if override is None or int(override) == _TINY_CACHE:
        return lambda: admin_command(sock, prefix="config unset", var="client_oc_size")
    return lambda: admin_command(sock, prefix="config set", var="client_oc_size", val=[str(override)])


def _drop(sock: Path, files: list[Path], timeout_s: float) -> dict[str, Any]:
    """:func:`empty_client_cache`'s work, under the host's lock for ``sock``."""
    import time  # lazy: stdlib, only where a cold drop is asked

    restore = _restore_size(sock)
    admin_command(sock, prefix="config set", var="client_oc_size", val=[str(_TINY_CACHE)])
    try:
        deadline, pause, flushed = time.monotonic() + timeout_s, 0.01, False
        _trim_read(files[0])
        left = _buffered_bytes(sock)
        while left > CLIENT_CACHE_TOLERANCE and time.monotonic() < deadline:
            if not flushed:
                _flush(files)
                flushed = True
            time.sleep(pause)
            pause = min(pause * 2, 0.5)
            _trim_read(files[0])
            left = _buffered_bytes(sock)
    finally:
        restore()
    left = _buffered_bytes(sock)
    if left > CLIENT_CACHE_TOLERANCE:
        return {"client_cache_bytes": left,
                "error": f"ceph-fuse still holds {format_size(left)} of data after its cache was emptied "
                         f"(for {timeout_s:g} s)"}
    return {"client_cache_bytes": left}
