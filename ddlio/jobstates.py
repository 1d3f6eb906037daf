"""What a scheduler (Slurm) says of its jobs, read in one place.

- **Job states.** :data:`STATES` is the one table of Slurm's job states and their :class:`Kind`: every list of
  states (:data:`TERMINAL`, :data:`WAITING`, :data:`STARTING`, :data:`RUNNING`) is derived from it, so a new
  scheduler state is one line there.
- **Polling.** :class:`JobWatcher` asks ``squeue`` once per poll for every watched job (its pending reason too),
  and ``sacct`` once for the jobs ``squeue`` no longer lists (ended ones). Both print array jobs in Slurm's
  notation (``123_[4-35%4]``, ``123_7``, ``123_[1,3-5]``): a pending array's tasks are one line, expanded here.
  A job is gone (``VANISHED``) only when both deny it for ``vanish_after_s`` seconds; a queued job stays queued
  however long it waits.
- **Pending reasons.** :data:`REASONS` sorts every reason Slurm gives a pending job into what it means for the
  sweep: it waits (the scheduler will get to it), it is held by a limit that clears as other jobs end, it is held on
  purpose, or it can never start without an administrator (the request is above a limit of the partition, account
  or QOS).

Parsers take the commands' text and are tested on outputs captured from a real cluster (tests/fixtures/slurm/).
"""

from __future__ import annotations

import math
import subprocess
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from enum import Enum


class Kind(str, Enum):
    """What a job state means for whoever waits on the job."""

    #: nothing more will happen to the job
    TERMINAL = "terminal"
    #: the job has not started (or waits to start again); it may have a pending reason
    WAITING = "waiting"
    #: the job has its nodes, which are being readied (booted, configured); its script has not started
    STARTING = "starting"
    #: the job's script runs (or is being wound down)
    RUNNING = "running"


#: Every Slurm job state (squeue %T / sacct State, without suffixes) -> its kind: the one table.
STATES: dict[str, Kind] = {
    "PENDING": Kind.WAITING,
    "REQUEUED": Kind.WAITING,
    "REQUEUE_HOLD": Kind.WAITING,
    "REQUEUE_FED": Kind.WAITING,
    "RESV_DEL_HOLD": Kind.WAITING,
    "RESIZING": Kind.WAITING,
    "SUSPENDED": Kind.WAITING,  # its CPUs were given back: it waits to be resumed
    "CONFIGURING": Kind.STARTING,
    "RUNNING": Kind.RUNNING,
    "STOPPED": Kind.RUNNING,  # SIGSTOPped, keeping its CPUs
    "SIGNALING": Kind.RUNNING,
    "STAGE_OUT": Kind.RUNNING,
    "COMPLETING": Kind.RUNNING,
    "COMPLETED": Kind.TERMINAL,
    "FAILED": Kind.TERMINAL,
    "TIMEOUT": Kind.TERMINAL,
    "CANCELLED": Kind.TERMINAL,
    "PREEMPTED": Kind.TERMINAL,  # jobs go out with --no-requeue
    "NODE_FAIL": Kind.TERMINAL,
    "OUT_OF_MEMORY": Kind.TERMINAL,
    "BOOT_FAIL": Kind.TERMINAL,
    "DEADLINE": Kind.TERMINAL,
    "REVOKED": Kind.TERMINAL,
    "SPECIAL_EXIT": Kind.TERMINAL,
}


def states_of(*kinds: Kind) -> frozenset[str]:
    """The states of :data:`STATES` whose kind is one of ``kinds``."""
    return frozenset(s for s, k in STATES.items() if k in kinds)


#: Slurm job states after which nothing more will happen to a job
TERMINAL = states_of(Kind.TERMINAL)
#: states of a job whose script has not started (or waits to start again): waiting or starting
WAITING = states_of(Kind.WAITING, Kind.STARTING)
#: states of a job whose nodes are being readied
STARTING = states_of(Kind.STARTING)
#: states of a job whose script runs
RUNNING = states_of(Kind.RUNNING)
#: the state given to a job that neither squeue nor sacct has known for ``vanish_after_s`` seconds
VANISHED = "VANISHED"
#: the state of a job no source has answered for yet (a fresh submission, or both sources failed)
UNKNOWN = "UNKNOWN"


def state_kind(state: str) -> Kind | None:
    """The kind of a Slurm job state; None for a word the table does not hold (``UNKNOWN``, ``VANISHED``)."""
    return STATES.get(state)


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


def run_command(argv: list[str], timeout_s: float) -> subprocess.CompletedProcess[str]:
    """Run a Slurm command (timeout in seconds) and return its answer, text and exit code, whatever it is."""
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
    run: Runner = run_command
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




def fmt_duration(seconds: float) -> str:
    """A wait, coarse enough that a progress line repeats only when it changes: ``<1 min``, ``7 min``, ``2.5 h``."""
    if seconds < 60:
        return "<1 min"
    if seconds < 5400:
        return f"{int(seconds // 60)} min"
    return f"{seconds / 3600:.1f} h"
