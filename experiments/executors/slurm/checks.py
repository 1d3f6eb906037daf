"""Before submitting: refuse the Slurm points whose job could never start at this site (a request above a limit of
the partition, the user's association or QOS), and recognise sbatch's refusals that only mean "later"."""

from __future__ import annotations

import getpass
import math
import re
import shutil
import socket
from collections.abc import Sequence
from typing import Any

from ddlio.errors import LaunchError
from experiments.executors.slurm.site import Limits, Partition, SiteInfo, site_answer


def point_problems(spec: Any, site: SiteInfo) -> list[str]:
    """Why a point's job could never start here (empty when it could): each names the request and the limit."""
    name = spec.cluster.partition
    part = site.partition(name)
    if part is None:
        if name:
            return [f"partition {name} does not exist (partitions: {', '.join(sorted(site.partitions))})"]
        return []  # no default partition: sbatch will say so
    out = (_size_problems(spec, part) + _constraint_problems(spec, part) + _access_problems(spec, part)
           + _shared_data_problems(spec, part))
    if site.limits is not None:
        out += _limit_problems(spec, site.limits)
    return out


#: file-system types that only the node holding them can read (statfs names, lustre.fs)
NODE_LOCAL_FS = frozenset({"ext2", "ext3", "ext4", "xfs", "btrfs", "tmpfs", "ramfs", "overlay", "zfs", "f2fs"})


def _same_host(a: str, b: str) -> bool:
    return a.split(".")[0] == b.split(".")[0]


def _shared_data_problems(spec: Any, part: Partition) -> list[str]:
    """A point of several nodes whose ``data_root`` is on a node-local file system (ext4, xfs, tmpfs, ...): the
    other nodes would read a disk they do not have. Where every node of the partition is this host (a one-box
    test cluster) the disk is shared after all; where sinfo named no hosts, nothing is said."""
    if int(spec.nodes) <= 1 or not part.hosts:
        return []
    here = socket.gethostname()
    if all(_same_host(h, here) for h in part.hosts):
        return []
    from lustre import fs_info  # lazy: statfs of data_root only for multi-node points

    fs = fs_info(spec.data_root)
    if fs.type not in NODE_LOCAL_FS:
        return []
    return [f"nodes={int(spec.nodes)} but data_root={spec.data_root} is on {fs.type} at {fs.mount_point}, local "
            f"to this node: the other nodes cannot read it (put data_root on a file system every node mounts: "
            f"Lustre, CephFS, GPFS, NFS)"]


def _minutes(spec: Any) -> int:
    """The job's time limit as sbatch gets it, in whole minutes (at least 1)."""
    return max(1, math.ceil(float(spec.cluster.timeout_min)))


def _size_problems(spec: Any, part: Partition) -> list[str]:
    """The partition's state, node count, CPUs per node and MaxTime against the point's nodes, ppn and time."""
    out = []
    nodes, ppn = int(spec.nodes), int(spec.ppn)
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
    if part.max_time_min is not None and _minutes(spec) > part.max_time_min:
        out.append(f"cluster.timeout_min={float(spec.cluster.timeout_min):g} but partition {part.name} allows at "
                   f"most {part.max_time_min:g} min (MaxTime)")
    return out


def _constraint_problems(spec: Any, part: Partition) -> list[str]:
    """A ``--constraint`` (a plain AND of features) that too few nodes of the partition meet."""
    constraint = spec.cluster.constraint
    if not (constraint and part.features and re.fullmatch(r"[\w.-]+(&[\w.-]+)*", constraint)):
        return []
    want = set(constraint.split("&"))
    fit = sum(1 for f in part.features if want <= f)
    if fit and fit >= min(int(spec.nodes), len(part.features)):
        return []
    have = sorted(set().union(*part.features))
    return [f"constraint={constraint} but {'no' if not fit else f'only {fit}'} node(s) of partition "
            f"{part.name} have {' and '.join(sorted(want))} (features: {', '.join(have) or 'none'})"]


def _access_problems(spec: Any, part: Partition) -> list[str]:
    """An account or QOS the partition denies (or does not allow)."""
    out = []
    acct, qos = spec.cluster.account, spec.cluster.qos
    if acct and (acct in part.deny_accounts or (part.allow_accounts and acct not in part.allow_accounts)):
        out.append(f"account={acct} is not allowed in partition {part.name}")
    if qos and (qos in part.deny_qos or (part.allow_qos and qos not in part.allow_qos)):
        out.append(f"qos={qos} is not allowed in partition {part.name}")
    return out


def _limit_problems(spec: Any, lim: Limits) -> list[str]:
    """The user's accounts and QOS, and their per-job node and wall-time limits (``sacctmgr``)."""
    c = spec.cluster
    acct, qos = c.account, c.qos
    nodes, minutes = int(spec.nodes), _minutes(spec)
    use = acct or lim.default_account
    out = []
    if acct and acct not in lim.accounts:
        out.append(f"account={acct} but user {getpass.getuser()} may use only: {', '.join(lim.accounts) or 'none'}")
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


def check_available() -> None:
    """Raise a LaunchError naming what is missing when this machine cannot submit Slurm jobs."""
    missing = [c for c in ("sbatch", "sacct", "scancel") if shutil.which(c) is None]
    if "sbatch" in missing:
        raise LaunchError(
            "cluster=slurm needs Slurm's commands, but 'sbatch' is not on PATH: run the sweep on a cluster's login "
            "node (or load the site's slurm module); for a test cluster on this machine: tests/cluster/slurm.sh start"
        )


def check_runnable(specs: list[Any], echo: Any = print, dry_run: bool = False) -> str:
    """Refuse, before anything is submitted, Slurm points whose job could never start here: more nodes than the
    partition has, more ranks per node than its nodes' CPUs, a time limit above its MaxTime, a partition, account
    or QOS the user may not use, a per-job limit of the user's association or QOS. Raises one LaunchError naming
    each point, its request and the limit (with ``dry_run``, returns its message instead, so the plan is still
    shown). Where Slurm cannot be asked, says so and checks nothing."""
    slurm = [s for s in specs if s.cluster.executor == "slurm"]
    if not slurm:
        return ""
    site = site_answer()
    if site.error:
        echo(f"note: could not ask Slurm ({site.error}): the points were not checked against the partition's "
             "limits")
        return ""
    problems = unrunnable(slurm, site)
    if problems:
        shown = problems[:9] + ([f"... and {len(problems) - 9} more"] if len(problems) > 9 else [])
        message = ("some points can never start on this cluster; nothing was submitted:\n"
                   + "\n".join(f"  - {p}" for p in shown)
                   + "\nlower nodes, ppn or cluster.timeout_min, or choose another cluster.partition "
                   "(sinfo lists them)")
        if dry_run:
            return message
        raise LaunchError(message)
    if dry_run:
        echo(_fits_line(slurm, site))
    return ""


def _fits_line(slurm: list[Any], site: SiteInfo) -> str:
    """``Slurm: every point fits partition debug (2 nodes, 4 CPUs per node, MaxTime 60 min, UP); ...``."""
    parts = [site.partition(n) for n in sorted({s.cluster.partition for s in slurm})]
    return "Slurm: every point fits " + ", ".join(
        f"partition {p.name} ({p.total_nodes} nodes, {max(p.cpus_per_node, default=0)} CPUs per node, "
        f"MaxTime {'unlimited' if p.max_time_min is None else f'{p.max_time_min:g} min'}, {p.state})"
        for p in parts if p is not None) + f"; arrays split below MaxArraySize {site.max_array_size}"
