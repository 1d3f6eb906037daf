"""Rooms, not halls: no product module over 600 lines and no function over 80 (docstring included), so a concern
fits on a few screens and a contributor can find it. A file is cut by concern, not by size: two files that import
each other are one concern (tests/test_layering.py), and a whole concern may pass 400 lines, up to 600.
ruff's complexity rules (pyproject.toml: C901, PLR0912,
PLR0915) hold the branches and statements; this holds the sizes."""

from __future__ import annotations

import ast

from test_layering import product_files

from conftest import ROOT

MAX_MODULE_LINES = 600
MAX_FUNCTION_LINES = 80


def test_no_module_over_600_lines():
    long = {str(f.relative_to(ROOT)): n for f in product_files() if (n := len(f.read_text().splitlines()))
            > MAX_MODULE_LINES}
    assert long == {}


def test_no_function_over_80_lines():
    long = []
    for f in product_files():
        for node in ast.walk(ast.parse(f.read_text())):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                n = node.end_lineno - node.lineno + 1
                if n > MAX_FUNCTION_LINES:
                    long.append(f"{f.relative_to(ROOT)}:{node.lineno} {node.name}: {n} lines")
    assert long == []
