"""Reading the store into frames: a query as one frame, or in slices (bounded memory whatever the store's size),
with the stored config coded per configuration as the slices pass (:class:`analysis.configs.Configs`), or read
once per configuration (:func:`read_grouped`: the columns every point of a configuration shares, from one of them)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
import pandas as pd
from sqlalchemy import Text, cast, func, literal, select

from analysis.configs import Configs
from ddlio.store import Point, StoreReader


def read_frame(store: StoreReader, stmt: Any) -> pd.DataFrame:
    """``stmt`` as a frame; on SQLite through the driver's own connection (5x faster than row objects on 100k rows)."""
    if store.engine.dialect.name == "sqlite":
        sql = str(stmt.compile(dialect=store.engine.dialect, compile_kwargs={"literal_binds": True}))
        with store.engine.connect() as conn:
            return pd.read_sql_query(sql, conn.connection.driver_connection)
    with store.engine.connect() as conn:
        return pd.read_sql(stmt, conn)


#: rows per slice when a query is read in slices (bounded memory whatever the store's size)
SLICE_ROWS = 50_000


def read_rows(store: StoreReader, stmt: Any, size: int = SLICE_ROWS) -> Iterator[list[tuple[Any, ...]]]:
    """``stmt``'s rows in slices of ``size`` tuples; on SQLite through the driver's own cursor (no row objects),
    elsewhere through a streamed result."""
    if store.engine.dialect.name == "sqlite":
        sql = str(stmt.compile(dialect=store.engine.dialect, compile_kwargs={"literal_binds": True}))
        with store.engine.connect() as conn:
            cur = conn.connection.driver_connection.cursor()
            try:
                cur.execute(sql)
                while rows := cur.fetchmany(size):
                    yield rows
            finally:
                cur.close()
        return
    with store.engine.connect() as conn:
        for part in conn.execution_options(stream_results=True).execute(stmt).partitions(size):
            yield [tuple(r) for r in part]


def read_coded(store: StoreReader, stmt: Any, coder: Configs) -> pd.DataFrame:
    """``stmt`` (whose last column is the stored config as text) as a frame of its other columns plus ``_code``
    (:meth:`Configs.add`), read in slices: no point's config text outlives its slice. Each column's type is the
    one a single read gives (:func:`pandas.DataFrame.from_records` of all rows)."""
    names = [c.name for c in stmt.selected_columns][:-1]
    parts, codes = [], []
    for rows in read_rows(store, stmt):
        codes.append(coder.add([r[-1] for r in rows]))
        parts.append(pd.DataFrame.from_records([r[:-1] for r in rows], columns=names, coerce_float=True))
    if not parts:
        return pd.DataFrame.from_records([], columns=names, coerce_float=True).assign(_code=np.zeros(0, np.int64))
    df = pd.concat(parts, ignore_index=True) if len(parts) > 1 else parts[0]
    return _typed_as_one_read(df, parts, names).assign(_code=np.concatenate(codes))


def _frame(rows: list[tuple[Any, ...]], names: list[str], shared: dict[Any, Any]) -> pd.DataFrame:
    """``rows`` as a frame; each text of a text column replaced by one object per distinct text (``shared``, across
    slices), so a million points' ``cache`` or ``fs_type`` cost a pointer each, not a string each."""
    df = pd.DataFrame.from_records(rows, columns=names, coerce_float=True)
    for c in names:
        col = df[c]
        if (col.dtype == object or isinstance(col.dtype, pd.StringDtype)) and len(col):
            codes, uniq = pd.factorize(col, use_na_sentinel=True)
            if len(uniq) * 8 < len(col):  # few distinct values: share them
                objs = np.array([shared.setdefault(u, u) for u in uniq] + [None], dtype=object)
                df[c] = shared_texts(objs[codes], df.index)
    return df


def shared_texts(values: np.ndarray, index: pd.Index) -> pd.Series:
    """``values`` (an object array whose rows share a few text objects, e.g. one per configuration) as a column
    of those objects: 8 bytes a row, where a text column (``str``) would hold every row's characters again."""
    return pd.Series(values, index=index, dtype=object)


