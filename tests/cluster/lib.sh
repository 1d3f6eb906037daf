# Shell helpers shared by tests/cluster/slurm.sh, postgres.sh and cephfs.sh (sourced, not run).

log() { echo "[$(basename "$0") $(date +%T)] $*" >&2; }
die() { log "ERROR: $*"; exit 1; }
# PID 1 in these sandboxes does not reap orphans: a dead daemon can linger as a zombie, so kill -0 is not enough
alive() { [ -r "/proc/$1/status" ] && ! grep -q '^State:[[:space:]]*Z' "/proc/$1/status"; }
gone() { ! alive "$1"; }
# pid_of <pidfile> <comm>: the recorded PID if that process is alive and still is <comm> (PIDs get reused)
pid_of() {
  local p
  [ -s "$1" ] || return 1
  p=$(tr -dc 0-9 <"$1")
  [ -n "$p" ] && alive "$p" && [ "$(ps -o comm= -p "$p" 2>/dev/null)" = "$2" ] && echo "$p"
}
# wait_for <seconds> <command...>: poll until the command succeeds; every wait is time-boxed
wait_for() {
  local end=$((SECONDS + $1))
  shift
  while ((SECONDS < end)); do
    if "$@" >/dev/null 2>&1; then return 0; fi
    sleep 0.2
  done
  log "timed out waiting for: $*"
  return 1
}
# apt_install <log dir> <how long, for the message> <package...>: install the Debian packages not installed yet
# (none missing: nothing runs). Maintainer scripts must not start daemons we would not track: a policy-rc.d that
# denies every start stands while apt runs (unless the machine has its own). Every apt call is time-boxed.
apt_install() {
  local logdir=$1 eta=$2 p missing="" made_policy=0 rc=0
  shift 2
  for p in "$@"; do dpkg -s "$p" >/dev/null 2>&1 || missing="$missing $p"; done
  if [ -z "$missing" ]; then return 0; fi
  command -v apt-get >/dev/null || die "missing packages:$missing, and no apt-get to install them (Debian 12 needed)"
  log "installing:$missing (apt-get update + install, $eta)"
  if [ ! -e /usr/sbin/policy-rc.d ]; then
    printf '#!/bin/sh\nexit 101\n' >/usr/sbin/policy-rc.d
    chmod 755 /usr/sbin/policy-rc.d
    made_policy=1
  fi
  mkdir -p "$logdir"
  {
    timeout 300 apt-get -o DPkg::Lock::Timeout=600 update -q &&
      DEBIAN_FRONTEND=noninteractive timeout 900 apt-get -o DPkg::Lock::Timeout=600 install -y -q \
        --no-install-recommends $missing
  } >"$logdir/apt.log" 2>&1 || rc=$?
  if [ "$made_policy" = 1 ]; then rm -f /usr/sbin/policy-rc.d; fi
  if [ "$rc" != 0 ]; then tail -n 20 "$logdir/apt.log" >&2; die "apt-get failed (rc $rc), log: $logdir/apt.log"; fi
  for p in "$@"; do dpkg -s "$p" >/dev/null 2>&1 || die "package $p still missing after apt-get"; done
}
