"""What Slurm says about jobs and partitions, read in one place.

- **Job states.** :class:`JobWatcher` asks ``squeue`` once per poll for every watched job (its pending reason too),
  and ``sacct`` once for the jobs ``squeue`` no longer lists (ended ones). Both print array jobs in Slurm's
  notation (``123_[4-35%4]``, ``123_7``, ``123_[1,3-5]``): a pending array's tasks are one line, expanded here.
  A job is gone (``VANISHED``) only when both deny it for ``vanish_after_s`` seconds; a queued job stays queued
  however long it waits.
- **Pending reasons.** :data:`REASONS` sorts every reason Slurm gives a pending job into what it means for the
  sweep: it waits (the scheduler will get to it), it is held by a limit that clears as other jobs end, it is held on
  purpose, or it can never start without an administrator (the request is above a limit of the partition, account
  or QOS).
- **Before submitting.** :func:`check_points` compares each point's request with the target partition
  (``scontrol show partition``, ``sinfo``) and, where accounting enforces them, the user's associations and QOS
  (``sacctmgr``): a point that can never start is refused before anything is submitted.

Parsers take the commands' text and are tested on outputs captured from a real cluster (tests/fixtures/slurm/).
"""

from __future__ import annotations

import getpass
import math
import re
import shutil
import subprocess
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

#: Slurm job states after which nothing more will happen to a job
TERMINAL = frozenset({
    "COMPLETED", "FAILED", "TIMEOUT", "CANCELLED", "PREEMPTED", "NODE_FAIL", "OUT_OF_MEMORY", "BOOT_FAIL",
    "DEADLINE", "REVOKED", "SPECIAL_EXIT",
})
#: states of a job that has not started (or waits to start again)
WAITING = frozenset({"PENDING", "REQUEUED", "RESIZING", "SUSPENDED", "REQUEUE_HOLD", "REQUEUE_FED"})
#: the state given to a job that neither squeue nor sacct has known for ``vanish_after_s`` seconds
VANISHED = "VANISHED"
#: the state of a job no source has answered for yet (a fresh submission, or both sources failed)
UNKNOWN = "UNKNOWN"

SQUEUE_FORMAT = "%i|%T|%r"
SACCT_FIELDS = "JobID,State,ExitCode,Reason"

# ------------------------------------------------------------------------------------------ pending reasons
#: the scheduler will start the job when its turn comes (priority, free nodes, a dependency, maintenance)
WAITS = "waits"
#: a site limit on the user's, account's or QOS's jobs holds it; it clears as other jobs end
LIMIT = "held by a limit"
#: held on purpose (``scontrol hold``); a person releases it
HELD = "held"
#: above a limit of the partition, account or QOS, or not allowed there: only an administrator can change that
NEVER = "never (admin only)"