def _typed_as_one_read(df: pd.DataFrame, parts: list[pd.DataFrame], names: list[str]) -> pd.DataFrame:
    """``df`` (``parts`` concatenated) with each column whose type differs between parts (e.g. all empty in one)
    typed as a single read of all rows types it."""
    for c in names:
        if len({str(p[c].dtype) for p in parts}) > 1:
            df[c] = pd.DataFrame.from_records([(v,) for v in df[c].tolist()], columns=[c], coerce_float=True)[c]
    return df


def config_group() -> Any:
    """The SQL expression (labelled ``_group``) that groups points by stored configuration: ``config_digest``, or
    the point's own key for a row a writer has not given one yet (a configuration of its own)."""
    return func.coalesce(Point.config_digest, literal("point:") + Point.point_key).label("_group")


#: point keys per ``IN (...)`` of :func:`rows_of_points` (below SQLite's oldest limit of 999 bound variables)
KEYS_PER_QUERY = 500


def rows_of_points(store: StoreReader, stmt: Any, keys: list[str]) -> Iterator[tuple[Any, ...]]:
    """The rows of ``stmt`` (a select over ``points``) for the points ``keys``, asked :data:`KEYS_PER_QUERY`
    keys at a time."""
    for i in range(0, len(keys), KEYS_PER_QUERY):
        for rows in read_rows(store, stmt.where(Point.point_key.in_(keys[i:i + KEYS_PER_QUERY]))):
            yield from rows


def read_grouped(store: StoreReader, per_point: list[Any], per_config: list[Any], where: Any,
                 coder: Configs) -> pd.DataFrame:
    """The points ``where`` holds, in point-key order, as one frame: the ``per_point`` columns read for every
    point; the ``per_config`` columns (stored once per configuration: format, access, stripe count ...) and the
    stored config (coded by ``coder``: column ``_code``) read for one point of each ``config_digest`` and copied
    to the others. A row without a digest (not yet upgraded) is a configuration of its own. Each column's type
    is the one a single read of all rows gives."""
    group = config_group()
    names = ["_group", *(c.name for c in per_point)]
    parts: list[pd.DataFrame] = []
    shared: dict[Any, Any] = {}
    stmt = select(group, *per_point).where(where).order_by(Point.point_key)
    for rows in read_rows(store, stmt):
        parts.append(_frame(rows, names, shared))
    if not parts:
        empty = pd.DataFrame.from_records([], columns=names[1:] + [c.name for c in per_config], coerce_float=True)
        return empty.assign(_code=np.zeros(0, np.int64))
    df = pd.concat(parts, ignore_index=True) if len(parts) > 1 else parts[0]
    df = _typed_as_one_read(df, parts, names)
    del parts
    which, groups = pd.factorize(df.pop("_group"))  # each point's group, numbered in order of appearance
    firsts = np.unique(which, return_index=True)[1]  # each group's first point
    keys = df["point_key"].to_numpy(dtype=object)[firsts]
    cnames = ["_group", *(c.name for c in per_config)]
    cstmt = select(group, *per_config, cast(Point.config, Text).label("config"))
    by_group = {r[0]: r for r in rows_of_points(store, cstmt, keys.tolist())}
    ordered = [by_group[g] for g in groups]
    cfg = pd.DataFrame.from_records([r[:-1] for r in ordered], columns=cnames, coerce_float=True)
    codes = coder.add([r[-1] for r in ordered])
    copied = {c: cfg[c].to_numpy()[which] for c in cnames[1:]}
    copied = {c: shared_texts(v, df.index) if v.dtype == object else v for c, v in copied.items()}
    return df.assign(**copied, _code=codes[which])


def release_freed_memory() -> None:
    """Hand the heap memory freed by a large read back to the system (glibc's ``malloc_trim``; elsewhere only a
    garbage collection): a million points read in slices leave ~250 MiB freed but held, which every process the
    report or the figures then fork would count again."""
    import contextlib  # lazy: only after a large read
    import ctypes
    import gc

    gc.collect()
    with contextlib.suppress(OSError, AttributeError):  # not glibc: nothing to trim
        ctypes.CDLL("libc.so.6").malloc_trim(0)

