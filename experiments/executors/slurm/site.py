"""What bounds a job at this Slurm site: partitions (``scontrol show partition``, ``sinfo``), the configuration
(``scontrol show config``) and, where accounting enforces them, the user's association and QOS limits
(``sacctmgr``). :func:`ask_site` asks them once before a sweep; the parsers are tested on captured outputs."""

from __future__ import annotations

import getpass
import re
import shutil
import subprocess
import time
from dataclasses import dataclass, field

from ddlio.jobstates import Runner, run_command


def parse_minutes(text: str) -> float | None:
    """A Slurm time limit in minutes (``5``, ``30:00`` m:s, ``1:00:00``, ``2-00:00:00``, ``1-12``); None for
    ``UNLIMITED``/``INFINITE``/empty."""
    t = text.strip()
    if not t or t.upper() in ("UNLIMITED", "INFINITE", "NONE", "N/A"):
        return None
    days = 0
    if "-" in t:
        d, _, t = t.partition("-")
        days = int(d)
        parts = [int(x) for x in t.split(":")]
        h, m, s = [*parts, 0, 0, 0][:3]
    else:
        parts = [int(x) for x in t.split(":")]
        if len(parts) == 1:
            return float(parts[0])
        h, m, s = [0, *parts][-3:] if len(parts) == 2 else parts[:3]
    return days * 1440 + h * 60 + m + s / 60


def _kv(line: str) -> dict[str, str]:
    """``Key=Value Key2=Value2`` (scontrol -o) -> dict; values never contain spaces there."""
    out = {}
    for tok in line.split():
        k, sep, v = tok.partition("=")
        if sep:
            out[k] = v
    return out


@dataclass(frozen=True)
class Partition:
    """What limits a job in one partition (``scontrol show partition -o`` + ``sinfo``). None = no limit."""

    name: str
    default: bool
    state: str
    total_nodes: int
    max_nodes: int | None
    max_time_min: float | None
    max_cpus_per_node: int | None
    cpus_per_node: tuple[int, ...] = ()  # CPUs of each node of the partition (sinfo)
    features: tuple[frozenset[str], ...] = ()  # each node's features (sinfo %f), for --constraint
    hosts: tuple[str, ...] = ()  # each node's host name (sinfo %n, NodeHostname); () where sinfo did not say
    allow_accounts: tuple[str, ...] = ()  # () = all
    deny_accounts: tuple[str, ...] = ()
    allow_qos: tuple[str, ...] = ()
    deny_qos: tuple[str, ...] = ()


def _limit(v: str | None) -> int | None:
    return int(v) if v and v.isdigit() else None


def _names(v: str | None) -> tuple[str, ...]:
    return () if not v or v.upper() in ("ALL", "(NULL)") else tuple(x for x in v.split(",") if x)


def parse_partitions(scontrol_text: str, sinfo_text: str = "") -> dict[str, Partition]:
    """``scontrol show partition -o`` (+ ``sinfo -h -N -o '%N|%P|%c|%T|%f|%n'`` for each node's CPUs, features
    and host name) -> partitions."""
    cpus: dict[str, dict[str, int]] = {}
    feats: dict[str, dict[str, frozenset[str]]] = {}
    hosts: dict[str, dict[str, str]] = {}
    for line in sinfo_text.splitlines():
        cols = line.split("|")
        if len(cols) >= 3 and cols[2].strip().isdigit():
            part = cols[1].strip().rstrip("*")
            cpus.setdefault(part, {})[cols[0].strip()] = int(cols[2])
            if len(cols) >= 5:
                feats.setdefault(part, {})[cols[0].strip()] = frozenset(
                    f for f in cols[4].strip().split(",") if f and f != "(null)")
            if len(cols) >= 6 and cols[5].strip():
                hosts.setdefault(part, {})[cols[0].strip()] = cols[5].strip()
    out = {}
    for line in scontrol_text.splitlines():
        kv = _kv(line)
        name = kv.get("PartitionName")
        if not name:
            continue
        out[name] = Partition(
            name=name,
            default=kv.get("Default") == "YES",
            state=kv.get("State", "UP"),
            total_nodes=int(kv.get("TotalNodes") or 0),
            max_nodes=_limit(kv.get("MaxNodes")),
            max_time_min=parse_minutes(kv.get("MaxTime", "")),
            max_cpus_per_node=_limit(kv.get("MaxCPUsPerNode")),
            cpus_per_node=tuple(sorted(cpus.get(name, {}).values(), reverse=True)),
            features=tuple(feats[name][n] for n in sorted(feats[name])) if name in feats else (),
            hosts=tuple(hosts[name][n] for n in sorted(hosts[name])) if name in hosts else (),
            allow_accounts=_names(kv.get("AllowAccounts")),
            deny_accounts=_names(kv.get("DenyAccounts")),
            allow_qos=_names(kv.get("AllowQos")),
            deny_qos=_names(kv.get("DenyQos")),
        )
    return out


