"""The keys concern: every key of a composed point is one ddlio defines.

Hydra refuses a misspelt key only when it is overridden as ``key=value``; ``+key=value`` and ``++key=value`` add it
to the config, where nothing reads it (a typo would measure the default, a made-up format option would give the
same measurement a new key). :func:`check_keys` compares the composed config with the schema
(:mod:`experiments.config.schema`, each format's conf) and names the closest valid key. The maps ``cluster.env``
and ``cluster.sbatch`` stay open: their keys are the user's (environment variables, sbatch options).
"""

from __future__ import annotations

import difflib
from dataclasses import fields
from typing import Any

from experiments.config.schema import (
    FORMAT_SCHEMAS,
    AccessConf,
    CheckpointConf,
    ClusterConf,
    DdlioConf,
    SlurmClusterConf,
    WorkloadConf,
)


def _names(conf: type) -> list[str]:
    return [f.name for f in fields(conf)]


#: maps whose keys are the user's to choose (not walked)
OPEN_MAPS = ("cluster.env", "cluster.sbatch")
#: the schema of each config group (the format's is chosen by its name): every key it may hold (a local cluster's
#: Slurm keys at their defaults, as stored points hold them)
GROUPS: dict[str, type] = {"access": AccessConf, "workload": WorkloadConf, "cluster": SlurmClusterConf,
                           "checkpoint": CheckpointConf}
#: the keys each group must have (a cluster: what every executor takes; the rest take their defaults)
REQUIRED: dict[str, type] = {**GROUPS, "cluster": ClusterConf}
#: the config groups of conf/ a point is composed from (``format=hdf5``), and those added with ``+``
#: (``+experiment=paper_formats``): a misspelt one is an unknown key to Hydra (``fromat=hdf5``)
CONFIG_GROUPS = ("format", *GROUPS)
ADDED_GROUPS = ("experiment",)
#: the keys only ``cluster=slurm`` has
SLURM_KEYS = {f"cluster.{n}" for n in set(_names(SlurmClusterConf)) - set(_names(ClusterConf))}


def known_keys(format_name: str | None = None) -> list[str]:
    """Every dotted key ddlio defines (the format's options for ``format_name``, every format's without it)."""
    keys = [n for n in _names(DdlioConf) if n not in ("format", *GROUPS)]
    for group, conf in GROUPS.items():
        keys += [f"{group}.{n}" for n in _names(conf)]
    confs = [FORMAT_SCHEMAS[format_name]] if format_name in FORMAT_SCHEMAS else list(FORMAT_SCHEMAS.values())
    keys += sorted({f"format.{n}" for conf in confs for n in _names(conf)})
    return keys


def closest(key: str, format_name: str | None = None) -> str | None:
    """The valid key closest to ``key`` (a typo's likely meaning), or None when none is close."""
    keys = known_keys(format_name)
    leaf = key.rsplit(".", 1)[-1]
    got = [k for k in keys if k.rsplit(".", 1)[-1] == leaf][:1]  # the right name in the wrong group
    got = got or difflib.get_close_matches(key, keys, n=1, cutoff=0.75)
    # the group's shared prefix alone makes no match: the names themselves must be close too (foo is not au_floor)
    got = [k for k in got if difflib.SequenceMatcher(None, leaf, k.rsplit(".", 1)[-1]).ratio() >= 0.6]
    return got[0] if got else None


def formats_with(key: str) -> list[str]:
    """The formats that have the option ``key`` (``format.load``: npy, npz), sorted; none for another key."""
    group, _, leaf = key.partition(".")
    if group != "format" or not leaf:
        return []
    return sorted(n for n, conf in FORMAT_SCHEMAS.items() if leaf in _names(conf))


def format_of(conf: Any) -> str | None:
    """The format whose conf class is ``conf`` (what OmegaConf names in a refusal: ``Key 'load' not in
    'HDF5Conf'``), or None."""
    return next((n for n, c in FORMAT_SCHEMAS.items() if c is conf), None)


