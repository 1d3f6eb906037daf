"""Every file or directory an analysis command writes goes through here, so no output ever replaces a file ddlio did
not write. :func:`check_file` / :func:`check_dir` run before any work (before the store is read or written): the
path is not in the way (a directory where a file goes, or the reverse), its directory can be written (probed by
creating and removing a file there), a file that exists is replaced only when ddlio wrote it (:func:`ours`) or
with ``--force``, and the files shipped in ``conf/`` are never replaced, not even with ``--force`` (a preset
ddlio derived there may be).
:func:`write_file` then writes through a temporary file beside the output (fsync, rename), removed on failure, so a
full disk leaves no partial or empty output; a write that fails is bad input naming the path (exit 2).

How ddlio recognises its own outputs: HTML carries ``<meta name='generator' content='ddlio ...'>``; a workload
preset carries the ``python -m analysis import-darshan --workload-out`` comment it is written with; a CSV export
is listed, with the SHA-256 of the bytes ddlio wrote, in the manifest :data:`OUTPUTS` of its directory (a CSV
carries no mark of its own, and a header that happens to name ``point_key`` proves nothing; a file changed since
is no longer ddlio's); a Parquet export carries ``ddlio`` in its schema's metadata; a figure directory holds a
manifest (:data:`MANIFEST`) naming the files ddlio wrote there.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import tempfile
from collections.abc import Callable, Iterable
from pathlib import Path

from ddlio.errors import DdlioError

#: the shipped Hydra presets: never replaced by an output
SHIPPED_CONF = Path(__file__).resolve().parents[1] / "conf"
#: in a figure directory: the names of the files ddlio wrote there, one a line
MANIFEST = ".ddlio-figures"
#: in an output's directory: ``<sha256>  <name>`` of each output file ddlio wrote there without a mark inside
OUTPUTS = ".ddlio-outputs"
#: the mark an HTML output carries (inserted into its <head>)
HTML_MARK = "<meta name='generator' content='ddlio'>"
#: the line a workload preset written by import-darshan carries
YAML_MARK = "# python -m analysis import-darshan --workload-out"
#: the key of a Parquet export's schema metadata
PARQUET_KEY = b"ddlio"


class OutputError(DdlioError):
    """An output path that cannot or must not be written (exit 2, naming it)."""


def _shipped(path: Path) -> bool:
    return path == SHIPPED_CONF or SHIPPED_CONF in path.parents


def _head(path: Path, n: int = 4096) -> str:
    try:
        with open(path, "rb") as f:
            return f.read(n).decode("utf-8", errors="replace")
    except OSError:
        return ""


def ours(path: Path, kind: str) -> bool:
    """Whether the existing file ``path`` is recognisably one ddlio wrote, as output ``kind`` (html, yaml, csv,
    parquet)."""
    if _recorded(path):
        return True
    head = _head(path)
    if kind == "html":
        return HTML_MARK in head
    if kind == "yaml":
        return YAML_MARK in head
    if kind == "parquet":
        try:
            import pyarrow.parquet as pq  # lazy: pyarrow is heavy and only a Parquet output needs it

            meta = pq.read_schema(path).metadata or {}
        except Exception:
            return False
        return PARQUET_KEY in meta
    return False


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _outputs(directory: Path) -> dict[str, str]:
    """The manifest :data:`OUTPUTS` of ``directory``: name -> SHA-256 of what ddlio wrote (empty when none)."""
    try:
        lines = (directory / OUTPUTS).read_text().splitlines()
    except (OSError, UnicodeDecodeError):
        return {}
    return {name: digest for digest, _, name in (line.partition("  ") for line in lines) if name}


def _recorded(path: Path) -> bool:
    """Whether ``path`` holds, byte for byte, what ddlio recorded writing there (:data:`OUTPUTS`)."""
    digest = _outputs(path.parent).get(path.name)
    try:
        return digest is not None and path.is_file() and _sha256(path) == digest
    except OSError:
        return False


def record_output(path: Path) -> None:
    """Record the file ``path`` ddlio has just written in its directory's manifest :data:`OUTPUTS`, so that a
    later run may replace it (and only while it holds those bytes)."""
    entries = {**_outputs(path.parent), path.name: _sha256(path)}
    write_file(path.parent / OUTPUTS, "".join(f"{d}  {n}\n" for n, d in sorted(entries.items())))


def _probe(directory: Path, what: str, named: Path) -> None:
    """``directory`` (or its nearest existing ancestor) can be written: a file is created there and removed.
    Messages name the output as the user did (``named``)."""
    d = directory
    while not d.exists():
        if d.parent == d:
            break
        d = d.parent
    if not d.is_dir():
        raise OutputError(f"{what} {named}: {d} is not a directory")
    try:
        fd, probe = tempfile.mkstemp(prefix=".ddlio-probe-", dir=d)
    except OSError as e:
        raise OutputError(f"{what} {named}: cannot write in {d}: {e.strerror or e}") from None
    os.close(fd)
    os.unlink(probe)


def check_file(path: str | os.PathLike, kind: str, force: bool = False, what: str = "--out") -> Path:
    """Check the output file ``path`` before any work (see the module's doc); returns it as a Path. Raises
    :class:`OutputError` naming the path and what to do."""
    p = Path(path)
    if str(path) == "" or p.name in ("", ".", ".."):
        raise OutputError(f"{what} {str(path)!r}: name a file")
    if p.name in (OUTPUTS, MANIFEST):
        raise OutputError(f"{what} {p}: {p.name} is the manifest where ddlio lists its outputs: name another file")
    full = p.resolve()
    if _shipped(full) and full.exists() and not (kind == "yaml" and full.is_file() and ours(full, kind)):
        raise OutputError(f"{what} {p}: a file shipped with ddlio ({SHIPPED_CONF.name}/) is never replaced, not "
                          "even with --force: name a new file")
    if full.is_dir():
        raise OutputError(f"{what} {p} is a directory: name a file in it (e.g. {p / ('output.' + kind)})")
    if full.exists() or full.is_symlink():
        if not full.is_file():
            raise OutputError(f"{what} {p} is not a regular file: name another path")
        if not ours(full, kind) and not force:
            raise OutputError(f"{what} {p} exists and was not written by ddlio: name another file, or pass "
                              "--force to replace it")
        if not os.access(full, os.W_OK):
            raise OutputError(f"{what} {p} is read-only")
    _probe(p.parent, what, p)  # as the user named it: messages name the part of their path in the way
    return p


def check_dir(path: str | os.PathLike, force: bool = False, what: str = "--out") -> Path:
    """Check the output directory ``path`` before any work: not a file, writable; returns it as a Path. Which of
    its files may be replaced is :func:`check_dir_names`'s question once the names are known."""
    p = Path(path)
    if str(path) == "":
        raise OutputError(f"{what} {str(path)!r}: name a directory")
    full = p.resolve()
    if _shipped(full):
        raise OutputError(f"{what} {p}: inside the presets shipped with ddlio ({SHIPPED_CONF.name}/): name another "
                          "directory")
    if full.exists() and not full.is_dir():
        raise OutputError(f"{what} {p} exists and is not a directory: name a directory")
    _probe(p, what, p)
    return p


def _manifest(directory: Path) -> dict[str, str | None]:
    """The figure manifest :data:`MANIFEST` of ``directory``: name -> SHA-256 of what ddlio wrote (``<sha256>
    <name>`` lines; a line of a name alone, as earlier releases wrote, maps to None)."""
    try:
        lines = (directory / MANIFEST).read_text().splitlines()
    except (OSError, UnicodeDecodeError):
        return {}
    out: dict[str, str | None] = {}
    for line in lines:
        digest, sep, name = line.partition("  ")
        if sep and len(digest) == 64 and all(c in "0123456789abcdef" for c in digest):
            out[name] = digest
        elif line.strip():
            out[line.strip()] = None
    return out


def manifest_names(directory: Path) -> set[str]:
    """The names ddlio's manifest in ``directory`` lists (empty when there is none)."""
    return set(_manifest(directory))


def _still_ours(path: Path, digest: str | None) -> bool:
    """Whether ``path``, listed in the manifest with ``digest``, still holds what ddlio wrote (a listing without
    a digest, an earlier release's, is taken at its word)."""
    try:
        return digest is None or (path.is_file() and _sha256(path) == digest)
    except OSError:
        return False


def check_dir_names(directory: Path, names: Iterable[str], force: bool = False, what: str = "--out") -> None:
    """The files ``names`` about to be written in ``directory``: any that exists must be one ddlio wrote there
    (listed in its manifest with the bytes it still holds), unless ``force``."""
    mine = _manifest(directory)
    foreign = sorted(n for n in names if (directory / n).exists()
                     and not (n in mine and _still_ours(directory / n, mine[n])))
    if foreign and not force:
        shown = ", ".join(foreign[:5]) + (f" and {len(foreign) - 5} more" if len(foreign) > 5 else "")
        raise OutputError(f"{what} {directory}: {shown} exist and were not written by ddlio, or were changed "
                          f"since (no {MANIFEST} lists them as they are): name another directory, or pass --force "
                          "to replace them")
    for n in names:
        if (directory / n).is_dir():
            raise OutputError(f"{what} {directory}: {n} is a directory in the way")


def record_names(directory: Path, names: Iterable[str]) -> None:
    """Add ``names`` (files ddlio has just written in ``directory``) to its manifest, each with the SHA-256 of
    what it holds, so that a later run replaces it only while it holds those bytes."""
    entries = _manifest(directory)
    for n in names:
        f = directory / n
        entries[n] = _sha256(f) if f.is_file() else entries.get(n)
    write_file(directory / MANIFEST, "".join(f"{d}  {n}\n" if d else f"{n}\n" for n, d in sorted(entries.items())))


def mark_html(text: str) -> str:
    """``text`` (an HTML page) with ddlio's mark in its head."""
    return text.replace("<head>", "<head>" + HTML_MARK, 1) if "<head>" in text else HTML_MARK + text


def write_with(path: Path, write: Callable[[str], None], what: str = "--out") -> Path:
    """Call ``write(tmp)`` to write a temporary file beside ``path``, then fsync and rename it over ``path``; on
    any failure the temporary file is removed, and an OS error becomes :class:`OutputError` naming ``path``."""
    tmp = ""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
        os.close(fd)
        write(tmp)
        with open(tmp, "rb+") as f:
            os.fsync(f.fileno())
        os.chmod(tmp, _mode(path))
        os.replace(tmp, path)
    except OSError as e:
        raise OutputError(f"{what} {path}: cannot write it: {e.strerror or e}; nothing was left behind") from None
    finally:
        if tmp:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp)
    return path


def _mode(path: Path) -> int:
    """The permission bits the output gets: those of the file it replaces, else what the umask leaves of 0o666
    (as ``open`` would give; a temporary file starts at 0o600)."""
    try:
        return path.stat().st_mode & 0o7777
    except OSError:
        mask = os.umask(0)
        os.umask(mask)
        return 0o666 & ~mask


def write_file(path: Path, data: str | bytes, what: str = "--out") -> Path:
    """Write ``data`` (text as UTF-8) to ``path`` atomically, as :func:`write_with`."""
    raw = data.encode("utf-8") if isinstance(data, str) else data

    def put(tmp: str) -> None:
        with open(tmp, "wb") as f:
            f.write(raw)

    return write_with(path, put, what)