#: pending reason (squeue %r) -> what it means for the sweep. Reasons not listed are classified by
#: :func:`reason_kind` from their shape, and otherwise taken as waits (never cancelled on a guess).
REASONS: dict[str, str] = {
    **dict.fromkeys((
        "None", "Priority", "Resources", "Dependency", "BeginTime", "JobArrayTaskLimit", "ReqNodeNotAvail",
        "NodeDown", "PartitionDown", "FrontEndDown", "Licenses", "Reservation", "Prolog", "Cleaning",
        "Nodes_required_for_job_are_DOWN,_DRAINED_or_reserved_for_jobs_in_higher_priority_partitions",
        "PowerUpNodes", "Scheduling", "resources", "ReqNodeNotAvail,_Reserved_for_maintenance",
    ), WAITS),
    **dict.fromkeys((
        "QOSMaxJobsPerUserLimit", "QOSMaxJobsPerAccountLimit", "AssocMaxJobsLimit", "AssocGrpJobsLimit",
        "QOSGrpJobsLimit", "QOSMaxSubmitJobPerUserLimit", "AssocMaxSubmitJobLimit", "AssocGrpSubmitJobsLimit",
        "QOSGrpSubmitJobsLimit", "QOSMaxCpuPerUserLimit", "QOSMaxNodePerUserLimit", "QOSMaxMemoryPerUser",
        "AssocGrpCpuLimit", "AssocGrpNodeLimit", "AssocGrpMemLimit", "QOSGrpCpuLimit", "QOSGrpNodeLimit",
        "QOSGrpMemLimit", "QOSResourceLimit", "AssociationResourceLimit", "AssociationJobLimit", "QOSJobLimit",
        "MaxJobsPerUser", "MaxSubmitJobs",
    ), LIMIT),
    **dict.fromkeys(("JobHeldUser", "JobHeldAdmin", "launch_failed_requeued_held", "SystemFailure"), HELD),
    **dict.fromkeys((
        "PartitionNodeLimit", "PartitionTimeLimit", "PartitionConfig", "PartitionInactive",
        "AssocMaxNodesPerJobLimit", "AssocMaxCpuPerJobLimit", "AssocMaxWallDurationPerJobLimit",
        "AssocMaxMemPerJob", "AssocMaxNodesPerJob", "QOSMaxNodePerJobLimit", "QOSMaxCpuPerJobLimit",
        "QOSMaxWallDurationPerJobLimit", "QOSMaxMemoryPerJob", "QOSMinCpuNotSatisfied", "QOSMinNodes",
        "InvalidAccount", "InvalidQOS", "QOSNotAllowed", "AccountNotAllowed", "BadConstraints",
        "DependencyNeverSatisfied",
    ), NEVER),
}


def reason_kind(reason: str) -> str:
    """What a pending reason means for the sweep: :data:`WAITS`, :data:`LIMIT`, :data:`HELD` or :data:`NEVER`.

    ``ReqNodeNotAvail, UnavailableNodes:n2`` waits (a node down for maintenance comes back); a per-job limit of an
    association or QOS (``...PerJob...``, ``...MaxWall...``) never clears by waiting; group and per-user limits do.
    """
    r = reason.strip()
    if r in REASONS:
        return REASONS[r]
    if r.startswith("ReqNodeNotAvail") or r.startswith("Nodes_required"):
        return WAITS
    if r.startswith(("Assoc", "QOS", "Qos")):
        if "PerJob" in r or "MaxWall" in r or "MinCpu" in r or "MinNode" in r or "MinTRES" in r:
            return NEVER
        if "Grp" in r or "PerUser" in r or "PerAccount" in r or "MaxJobs" in r or "MaxSubmit" in r:
            return LIMIT
    if r.startswith("JobHeld"):
        return HELD
    return WAITS


# ----------------------------------------------------------------------------------------------- job states
@dataclass(frozen=True)
class JobState:
    """One job's (or array task's) state as Slurm words it, without suffixes (``CANCELLED by 0`` ->
    ``CANCELLED``), its pending reason ("" when it has none) and the source that said so."""

    state: str
    reason: str = ""
    source: str = ""

    @property
    def kind(self) -> str:
        """:func:`reason_kind` of a pending job's reason; "" for a job that does not wait."""
        return reason_kind(self.reason or "None") if self.state in WAITING else ""


def expand_job_id(text: str) -> list[str]:
    """Every job id that one squeue/sacct job-id field names: ``123`` and ``123_7`` as they are,
    ``123_[4-35%4]`` and ``123_[1,3-5]`` as their tasks (``123_4`` ... ``123_35``). ``123.batch`` (a step) is
    its job ``123``; het-job ids (``123+0``) are left as they are."""
    t = text.strip().split(".", 1)[0]
    base, sep, rest = t.partition("_")
    if not sep or not rest.startswith("["):
        return [t] if t else []
    inner = rest[1:].split("]", 1)[0].split("%", 1)[0]
    out = []
    for part in inner.split(","):
        lo, dash, hi = part.partition("-")
        hi, _, s = hi.partition(":")  # 1-9:2 (a step in the range)
        if not lo.strip().isdigit() or (dash and not hi.strip().isdigit()):
            continue
        step = int(s) if s.isdigit() and int(s) > 0 else 1
        first, last = int(lo), int(hi) if dash else int(lo)
        out += [f"{base}_{i}" for i in range(first, last + 1, step)]
    return out


