"""The one place where a value becomes text that a shell or ``sbatch`` reads.

Every user-given value that lands in a job script (the reproducer ``repro.sbatch``, submitit's job script) or on a
command line goes through :func:`quote` (or :func:`sbatch_flag`, :func:`export_line`), which refuses control
characters and quotes the rest for a POSIX shell. A newline inside a quoted ``#SBATCH`` value would still end the
comment line and start a shell line, so no quoting can make one safe: they are refused, here and (earlier, with the
key named) by :func:`control_problems` during validation. Two things are shell *by design* and pass as written:
``cluster.setup`` lines and the ``cluster.launch`` template (the user's own shell, as in any batch script).
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import sys
import unicodedata
from collections.abc import Iterator
from pathlib import Path
from typing import Any

#: C0 controls (newline, carriage return, tab, escape ...), DEL and C1 controls
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")
#: an environment variable name as POSIX shells accept it in ``export NAME=...``
ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
#: an sbatch long option name (``mail_type`` and ``mail-type`` both)
SBATCH_OPTION = re.compile(r"[A-Za-z][A-Za-z0-9_-]*\Z")
_NAMES = {"\n": "a newline", "\r": "a carriage return", "\t": "a tab", "\x00": "a NUL byte", "\x1b": "an escape"}


def control_char(text: str) -> str | None:
    """The name of the first control character in ``text`` (``'a newline'``, ``'U+0007'``), or None."""
    m = _CONTROL.search(text)
    if m is None:
        return None
    c = m.group()
    return _NAMES.get(c) or unicodedata.name(c, f"U+{ord(c):04X}")


def control_problems(obj: Any, path: str = "") -> Iterator[str]:
    """One problem per string (dict keys included) below ``obj`` that holds a control character, named by its
    dotted key path (``cluster.partition``)."""
    if isinstance(obj, str):
        what = control_char(obj)
        if what:
            yield (f"{path or 'value'}={obj!r} contains a control character ({what}): values that reach a job "
                   "script, sbatch or a command line may not; remove it")
    elif isinstance(obj, dict):
        for k, v in obj.items():
            sub = f"{path}.{k}" if path else str(k)
            if isinstance(k, str) and control_char(k):
                yield f"{path or 'config'} has a key {k!r} with a control character ({control_char(k)}): remove it"
            yield from control_problems(v, sub)
    elif isinstance(obj, (list, tuple)):
        for i, v in enumerate(obj):
            yield from control_problems(v, f"{path}[{i}]")


def quote(value: Any) -> str:
    """``value`` as one shell word (POSIX single quotes where needed); ValueError for a control character."""
    text = str(value)
    what = control_char(text)
    if what:
        raise ValueError(f"{text!r} contains a control character ({what}); it cannot be put in a job script")
    return shlex.quote(text)


def sbatch_flag(key: str, value: Any) -> str:
    """One ``#SBATCH`` line as sbatch and submitit spell it: ``_`` becomes ``-``, True is a bare flag, the value is
    quoted (sbatch strips the quotes)."""
    if not SBATCH_OPTION.match(str(key)):
        raise ValueError(f"{key!r} is not an sbatch option name")
    key = str(key).replace("_", "-")
    return f"#SBATCH --{key}" if value is True else f"#SBATCH --{key}={quote(value)}"


def export_line(name: str, value: Any) -> str:
    """``export NAME='value'``; ValueError unless ``name`` is a valid variable name."""
    if not ENV_NAME.match(str(name)):
        raise ValueError(f"{name!r} is not an environment variable name (letters, digits, _; not a digit first)")
    return f"export {name}={quote(value)}"


def resolve_command(word: str) -> str | None:
    """Find a launcher command: this interpreter's bin directory first (the venv's mpich), then PATH."""
    local = Path(sys.executable).parent / word
    if os.sep not in word and local.is_file() and os.access(local, os.X_OK):
        return str(local)
    return shutil.which(word)
