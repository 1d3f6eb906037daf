"""The ``--where`` filter language: a small, checked expression language over a frame's columns.

``--where "format == 'hdf5' and nodes >= 2"`` keeps the rows for which the condition holds. The text is parsed with
Python's :mod:`ast` and every node is checked against what the language allows **before anything is evaluated**:

- column names of the frame (nothing else is a name: no variables, modules or builtins);
- literals: numbers, ``'text'``, ``True``, ``False``, ``None``;
- comparisons ``== != < <= > >=`` (chains like ``1 <= nodes <= 4`` too), ``in`` / ``not in`` a list or tuple of
  literals (``format in ['hdf5', 'npz']``); ``== None`` / ``!= None`` test for a missing value;
- ``and``, ``or``, ``not``, unary ``-`` (and ``+``), parentheses;
- arithmetic ``+ - * / // % **`` between numeric columns and number literals (``bandwidth_mib_s / ranks > 100``).

Anything else (attribute access, calls, indexing, ``@`` variables, lambdas, comprehensions, f-strings, ``&``/``|``
...) is refused with one message naming what was refused and what is allowed; a name that is not a column is refused
with the columns, closest match first. The checked tree is then evaluated by this module over the frame's columns
with vectorised pandas operations: never through ``eval``, ``DataFrame.query`` or ``pd.eval``. A missing value
(NULL/NaN) never satisfies a comparison other than ``!=`` and ``== None``; a row whose condition is missing is dropped.
"""

from __future__ import annotations

import ast
import difflib
import io
import operator
import textwrap
import tokenize
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from ddlio.errors import DdlioError

#: One line that says what a filter may use (printed with every refusal).
ALLOWED = ("column names, literals (numbers, 'text', True, False, None), comparisons (== != < <= > >=), "
           "`in` / `not in` a list of literals, and / or / not, unary minus, arithmetic (+ - * / // % **) on numbers")
EXAMPLE = "format == 'hdf5' and nodes >= 2"
#: Longest filter accepted, in characters, and deepest nesting of its syntax tree (keeps checking and evaluation
#: bounded whatever the input).
MAX_LENGTH = 2000
MAX_DEPTH = 100

_COMPARE: dict[type, Callable[[Any, Any], Any]] = {
    ast.Eq: operator.eq, ast.NotEq: operator.ne, ast.Lt: operator.lt, ast.LtE: operator.le, ast.Gt: operator.gt,
    ast.GtE: operator.ge,
}
_ARITH: dict[type, Callable[[Any, Any], Any]] = {
    ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod, ast.Pow: operator.pow,
}
#: What a refused node is, in the user's words, by node type (operators by operator type), with a hint.
_REFUSED: dict[type, tuple[str, str]] = {
    ast.Attribute: ("attribute access", ""), ast.Call: ("a function call", ""), ast.Subscript: ("indexing", ""),
    ast.Slice: ("a slice", ""), ast.Lambda: ("a lambda", ""), ast.ListComp: ("a comprehension", ""),
    ast.SetComp: ("a comprehension", ""), ast.DictComp: ("a comprehension", ""),
    ast.GeneratorExp: ("a comprehension", ""), ast.JoinedStr: ("an f-string", ""),
    ast.FormattedValue: ("an f-string", ""), ast.IfExp: ("a conditional expression", ""),
    ast.NamedExpr: ("an assignment (:=)", ""), ast.Starred: ("unpacking (*)", ""), ast.Dict: ("a dict", ""),
    ast.Set: ("a set", ""), ast.Await: ("await", ""), ast.Yield: ("yield", ""), ast.YieldFrom: ("yield", ""),
    ast.BitAnd: ("`&`", "write `and`"), ast.BitOr: ("`|`", "write `or`"), ast.BitXor: ("`^`", ""),
    ast.LShift: ("`<<`", ""), ast.RShift: ("`>>`", ""), ast.MatMult: ("`@`", ""),
    ast.Invert: ("`~`", "write `not`"), ast.Is: ("`is`", "write `== None`"), ast.IsNot: ("`is not`", "write `!= None`"),
}
_NUMERIC_KINDS = {"integer", "floating", "mixed-integer-float", "boolean", "decimal", "empty"}


