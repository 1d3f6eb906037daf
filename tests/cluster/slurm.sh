#!/usr/bin/env bash
# A real Slurm 22.05 cluster on this one Debian 12 machine, without systemd, for ddlio's `slurm` tests and CI:
# munged, MariaDB, slurmdbd (so sacct works), slurmctld, and N slurmd posing as nodes n1..nN on this host.
#
#   bash tests/cluster/slurm.sh start    install what is missing (Debian packages), start, wait until healthy;
#                                        a no-op (exit 0) when this base's cluster is already up and healthy
#   bash tests/cluster/slurm.sh status   exit 0 only if slurmctld answers, accounting answers and every node is
#                                        idle, mixed or allocated
#   bash tests/cluster/slurm.sh stop     end only the daemons this script started (PIDs recorded under the base)
#   bash tests/cluster/slurm.sh restart
#
# Env: SLURM_BASE (default ${TMPDIR:-/tmp}/ddlio-slurm-ci: state, logs, PIDs, the database), SLURM_NODES=2,
#      SLURM_CPUS=4 (per node, may exceed the real cores), SLURM_PARTITION=debug, KEEP_STATE=0 (1: keep job state
#      and accounting across a restart). Needs root. See tests/cluster/README.md for the pitfalls handled here.
set -euo pipefail

N=${SLURM_NODES:-2}
CPUS=${SLURM_CPUS:-4}
PART=${SLURM_PARTITION:-debug}
KEEP=${KEEP_STATE:-0}
B=${SLURM_BASE:-${TMPDIR:-/tmp}/ddlio-slurm-ci}
R=$B/run
H=$(hostname -s)
CONF=/etc/slurm
LIBMPI=/usr/lib/x86_64-linux-gnu/libmpi.so.40
PKGS="slurm-wlm slurmdbd munge mariadb-server openmpi-bin libpmix-dev"

# shellcheck source=tests/cluster/lib.sh
. "$(dirname "$0")/lib.sh"
# start a self-daemonizing program: no terminal/pipe kept open, and not the lock (fd 9)
daemon() { "$@" </dev/null >>"$B/log/daemons.out" 2>&1 9>&-; }
nodes() { seq -f "n%g" 1 "$N"; }

# ---------------------------------------------------------------- health
ctld_up() { timeout 5 scontrol ping 2>/dev/null | grep -q 'is UP'; }
acct_up() { timeout 5 sacctmgr -n -P show cluster format=cluster 2>/dev/null | grep -qx ci; }
# every node n1..nN is in the partition and idle, mixed or allocated (no *, drain, down, invalid ...)
nodes_ok() {
  local got want
  got=$(timeout 5 sinfo -h -N -p "$PART" -o '%N %T' 2>/dev/null | sort -u) || return 1
  want=$(nodes | sort)
  [ "$(awk '{print $1}' <<<"$got")" = "$want" ] || return 1
  awk '$2 !~ /^(idle|mixed|allocated)$/ {bad=1} END {exit bad}' <<<"$got"
}
nodes_idle() { [ "$(timeout 5 sinfo -h -N -p "$PART" -t idle -o %N 2>/dev/null | sort -u)" = "$(nodes | sort)" ]; }
healthy() { ctld_up && acct_up && nodes_ok; }
# what the running cluster was configured from: the generator of its configuration and the knobs it used. A cluster
# started by an older version of this script (a different hash beside its state) is restarted by `start`.
conf_hash() { { declare -f write_conf; echo "$N $CPUS $PART $B"; } | sha256sum | cut -c1-16; }
conf_current() { [ "$(cat "$B/conf.hash" 2>/dev/null)" = "$(conf_hash)" ]; }
# the checkout this script is in, and the one whose start brought the running cluster up ($CONF/ddlio-owner: the
# tests read it too): two checkouts' tests on one cluster share its nodes, and one's stop ends the other's jobs
HERE=$(cd "$(dirname "$0")/../.." && pwd -P)
owner() { cat "$CONF/ddlio-owner" 2>/dev/null || true; }
# refuse to restart, share or stop a cluster that another checkout (still present) started and still runs
not_others() {
  local o
  o=$(owner)
  if [ -n "$o" ] && [ "$o" != "$HERE" ] && [ -d "$o" ] && pid_of "$R/slurmctld.pid" slurmctld >/dev/null; then
    die "the test cluster (base $B) runs for the checkout $o, not $HERE: its tests use it now or may; stop it from there (bash $o/tests/cluster/slurm.sh stop)"
  fi
}
# all daemons this base started are alive
ours_up() {
  local n
  pid_of "$R/slurmctld.pid" slurmctld >/dev/null && pid_of "$R/slurmdbd.pid" slurmdbd >/dev/null \
    && pid_of "$R/mariadbd.pid" mariadbd >/dev/null || return 1
  for n in $(nodes); do pid_of "$R/slurmd-$n.pid" slurmd >/dev/null || return 1; done
}

