# Shell helpers shared by tests/cluster/slurm.sh and tests/cluster/postgres.sh (sourced, not run).

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
