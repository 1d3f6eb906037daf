"""The format registry: name -> :class:`~experiments.formats.base.Format` subclass.

A new format is one module defining a Format subclass and its Hydra conf (a
:class:`~experiments.formats.base.FormatConf` subclass named by ``Format.conf``), one line here, a
``conf/format/<name>.yaml`` and a fixture line in the conformance tests; the configuration schema
(``experiments.config.register_configs``) takes the formats and their confs from here.
"""

from __future__ import annotations

from typing import Any

from experiments.formats.base import FilePayload, Format, FormatConf, Reader
from experiments.formats.bin import Bin
from experiments.formats.hdf5 import HDF5
from experiments.formats.jpeg import JPEG
from experiments.formats.npy import NPY
from experiments.formats.npz import NPZ
from experiments.formats.png import PNG
from experiments.formats.tfrecord import TFRecord

FORMATS: dict[str, type[Format]] = {cls.name: cls for cls in (HDF5, TFRecord, NPZ, NPY, Bin, JPEG, PNG)}
#: each format's Hydra conf (``schema/format/<name>``), in the registry's order
FORMAT_CONFS: dict[str, type[FormatConf]] = {name: cls.conf for name, cls in FORMATS.items()}


def get_format(name: str, **options: Any) -> Format:
    """An instance of format ``name`` with its options; ``KeyError`` names the valid formats."""
    try:
        cls = FORMATS[name]
    except KeyError:
        raise KeyError(f"unknown format {name!r}: choose one of {', '.join(sorted(FORMATS))}") from None
    return cls(**options)


__all__ = ["FORMATS", "FORMAT_CONFS", "FilePayload", "Format", "FormatConf", "Reader", "get_format"]
