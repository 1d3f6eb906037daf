"""The format registry: name -> :class:`~experiments.formats.base.Format` subclass.

A new format is one module defining a Format subclass, one line here, and a fixture line in the conformance tests.
"""

from __future__ import annotations

from typing import Any

from experiments.formats.base import FilePayload, Format, Reader
from experiments.formats.bin import Bin
from experiments.formats.hdf5 import HDF5
from experiments.formats.jpeg import JPEG
from experiments.formats.npy import NPY
from experiments.formats.npz import NPZ
from experiments.formats.png import PNG
from experiments.formats.tfrecord import TFRecord

FORMATS: dict[str, type[Format]] = {cls.name: cls for cls in (HDF5, TFRecord, NPZ, NPY, Bin, JPEG, PNG)}


def get_format(name: str, **options: Any) -> Format:
    """An instance of format ``name`` with its options; ``KeyError`` names the valid formats."""
    try:
        cls = FORMATS[name]
    except KeyError:
        raise KeyError(f"unknown format {name!r}: choose one of {', '.join(sorted(FORMATS))}") from None
    return cls(**options)


__all__ = ["FORMATS", "FilePayload", "Format", "Reader", "get_format"]