def _closest_group(key: str, given: str | None) -> str | None:
    """The config group a top-level ``key`` misspells, as the override to write (``format=hdf5`` for
    ``fromat=hdf5``, ``+experiment=...`` for ``expriment=...``), or None."""
    if "." in key:
        return None
    got = difflib.get_close_matches(key, [*CONFIG_GROUPS, *ADDED_GROUPS], n=1, cutoff=0.7)
    if not got:
        return None
    value = given.split("=", 1)[1] if given and "=" in given else None
    plus = "+" if got[0] in ADDED_GROUPS else ""
    return f"{plus}{got[0]}={value}" if value is not None else f"{plus}{got[0]}"


def unknown_key_problem(key: str, format_name: str | None = None, given: str | None = None,
                        conf: Any = None) -> str:
    """The message for a key ddlio does not define, naming the closest valid one (or the group's keys); a Slurm key
    on ``cluster=local`` is one ddlio defines for ``cluster=slurm`` (``given``: the override, ``key=value``); a
    format option of other formats than the point's (``format_name``, or the format whose conf class ``conf`` is)
    names the formats that have it."""
    format_name = format_name or format_of(conf)
    if key in SLURM_KEYS:
        return (f"{given or key} applies to Slurm only (cluster=local runs every point on this host): drop it, or use "
                "cluster=slurm")
    owners = [n for n in formats_with(key) if n != format_name]
    if owners:
        which = f"format={', '.join(owners)}"
        if not format_name:
            return f"{key} is an option of {which} only: sweep it over those formats alone"
        own = [k.partition(".")[2] for k in known_keys(format_name) if k.startswith("format.") and k != "format.name"]
        mine = f"whose options are {', '.join(own)}" if own else "which has no options"
        return (f"{key} is an option of {which} only, not of format={format_name} ({mine}): drop "
                f"format={format_name} from the sweep or sweep {key} over {which} alone")
    group_hint = _closest_group(key, given)
    if group_hint:
        return (f"{key} is not a ddlio key: did you mean {group_hint}? (a config group; python sweep.py --help "
                "lists them)")
    hint = closest(key, format_name)
    if hint and hint != key:
        return f"{key} is not a ddlio key: did you mean {hint}? (python sweep.py --help lists every key)"
    group = key.split(".", 1)[0] if "." in key else ""
    choices = [k for k in known_keys(format_name) if group and k.startswith(group + ".")]
    what = f"the keys of {group} are {', '.join(choices)}" if choices else "python sweep.py --help lists every key"
    return f"{key} is not a ddlio key: {what}"


def _walk(problems: list[str], value: Any, conf: type, prefix: str, format_name: str | None) -> None:
    if not isinstance(value, dict):
        return
    known = _names(conf)  # one level: the groups' values are scalars, lists and the open maps
    problems += [unknown_key_problem(f"{prefix}{k}", format_name) for k in value if k not in known]


def missing_keys(cfg: dict[str, Any]) -> list[str]:
    """One problem per key of the schema that ``cfg`` lacks (deleted with ``~key``) and per config group that is
    not one (``~workload`` leaves nothing, a group set to a plain value): the other checks need them all."""
    problems = []
    for name in _names(DdlioConf):
        if name not in cfg:
            problems.append(f"{name} is missing (deleted with ~{name}?): every ddlio key needs a value; give one "
                            f"with {name}=VALUE")
        elif name in ("format", *GROUPS) and not isinstance(cfg[name], dict):
            problems.append(f"{name} must be a config group (e.g. {name}=... naming one of conf/{name}/), not "
                            f"{cfg[name]!r}")
    for group, conf in REQUIRED.items():
        value = cfg.get(group)
        if isinstance(value, dict):
            problems += [f"{group}.{n} is missing (deleted with ~{group}.{n}?): give it a value"
                         for n in _names(conf) if n not in value]
    return problems


def check_keys(problems: list[str], cfg: dict[str, Any]) -> None:
    """Add one problem per key of ``cfg`` that ddlio does not define (see the module)."""
    for k, v in cfg.items():
        if k == "format" and isinstance(v, dict):
            name = v.get("name")
            if name in FORMAT_SCHEMAS:  # an unknown format is the format concern's problem
                _walk(problems, v, FORMAT_SCHEMAS[name], "format.", name)
        elif k in GROUPS:
            _walk(problems, v, GROUPS[k], f"{k}.", None)
        elif k not in _names(DdlioConf):
            problems.append(unknown_key_problem(k))