class FilterError(DdlioError, ValueError):
    """A ``--where`` filter that is not in the filter language, names an unknown column, or cannot be evaluated."""


@dataclass(frozen=True)
class Filter:
    """A checked ``--where`` filter: build it with :meth:`parse`, apply it with :meth:`apply` or :meth:`mask`."""

    text: str
    tree: ast.expr
    columns: tuple[str, ...]

    @classmethod
    def parse(cls, text: str, columns: Iterable[str]) -> Filter:
        """Parse and check ``text`` against the language and ``columns``; raises :class:`FilterError` naming every
        refused construct (and, for unknown names, the columns, closest first). Nothing is evaluated."""
        cols = tuple(columns)
        if len(text) > MAX_LENGTH:
            raise FilterError(_message(text, [f"it is {len(text)} characters long (at most {MAX_LENGTH})"]))
        checker = _Checker(text.strip(), cols)
        if _has_at(text):  # pandas' `@name` reaches any Python object: the reason this language exists
            checker.refused.add("`@`")
            checker.problems.append("`@` (a reference to a Python variable) is not allowed")
        try:
            tree = ast.parse(text.strip(), mode="eval").body
        except SyntaxError as e:
            where = f" at character {e.offset}" if e.offset else ""
            raise FilterError(
                _message(text, checker.problems or [f"it is not a valid expression ({e.msg}{where})"])) from None
        except (ValueError, RecursionError, MemoryError) as e:  # null bytes; absurd nesting
            raise FilterError(_message(text, checker.problems or [f"it cannot be read ({e})"])) from None
        checker.check(tree, "condition", 0)
        if checker.problems or checker.unknown:
            raise FilterError(_message(text, list(dict.fromkeys(checker.problems)), checker.unknown, cols))
        return cls(text=text, tree=tree, columns=cols)

    def mask(self, df: pd.DataFrame) -> pd.Series:
        """Boolean Series over ``df``'s index: True where the condition holds (a missing condition is False)."""
        missing = [c for c in dict.fromkeys(_names(self.tree)) if c not in df.columns]
        if missing:
            raise FilterError(_message(self.text, [], missing, tuple(df.columns)))
        with np.errstate(all="ignore"):
            m = _Evaluator(self.text.strip(), df).condition(self.tree)
        return m.fillna(False).astype(bool)

    def apply(self, df: pd.DataFrame) -> pd.DataFrame:
        """The rows of ``df`` where the condition holds, index reset."""
        return df[self.mask(df).to_numpy()].reset_index(drop=True)


def _has_at(text: str) -> bool:
    """Whether ``text`` holds an ``@`` operator outside string literals (pandas' variable reference)."""
    try:
        return any(t.type == tokenize.OP and t.string == "@"
                   for t in tokenize.generate_tokens(io.StringIO(text).readline))
    except (tokenize.TokenError, SyntaxError):
        return "@" in text


def _names(node: ast.AST) -> Iterable[str]:
    return (n.id for n in ast.walk(node) if isinstance(n, ast.Name))