def parse_config(text: str) -> dict[str, str]:
    """``scontrol show config`` -> ``{"MaxArraySize": "1001", ...}``."""
    out = {}
    for line in text.splitlines():
        k, sep, v = line.partition("=")
        if sep and k.strip() and " " not in k.strip():
            out[k.strip()] = v.strip()
    return out


def max_array_size(config: dict[str, str], fallback: int = 1001) -> int:
    """Slurm's MaxArraySize: array indexes run from 0 to MaxArraySize - 1."""
    v = config.get("MaxArraySize", "")
    return int(v) if v.isdigit() and int(v) > 0 else fallback


@dataclass(frozen=True)
class Limits:
    """A user's association and QOS limits that bound one job (``sacctmgr -P``): None = no limit."""

    accounts: tuple[str, ...] = ()  # the accounts the user has associations with
    default_account: str = ""
    qos_allowed: dict[str, tuple[str, ...]] = field(default_factory=dict)  # account -> QOS names
    max_nodes: dict[str, int] = field(default_factory=dict)  # account -> MaxTRES node= per job
    max_wall_min: dict[str, float] = field(default_factory=dict)  # account -> MaxWall
    qos_max_nodes: dict[str, int] = field(default_factory=dict)  # qos -> MaxTRES node= per job
    qos_max_wall_min: dict[str, float] = field(default_factory=dict)  # qos -> MaxWall
    qos_names: tuple[str, ...] = ()


def _tres(text: str, key: str) -> int | None:
    m = re.search(rf"(?:^|,){key}=(\d+)", text or "")
    return int(m.group(1)) if m else None


def parse_limits(assoc_text: str, qos_text: str, default_account: str = "") -> Limits:
    """``sacctmgr -n -P show assoc where user=U format=Account,Partition,QOS,MaxTRES,MaxWall`` and
    ``sacctmgr -n -P show qos format=Name,MaxTRES,MaxWall`` -> :class:`Limits`."""
    accounts: list[str] = []
    qos_allowed: dict[str, tuple[str, ...]] = {}
    max_nodes: dict[str, int] = {}
    max_wall: dict[str, float] = {}
    for line in assoc_text.splitlines():
        cols = (line.split("|") + [""] * 5)[:5]
        acct = cols[0].strip()
        if not acct:
            continue
        accounts.append(acct)
        qos_allowed[acct] = tuple(sorted(set(qos_allowed.get(acct, ())) | set(_names(cols[2]))))
        n = _tres(cols[3], "node")
        if n is not None:
            max_nodes[acct] = n
        w = parse_minutes(cols[4])
        if w is not None:
            max_wall[acct] = w
    qmax_nodes: dict[str, int] = {}
    qmax_wall: dict[str, float] = {}
    names = []
    for line in qos_text.splitlines():
        cols = (line.split("|") + [""] * 3)[:3]
        name = cols[0].strip()
        if not name:
            continue
        names.append(name)
        n = _tres(cols[1], "node")
        if n is not None:
            qmax_nodes[name] = n
        w = parse_minutes(cols[2])
        if w is not None:
            qmax_wall[name] = w
    return Limits(tuple(dict.fromkeys(accounts)), default_account, qos_allowed, max_nodes, max_wall, qmax_nodes,
                  qmax_wall, tuple(names))