# ---------------------------------------------------------------- install
install_pkgs() { apt_install "$B" "a minute at most" $PKGS; }

# ---------------------------------------------------------------- configuration
write_conf() {
  mkdir -p "$CONF"
  cat >"$CONF/slurm.conf" <<EOF
# written by ddlio tests/cluster/slurm.sh (base $B) -- overwritten at every start
ClusterName=ci
SlurmctldHost=$H
FirstJobId=$(cat "$B/first_job_id")
SlurmUser=root
AuthType=auth/munge
StateSaveLocation=$B/state
SlurmdSpoolDir=$B/spool/%n
SlurmctldPidFile=$R/slurmctld.pid
SlurmdPidFile=$R/slurmd-%n.pid
SlurmctldLogFile=$B/log/slurmctld.log
SlurmdLogFile=$B/log/slurmd-%n.log
TmpFS=$B/tmp/%n
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
TaskProlog=$B/task_prolog.sh
MpiDefault=none
ReturnToService=2
SchedulerParameters=batch_sched_delay=0
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
SlurmdParameters=config_overrides
JobAcctGatherType=jobacct_gather/linux
AccountingStorageType=accounting_storage/slurmdbd
AccountingStorageHost=localhost
# limits and QOS are enforced as on a real site: a test sets one with sacctmgr and removes it after
AccountingStorageEnforce=limits,qos
# a job of a higher PriorityTier partition (urgent) preempts debug's jobs: how a PREEMPTED job looks
PreemptType=preempt/partition_prio
PreemptMode=CANCEL
JobCompType=jobcomp/filetxt
JobCompLoc=$B/log/jobcomp.txt
KillWait=5
NodeName=n[1-$N] NodeHostname=$H NodeAddr=127.0.0.1 Port=[17001-$((17000 + N))] CPUs=$CPUS RealMemory=2000
PartitionName=$PART Nodes=ALL Default=YES MaxTime=INFINITE State=UP PriorityTier=1
# partitions of their own, so a test that dies leaves no limit behind: a 5-minute MaxTime, and a preemptor
PartitionName=short Nodes=ALL Default=NO MaxTime=5 State=UP PriorityTier=1
PartitionName=urgent Nodes=ALL Default=NO MaxTime=INFINITE State=UP PriorityTier=2
EOF
  cat >"$CONF/slurmdbd.conf" <<EOF
AuthType=auth/munge
DbdHost=localhost
SlurmUser=root
LogFile=$B/log/slurmdbd.log
PidFile=$R/slurmdbd.pid
StorageType=accounting_storage/mysql
StorageHost=127.0.0.1
StoragePort=3307
StorageUser=slurm
StoragePass=slurmpw
EOF
  chmod 600 "$CONF/slurmdbd.conf"
  # every fake node shares the real host name, and Open MPI / PMIx name their shared-memory files after it:
  # give the tasks of each fake node their own TMPDIR and vader backing directory (collisions segfault otherwise)
  cat >"$B/task_prolog.sh" <<EOF
#!/bin/sh
d=$B/tmp/\$SLURMD_NODENAME
mkdir -p "\$d"
echo "export TMPDIR=\$d"
echo "export OMPI_MCA_btl_vader_backing_directory=\$d"
EOF
  chmod 755 "$B/task_prolog.sh"
}

# ---------------------------------------------------------------- daemons
start_munge() {
  if { munge -n | unmunge; } >/dev/null 2>&1; then return 0; fi  # a munged already runs: use it, don't own it
  [ -s /etc/munge/munge.key ] || mungekey -c
  mkdir -p /run/munge
  chown munge: /run/munge /etc/munge/munge.key
  chmod 400 /etc/munge/munge.key
  daemon runuser -u munge -- munged --force
  wait_for 10 sh -c 'munge -n | unmunge' || die "munged does not answer"
  cp /run/munge/munged.pid "$R/munged.pid"
}