def normalize_state(text: str) -> str:
    """Slurm's state word alone: ``CANCELLED by 0`` -> ``CANCELLED``, ``COMPLETED+`` -> ``COMPLETED``."""
    words = text.strip().split()
    return words[0].rstrip("+").upper() if words else ""


def _parse(text: str, source: str, reason_col: int) -> dict[str, JobState]:
    out: dict[str, JobState] = {}
    ranged: dict[str, JobState] = {}
    for line in text.splitlines():
        cols = line.split("|")
        if len(cols) <= reason_col or not cols[0].strip():
            continue
        state = normalize_state(cols[1])
        if not state:
            continue
        reason = cols[reason_col].strip()
        js = JobState(state, "" if reason == "None" else reason, source)
        ids = expand_job_id(cols[0])
        # a line of its own beats a range (sacct lists a cancelled array as `1_1` and `1_[1-4%1]`); among equals the
        # later line (a requeued job's newer record) wins
        for jid in ids:
            (ranged if "[" in cols[0] else out)[jid] = js
    return {**ranged, **out}


def parse_squeue(text: str) -> dict[str, JobState]:
    """``squeue -h -o '%i|%T|%r'`` output -> job id -> state (array notation expanded)."""
    return _parse(text, "squeue", 2)


def parse_sacct(text: str) -> dict[str, JobState]:
    """``sacct -n -P -X -o JobID,State,ExitCode,Reason`` output -> job id -> state (array notation expanded;
    with ``--array`` sacct already lists one task per line)."""
    return _parse(text, "sacct", 3)


def _base_ids(job_ids: Iterable[str]) -> list[str]:
    return sorted({str(j).split("_")[0] for j in job_ids})


Runner = Callable[[list[str], float], "subprocess.CompletedProcess[str]"]


def _run(argv: list[str], timeout_s: float) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, capture_output=True, text=True, timeout=timeout_s, check=False)


@dataclass
class JobWatcher:
    """Job states for a driver, with bounded calls: per :meth:`poll`, one ``squeue`` for every job and one
    ``sacct`` for those squeue does not list.

    A job both sources deny (squeue answered without it, sacct answered without it or has no accounting) for
    ``vanish_after_s`` seconds is :data:`VANISHED`; until then it keeps its last known state. A source that fails
    (timeout, error) denies nothing.
    """

    vanish_after_s: float = 120.0
    timeout_s: float = 30.0
    run: Runner = _run
    clock: Callable[[], float] = time.monotonic
    last: dict[str, JobState] = field(default_factory=dict)
    missing_since: dict[str, float] = field(default_factory=dict)
    calls: int = 0
    _sacct_array: bool = True  # sacct --array (Slurm >= 23.02); dropped after the first "unrecognized option"

    def _ask(self, argv: list[str]) -> subprocess.CompletedProcess[str] | None:
        """The command's answer; exit 127 when it is not installed, None when it could not answer (timeout)."""
        self.calls += 1
        try:
            return self.run(argv, self.timeout_s)
        except FileNotFoundError:
            return subprocess.CompletedProcess(argv, 127, "", f"{argv[0]}: command not found")
        except (subprocess.TimeoutExpired, OSError):
            return None

    def squeue(self, job_ids: Iterable[str]) -> dict[str, JobState] | None:
        """squeue's answer for these jobs, or None when it could not be asked."""
        ids = _base_ids(job_ids)
        p = self._ask(["squeue", "-h", "-o", SQUEUE_FORMAT, "-j", ",".join(ids)])
        if p is None or p.returncode == 127:
            return None
        if p.returncode != 0:
            # one unknown id (`-j 5`) is an error; several are not: either way, an answer that lists nothing
            return {} if "Invalid job id" in p.stderr else None
        return parse_squeue(p.stdout)

    def sacct(self, job_ids: Iterable[str]) -> dict[str, JobState] | None:
        """sacct's answer for these jobs; ``{}`` when accounting is off (it denies every job), None on failure."""
        ids = _base_ids(job_ids)
        argv = ["sacct", "-n", "-P", "-X", "-o", SACCT_FIELDS, "-j", ",".join(ids)]
        if self._sacct_array:
            argv.insert(4, "--array")
        p = self._ask(argv)
        if p is not None and p.returncode != 0 and "--array" in p.stderr and self._sacct_array:
            self._sacct_array = False  # Slurm < 23.02: pending array tasks come as one line, expanded here
            return self.sacct(job_ids)
        if p is None:
            return None
        if p.returncode != 0:  # no sacct, or no accounting: it knows no job (squeue alone decides)
            return {} if p.returncode == 127 or "accounting storage is disabled" in p.stderr.lower() else None
        return parse_sacct(p.stdout)

    def poll(self, job_ids: Iterable[str]) -> dict[str, JobState]:
        """The state of every job in ``job_ids`` (``123`` or array task ``123_4``), each always answered:
        :data:`UNKNOWN` when no source has said anything yet, :data:`VANISHED` when both denied it long enough."""
        ids = sorted(set(map(str, job_ids)))
        if not ids:
            return {}
        now = self.clock()
        live = self.squeue(ids)
        rest = [i for i in ids if live is None or i not in live]
        acct = self.sacct(rest) if rest else {}
        out: dict[str, JobState] = {}
        for i in ids:
            js = (live or {}).get(i) or (acct or {}).get(i)
            # squeue lists every job the controller holds; one it does not list that sacct still calls waiting or
            # running (a cancelled requeued job stays REQUEUED there) is denied as much as one sacct never knew
            stale = live is not None and i not in live and (js is None or js.state not in TERMINAL)
            if stale and acct is not None:
                since = self.missing_since.setdefault(i, now)
                if now - since >= self.vanish_after_s:
                    js = JobState(VANISHED, js.state if js else "", "")
            else:
                self.missing_since.pop(i, None)
            if js is not None:
                self.last[i] = js
            out[i] = self.last.get(i, JobState(UNKNOWN))
        return out


