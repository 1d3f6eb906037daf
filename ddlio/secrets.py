"""Database passwords stay in the driver process: masked wherever a URL is stored, printed or handed to a job.

A site keeps the password out of command lines in one of three ways: libpq's own ``PGPASSWORD`` or ``~/.pgpass``
(psycopg honours both; the URL then has no password), or ``db_url_file=PATH``, a file holding the whole URL that
only its owner may read (mode 600). Whatever the URL carries, only the driver's connection sees it; points, run
folders, the store and the report see it masked (``postgresql://user:***@host/db``).
"""

from __future__ import annotations

import contextlib
import io
import os
import re
import stat
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ddlio.errors import ConfigError

#: ``scheme://user:PASSWORD@`` in any text (URLs, command lines, error messages), also as Hydra's overrides
#: spell it (``postgresql\://user\:PASSWORD@host``). The password runs to the last ``@`` of the word (greedy): one
#: that holds ``@``, ``:`` or ``/`` is masked whole (a host or a second URL in the same word may be masked with it:
#: too much is hidden, never too little); a word of several URLs (``db=URL1,URL2``) is cut at each.
_PASSWORD_IN_URL = re.compile(
    r"(\b[A-Za-z][\w+.-]*\\?://[^\s:/@?#\\]*\\?:)((?:(?!,[A-Za-z][\w+.-]*\\?://)[^\s\"])*)(@)")
MASK = "***"


def mask(text: str) -> str:
    """``text`` with the password of every URL in it replaced by ``***``."""
    return _PASSWORD_IN_URL.sub(lambda m: m.group(1) + MASK + m.group(3), text)


def mask_any(obj: Any) -> Any:
    """``obj`` (strings, lists, dicts at any depth) with every URL password masked."""
    if isinstance(obj, str):
        return mask(obj)
    if isinstance(obj, dict):
        return {k: mask_any(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return type(obj)(mask_any(v) for v in obj)
    return obj


class MaskingStream(io.TextIOBase):
    """A text stream that writes to ``target`` what it is given, whole lines at a time, with every URL password
    masked (a URL split across two writes is still seen whole)."""

    def __init__(self, target: Any) -> None:
        self.target, self._pending = target, ""

    def writable(self) -> bool:
        return True

    def write(self, text: str) -> int:
        self._pending += text
        done, nl, rest = self._pending.rpartition("\n")
        if nl:
            self.target.write(mask(done + nl))
            self._pending = rest
        return len(text)

    def flush(self) -> None:
        if self._pending:
            self.target.write(mask(self._pending))
            self._pending = ""
        self.target.flush()

    def isatty(self) -> bool:
        return bool(getattr(self.target, "isatty", lambda: False)())

    def fileno(self) -> int:
        return int(self.target.fileno())


@contextlib.contextmanager
def masked_stdio(enabled: bool = True) -> Iterator[None]:
    """Inside, what is printed to stdout and stderr has every URL password masked (for what other code prints as it
    pleases: Hydra's ``--cfg job``, ``--info`` and ``--help`` print the composed config, ``db`` included)."""
    if not enabled:
        yield
        return
    saved = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = MaskingStream(saved[0]), MaskingStream(saved[1])
    try:
        yield
    finally:
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(Exception):
                stream.flush()
        sys.stdout, sys.stderr = saved


def read_db_url_file(path: str | os.PathLike, base: str | os.PathLike | None = None) -> str:
    """The URL held in the file ``path`` (relative to ``base``); refused unless only its owner can read it."""
    p = Path(base or os.getcwd()) / os.path.expanduser(str(path))
    try:
        st = p.stat()
        text = p.read_text(encoding="utf-8")
    except OSError as e:
        raise ConfigError(f"db_url_file={path}: cannot read it ({e.strerror or e})") from None
    if not stat.S_ISREG(st.st_mode):
        raise ConfigError(f"db_url_file={path} is not a regular file: give a file that holds the database URL")
    if st.st_mode & 0o077:
        raise ConfigError(
            f"db_url_file={path} is readable by others (mode {stat.S_IMODE(st.st_mode):03o}): it holds a password; "
            f"run chmod 600 {p}"
        )
    lines = [ln.strip() for ln in text.splitlines() if ln.strip() and not ln.lstrip().startswith("#")]
    if len(lines) != 1:
        raise ConfigError(f"db_url_file={path} must hold one database URL on one line (it has {len(lines)} lines)")
    return lines[0]


def driver_db(cfg: dict[str, Any], base: str | os.PathLike | None = None) -> str:
    """The store the driver opens, unmasked: the URL in ``db_url_file`` when it is set, else ``db`` (a relative
    SQLite path made absolute against ``base``)."""
    url_file = str(cfg.get("db_url_file") or "")
    db = read_db_url_file(url_file, base) if url_file else str(cfg["db"])
    if "://" in db:
        return db
    return str((Path(base or os.getcwd()) / os.path.expanduser(db)).resolve())
