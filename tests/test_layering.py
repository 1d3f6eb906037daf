"""The rooms and their floor: which package may import which, read from the source (imports inside functions
included), against one table. docs/architecture.md shows the same table.

- ``ddlio`` is the floor: errors, units, shell, secrets, env, records, run-folder paths, job states, the store. It
  imports none of the rooms.
- ``lustre`` (the storage layer) stands on ``ddlio`` only.
- ``experiments`` is the run side; its subpackages are layered among themselves (config below dataset below kernel
  below run; executors beside the kernel, below run).
- ``analysis`` reads the store through ``ddlio.store``; it never imports the runner (``experiments.run``), the
  kernel or the executors.

A module the table does not place fails the test, so a new room is placed on purpose.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import ROOT

FIRST_PARTY = ("ddlio", "lustre", "experiments", "analysis", "hydra_plugins", "sweep")

#: unit -> the units it may import (its own included). A unit is a package or subpackage; a module belongs to the
#: longest unit its dotted name starts with.
ALLOWED: dict[str, set[str]] = {
    "ddlio": {"ddlio"},
    "lustre": {"ddlio", "lustre"},
    "experiments": {"experiments"},  # the package's own __init__: a docstring
    # the run side's registries of loaders and workload kinds: names and "module:Class" paths, imported on first use
    "experiments.registry": {"ddlio", "experiments.registry"},
    "experiments.formats": {"ddlio", "experiments.formats"},
    "experiments.config": {"ddlio", "lustre", "experiments.registry", "experiments.formats", "experiments.config"},
    "experiments.dataset": {"ddlio", "lustre", "experiments.formats", "experiments.config", "experiments.dataset"},
    "experiments.kernel": {"ddlio", "lustre", "experiments.registry", "experiments.formats", "experiments.config",
                           "experiments.dataset", "experiments.kernel"},
    "experiments.executors": {"ddlio", "lustre", "experiments.config", "experiments.executors"},
    # a workload kind: its spec part, its job phases and the MPI program they run, its metrics and store rows
    "experiments.kinds": {"ddlio", "lustre", "experiments.registry", "experiments.formats", "experiments.config",
                          "experiments.dataset", "experiments.kernel", "experiments.executors", "experiments.kinds"},
    "experiments.run": {"ddlio", "lustre", "experiments.registry", "experiments.formats", "experiments.config",
                        "experiments.dataset", "experiments.kernel", "experiments.executors", "experiments.kinds",
                        "experiments.run"},
    "experiments.calibrate": {"ddlio", "experiments.config", "experiments.kernel", "experiments.calibrate"},
    # experiments.registry: which workload kinds an analysis applies to (their declarations, analysis/kinds.py)
    "analysis": {"ddlio", "lustre", "experiments.registry", "experiments.config", "experiments.formats", "analysis"},
    "hydra_plugins": {"ddlio", "experiments.config", "experiments.run", "hydra_plugins"},
    "sweep": {"ddlio", "experiments.config", "experiments.run", "hydra_plugins", "sweep"},
}


def unit_of(module: str) -> str | None:
    """The table's unit a dotted module name belongs to (the longest matching prefix), or None."""
    best = None
    for unit in ALLOWED:
        if (module == unit or module.startswith(unit + ".")) and (best is None or len(unit) > len(best)):
            best = unit
    return best


def product_files(root: Path = ROOT) -> list[Path]:
    """Every product module: the rooms, the floor, the Hydra plugin and sweep.py (not tests, not bench)."""
    files = [root / "sweep.py"]
    for top in ("ddlio", "lustre", "experiments", "analysis", "hydra_plugins"):
        files += sorted((root / top).rglob("*.py"))
    return [f for f in files if "__pycache__" not in f.parts]


def module_name(path: Path, root: Path = ROOT) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def imports(path: Path, root: Path = ROOT) -> list[tuple[int, str, bool]]:
    """(line, first-party module imported, inside a function?) for every import statement in the file."""
    tree = ast.parse(path.read_text(), filename=str(path))
    me = module_name(path, root)
    package = me if path.name == "__init__.py" else me.rpartition(".")[0]
    out: list[tuple[int, str, bool]] = []

    def visit(node: ast.AST, in_function: bool) -> None:
        for child in ast.iter_child_nodes(node):
            inner = in_function or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
            targets: list[str] = []
            if isinstance(child, ast.Import):
                targets = [a.name for a in child.names]
            elif isinstance(child, ast.ImportFrom):
                base = child.module or ""
                if child.level:
                    up = package.split(".")
                    up = up[: len(up) - (child.level - 1)]
                    base = ".".join([*up, base] if base else up)
                # `from pkg import sub` imports the submodule pkg.sub where one exists
                targets = [f"{base}.{a.name}" if _is_module(root, f"{base}.{a.name}") else base for a in child.names]
            for t in dict.fromkeys(targets):
                if t.split(".")[0] in FIRST_PARTY:
                    out.append((child.lineno, t, in_function))
            visit(child, inner)

    visit(tree, False)
    return out