def job_states(job_ids: Iterable[str], timeout_s: float = 30) -> dict[str, str]:
    """Current state of each job that squeue or sacct knows (``12345`` or array task ``12345_3``), as Slurm's
    word; a job neither knows is absent from the answer."""
    got = JobWatcher(vanish_after_s=math.inf, timeout_s=timeout_s).poll(job_ids)
    return {i: js.state for i, js in got.items() if js.state != UNKNOWN}


# ------------------------------------------------------------------------------------ partitions and limits
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
    allow_accounts: tuple[str, ...] = ()  # () = all
    deny_accounts: tuple[str, ...] = ()
    allow_qos: tuple[str, ...] = ()
    deny_qos: tuple[str, ...] = ()


def _limit(v: str | None) -> int | None:
    return int(v) if v and v.isdigit() else None


def _names(v: str | None) -> tuple[str, ...]:
    return () if not v or v.upper() in ("ALL", "(NULL)") else tuple(x for x in v.split(",") if x)


def parse_partitions(scontrol_text: str, sinfo_text: str = "") -> dict[str, Partition]:
    """``scontrol show partition -o`` (+ ``sinfo -h -N -o '%N|%P|%c|%T|%f'`` for each node's CPUs and features)
    -> partitions."""
    cpus: dict[str, dict[str, int]] = {}
    feats: dict[str, dict[str, frozenset[str]]] = {}
    for line in sinfo_text.splitlines():
        cols = line.split("|")
        if len(cols) >= 3 and cols[2].strip().isdigit():
            part = cols[1].strip().rstrip("*")
            cpus.setdefault(part, {})[cols[0].strip()] = int(cols[2])
            if len(cols) >= 5:
                feats.setdefault(part, {})[cols[0].strip()] = frozenset(
                    f for f in cols[4].strip().split(",") if f and f != "(null)")
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


