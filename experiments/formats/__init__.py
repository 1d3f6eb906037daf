"""The format registry: name -> :class:`~experiments.formats.base.Format` subclass.

A new format is one module defining a Format subclass and its Hydra conf (a
:class:`~experiments.formats.base.FormatConf` subclass named by ``Format.conf``), one line in :data:`FORMATS` here, a
``conf/format/<name>.yaml`` and a fixture line in the conformance tests; the configuration schema
(``experiments.config.register_configs``) takes the formats and their confs from here.
"""

from __future__ import annotations

from typing import Any

from ddlio.lazy import LazyRegistry
from experiments.formats.base import FilePayload, Format, FormatConf, Reader

#: format name -> its class, imported when the name is first looked up (a rank reading npz never imports h5py's
#: reader module or the image formats); iterating lists the names without importing any
_PATHS = {
    "hdf5": "experiments.formats.hdf5:HDF5",
    "tfrecord": "experiments.formats.tfrecord:TFRecord",
    "npz": "experiments.formats.npz:NPZ",
    "npy": "experiments.formats.npy:NPY",
    "bin": "experiments.formats.bin:Bin",
    "jpeg": "experiments.formats.jpeg:JPEG",
    "png": "experiments.formats.png:PNG",
    "parquet": "experiments.formats.parquet:Parquet",
}
FORMATS: LazyRegistry = LazyRegistry(_PATHS)
#: format name -> its Hydra conf (``FORMATS[name].conf``), imported as FORMATS imports
FORMAT_CONFS: LazyRegistry = LazyRegistry(_PATHS, get=lambda cls: cls.conf)


def get_format(name: str, **options: Any) -> Format:
    """An instance of format ``name`` with its options; ``KeyError`` names the valid formats."""
    try:
        cls = FORMATS[name]
    except KeyError:
        raise KeyError(f"unknown format {name!r}: choose one of {', '.join(sorted(FORMATS))}") from None
    return cls(**options)


__all__ = ["FORMATS", "FORMAT_CONFS", "FilePayload", "Format", "FormatConf", "Reader", "get_format"]
