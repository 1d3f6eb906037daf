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
import os
import sys
from collections.abc import Callable, Iterator, Mapping
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


def lazy_exports(package: str, exports: Mapping[str, str]) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """``__getattr__, __dir__ = lazy_exports(__name__, {"Name": ".submodule", ...})`` in a package's ``__init__``
    (PEP 562): each re-exported name is imported from its module (relative to the package with a leading dot, as
    in an import statement, else absolute) on first access and kept, so a process that needs one submodule of a
    package (an MPI rank, the job process) does not import all the others.

    A name must not also be a submodule's name: the import system binds a submodule to its package's attribute
    when it is imported, and would shadow the re-export."""

    def __getattr__(name: str) -> Any:
        sub = exports.get(name)
        if sub is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(sub, package), name)
        setattr(sys.modules[package], name, value)
        return value

    def __dir__() -> list[str]:
        return sorted(set(vars(sys.modules[package])) | set(exports))

    return __getattr__, __dir__


class LazyRegistry(Mapping[str, Any]):
    """A registry from a name to an implementation at ``"module:attribute"``, imported when that name is first
    looked up (as fsspec's ``known_implementations``): the list of names costs nothing, and a process that uses
    one format or one executor imports only its module. Iterating, ``len`` and ``in`` import nothing; ``values()``
    and ``items()`` import every implementation. ``get`` maps the implementation to what the registry hands out
    (``FORMAT_CONFS``: a format's conf).

    With ``group``, implementations from outside the product join the built-in ones: every entry point of that
    group (``[project.entry-points."ddlio.loaders"]`` in a plug-in's pyproject.toml, ``name = "module:Class"``) is
    a name of the registry, as submitit finds its executor plug-ins. The installed distributions are read once per
    process, and only when a name is asked for that is not built in, or when the names are listed; a built-in name
    never scans. A plug-in may not replace a built-in name."""

    def __init__(self, paths: Mapping[str, str], get: Callable[[Any], Any] | None = None,
                 group: str | None = None) -> None:
        self._paths = dict(paths)
        self._get = get
        self._group = group
        self._scanned = group is None
        self._loaded: dict[str, Any] = {}

    @property
    def group(self) -> str | None:
        """The entry-point group plug-ins register under (None: built-in names only)."""
        return self._group

    def _scan(self) -> None:
        """Add the entry points of :attr:`group` to the names (once; built-in names win)."""
        if self._scanned:
            return
        self._scanned = True
        from importlib.metadata import entry_points  # lazy: reads every installed distribution's metadata

        for ep in entry_points(group=self._group):
            self._paths.setdefault(ep.name, ep.value)

    def path(self, name: str) -> str:
        """``"module:attribute"`` of ``name``'s implementation, without importing it (KeyError if unknown)."""
        if name not in self:
            raise KeyError(name)
        return self._paths[name]

    def register(self, name: str, path: str) -> None:
        """Add ``name`` at ``"module:attribute"`` for this process (a built-in name cannot be replaced)."""
        if name in self._paths and self._paths[name] != path:
            raise ValueError(f"{name!r} is already registered at {self._paths[name]}")
        self._paths[name] = path

    def __getitem__(self, name: str) -> Any:
        try:
            return self._loaded[name]
        except KeyError:
            pass
        module, _, attr = self.path(name).partition(":")  # KeyError for a name not registered
        value = getattr(importlib.import_module(module), attr)
        if self._get is not None:
            value = self._get(value)
        self._loaded[name] = value
        return value

    def __contains__(self, name: object) -> bool:
        if name in self._paths:
            return True
        self._scan()
        return name in self._paths

    def __iter__(self) -> Iterator[str]:
        self._scan()
        return iter(list(self._paths))

    def __len__(self) -> int:
        self._scan()
        return len(self._paths)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self._paths!r})"


#: what numpy's BLAS (OpenBLAS) is told in a process that multiplies no matrices on its threads: at import it
#: starts a thread per core, which spins for ~0.1 s (~0.09 CPU-s here, a core of a 2-core node) before it sleeps
ONE_BLAS_THREAD = {"OPENBLAS_NUM_THREADS": "1"}


def one_blas_thread(given: Mapping[str, str] | None = None) -> None:
    """Before numpy loads in a process that writes a dataset: have its BLAS start no threads of its own (see
    :data:`ONE_BLAS_THREAD`), unless ``given`` (the ranks' ``cluster.env``, set here now, before numpy reads it) or
    this process's environment says otherwise. No effect once numpy is loaded (a process forked after it has no
    BLAS threads anyway)."""
    for name, value in ONE_BLAS_THREAD.items():
        os.environ[name] = (given or {}).get(name) or os.environ.get(name) or value