def ask_site(timeout_s: float = 20, run: Runner = _run) -> SiteInfo:
    """Ask Slurm (scontrol, sinfo, and sacctmgr where limits are enforced) what bounds a job here."""
    if shutil.which("scontrol") is None:
        return SiteInfo(error="no scontrol on PATH")
    try:
        part = run(["scontrol", "show", "partition", "-o"], timeout_s)
        conf = run(["scontrol", "show", "config"], timeout_s)
        nodes = run(["sinfo", "-h", "-N", "-o", "%N|%P|%c|%T|%f"], timeout_s) if shutil.which("sinfo") else None
    except (subprocess.TimeoutExpired, OSError) as e:
        return SiteInfo(error=f"scontrol did not answer ({type(e).__name__})")
    if part.returncode != 0:
        return SiteInfo(error=f"scontrol show partition: {part.stderr.strip() or f'exit {part.returncode}'}")
    config = parse_config(conf.stdout) if conf.returncode == 0 else {}
    partitions = parse_partitions(part.stdout, nodes.stdout if nodes is not None and nodes.returncode == 0 else "")
    limits = None
    enforce = config.get("AccountingStorageEnforce", "none")
    if shutil.which("sacctmgr") and any(w in enforce for w in ("associations", "limits", "qos")):
        user = getpass.getuser()
        try:
            a = run(["sacctmgr", "-n", "-P", "show", "assoc", "where", f"user={user}",
                     "format=Account,Partition,QOS,MaxTRES,MaxWall"], timeout_s)
            q = run(["sacctmgr", "-n", "-P", "show", "qos", "format=Name,MaxTRES,MaxWall"], timeout_s)
            u = run(["sacctmgr", "-n", "-P", "show", "user", user, "format=DefaultAccount"], timeout_s)
        except (subprocess.TimeoutExpired, OSError):
            a = q = u = None
        if a is not None and q is not None and u is not None and a.returncode == 0 and q.returncode == 0:
            limits = parse_limits(a.stdout, q.stdout, u.stdout.strip().splitlines()[0] if u.stdout.strip() else "")
    return SiteInfo(partitions, config, limits)


def point_problems(spec: Any, site: SiteInfo) -> list[str]:
    """Why a point's job could never start here (empty when it could): each names the request and the limit."""
    c = spec.cluster
    name = c.partition
    part = site.partition(name)
    if part is None:
        if name:
            return [f"partition {name} does not exist (partitions: {', '.join(sorted(site.partitions))})"]
        return []  # no default partition: sbatch will say so
    out = []
    nodes, ppn = int(spec.nodes), int(spec.ppn)
    minutes = max(1, math.ceil(float(c.timeout_min)))
    if part.state.upper() in ("INACTIVE", "DRAIN"):
        out.append(f"partition {part.name} is {part.state} (it takes no new jobs)")
    if part.total_nodes and nodes > part.total_nodes:
        out.append(f"nodes={nodes} but partition {part.name} has {part.total_nodes} node"
                   f"{'s' if part.total_nodes != 1 else ''}")
    elif part.max_nodes is not None and nodes > part.max_nodes:
        out.append(f"nodes={nodes} but partition {part.name} allows at most {part.max_nodes} (MaxNodes)")
    if part.cpus_per_node:
        enough = [n for n in part.cpus_per_node if n >= ppn]
        if not enough:
            out.append(f"ppn={ppn} (1 CPU per rank) but the nodes of partition {part.name} have at most "
                       f"{part.cpus_per_node[0]} CPUs")
        elif len(enough) < nodes <= len(part.cpus_per_node):
            out.append(f"nodes={nodes} x ppn={ppn} but only {len(enough)} node(s) of partition {part.name} have "
                       f"{ppn} CPUs")
    if part.max_cpus_per_node is not None and ppn > part.max_cpus_per_node:
        out.append(f"ppn={ppn} but partition {part.name} allows {part.max_cpus_per_node} CPUs per node "
                   "(MaxCPUsPerNode)")
    if part.max_time_min is not None and minutes > part.max_time_min:
        out.append(f"cluster.timeout_min={float(c.timeout_min):g} but partition {part.name} allows at most "
                   f"{part.max_time_min:g} min (MaxTime)")
    constraint = c.constraint
    if constraint and part.features and re.fullmatch(r"[\w.-]+(&[\w.-]+)*", constraint):  # plain AND of features
        want = set(constraint.split("&"))
        fit = sum(1 for f in part.features if want <= f)
        have = sorted(set().union(*part.features))
        if fit < min(nodes, len(part.features)) or not fit:
            out.append(f"constraint={constraint} but {'no' if not fit else f'only {fit}'} node(s) of partition "
                       f"{part.name} have {' and '.join(sorted(want))} (features: {', '.join(have) or 'none'})")
    acct, qos = c.account, c.qos
    if acct and (acct in part.deny_accounts or (part.allow_accounts and acct not in part.allow_accounts)):
        out.append(f"account={acct} is not allowed in partition {part.name}")
    if qos and (qos in part.deny_qos or (part.allow_qos and qos not in part.allow_qos)):
        out.append(f"qos={qos} is not allowed in partition {part.name}")
    lim = site.limits
    if lim is not None:
        user = getpass.getuser()
        use = acct or lim.default_account
        if acct and acct not in lim.accounts:
            out.append(f"account={acct} but user {user} may use only: {', '.join(lim.accounts) or 'none'}")
        elif use:
            if qos and lim.qos_names and qos not in lim.qos_names:
                out.append(f"qos={qos} does not exist (QOS: {', '.join(lim.qos_names)})")
            elif qos and lim.qos_allowed.get(use) and qos not in lim.qos_allowed[use]:
                out.append(f"qos={qos} but account {use} may use only: {', '.join(lim.qos_allowed[use])}")
            if use in lim.max_nodes and nodes > lim.max_nodes[use]:
                out.append(f"nodes={nodes} but account {use} allows {lim.max_nodes[use]} per job (MaxTRES node)")
            if use in lim.max_wall_min and minutes > lim.max_wall_min[use]:
                out.append(f"cluster.timeout_min={float(c.timeout_min):g} but account {use} allows at most "
                           f"{lim.max_wall_min[use]:g} min (MaxWall)")
        q = qos or next(iter(lim.qos_allowed.get(use, ())), "")
        if q in lim.qos_max_nodes and nodes > lim.qos_max_nodes[q]:
            out.append(f"nodes={nodes} but QOS {q} allows {lim.qos_max_nodes[q]} per job (MaxTRES node)")
        if q in lim.qos_max_wall_min and minutes > lim.qos_max_wall_min[q]:
            out.append(f"cluster.timeout_min={float(c.timeout_min):g} but QOS {q} allows at most "
                       f"{lim.qos_max_wall_min[q]:g} min (MaxWall)")
    return out