start_db() {
  mkdir -p "$B/db"
  # MariaDB runs as root here so that any SLURM_BASE works (the mysql user may not traverse e.g. /root)
  if [ ! -d "$B/db/data/mysql" ]; then
    timeout 120 mariadb-install-db --user=root --datadir="$B/db/data" --skip-test-db \
      --auth-root-authentication-method=socket >"$B/log/mariadb-install.log" 2>&1 \
      || die "mariadb-install-db failed, log: $B/log/mariadb-install.log"
  fi
  setsid mariadbd --no-defaults --user=root --datadir="$B/db/data" --socket="$B/db/sock" --port=3307 \
    --pid-file="$R/mariadbd.pid" --bind-address=127.0.0.1 --skip-name-resolve --log-error="$B/log/mariadb.log" \
    --innodb-buffer-pool-size=64M --innodb-flush-log-at-trx-commit=0 --innodb-flush-method=nosync \
    </dev/null >/dev/null 2>&1 9>&- &
  wait_for 60 timeout 5 mariadb --socket="$B/db/sock" -e 'select 1' || die "MariaDB does not answer, log: $B/log/mariadb.log"
  wait_for 10 pid_of "$R/mariadbd.pid" mariadbd || die "MariaDB wrote no PID file"
  timeout 20 mariadb --socket="$B/db/sock" -e "CREATE USER IF NOT EXISTS slurm@'127.0.0.1' IDENTIFIED BY 'slurmpw';
    GRANT ALL ON slurm_acct_db.* TO slurm@'127.0.0.1'"
  daemon slurmdbd
  wait_for 30 timeout 5 sacctmgr -n show cluster || die "slurmdbd does not answer, log: $B/log/slurmdbd.log"
}

# 2-node check: N tasks, one per node, must report N distinct SLURMD_NODENAMEs, and the job must reach accounting
check_srun() {
  local out jid names
  out=$(timeout 60 srun -p "$PART" -N"$N" -n"$N" --ntasks-per-node=1 --mpi=pmix -t1 \
    sh -c 'echo "$SLURM_JOB_ID $SLURMD_NODENAME"' 2>&1) || die "srun -N$N failed: $out"
  jid=$(awk 'NR==1 {print $1}' <<<"$out")
  names=$(awk '{print $2}' <<<"$out" | sort -u | tr '\n' ' ')
  [ "$(awk '{print $2}' <<<"$out" | sort -u)" = "$(nodes | sort)" ] || die "srun -N$N ran on: $names"
  wait_for 30 sh -c "timeout 5 sacct -n -X -j $jid -o state | grep -q COMPLETED" \
    || die "job $jid does not show COMPLETED in sacct, log: $B/log/slurmdbd.log"
  log "srun -N$N ok on $names(job $jid, in sacct)"
}