def _is_module(root: Path, dotted: str) -> bool:
    p = root.joinpath(*dotted.split("."))
    return p.with_suffix(".py").is_file() or (p / "__init__.py").is_file()


def violations(root: Path = ROOT) -> list[str]:
    """Every import the table does not allow, and every module it does not place, as readable lines."""
    bad = []
    for f in product_files(root):
        me = module_name(f, root)
        mine = unit_of(me)
        if mine is None:
            bad.append(f"{f.relative_to(root)}: module {me} is in no unit of the layering table")
            continue
        for line, target, _ in imports(f, root):
            theirs = unit_of(target)
            if theirs is None or theirs not in ALLOWED[mine]:
                bad.append(f"{f.relative_to(root)}:{line}: {mine} imports {target} ({theirs or 'no unit'})")
    return bad


def test_every_import_is_one_the_table_allows():
    assert violations() == []


def test_the_table_has_no_cycle():
    graph = {u: {v for v in deps if v != u} for u, deps in ALLOWED.items()}
    done: set[str] = set()

    def walk(u: str, path: tuple[str, ...]) -> None:
        assert u not in path, f"cycle: {' -> '.join((*path, u))}"
        if u in done:
            return
        for v in graph[u]:
            walk(v, (*path, u))
        done.add(u)

    for u in graph:
        walk(u, ())


def test_first_party_imports_inside_functions_say_why():
    """An import inside a function is there for start-up time or an optional dependency, said on its line
    (``# lazy: ...``); never to dodge a cycle between the project's own modules."""
    bad = []
    for f in product_files():
        lines = f.read_text().splitlines()
        for line, target, inner in imports(f):
            if inner and "# lazy:" not in lines[line - 1]:
                bad.append(f"{f.relative_to(ROOT)}:{line}: {target}")
    assert bad == []


def test_the_table_catches_what_it_forbids(tmp_path):
    """The check itself: a copy of the tree with an analysis module importing the runner, and one with a module in
    no unit, are both reported."""
    for top in ("ddlio", "analysis", "experiments"):
        (tmp_path / top).mkdir()
        (tmp_path / top / "__init__.py").write_text("")
    (tmp_path / "experiments" / "run").mkdir()
    (tmp_path / "experiments" / "run" / "__init__.py").write_text("")
    (tmp_path / "sweep.py").write_text("")
    (tmp_path / "analysis" / "bad.py").write_text("def f():\n    from experiments.run import launch  # lazy: x\n")
    (tmp_path / "stray.py").write_text("")
    (tmp_path / "ddlio" / "up.py").write_text("from analysis import bad\n")
    found = violations(tmp_path)
    assert any("analysis/bad.py:2: analysis imports experiments.run" in v for v in found), found
    assert any("ddlio/up.py:1: ddlio imports analysis.bad" in v for v in found), found


@pytest.mark.parametrize("module", ["lustre", "lustre.lfs", "lustre.posix", "ddlio", "ddlio.store", "ddlio.jobstates"])
def test_the_floor_loads_nothing_above_it(module):
    """At run time too: importing the floor or the storage layer loads no room above it."""
    code = (f"import sys, {module}\n"
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('experiments', 'analysis')))")
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert p.returncode == 0, p.stderr
    assert p.stdout.strip() == "[]"


def _module_graph(root: Path = ROOT) -> dict[str, set[str]]:
    """Product module -> the product modules it imports (at the top, inside functions, and under TYPE_CHECKING:
    a type that needs the other file is a dependency too); ``from pkg import name`` counts as importing ``pkg``
    (its ``__init__``) unless ``name`` is a submodule."""
    mods = {module_name(f, root) for f in product_files(root)}

    def owner(target: str) -> str | None:
        while target and target not in mods:
            target = target.rpartition(".")[0]
        return target or None

    graph: dict[str, set[str]] = {}
    for f in product_files(root):
        me = module_name(f, root)
        graph[me] = {m for _, t, _ in imports(f, root) if (m := owner(t)) and m != me}
    return graph


def test_no_two_product_files_import_each_other_directly_or_in_a_loop():
    """Two files that import each other are one concern cut in two (or a loop kept apart by a deferred import):
    merge them or cut again. Every strongly connected set of modules is listed."""
    graph = _module_graph()
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    loops: list[list[str]] = []

    def visit(v: str) -> None:  # Tarjan's strongly connected components
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                loops.append(sorted(comp))

    sys.setrecursionlimit(max(sys.getrecursionlimit(), 10_000))
    for v in sorted(graph):
        if v not in index:
            visit(v)
    assert loops == [], "modules that import each other: " + "; ".join(" <-> ".join(c) for c in loops)