def unrunnable(specs: Sequence[Any], site: SiteInfo) -> list[str]:
    """One line per distinct reason a Slurm point can never start, with the points it concerns."""
    seen: dict[str, list[str]] = {}
    for s in specs:
        if s.cluster.executor != "slurm":
            continue
        name = " ".join(o for o in s.overrides if not o.startswith(("data_root=", "db="))) or "defaults"
        for p in point_problems(s, site):
            seen.setdefault(p, []).append(name)
    lines = []
    for problem, where in seen.items():
        more = f" and {len(where) - 2} more" if len(where) > 2 else ""
        lines.append(f"{problem}  [point{'s' if len(where) > 1 else ''}: {'; '.join(where[:2])}{more}]")
    return lines


# -------------------------------------------------------------------------------------------- sbatch refusals
#: what sbatch prints when a limit that frees up as jobs end refuses a submission
_SUBMIT_LIMIT = re.compile(
    r"MaxSubmitJob|MaxSubmit|SubmitJobsLimit|SubmitJobPerUser|job submit limit|MaxJobsPerUser|AssocMaxJobsLimit|"
    r"QOSMaxJobsPerUser|Maximum number of jobs|MaxJobCount|too many jobs",
    re.IGNORECASE,
)


def is_submit_limit(message: str) -> bool:
    """Whether sbatch refused a job for a limit that clears as other jobs end (submit or job count), so the point
    should wait and be submitted later, not fail."""
    return bool(_SUBMIT_LIMIT.search(message))


def fmt_duration(seconds: float) -> str:
    """A wait, coarse enough that a progress line repeats only when it changes: ``<1 min``, ``7 min``, ``2.5 h``."""
    if seconds < 60:
        return "<1 min"
    if seconds < 5400:
        return f"{int(seconds // 60)} min"
    return f"{seconds / 3600:.1f} h"