def _message(text: str, problems: Sequence[str], unknown: Sequence[str] = (), columns: Sequence[str] = ()) -> str:
    """One refusal message (a few lines): the filter, what was refused, what is allowed, the columns if asked."""
    shown = text if len(text) <= 80 else text[:77] + "..."
    parts = list(problems[:4]) + ([f"and {len(problems) - 4} more"] if len(problems) > 4 else [])
    if unknown:
        parts.insert(0, ("unknown column " if len(unknown) == 1 else "unknown columns ")
                     + ", ".join(f"`{n}`" for n in unknown[:5]))
    lines = [f"--where {shown!r} is refused: " + "; ".join(parts)]
    lines.append(f"allowed: {ALLOWED}; e.g. \"{EXAMPLE}\"")
    if unknown:
        close = difflib.get_close_matches(unknown[0], columns, n=len(columns), cutoff=0.5)
        ordered = close + [c for c in columns if c not in close]
        lines.append("columns: " + ", ".join(ordered))
    # the first line is not wrapped, so the refused text is quoted whole; the lists below it are
    return "\n".join([lines[0]] + [textwrap.fill(line, 118, subsequent_indent="  ") for line in lines[1:]])


class _Checker:
    """Walks the tree once and collects every refused construct; ``role`` is what the node must be: a
    ``condition`` (a row is kept or not), a ``value`` (a column, literal or arithmetic) or ``literals`` (after in)."""

    def __init__(self, text: str, columns: tuple[str, ...]) -> None:
        self.text, self.columns = text, set(columns)
        self.problems: list[str] = []
        self.unknown: list[str] = []
        self.refused: set[str] = set()

    def snippet(self, node: ast.AST) -> str:
        s = ast.get_source_segment(self.text, node) or type(node).__name__
        return s if len(s) <= 40 else s[:37] + "..."

    def refuse(self, node: ast.AST, kind: ast.AST | None = None, what: str = "") -> None:
        """Name ``node`` as refused: what it is (by ``kind``'s type: ``node`` or its operator) and its text."""
        name, hint = _REFUSED.get(type(kind or node), (what or type(kind or node).__name__, ""))
        if name not in self.refused:  # once per kind: `a.b.c` is one attribute access, not two
            self.refused.add(name)
            self.problems.append(f"{name} is not allowed{f' ({hint})' if hint else ''}: `{self.snippet(node)}`")

    def check(self, node: ast.expr, role: str, depth: int) -> None:
        """Check ``node`` in its ``role`` at nesting ``depth``: each kind of node has its method below."""
        if depth > MAX_DEPTH:
            self.problems.append(f"it is nested more than {MAX_DEPTH} levels deep")
            return
        for kinds, method in self._CHECKS:
            if isinstance(node, kinds):
                method(self, node, role, depth + 1)
                return
        self.refuse(node)  # and not what is inside: its names need not be columns (a lambda's arguments)

    def _name(self, node: ast.Name, role: str, d: int) -> None:
        if node.id not in self.columns and node.id not in self.unknown:
            self.unknown.append(node.id)

    def _constant(self, node: ast.Constant, role: str, d: int) -> None:
        if type(node.value) not in (int, float, str, bool, type(None)):
            self.refuse(node, what=f"a {type(node.value).__name__} literal")
        elif role == "condition" and not isinstance(node.value, bool):
            self.problems.append(f"`{self.snippet(node)}` is not a condition (compare something, e.g. {EXAMPLE})")

    def _boolop(self, node: ast.BoolOp, role: str, d: int) -> None:
        self.require(node, role, "condition")
        for v in node.values:
            self.check(v, "condition", d)

    def _unaryop(self, node: ast.UnaryOp, role: str, d: int) -> None:
        if isinstance(node.op, ast.Not):
            self.require(node, role, "condition")
            self.check(node.operand, "condition", d)
        elif isinstance(node.op, (ast.USub, ast.UAdd)):
            self.require(node, role, "value")
            self.number(node.operand)
            self.check(node.operand, "value", d)
        else:
            self.refuse(node, node.op)
            self.check(node.operand, "value", d)

    def _binop(self, node: ast.BinOp, role: str, d: int) -> None:
        if type(node.op) not in _ARITH:
            self.refuse(node, node.op)
        else:
            self.require(node, role, "value")
        for side in (node.left, node.right):
            self.number(side)
            self.check(side, "value", d)

    def _compare(self, node: ast.Compare, role: str, d: int) -> None:
        self.require(node, role, "condition")
        self.check(node.left, "value", d)
        if len(node.ops) > 1 and any(isinstance(op, (ast.In, ast.NotIn)) for op in node.ops):
            self.problems.append(f"`in` in a chain of comparisons (`{self.snippet(node)}`) is not allowed "
                                 "(join them with `and`)")
        for op, right in zip(node.ops, node.comparators, strict=True):
            if isinstance(op, (ast.In, ast.NotIn)):
                self.literals(right)
            elif type(op) in _COMPARE:
                self.check(right, "value", d)
            else:
                self.refuse(node, op)
                self.check(right, "value", d)

    def _sequence(self, node: ast.List | ast.Tuple, role: str, d: int) -> None:
        self.refuse(node, what="a list outside `in` / `not in`")

    #: (node types, the method that checks them); any other node is refused
    _CHECKS: tuple[tuple[type | tuple[type, ...], Callable[..., None]], ...] = (
        (ast.Name, _name), (ast.Constant, _constant), (ast.BoolOp, _boolop), (ast.UnaryOp, _unaryop),
        (ast.BinOp, _binop), (ast.Compare, _compare), ((ast.List, ast.Tuple), _sequence),
    )

    def require(self, node: ast.expr, role: str, kind: str) -> None:
        if role == "condition" and kind == "value":
            self.problems.append(f"`{self.snippet(node)}` is not a condition (compare it, e.g. `... > 0`)")
        elif role == "value" and kind == "condition":
            self.problems.append(f"a condition used as a value (`{self.snippet(node)}`) is not allowed")

    def number(self, node: ast.expr) -> None:
        if isinstance(node, ast.Constant) and not isinstance(node.value, (int, float)):
            self.problems.append(f"arithmetic on {node.value!r} (`{self.snippet(node)}`) is not allowed (numbers only)")

    def literals(self, node: ast.expr) -> None:
        if not isinstance(node, (ast.List, ast.Tuple)):
            self.problems.append(f"`in` needs a list of literals, e.g. format in ['hdf5', 'npz'] "
                                 f"(not `{self.snippet(node)}`)")
            if not isinstance(node, ast.Constant):
                self.check(node, "value", MAX_DEPTH)
            return
        for elt in node.elts:
            if isinstance(elt, ast.UnaryOp) and isinstance(elt.op, ast.USub):
                elt = elt.operand
                ok = isinstance(elt, ast.Constant) and type(elt.value) in (int, float)
            else:
                ok = isinstance(elt, ast.Constant) and type(elt.value) in (int, float, str, bool, type(None))
            if not ok:
                self.problems.append(f"`{self.snippet(elt)}` in a list is not allowed (literals only)")


