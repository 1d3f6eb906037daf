"""The ``--where`` filter language (analysis/where.py): every allowed construct keeps the rows the equivalent pandas
boolean mask keeps; every refused construct is named before anything is evaluated; hostile filters execute nothing,
through the real command line against a real SQLite store."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from pandas.testing import assert_frame_equal

from analysis.query import ANALYSIS_COLUMNS, parse_where
from analysis.where import ALLOWED, Filter, FilterError
from ddlio.store import Store


@pytest.fixture
def df() -> pd.DataFrame:
    """A frame shaped like the analysis frame's columns: text with a missing value, ints, floats with NaN, a
    nullable boolean."""
    return pd.DataFrame({
        "format": ["hdf5", "npz", None, "tfrecord", "hdf5", "npz"],
        "access": ["shared", "fpp", "shared", "fpp", "fpp", "shared"],
        "nodes": [1, 2, 4, 8, 2, 1],
        "ranks": [1, 4, 8, 16, 2, 2],
        "stripe_count": [1, -1, 4, 8, 1, 2],
        "bandwidth_mib_s": [100.0, np.nan, 250.5, 900.0, 120.0, 80.0],
        "overlapping": [0, 0, 1, 2, 0, 3],
        "striping_applicable": pd.array([True, None, False, True, True, False], dtype="boolean"),
    })


def rows(df: pd.DataFrame, mask: pd.Series) -> pd.DataFrame:
    return df[mask.fillna(False).astype(bool).to_numpy()].reset_index(drop=True)


ALLOWED_CASES = [
    ("format == 'hdf5' and nodes >= 2", lambda d: (d.format == "hdf5") & (d.nodes >= 2)),
    ("overlapping == 0", lambda d: d.overlapping == 0),
    ("format != 'hdf5'", lambda d: d.format != "hdf5"),
    ("nodes < 4", lambda d: d.nodes < 4),
    ("nodes <= 4", lambda d: d.nodes <= 4),
    ("nodes > 1", lambda d: d.nodes > 1),
    ("bandwidth_mib_s >= 120", lambda d: d.bandwidth_mib_s >= 120),
    ("1 <= nodes < 8", lambda d: (d.nodes >= 1) & (d.nodes < 8)),
    ("nodes == ranks", lambda d: d.nodes == d.ranks),
    ("format in ['hdf5', 'npz']", lambda d: d.format.isin(["hdf5", "npz"])),
    ("format not in ('hdf5',)", lambda d: ~d.format.isin(["hdf5"])),
    ("stripe_count in [-1, 8]", lambda d: d.stripe_count.isin([-1, 8])),
    ("format in ['npz', None]", lambda d: d.format.isin(["npz"]) | d.format.isna()),
    ("format == None", lambda d: d.format.isna()),
    ("bandwidth_mib_s != None", lambda d: d.bandwidth_mib_s.notna()),
    ("access == 'fpp' or overlapping > 1", lambda d: (d.access == "fpp") | (d.overlapping > 1)),
    ("not access == 'fpp'", lambda d: ~(d.access == "fpp")),
    ("not (nodes > 1 and access == 'shared')", lambda d: ~((d.nodes > 1) & (d.access == "shared"))),
    ("striping_applicable", lambda d: d.striping_applicable),
    ("not striping_applicable", lambda d: ~d.striping_applicable),
    ("striping_applicable == True", lambda d: d.striping_applicable == True),  # noqa: E712
    ("stripe_count == -1", lambda d: d.stripe_count == -1),
    ("-stripe_count > 0", lambda d: -d.stripe_count > 0),
    ("bandwidth_mib_s / ranks > 50", lambda d: d.bandwidth_mib_s / d.ranks > 50),
    ("bandwidth_mib_s * 2 + 1 > 300", lambda d: d.bandwidth_mib_s * 2 + 1 > 300),
    ("nodes - 1 == 0", lambda d: d.nodes - 1 == 0),
    ("ranks // nodes == 2", lambda d: d.ranks // d.nodes == 2),
    ("ranks % 4 == 0", lambda d: d.ranks % 4 == 0),
    ("nodes ** 2 >= 16", lambda d: d.nodes**2 >= 16),
    ("2 ** -1 * nodes == 1", lambda d: 0.5 * d.nodes == 1),
    ("nodes >= 2e0", lambda d: d.nodes >= 2.0),
    ("True", lambda d: pd.Series(True, index=d.index)),
    ("False", lambda d: pd.Series(False, index=d.index)),
]


@pytest.mark.parametrize(("expr", "mask"), ALLOWED_CASES, ids=[c[0] for c in ALLOWED_CASES])
def test_an_allowed_filter_keeps_the_rows_of_the_equivalent_pandas_mask(df, expr, mask):
    got = Filter.parse(expr, df.columns).apply(df)
    assert_frame_equal(got, rows(df, mask(df)))
    assert expr in ("True", "False") or 0 < len(got) < len(df)  # each case keeps some rows, drops others


REFUSED_CASES = [
    ("@pd.io.common.os.system('touch F') == 0", r"`@` \(a reference to a Python variable\) is not allowed"),
    ("nodes @ ranks == 1", r"`@`"),
    ("__import__('os').system('touch F') == 0", r"a function call is not allowed: `__import__\('os'\)"),
    ("format.str.len() > 3", r"a function call is not allowed: `format.str.len\(\)`"),
    ("nodes.real > 1", r"attribute access is not allowed: `nodes.real`"),
    ("format[0] == 'h'", r"indexing is not allowed: `format\[0\]`"),
    ("(lambda: 1)() == 1", r"a function call is not allowed"),
    ("(lambda x: x) == 1", r"a lambda is not allowed"),
    ("[n for n in nodes] == 1", r"a comprehension is not allowed"),
    ("f'{nodes}' == '1'", r"an f-string is not allowed"),
    ("(nodes := 3) > 1", r"an assignment \(:=\) is not allowed"),
    ("(1 if nodes else 2) == 1", r"a conditional expression is not allowed"),
    ("{'a': 1} == nodes", r"a dict is not allowed"),
    ("{1, 2} == nodes", r"a set is not allowed"),
    ("nodes == [1, 2]", r"a list outside `in` / `not in` is not allowed"),
    ("nodes in ranks", r"`in` needs a list of literals"),
    ("nodes in [ranks]", r"`ranks` in a list is not allowed \(literals only\)"),
    ("(nodes > 1) & (ranks > 1)", r"`&` is not allowed \(write `and`\)"),
    ("(nodes > 1) | (ranks > 1)", r"`\|` is not allowed \(write `or`\)"),
    ("~striping_applicable", r"`~` is not allowed \(write `not`\)"),
    ("nodes is None", r"`is` is not allowed \(write `== None`\)"),
    ("nodes << 2 == 4", r"`<<` is not allowed"),
    ("nodes == b'x'", r"a bytes literal is not allowed"),
    ("nodes == 1j", r"a complex literal is not allowed"),
    ("'ab' * 1000000000 == format", r"arithmetic on 'ab' .* is not allowed \(numbers only\)"),
    ("nodes + 1", r"`nodes \+ 1` is not a condition"),
    ("'hdf5'", r"`'hdf5'` is not a condition"),
    ("(nodes > 1) + 1 > 0", r"a condition used as a value"),
    ("nodes >", r"it is not a valid expression"),
    ("nodes > 1; import os", r"it is not a valid expression"),
    ("-" * 300 + "nodes > 1", r"nested more than 100 levels deep"),
    ("nodes > 1 or " * 200 + "nodes > 1", r"at most 2000\)"),
]


@pytest.mark.parametrize(("expr", "match"), REFUSED_CASES, ids=[c[0][:40] for c in REFUSED_CASES])
def test_a_refused_construct_is_named_with_what_is_allowed(df, expr, match):
    with pytest.raises(FilterError, match=match) as e:
        Filter.parse(expr, df.columns)
    msg = str(e.value)
    assert "is refused" in msg and ALLOWED.replace(" ", "").replace("\n", "") in msg.replace(" ", "").replace("\n", "")
    assert len(msg.splitlines()) <= 11  # "error: " + this fits the 12-line budget


def test_an_at_sign_inside_a_string_literal_is_text_not_a_variable(df):
    df.loc[2, "format"] = "user@host"
    assert Filter.parse("format == 'user@host'", df.columns).mask(df).tolist() == [False, False, True, False, False,
                                                                                  False]


def test_an_unknown_name_lists_the_columns_closest_first():
    with pytest.raises(FilterError, match=r"unknown column `node`(.|\n)*columns: nodes, ") as e:
        parse_where("node >= 2")
    listed = str(e.value).split("columns: ", 1)[1].replace("\n", " ").replace(",", " ").split()
    assert sorted(listed) == sorted(ANALYSIS_COLUMNS)
    with pytest.raises(FilterError, match=r"unknown columns `pd`, `os`"):
        parse_where("pd == 1 and os == 2")


def test_evaluation_refuses_arithmetic_on_text_and_a_non_boolean_column_as_a_condition(df):
    with pytest.raises(FilterError, match=r"cannot evaluate `format`: arithmetic needs numbers.*string"):
        Filter.parse("format * 1000000000 == 'x'", df.columns).mask(df)
    with pytest.raises(FilterError, match=r"column nodes holds integer values, not True/False"):
        Filter.parse("nodes", df.columns).mask(df)
    with pytest.raises(FilterError, match=r"cannot evaluate `nodes > 'a'`: TypeError"):
        Filter.parse("nodes > 'a'", df.columns).mask(df)


def test_arithmetic_stays_bounded_and_numeric_text_columns_of_an_empty_store_still_filter(df):
    # 10**10**10 in Python integers would not finish; the language evaluates numbers as numpy scalars
    assert Filter.parse("nodes < 10 ** 10 ** 10 or nodes > 0", df.columns).mask(df).all()
    empty = pd.DataFrame({"nodes": pd.Series([], dtype=object), "format": pd.Series([], dtype=object)})
    assert Filter.parse("nodes * 2 > 3 and format == 'hdf5'", empty.columns).apply(empty).empty


@pytest.mark.parametrize("command", ["guidelines", "figures", "report"])
@pytest.mark.parametrize("hostile", ["@pd.io.common.os.system('touch F') == 0",
                                     "__import__('os').system('touch F') == 0"])
def test_a_hostile_filter_executes_nothing_through_every_command(tmp_path, analysis, command, hostile):
    Store(str(tmp_path / "r.db"))  # a real (empty) store: the filter would be evaluated against it
    r = analysis(command, "--db", str(tmp_path / "r.db"), "--out", str(tmp_path / "out"), "--where", hostile) \
        if command != "guidelines" else analysis(command, "--db", str(tmp_path / "r.db"), "--where", hostile)
    assert r.returncode == 2, r.stderr
    assert not (tmp_path / "F").exists()
    assert r.stderr.startswith("error: --where") and "is refused" in r.stderr and "allowed: column names" in r.stderr
    assert "Traceback" not in r.stderr and len(r.stderr.splitlines()) <= 12
    assert not (tmp_path / "out").exists()  # refused before any output is written
