"""Modules imported on their first use.

The driver (``sweep.py``) and the job process load the format registry, the dataset plan and the result
records for their names, options and checks, and most of them never touch an array: numpy there costs each of
those processes 8-9 MiB of memory that stays for the whole sweep (anonymous, beside the shared libraries) and
about 80 ms of start-up. A module that uses numpy in its functions only binds ``np`` with :func:`lazy_import`;
the processes that read or write data (the MPI ranks) import numpy at their first array, as before.

Module-level uses (``x = np.empty(0)``, a default argument ``dtype=np.uint8``) import at once, as a plain
``import`` would: keep them inside functions. ``tests/test_lazy.py`` holds the driver and the job process to a
numpy-free start.
"""

from __future__ import annotations

import importlib
import sys
from typing import Any


class LazyModule:
    """Stand-in for module ``name``, bound to the global ``alias`` of ``namespace`` (a module's ``globals()``):
    its first attribute access imports the module and rebinds the global to it, so every later use in that module
    is the plain global lookup of the real module (no stand-in left on any hot path)."""

    __slots__ = ("_alias", "_name", "_namespace")

    def __init__(self, name: str, namespace: dict[str, Any], alias: str) -> None:
        self._name, self._namespace, self._alias = name, namespace, alias

    def __getattr__(self, attr: str) -> Any:
        module = importlib.import_module(self._name)
        if self._namespace.get(self._alias) is self:
            self._namespace[self._alias] = module
        return getattr(module, attr)

    def __repr__(self) -> str:
        return f"<module {self._name!r}, imported on first use>"


def lazy_import(name: str, namespace: dict[str, Any], alias: str) -> Any:
    """``alias = lazy_import(name, globals(), alias)``: module ``name`` as the global ``alias``, imported when
    first used (at once when it is already imported)."""
    module = sys.modules.get(name)
    return module if module is not None else LazyModule(name, namespace, alias)
