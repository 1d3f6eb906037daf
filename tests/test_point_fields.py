"""A point's fields stated once: the five views of a point agree, field by field.

The views: the Hydra confs (experiments/config/schema.py and each format's conf in experiments/formats), the frozen
specs (experiments/config/point.py), the stored form (STORED_FORM), the fields validate builds the point from
(``point_fields``), and the store's column map (ddlio.store). :data:`FIELDS` is the one table that states how a
field is named in each view; a field added to one view and not to the others fails here.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
import yaml
from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf

from conftest import ROOT
from experiments.config import (
    KEYLESS_DEFAULTS,
    SLURM_ONLY,
    STORED_FORM,
    AccessConf,
    ClusterConf,
    DdlioConf,
    FormatSpec,
    LayoutSpec,
    LocalCluster,
    PointSpec,
    SlurmCluster,
    SlurmClusterConf,
    WorkloadConf,
    WorkloadSpec,
    register_configs,
)
from experiments.config.fields import FIELDS as TABLE
from experiments.config.fields import MISSING, REQUIRED, conf_comment, conf_row, knob_table, with_knob_table
from experiments.config.point import CLUSTER_KEYLESS_DEFAULTS, DERIVED_KEYS, dataset_params, measurement_params
from experiments.config.validate import point_fields, validate
from experiments.formats import FORMAT_CONFS, FORMATS

register_configs()

# The one table (experiments/config/fields.py), as the four views name each field of a point:
#   spec      the PointSpec field ("part.field"; part format/layout/workload, none for the point itself)
#   conf      the composed key it is validated from ("group.field"; "format.*" the format's own options, "cluster.*"
#             every ClusterConf key; None: not configured, derived while validating)
#   stored    its key in the stored form (STORED_FORM)
#   column    its column in the store's points table (None: only in points.config, the whole stored form)
FIELDS: tuple[tuple[str, str | None, str, str | None], ...] = tuple(
    (f.spec, f.conf, f.stored, f.column) for f in TABLE if f.spec is not None)
#: composed keys that are not fields of a point: how a sweep runs, not what a point measures (why)
NOT_IN_POINT = {
    "db_url_file": "replaces db while validating (the URL with its password stays in the driver)",
    "wait": "how the driver waits for jobs", "dry_run": "whether anything is submitted",
    "retry_failed": "which stored points run again",
    "remeasure_earlier": "which stored points run again (those of an earlier method)",
    "order": "the order points run in",
    "objective": "what a point returns to a sweeper (every objective is a stored total)",
    "workload.compute_time_by_accelerator": "a preset's table: accelerator picks one figure into compute_time",
}
#: the store's columns filled from the stored form's derived keys, or worked out by the store (None)
DERIVED_COLUMNS = {"ranks": "ranks", "num_files": "num_files", "dataset_key": "dataset_key", "label": None}
#: the groups of DdlioConf: each composed from conf/<group>/
GROUPS = ("format", "access", "workload", "cluster", "checkpoint")


def _names(cls: type) -> list[str]:
    return [f.name for f in dataclasses.fields(cls)]


def _column(name: str) -> str:
    return {spec: column for spec, _, _, column in FIELDS}[name]


def _composed(tmp_path: Path, *overrides: str) -> dict:
    with initialize_config_dir(config_dir=str(ROOT / "conf"), version_base=None):
        cfg = compose("config", overrides=[f"data_root={tmp_path / 'd'}", f"db={tmp_path / 'r.db'}", *overrides])
    return OmegaConf.to_container(cfg, resolve=True)


def _store_columns() -> dict[str, str | None]:
    """The store's map of a point's columns to their stored keys."""
    from ddlio.store.rows import _CONFIG_COLUMNS

    return _CONFIG_COLUMNS


def test_the_confs_mark_a_mandatory_value_as_omegaconf_does():
    import omegaconf

    from experiments.formats.base import MISSING

    assert MISSING == omegaconf.MISSING
    assert OmegaConf.is_missing(OmegaConf.structured(DdlioConf), "format")


def test_the_table_names_each_field_once():
    for i in range(4):
        names = [row[i] for row in FIELDS if row[i] is not None]
        assert len(names) == len(set(names)), f"view {i} of FIELDS names a field twice"


def test_the_confs_hold_every_configured_field():
    """Every composed key is a field of the point (FIELDS' conf view) or stated not to be one."""
    conf: set[str] = set()
    for name in _names(DdlioConf):
        if name == "format":
            conf |= {"format.name", "format.*"}
        elif name in ("cluster", "checkpoint"):  # the kind's options: one field, a dict, as the cluster's
            conf.add(f"{name}.*")
        elif name in GROUPS:
            group = {"access": AccessConf, "workload": WorkloadConf}[name]
            conf |= {f"{name}.{f}" for f in _names(group)}
        else:
            conf.add(name)
    table = {row[1] for row in FIELDS if row[1] is not None}
    assert conf - set(NOT_IN_POINT) == table
    assert set(NOT_IN_POINT) <= conf


def test_the_specs_hold_every_field():
    specs = {"format": FormatSpec, "layout": LayoutSpec, "workload": WorkloadSpec}
    fields = {name for name in _names(PointSpec) if name not in specs}
    fields |= {f"{part}.{name}" for part, cls in specs.items() for name in _names(cls)}
    assert fields == {row[0] for row in FIELDS}


def test_the_stored_form_holds_every_field_under_its_key():
    stored = {(f"{part}.{name}" if part else name): key for key, part, name in STORED_FORM}
    assert stored == {spec: key for spec, _, key, _ in FIELDS}
    assert not set(DERIVED_KEYS) & set(stored.values())
    defaults = {f.name: f.default if f.default_factory is dataclasses.MISSING else f.default_factory()
                for spec in (WorkloadSpec, LayoutSpec, PointSpec) for f in dataclasses.fields(spec)}
    assert all(defaults[k] == v for k, v in KEYLESS_DEFAULTS.items()), "a keyless default is not the spec's"


def test_validate_builds_every_field_explicitly(tmp_path):
    """validate passes each spec every one of its fields (none is left to a dataclass default)."""
    parts = point_fields(_composed(tmp_path, "workload=tiny"), tmp_path)
    built = {(f"{part}.{name}" if part else name) for part, kwargs in parts.items() for name in kwargs}
    assert built == {row[0] for row in FIELDS}


def test_the_store_maps_its_columns_to_the_stored_keys():
    columns = _store_columns()
    stored = {column: key for _, _, key, column in FIELDS if column is not None}
    assert set(columns) == set(stored) | set(DERIVED_COLUMNS)
    for column, key in columns.items():
        if column == "cluster":  # the store keeps the cluster's name (the stored key holds the whole cluster)
            assert key is None
        else:
            assert key == {**stored, **DERIVED_COLUMNS}[column], column
    from ddlio.store import Point

    assert set(columns) <= set(Point.__table__.columns.keys())


def test_the_cluster_views_agree(tmp_path):
    """cluster.* : the confs inherit as the specs do (ClusterConf -> SlurmClusterConf, LocalCluster ->
    SlurmCluster): each conf's keys are its spec's fields (executor picks the class), with the conf's defaults,
    stored in SlurmClusterConf's order (minus those at a keyless default)."""
    assert issubclass(SlurmClusterConf, ClusterConf)
    conf = _names(SlurmClusterConf)
    assert set(_names(ClusterConf)) - {"executor"} == set(_names(LocalCluster))  # executor: the class
    assert set(conf) - {"executor"} == set(_names(SlurmCluster))
    assert conf[:len(_names(ClusterConf))] == _names(ClusterConf)  # Slurm's keys after every executor's
    assert tuple(n for n in _names(SlurmCluster) if n not in _names(LocalCluster)) == SLURM_ONLY
    unset = SlurmClusterConf()
    for cls in (LocalCluster, SlurmCluster):
        for f in dataclasses.fields(cls):
            if f.default_factory is not dataclasses.MISSING:
                assert f.default_factory() == getattr(unset, f.name), (cls.__name__, f.name)
            elif f.default is not dataclasses.MISSING:
                assert f.default == getattr(unset, f.name), (cls.__name__, f.name)
    for executor in ("local", "slurm"):
        p = validate(_composed(tmp_path, "workload=tiny", f"cluster={executor}"), tmp_path)
        assert type(p.cluster).executor == executor
        # a knob at its keyless default stays out of the stored form (points keep the bytes earlier ddlio wrote)
        stored = [n for n in conf if n not in CLUSTER_KEYLESS_DEFAULTS]
        assert list(p.to_dict()["cluster"]) == stored
        assert PointSpec.from_dict(p.to_dict()) == p
    assert _column("cluster") == "cluster"


@pytest.mark.parametrize("name", sorted(FORMATS))
def test_each_formats_conf_is_its_options(tmp_path, name):
    """format.* : a format's conf (minus name) is the one schema of its options: validate keeps them in its order,
    the stored form holds them (tests/test_config.py pins their bytes and keys), the keys' keyless defaults and read
    options name only them, and conf/format/<name>.yaml sets each of them with its comment."""
    fmt = FORMATS[name]
    assert FORMAT_CONFS[name] is fmt.conf and fmt.conf().name == name
    options = [n for n in _names(fmt.conf) if n != "name"]
    shape = ["workload.sample_shape=[8,8,3]"] if "array" in fmt.layouts else []
    p = validate(_composed(tmp_path, "workload=tiny", f"format={name}", *shape), tmp_path)
    assert list(p.format.options) == options
    assert list(p.to_dict()["format_options"]) == options
    defaults = fmt.conf()
    assert set(fmt.read_options) <= set(options)
    for k, v in fmt.keyless_defaults.items():
        assert k in options and getattr(defaults, k) == v, (name, k)
    if fmt.layouts:
        assert "layout" in options and defaults.layout == fmt.layouts[0]
    group = yaml.safe_load((ROOT / "conf" / "format" / f"{name}.yaml").read_text())
    assert list(group or {})[1:] == options, f"conf/format/{name}.yaml does not set every option, in the conf's order"


# ------------------------------------------------------------------------- the views held to the one table
def _default(f: dataclasses.Field) -> object:
    if f.default_factory is not dataclasses.MISSING:
        return f.default_factory()
    return REQUIRED if f.default is dataclasses.MISSING else f.default


def test_the_table_states_the_knobs_that_are_no_field_of_a_point():
    assert {f.conf for f in TABLE if f.spec is None} == set(NOT_IN_POINT)
    assert all(f.stored is None and f.column is None for f in TABLE if f.spec is None)


@pytest.mark.parametrize("cls", [DdlioConf, AccessConf, WorkloadConf], ids=lambda c: c.__name__)
def test_the_hydra_confs_are_the_tables(cls):
    """Each field of the Hydra confs (written out for the ConfigStore) has the table's type and default, and the
    table's doc as its comment (experiments.config.fields.conf_comment writes it)."""
    source = (ROOT / "experiments" / "config" / "schema.py").read_text().splitlines()
    start = source.index(f"class {cls.__name__}:")
    for f in dataclasses.fields(cls):
        row = conf_row(cls.__name__, f.name)
        if row is None or (cls is DdlioConf and f.name in GROUPS):
            assert f.name in GROUPS, f"{cls.__name__}.{f.name} is not in experiments/config/fields.py"
        else:
            default = _default(f)
            assert (f.type, MISSING if default is REQUIRED else default) == (row.conf_type, row.conf_default), f.name
        if row is None:
            continue
        at = next(i for i in range(start, len(source)) if source[i].startswith(f"    {f.name}: "))
        comment = []
        while source[at - 1 - len(comment)].startswith("    #"):
            comment.insert(0, source[at - 1 - len(comment)])
        assert comment == conf_comment(row), f"{cls.__name__}.{f.name}: its comment is not the table's doc"


def test_the_specs_are_the_tables():
    """Each spec field has the table's type and default."""
    specs = {"format": FormatSpec, "layout": LayoutSpec, "workload": WorkloadSpec, "": PointSpec}
    rows = {f.spec: f for f in TABLE if f.spec is not None}
    for part, cls in specs.items():
        for f in dataclasses.fields(cls):
            if cls is PointSpec and f.name in specs:
                continue
            row = rows[f"{part}.{f.name}" if part else f.name]
            assert (f.type, _default(f)) == (row.type, row.default), row.spec


def test_the_keys_hold_what_the_table_says(tmp_path):
    """The names dataset_params and measurement_params give each field are the table's (every field that can enter
    a key present: a point with every conditional field in play, once at cache=cold and once at storage_cold)."""
    base = validate(_composed(tmp_path, "workload=tiny", "workload.sample_shape=[8,8,4]", "workload.compute=cpu",
                              "kind=train"), tmp_path)
    layout = dataclasses.replace(base.layout, striping_applicable=True, object_size=4 << 20, pool="fast")
    dataset: set[str] = set()
    measurement: set[str] = set()
    for cache in ("cold", "storage_cold"):
        w = dataclasses.replace(base.workload, cache=cache, settle=True, persistent_workers=True, pin_memory=True,
                                start_method="spawn", device="cpu")
        p = dataclasses.replace(base, layout=layout, workload=w, kind="another", checkpoint={"name": "a kind's own"})
        dataset |= set(dataset_params(p))
        measurement |= set(measurement_params(p))
    assert dataset - {"num_files"} == {f.dataset for f in TABLE if f.dataset}
    assert measurement == {name for f in TABLE for name in f.measurement}


def test_the_docs_knob_table_is_the_tables():
    """docs/configuration.md lists every knob with the table's doc and default (python -m experiments.config.fields
    writes it)."""
    text = (ROOT / "docs" / "configuration.md").read_text()
    assert text == with_knob_table(text), "docs/configuration.md: run python -m experiments.config.fields"
    table = knob_table()
    for f in TABLE:
        if f.knob is not None:
            assert f"| `{f.knob}` | {f.doc} |" in table


def test_help_lists_every_knob_and_the_kinds():
    import subprocess
    import sys

    out = subprocess.run([sys.executable, str(ROOT / "sweep.py"), "--help"], capture_output=True, text=True,
                         cwd=ROOT, timeout=120, check=True).stdout
    for f in TABLE:
        if f.knob is not None:
            assert f"\n  {f.knob} = " in out, f.knob
    assert "choices: checkpoint, train" in out