def _literal(value: Any) -> Any:
    """A literal as evaluated: numbers as numpy scalars (bounded arithmetic: no 10**10**10 in Python ints)."""
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return value
    if isinstance(value, int):
        if -(2**63) <= value < 2**63:
            return np.int64(value)
        return np.float64(np.inf if value > 0 else -np.inf)
    return np.float64(value)


class _Evaluator:
    """Evaluates a checked tree over ``df``: conditions as nullable boolean Series, values as Series or scalars."""

    def __init__(self, text: str, df: pd.DataFrame) -> None:
        self.text, self.df = text, df

    def fail(self, node: ast.AST, why: str) -> FilterError:
        seg = ast.get_source_segment(self.text, node) or ""
        return FilterError(f"--where {self.text!r}: cannot evaluate `{seg[:60]}`: {why}")

    def as_mask(self, v: Any) -> pd.Series:
        if isinstance(v, pd.Series):
            return v.astype("boolean")
        return pd.Series(bool(v), index=self.df.index, dtype="boolean")

    def condition(self, node: ast.expr) -> pd.Series:
        if isinstance(node, ast.BoolOp):
            masks = [self.condition(v) for v in node.values]
            out = masks[0]
            for m in masks[1:]:
                out = (out & m) if isinstance(node.op, ast.And) else (out | m)
            return out
        if isinstance(node, ast.UnaryOp):  # not
            return ~self.condition(node.operand)
        if isinstance(node, ast.Compare):
            return self.compare(node)
        if isinstance(node, ast.Constant):
            return self.as_mask(node.value)
        assert isinstance(node, ast.Name)  # the checker allows nothing else where a condition is expected
        col = self.df[node.id]
        kind = pd.api.types.infer_dtype(col, skipna=True)
        if not (pd.api.types.is_bool_dtype(col.dtype) or kind in ("boolean", "empty")):
            raise self.fail(node, f"column {node.id} holds {kind} values, not True/False: compare it, "
                                  f"e.g. {node.id} == ...")
        return col.astype("boolean")

    def compare(self, node: ast.Compare) -> pd.Series:
        left = self.value(node.left)
        out: pd.Series | None = None
        for op, right_node in zip(node.ops, node.comparators, strict=True):
            if isinstance(op, (ast.In, ast.NotIn)):
                items = [_literal(ast.literal_eval(e)) for e in right_node.elts]  # type: ignore[attr-defined]
                m = self.isin(left, items)
                if isinstance(op, ast.NotIn):
                    m = ~m
                right = None
            else:
                right = self.value(right_node)
                m = self.as_mask(self.binary(node, _COMPARE[type(op)], left, right, compare=True))
            out = m if out is None else out & m
            left = right
        assert out is not None
        return out

    def isin(self, left: Any, items: list[Any]) -> pd.Series:
        values = [v for v in items if v is not None]
        if isinstance(left, pd.Series):
            m = left.isin(values)
            if len(values) < len(items):
                m = m | left.isna()
            return m.astype("boolean")
        return self.as_mask(left in values or (left is None and None in items))

    def value(self, node: ast.expr) -> Any:
        if isinstance(node, ast.Constant):
            return _literal(node.value)
        if isinstance(node, ast.Name):
            return self.df[node.id]
        if isinstance(node, ast.UnaryOp):
            v = self.numeric(node.operand, self.value(node.operand))
            return -v if isinstance(node.op, ast.USub) else v
        assert isinstance(node, ast.BinOp)
        left = self.numeric(node.left, self.value(node.left))
        right = self.numeric(node.right, self.value(node.right))
        return self.binary(node, _ARITH[type(node.op)], left, right)

    def numeric(self, node: ast.expr, v: Any) -> Any:
        """``v`` if it is a number or a numeric column (text columns are refused before any arithmetic runs)."""
        if isinstance(v, pd.Series):
            if pd.api.types.is_numeric_dtype(v.dtype):
                return v
            kind = pd.api.types.infer_dtype(v, skipna=True)
            if kind in _NUMERIC_KINDS:
                return pd.to_numeric(v)
            raise self.fail(node, f"arithmetic needs numbers and this column holds {kind} values")
        if isinstance(v, (bool, np.bool_, np.number)):
            return v
        raise self.fail(node, "arithmetic needs numbers")

    def binary(self, node: ast.expr, fn: Callable[[Any, Any], Any], a: Any, b: Any, compare: bool = False) -> Any:
        if compare and (a is None or b is None) and fn in (operator.eq, operator.ne):
            other = b if a is None else a
            if isinstance(other, pd.Series):
                return other.isna() if fn is operator.eq else other.notna()
            return (other is None) == (fn is operator.eq)
        if compare and (a is None or b is None):
            raise self.fail(node, "None (a missing value) can only be tested with == None or != None")
        if fn is operator.pow:  # numpy refuses integers to negative integer powers: 2 ** -1 is 0.5, as in Python
            a = a.astype("float64") if isinstance(a, pd.Series) else np.float64(a)
        try:
            return fn(a, b)
        except (TypeError, ValueError, ArithmeticError) as e:
            raise self.fail(node, f"{type(e).__name__}: {e}") from None
