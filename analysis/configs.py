"""Stored configs (JSON text) coded per configuration: each distinct configuration (the text without its per-point
fields: repeat, keys, overrides) is kept and parsed once, however many points share it."""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from typing import Any

import numpy as np
import pandas as pd

from ddlio.identity import config_key, labels


class Configs:
    """Stored configs (JSON text) coded per configuration: :meth:`add` gives each text the code of its
    :func:`bare` form, so each distinct configuration is kept (and parsed) once, however many points share it."""

    def __init__(self) -> None:
        self.code: dict[str, int] = {}
        self.texts: list[str] = []  # each code's text without the per-point fields ("" for a missing config)

    def add(self, texts: list[Any]) -> np.ndarray:
        """The code of each of ``texts`` (int64), new configurations appended."""
        out = np.empty(len(texts), dtype=np.int64)
        code, known = self.code, self.texts
        for i, t in enumerate(texts):
            text = bare(t) if isinstance(t, str) and t else ""
            j = code.get(text)
            if j is None:
                j = code[text] = len(known)
                known.append(text)
            out[i] = j
        return out

    def parsed(self) -> list[dict[str, Any]]:
        """Each code's config as a dict (``{}`` for a missing one)."""
        return [json.loads(t) if t else {} for t in self.texts]

    def identities(self) -> tuple[np.ndarray, np.ndarray]:
        """(config_key, label) per code; labels among all the coded configurations."""
        uniq = self.parsed()
        if not uniq:
            return np.array([], dtype=object), np.array([], dtype=object)
        return (np.array([config_key(c) for c in uniq], dtype=object),
                np.array(labels(uniq), dtype=object))


#: the stored config's per-point fields (top level), which no configuration key or label reads: their values
_PER_POINT = [rf'"{k}": {v}' for k, v in (("repeat", r"-?\d+"), ("point_key", r'"[0-9a-f]*"'),
                                          ("dataset_key", r'"[^"\\]*"'),
                                          ("overrides", r'\[(?:"(?:[^"\\]|\\.)*"(?:, ?)?)*\]'))]
#: each as a member followed by another, or as the last member
_MEMBER = [(re.compile(p + ", ?"), re.compile(", ?" + p + r"(?=\s*\}\s*$)")) for p in _PER_POINT]


#: the literal that starts each of :data:`_PER_POINT`
_LITERALS = [f'"{k}": ' for k in ("repeat", "point_key", "dataset_key", "overrides")]


def bare(text: str) -> str:
    """``text`` (a stored config as JSON) without its per-point fields, when each occurs once at most (else the
    text unchanged: a nested key of the same name is never touched). Each field is found by its literal (a
    C-speed search, faster here than any one regular expression over the text) and its pattern matched there
    only; a text naming a field twice takes :func:`bare_slow`."""
    out = text
    for lit, (inner, last) in zip(_LITERALS, _MEMBER, strict=True):
        pos = out.find(lit)
        if pos < 0:
            continue
        if out.find(lit, pos + 1) >= 0:
            return bare_slow(text)
        m = inner.match(out, pos) or last.search(out, max(0, pos - 2))
        if m is not None:
            out = out[:m.start()] + out[m.end():]
    return out


def bare_slow(text: str) -> str:
    """:func:`bare` by substitution over the whole text (for texts in which a field's name occurs twice)."""
    out = text
    for inner, last in _MEMBER:
        stripped, n = inner.subn("", out)
        if n == 0:
            stripped, n = last.subn("", out)
        if n > 1:
            return text
        out = stripped
    return out


def identities(texts: list[Any]) -> tuple[np.ndarray, np.ndarray]:
    """(config_key, label) of each stored config (JSON text) of ``texts``, the labels among all of them; parsed
    once per distinct configuration: the text without the per-point fields (repeat, keys, overrides), which
    neither :func:`ddlio.identity.config_key` nor :func:`ddlio.identity.labels` reads."""
    coder = Configs()
    codes = coder.add(texts)
    if not texts:
        return np.array([], dtype=object), np.array([], dtype=object)
    keys, names = coder.identities()
    return keys[codes], names[codes]


def row_codes(columns: Iterable[Any]) -> np.ndarray:
    """Each row's code (int64): rows equal in every one of ``columns`` (Series or arrays of one length; missing
    values are values too, as ``groupby(dropna=False)`` has them) share one, numbered 0, 1, ... in order of first
    appearance. A million rows cost a factorization per column, not a groupby of all of them."""
    codes: np.ndarray | None = None
    for col in columns:  # the combination so far and this column, numbered again (never past int64)
        part, uniq = pd.factorize(col, use_na_sentinel=False)
        part = part.astype(np.int64)
        codes = part if codes is None else pd.factorize(codes * max(len(uniq), 1) + part)[0].astype(np.int64)
    if codes is None:
        raise ValueError("row_codes needs at least one column")
    return codes