@dataclass(frozen=True)
class SiteInfo:
    """What Slurm said about the site before a sweep: partitions, configuration, and (where accounting enforces
    them) the user's limits. ``error`` says why Slurm could not be asked ("" when it answered)."""

    partitions: dict[str, Partition] = field(default_factory=dict)
    config: dict[str, str] = field(default_factory=dict)
    limits: Limits | None = None
    error: str = ""

    @property
    def max_array_size(self) -> int:
        return max_array_size(self.config)

    def partition(self, name: str) -> Partition | None:
        if name:
            return self.partitions.get(name)
        return next((p for p in self.partitions.values() if p.default), None)


def ask_site(timeout_s: float = 20, run: Runner = run_command) -> SiteInfo:
    """Ask Slurm (scontrol, sinfo, and sacctmgr where limits are enforced) what bounds a job here."""
    if shutil.which("scontrol") is None:
        return SiteInfo(error="no scontrol on PATH")
    try:
        part = run(["scontrol", "show", "partition", "-o"], timeout_s)
        conf = run(["scontrol", "show", "config"], timeout_s)
        nodes = run(["sinfo", "-h", "-N", "-o", "%N|%P|%c|%T|%f|%n"], timeout_s) if shutil.which("sinfo") else None
    except (subprocess.TimeoutExpired, OSError) as e:
        return SiteInfo(error=f"scontrol did not answer ({type(e).__name__})")
    if part.returncode != 0:
        return SiteInfo(error=f"scontrol show partition: {part.stderr.strip() or f'exit {part.returncode}'}")
    config = parse_config(conf.stdout) if conf.returncode == 0 else {}
    partitions = parse_partitions(part.stdout, nodes.stdout if nodes is not None and nodes.returncode == 0 else "")
    enforce = config.get("AccountingStorageEnforce", "none")
    enforced = any(w in enforce for w in ("associations", "limits", "qos"))
    limits = ask_limits(timeout_s, run) if enforced and shutil.which("sacctmgr") else None
    return SiteInfo(partitions, config, limits)


def ask_limits(timeout_s: float = 20, run: Runner = run_command) -> Limits | None:
    """The user's association and QOS limits (``sacctmgr``); None when sacctmgr does not answer."""
    user = getpass.getuser()
    try:
        a = run(["sacctmgr", "-n", "-P", "show", "assoc", "where", f"user={user}",
                 "format=Account,Partition,QOS,MaxTRES,MaxWall"], timeout_s)
        q = run(["sacctmgr", "-n", "-P", "show", "qos", "format=Name,MaxTRES,MaxWall"], timeout_s)
        u = run(["sacctmgr", "-n", "-P", "show", "user", user, "format=DefaultAccount"], timeout_s)
    except (subprocess.TimeoutExpired, OSError):
        return None
    if a.returncode != 0 or q.returncode != 0:
        return None
    return parse_limits(a.stdout, q.stdout, u.stdout.strip().splitlines()[0] if u.stdout.strip() else "")


#: how long :func:`site_answer` reuses Slurm's answer (seconds): a sweep's checks, dry run and submission ask once
SITE_ANSWER_TTL_S = 60.0
_answer: tuple[float, SiteInfo] | None = None


def site_answer() -> SiteInfo:
    """:func:`ask_site`'s answer, asked at most once a minute in this process: the checks before a sweep, its dry
    run and its submission read the same answer (where the controller does not answer, each ask waits out
    scontrol's own timeouts)."""
    global _answer
    now = time.monotonic()
    if _answer is None or now - _answer[0] > SITE_ANSWER_TTL_S:
        _answer = (now, ask_site())
    return _answer[1]