do_start() {
  local t0=$SECONDS p foreign
  [ "$(id -u)" = 0 ] || die "needs root (it installs packages and runs the Slurm daemons as root)"
  mkdir -p "$B/log" "$R"
  exec 9>"$B/lock"
  flock -w 300 9 || die "another slurm.sh holds $B/lock"
  not_others
  if ours_up && healthy && conf_current; then
    log "already up and healthy (base $B): $(timeout 5 sinfo -h -o '%P: %D nodes %N, CPUs A/I/O/T %C')"
    return 0
  fi
  if ours_up && ! conf_current; then
    log "up, but configured by an older version of this script: restarting"
  elif ours_up || pid_of "$R/slurmctld.pid" slurmctld >/dev/null; then
    log "up but not healthy: restarting"
  fi
  rm -f "$B/conf.hash"
  stop_daemons
  # someone else's Slurm would collide with ours on ports, /etc/slurm and PID files: refuse rather than fight it
  foreign=$(ps -eo pid=,stat=,comm= | awk '$2 !~ /^Z/ && $3 ~ /^(slurmctld|slurmd|slurmdbd)$/ {print $1 "(" $3 ")"}' | tr '\n' ' ')
  [ -z "$foreign" ] || die "Slurm daemons not started from $B already run: $foreign-- stop them first"

  install_pkgs
  [ -e "$LIBMPI" ] || die "$LIBMPI missing (Debian's Open MPI)"
  getent hosts "$H" >/dev/null || echo "127.0.0.1 $H" >>/etc/hosts
  if [ "$KEEP" != 1 ]; then  # fresh state and accounting; a new job-id range so stale submitit folders can't match
    rm -rf "$B"/{state,spool,tmp,db,first_job_id,task_prolog.sh} "$B"/log/*
  fi
  [ -s "$B/first_job_id" ] || echo $((($(date +%s%N) / 100000000) % 60000000 + 1)) >"$B/first_job_id"
  mkdir -p "$B/state"
  for p in $(nodes); do mkdir -p "$B/spool/$p" "$B/tmp/$p"; done
  write_conf

  start_munge
  start_db
  daemon slurmctld
  wait_for 30 ctld_up || die "slurmctld does not answer, log: $B/log/slurmctld.log"
  wait_for 30 acct_up || die "cluster 'ci' not registered in accounting, logs: $B/log/slurmctld.log slurmdbd.log"
  for p in $(nodes); do daemon slurmd -N "$p"; done
  timeout 5 scontrol update NodeName="n[1-$N]" State=RESUME >/dev/null 2>&1 || true  # drains survive KEEP_STATE
  wait_for 60 nodes_idle || { timeout 5 sinfo -N >&2 || true; die "nodes not idle, logs: $B/log/slurmd-n*.log"; }
  check_srun
  conf_hash >"$B/conf.hash"
  echo "$HERE" >"$CONF/ddlio-owner"
  log "cluster up in $((SECONDS - t0)) s (base $B): $(timeout 5 sinfo -h -o '%P: %D nodes %N, CPUs A/I/O/T %C')"
}

# stop_pid <pidfile> <comm>: TERM, up to 10 s, then KILL; only if the recorded PID still is <comm>
stop_pid() {
  local p
  if p=$(pid_of "$1" "$2"); then
    kill "$p" 2>/dev/null || true
    wait_for 10 gone "$p" \
      || { log "$2 ($p) ignored TERM: KILL"; kill -9 "$p" 2>/dev/null || true; }
  fi
  rm -f "$1"
}

stop_daemons() {
  local f
  if pid_of "$R/slurmctld.pid" slurmctld >/dev/null; then
    timeout 10 scancel -u "$(id -un)" >/dev/null 2>&1 || true
    wait_for 30 sh -c '[ -z "$(timeout 5 squeue -h)" ]' || log "jobs still listed by squeue; stopping anyway"
  fi
  for f in "$R"/slurmd-*.pid; do [ -e "$f" ] && stop_pid "$f" slurmd; done
  stop_pid "$R/slurmctld.pid" slurmctld
  stop_pid "$R/slurmdbd.pid" slurmdbd
  stop_pid "$R/mariadbd.pid" mariadbd
  stop_pid "$R/munged.pid" munged
}

do_stop() {
  mkdir -p "$B/log" "$R"
  exec 9>"$B/lock"
  flock -w 300 9 || die "another slurm.sh holds $B/lock"
  not_others
  stop_daemons
  rm -f "$CONF/ddlio-owner"
  log "stopped (base $B)"
}

do_status() {
  local ok=0
  command -v sinfo >/dev/null || { log "not installed: run tests/cluster/slurm.sh start"; return 1; }
  ctld_up || { log "slurmctld does not answer"; return 1; }
  timeout 5 sinfo -N -p "$PART" -o '%N %P %T %C' || true
  acct_up || { log "accounting (slurmdbd) does not answer: sacct would fail"; ok=1; }
  nodes_ok || { log "nodes $(nodes | tr '\n' ' ')are not all idle/mixed/allocated"; ok=1; }
  conf_current || { log "configured by an older version of this script: run start (it restarts)"; ok=1; }
  if [ "$ok" = 0 ]; then log "healthy"; fi
  return "$ok"
}

case "${1:-}" in
  start) do_start ;;
  stop) do_stop ;;
  restart) do_stop && do_start ;;
  status) do_status ;;
  *) echo "usage: $0 start|stop|status|restart" >&2; exit 2 ;;
esac
