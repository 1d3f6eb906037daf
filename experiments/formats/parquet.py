"""Parquet through pyarrow, as MLPerf Storage's flux and dlrm workloads store their samples: a sample is a row,
``workload.samples_per_file`` rows a file, in row groups of ``row_group_size`` rows.

The schema is ``columns``, a list of types named ``c0``, ``c1``, ... in order: numbers (``int8``, ``int32``,
``int64``, ``float16``, ``float32``, ``float64``) take their width, ``type:n`` is a vector of n numbers (a
fixed-size list), and ``binary`` columns share the rest of the sample's bytes evenly (the first ones a byte more
where it does not divide); ``type*k`` stands for k such columns. Without a binary column the numbers must fill the
sample. MLPerf's own schemas are of this kind (mlcommons/storage ``configs/dlio/workload/dlrm_b200.yaml``: 200
scalar columns of float16/32/64 and int8, 761 bytes, 40 of them read; ``flux_b200.yaml``: five float32 vectors of
524328, 409, 8232, 8232 and 7 values, 2,164,832 bytes). A row holds its sample's payload bytes split across the
columns in order (numbers are those bytes read little-endian), so a row's columns back to back are the sample: the
format round-trips exactly. Parquet itself stores int8 as 4-byte INT32 and a vector with its repetition levels: the
file holds more than the payload, as a real one does. Files are written
with ``pyarrow.parquet.ParquetWriter``: PLAIN encoding (no dictionary: random bytes do not repeat, and floats keep
their bits), no statistics, the ``compression`` codec (none, snappy, zstd, lz4), and the row sizes in the footer's
key-value metadata (``ddlio.row_bytes``).

Reading is a data loader's: ``pyarrow.parquet.ParquetFile`` opened on a
:class:`~experiments.formats.whole.CountingFile` (a raw file whose every ``preadv`` is counted), so pyarrow reads
the footer at open (the open's reads: the file-system layer sees them, as every format's headers) and then, on the
first read of a row of a row group, reads that row group's column chunks of the ``read`` columns
(``read_row_group(g, columns=..., use_threads=False)``: one read a chunk, on the caller's thread) and holds the
decoded group; the group's other rows are handed on from memory (their reads return 0 bytes) until a row of
another group is read or the kernel releases the reader. So a few columns read still cost their whole column
chunks, and a shuffled order reloads a group for nearly every row: the amplification shows in the application's
bytes and in the file system's alike.

The kernel's byte plan uses the ``load=whole`` machinery (:mod:`experiments.formats.whole`) with one byte as the
unit: :meth:`Parquet.whole_load_bytes` is 1 for every file, and a reader's :attr:`ParquetReader.loads` adds, for
every row group it loads, the column chunks' ``total_compressed_size`` from the footer: the plan comes from the
file's structure, the bytes read from what the read calls returned, and the kernel checks one against the other.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from typing import Any

from ddlio.errors import FormatError
from ddlio.lazy import lazy_import
from experiments.formats.base import ArrayReturningReader, FilePayload, Format, FormatConf, Reader, fsync_path
from experiments.formats.whole import CountingFile

np = lazy_import("numpy", globals(), "np")  # numpy on first use: see ddlio/lazy.py

#: column type -> bytes a value holds (0: binary, a share of the sample's bytes left after the scalars)
TYPES = {"binary": 0, "int8": 1, "int32": 4, "int64": 8, "float16": 2, "float32": 4, "float64": 8}
COMPRESSIONS = ("none", "snappy", "zstd", "lz4")
#: the footer's key-value metadata entry holding every row's bytes (one number when all rows are alike)
ROW_BYTES_KEY = b"ddlio.row_bytes"
#: rows a binary array is built from at most at once (its int32 offsets address under 2 GiB)
_CHUNK_BYTES = 1 << 30
_SPEC = re.compile(r"^([a-z0-9]+)(?::(\d+))?(?:\*(\d+))?$")


@dataclass
class ParquetConf(FormatConf):
    name: str = "parquet"
    # rows per row group (a file's last group holds the rest)
    row_group_size: int = 1024
    # column types in order: binary | int8 | int32 | int64 | float16 | float32 | float64, `type:n` a vector of n
    # values (a fixed-size list), `type*k` k such columns; numbers take their width, binary columns share the rest
    columns: list[str] = field(default_factory=lambda: ["binary"])
    # the columns loaded (indices into columns, after `type*k` is expanded); [] = all (reading: not in the dataset)
    read: list[int] = field(default_factory=list)
    # none | snappy | zstd | lz4 (pyarrow's codecs)
    compression: str = "none"


def expand_columns(spec: Any) -> list[str]:
    """The column types of ``spec`` (``type``, ``type:n``, each optionally ``*k``) one by one, a vector as
    ``type:n``; ``ValueError`` naming the choices."""
    if isinstance(spec, str) or not hasattr(spec, "__iter__"):
        raise ValueError(f"format.columns={spec!r} must be a list of column types, e.g. [binary] or "
                         "[int64,float32*13,binary]")
    out: list[str] = []
    for item in spec:
        m = _SPEC.match(str(item).strip().lower())
        if m is None or m.group(1) not in TYPES or any(g is not None and int(g) < 1 for g in m.groups()[1:]) \
                or (m.group(1) == "binary" and m.group(2) is not None):
            raise ValueError(f"format.columns entry {item!r} is unknown: choose one of {', '.join(TYPES)}, "
                             "type:n for a vector of n numbers, and *k for k such columns (e.g. float32*13, "
                             "float32:409)")
        out += [m.group(1) + (f":{int(m.group(2))}" if m.group(2) else "")] * int(m.group(3) or 1)
    if not out:
        raise ValueError("format.columns=[] holds no column: give at least one, e.g. [binary]")
    return out


def width(t: str) -> int:
    """Bytes a value of column type ``t`` holds in a row (``type:n``: n numbers; 0 for binary)."""
    base, _, n = t.partition(":")
    return TYPES[base] * int(n or 1)


def column_widths(types: list[str], size: int) -> list[int]:
    """Bytes of each column in a row of ``size`` bytes (see the module's docstring); ``ValueError`` where the
    numbers do not fit it, or (no binary column) do not fill it."""
    fixed = sum(width(t) for t in types)
    nbin = types.count("binary")
    if fixed > size or (nbin == 0 and fixed != size):
        raise ValueError(f"format.columns' numbers hold {fixed} bytes a row but a sample is {size} bytes: "
                         + ("use fewer or narrower number columns" if fixed > size
                            else "add a binary column for the rest, or number columns that fill it"))
    rest, out, k = size - fixed, [], 0
    for t in types:
        if t == "binary":
            out.append(rest // nbin + (k < rest % nbin))
            k += 1
        else:
            out.append(width(t))
    return out


class ParquetReader(ArrayReturningReader):
    """Rows of one Parquet file, a row group loaded and held at a time (see the module's docstring)."""

    def __init__(self, path: str | os.PathLike, types: list[str], read: list[int]) -> None:
        import pyarrow.parquet as pq  # lazy: start-up (pyarrow only where Parquet files are read)

        self.path = str(path)
        self._file = CountingFile(path)
        try:
            self._pf = pq.ParquetFile(self._file, pre_buffer=False, buffer_size=0)
            meta = self._pf.metadata
            names = self._pf.schema_arrow.names  # one Parquet leaf column each (a vector's values)
            kv = meta.metadata or {}
            row_bytes = [int(x) for x in kv[ROW_BYTES_KEY].split(b",")] if ROW_BYTES_KEY in kv else []
        except (OSError, ValueError, KeyError) as e:
            self._file.close()
            raise FormatError(f"{path}: not a readable ddlio Parquet file ({e})") from e
        self.num_samples = n = int(meta.num_rows)
        self._cols = list(read) or list(range(len(types)))
        if names != [f"c{j}" for j in range(len(types))] or not row_bytes or max(self._cols) >= len(names):
            self._file.close()
            raise FormatError(f"{path}: corrupt or not written with these format.columns ({len(names)} columns "
                              f"{names[:4]}..., {len(types)} expected)")
        self._row_bytes = row_bytes * n if len(row_bytes) == 1 else row_bytes
        self._names = [names[j] for j in self._cols]
        groups = [meta.row_group(g) for g in range(meta.num_row_groups)]
        self._starts = np.cumsum([0] + [g.num_rows for g in groups]).tolist()
        #: bytes each row group's load must read: its read columns' chunks, from the footer
        self._plan = [sum(int(g.column(j).total_compressed_size) for j in self._cols) for g in groups]
        self._types = [types[j] for j in self._cols]
        self._held_g = -1
        self._held: list[Any] = []
        self._matrix: np.ndarray | None = None  # the held group's rows, one a line, where they are alike
        self._last = np.empty(0, dtype=np.uint8)
        #: bytes the row-group loads of this reader must have read (the plan's unit is one byte: see the module)
        self.loads = 0

    def record_bytes(self, i: int) -> int:
        """The row's bytes, all columns (the sample's size; a ``read`` subset hands on fewer)."""
        return int(self._row_bytes[i])

    def _load(self, g: int) -> int:
        """Read row group ``g``'s read columns and hold them as numpy views; returns the bytes read."""
        before = self._file.nbytes
        try:
            table = self._pf.read_row_group(g, columns=self._names, use_threads=False)
        except (OSError, ValueError) as e:  # pyarrow's ArrowInvalid and ArrowIOError are both
            raise FormatError(f"{self.path}: reading row group {g} failed: corrupt or truncated ({e})") from e
        n = self._file.nbytes - before
        held = []
        for t, col in zip(self._types, table.columns, strict=True):
            arr = col.combine_chunks() if col.num_chunks != 1 else col.chunk(0)
            bufs, off, rows = arr.buffers(), arr.offset, len(arr)
            if t == "binary":
                offs = np.frombuffer(bufs[1], dtype=np.int32)[off : off + rows + 1]
                data = np.frombuffer(bufs[2], dtype=np.uint8) if bufs[2] is not None else np.empty(0, np.uint8)
                held.append((offs, data))
            else:  # numbers, or a fixed-size list's values (flattened: this slice's only), one row's a line
                values = arr.flatten() if ":" in t else arr
                w, vb, voff = TYPES[t.partition(":")[0]], values.buffers()[1], values.offset
                held.append(np.frombuffer(vb, dtype=np.uint8)[voff * w : voff * w + rows * width(t)]
                            .reshape(rows, width(t)))
        self._held, self._held_g = held, g
        self._matrix = _row_matrix(held, len(table))
        self.loads += self._plan[g]
        return n

    def read(self, i: int, out: np.ndarray) -> int:
        """Row ``i`` (its read columns back to back): the bytes its row group's load returned, or 0 when that
        group is held already."""
        g = self._held_g
        if g < 0 or not self._starts[g] <= i < self._starts[g + 1]:
            g = int(np.searchsorted(self._starts, i, side="right")) - 1
            n = self._load(g)
        else:
            n = 0
        j = i - self._starts[g]
        if self._matrix is not None:
            self._last = self._matrix[j]
            return n
        parts = [c[1][c[0][j] : c[0][j + 1]] if isinstance(c, tuple) else c[j] for c in self._held]
        if len(parts) == 1:
            self._last = parts[0]
        else:
            pos = 0
            for p in parts:
                out[pos : pos + len(p)] = p
                pos += len(p)
            self._last = out[:pos]
        return n

    def release(self) -> None:
        self._held, self._held_g, self._matrix = [], -1, None
        self._last = np.empty(0, dtype=np.uint8)

    def close(self) -> None:
        self.release()
        self._file.close()


def _row_matrix(held: list[Any], rows: int) -> np.ndarray | None:
    """The held group's rows as a (rows, bytes a row) matrix where every column's values are of one width (a
    row is then a view, as a loader hands rows of a batch on), else None (rows are assembled one by one)."""
    blocks = []
    for c in held:
        if isinstance(c, tuple):
            offs, data = c
            w = int(offs[1] - offs[0]) if rows else 0
            if rows and not np.all(np.diff(offs) == w):
                return None
            blocks.append(data[offs[0] : offs[0] + rows * w].reshape(rows, w))
        else:
            blocks.append(c)
    return blocks[0] if len(blocks) == 1 else np.hstack(blocks)


class Parquet(Format):
    name = "parquet"
    suffix = ".parquet"
    conf = ParquetConf
    writer_libraries = ("pyarrow.parquet",)
    read_options = frozenset({"read"})

    @property
    def loads_whole(self) -> bool:
        return True  # row groups are loaded and held (see the module's docstring)

    def whole_load_bytes(self, path: str | os.PathLike) -> int | None:
        return 1  # the plan's unit: readers add each row-group load's bytes, from the footer, to their `loads`

    @property
    def types(self) -> list[str]:
        return expand_columns(self.options.get("columns", ["binary"]))

    @classmethod
    def problems(cls, options: dict[str, Any], sample_shape: tuple[int, ...] | None = None) -> list[str]:
        out = super().problems(options, sample_shape)
        if sample_shape and list(options.get("read") or []):
            out.append(f"format.read={list(options['read'])} hands on part of each row, which "
                       f"workload.sample_shape={list(sample_shape)} cannot shape: leave one of them at its default")
        if sample_shape:
            try:
                column_widths(expand_columns(options.get("columns", ["binary"])), int(np.prod(sample_shape)))
            except ValueError as e:
                out.append(str(e))
        return out

    @classmethod
    def option_problems(cls, options: dict[str, Any]) -> list[str]:
        out = []
        rg = options.get("row_group_size", ParquetConf.row_group_size)
        if not isinstance(rg, int) or isinstance(rg, bool) or rg < 1:
            out.append(f"format.row_group_size={rg!r} must be a number of rows >= 1")
        comp = options.get("compression", "none")
        if comp not in COMPRESSIONS:
            out.append(f"format.compression={comp!r} is unknown: choose one of {', '.join(COMPRESSIONS)}")
        try:
            ncols = len(expand_columns(options.get("columns", ["binary"])))
        except ValueError as e:
            return [*out, str(e)]
        read = options.get("read") or []
        if isinstance(read, str) or not all(isinstance(j, int) and 0 <= j < ncols for j in read) \
                or len(set(read)) != len(read):
            out.append(f"format.read={read!r} must list distinct column indices 0..{ncols - 1} (of format.columns, "
                       "type*k expanded), or be [] for all")
        return out

    def write(self, path: str | os.PathLike, payload: FilePayload) -> None:
        import pyarrow as pa  # lazy: start-up (pyarrow only where Parquet files are written)
        import pyarrow.parquet as pq

        types = self.types
        sizes = payload.sizes
        for s in np.unique(sizes).tolist():
            column_widths(types, int(s))  # ValueError before a byte is written
        alike = sizes[:1].tolist() if not len(sizes) or np.all(sizes == sizes[0]) else sizes.tolist()
        meta = {ROW_BYTES_KEY: ",".join(map(str, alike or [0])).encode()}
        schema = pa.schema([(f"c{j}", arrow_type(pa, t)) for j, t in enumerate(types)], metadata=meta)
        comp = self.options.get("compression", "none")
        with pq.ParquetWriter(path, schema, compression=comp, use_dictionary=False, write_statistics=False) as w:
            for a, b, rows in _row_groups(payload, int(self.options.get("row_group_size", 1024))):
                w.write_table(_table(pa, schema, types, rows, sizes[a:b]), row_group_size=b - a)
        fsync_path(path)

    def open(self, path: str | os.PathLike) -> Reader:
        return ParquetReader(path, self.types, list(self.options.get("read") or []))


def _row_groups(payload: FilePayload, rg: int) -> Any:
    """Yield ``(a, b, bytes of rows a..b-1 back to back)`` for each row group, from the payload's groups."""
    offsets = np.zeros(len(payload.sizes) + 1, dtype=np.int64)
    np.cumsum(payload.sizes, out=offsets[1:])
    n, nxt = len(payload.sizes), 0
    pending: list[tuple[int, int, np.ndarray]] = []
    for lo, hi, buf in payload.iter_groups():
        pending.append((lo, hi, buf))
        while nxt < n and hi >= min(nxt + rg, n):
            b = min(nxt + rg, n)
            parts = [p[offsets[max(nxt, plo)] - offsets[plo] : offsets[min(b, phi)] - offsets[plo]]
                     for plo, phi, p in pending if plo < b and phi > nxt]
            yield nxt, b, parts[0] if len(parts) == 1 else np.concatenate(parts)
            pending = [p for p in pending if p[1] > b]
            nxt = b


def _table(pa: Any, schema: Any, types: list[str], rows: np.ndarray, sizes: np.ndarray) -> Any:
    """The row group's table: each column's bytes gathered from the rows (every row split as
    :func:`column_widths` says), in slices of under :data:`_CHUNK_BYTES`."""
    n = len(sizes)
    offsets = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(sizes, out=offsets[1:])
    batches, a = [], 0
    while a < n:
        b = a + 1
        while b < n and offsets[b + 1] - offsets[a] <= _CHUNK_BYTES:
            b += 1
        batches.append(pa.RecordBatch.from_arrays(
            _columns(pa, types, rows[offsets[a] : offsets[b]], sizes[a:b]), schema=schema))
        a = b
    return pa.Table.from_batches(batches, schema=schema)


def _columns(pa: Any, types: list[str], rows: np.ndarray, sizes: np.ndarray) -> list[Any]:
    """One arrow array per column of the rows (bytes back to back, ``sizes`` each)."""
    n = len(sizes)
    if np.all(sizes == sizes[0]):  # alike rows: each column is a strided slice of the rows' matrix
        widths = column_widths(types, int(sizes[0]))
        mat, pos, cols = rows.reshape(n, int(sizes[0])), 0, []
        for t, w in zip(types, widths, strict=True):
            block = np.ascontiguousarray(mat[:, pos : pos + w]).reshape(-1)
            pos += w
            cols.append(_array(pa, t, block, np.arange(n + 1, dtype=np.int32) * w, n))
        return cols
    per_row = [column_widths(types, int(s)) for s in sizes.tolist()]
    starts = np.concatenate([[0], np.cumsum(sizes)[:-1]]).tolist()
    cols, pos = [], [0] * n
    for j, t in enumerate(types):
        pieces = [rows[starts[i] + pos[i] : starts[i] + pos[i] + per_row[i][j]] for i in range(n)]
        for i in range(n):
            pos[i] += per_row[i][j]
        lens = np.array([len(p) for p in pieces], dtype=np.int32)
        offs = np.zeros(n + 1, dtype=np.int32)
        np.cumsum(lens, out=offs[1:])
        cols.append(_array(pa, t, np.concatenate(pieces) if pieces else np.empty(0, np.uint8), offs, n))
    return cols


def _array(pa: Any, t: str, data: np.ndarray, offsets: np.ndarray, n: int) -> Any:
    """An arrow array of type ``t`` over ``data`` (a binary column's values end to end, with int32 ``offsets``;
    a scalar column's values as little-endian bytes), without copying."""
    if t == "binary":
        return pa.Array.from_buffers(pa.binary(), n, [None, pa.py_buffer(offsets), pa.py_buffer(data)])
    base, _, k = t.partition(":")
    values = pa.Array.from_buffers(getattr(pa, base)(), n * int(k or 1), [None, pa.py_buffer(data)])
    return pa.FixedSizeListArray.from_arrays(values, int(k)) if k else values


def arrow_type(pa: Any, t: str) -> Any:
    """The arrow type of column type ``t``: ``binary``, a number, or ``type:n`` a fixed-size list of n numbers."""
    base, _, k = t.partition(":")
    return pa.list_(getattr(pa, base)(), int(k)) if k else getattr(pa, base)()
