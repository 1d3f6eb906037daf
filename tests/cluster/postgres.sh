#!/usr/bin/env bash
# A private, real PostgreSQL server (Debian's package) for ddlio's `postgres` tests and CI: its own data directory,
# its own port, run as the `postgres` user (initdb refuses root), reachable on 127.0.0.1 with a password.
#
#   bash tests/cluster/postgres.sh start    install what is missing (apt postgresql), initdb once, start, wait;
#                                           a no-op (exit 0) when this base's server already answers
#   bash tests/cluster/postgres.sh status   exit 0 only if the server this script started answers
#   bash tests/cluster/postgres.sh stop     end only the server this script started (its recorded PID)
#   bash tests/cluster/postgres.sh url      print the admin URL the tests use (tests/conftest.py: pg_url)
#
# Env: PG_BASE (default ${TMPDIR:-/tmp}/ddlio-pg-ci: data, socket, log, PID), PG_PORT=55432, PG_USER=ddlio,
#      PG_PASSWORD=ddlio-ci (a role with CREATEDB that the tests log in as, over TCP with scram-sha-256).
#      Needs root (it installs the package and runs the server as `postgres`).
set -euo pipefail

B=${PG_BASE:-${TMPDIR:-/tmp}/ddlio-pg-ci}
PORT=${PG_PORT:-55432}
USER_=${PG_USER:-ddlio}
PASS=${PG_PASSWORD:-ddlio-ci}
D=$B/data
PIDF=$B/postgres.pid

# shellcheck source=tests/cluster/lib.sh
. "$(dirname "$0")/lib.sh"
# the recorded PID, if that process is alive and still the postgres server
our_pid() { pid_of "$PIDF" postgres; }
bindir() { ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1; }
as_pg() { runuser -u postgres -- "$@"; }
ready() { timeout 5 "$(bindir)/pg_isready" -q -h 127.0.0.1 -p "$PORT"; }
answers() { PGPASSWORD=$PASS timeout 5 "$(bindir)/psql" -X -q -h 127.0.0.1 -p "$PORT" -U "$USER_" -d postgres -c 'select 1' >/dev/null; }

install_pkgs() {
  if [ -n "$(bindir)" ] && [ -x "$(bindir)/initdb" ]; then return 0; fi
  apt_install "$B" "a minute at most" postgresql
  [ -x "$(bindir)/initdb" ] || die "initdb still missing after installing postgresql"
}

do_start() {
  local t0=$SECONDS pid
  [ "$(id -u)" = 0 ] || die "needs root (it installs postgresql and runs the server as the postgres user)"
  mkdir -p "$B"
  exec 9>"$B/lock"
  flock -w 300 9 || die "another postgres.sh holds $B/lock"
  if our_pid >/dev/null && answers; then
    log "already up (base $B, port $PORT, pid $(our_pid))"
    return 0
  fi
  stop_server
  install_pkgs
  id postgres >/dev/null 2>&1 || die "no postgres user (the postgresql package creates it)"
  chown postgres: "$B"
  as_pg test -w "$B" || die "the postgres user cannot write $B: set PG_BASE to a directory it can reach"
  if [ ! -s "$D/PG_VERSION" ]; then
    rm -rf "$D"
    printf '%s\n' "$PASS" >"$B/pwfile"
    chown postgres: "$B/pwfile"
    chmod 600 "$B/pwfile"
    # the superuser is the tests' role; the socket trusts only the postgres OS user, TCP wants the password
    timeout 120 runuser -u postgres -- "$(bindir)/initdb" -D "$D" -U "$USER_" --pwfile="$B/pwfile" \
      --auth-local=peer --auth-host=scram-sha-256 -E UTF8 --locale=C.UTF-8 >"$B/initdb.log" 2>&1 \
      || { rm -f "$B/pwfile"; die "initdb failed, log: $B/initdb.log"; }
    rm -f "$B/pwfile"
  fi
  mkdir -p "$B/sock"
  chown postgres: "$B/sock"
  # a test server: speed over durability (fsync off), a private socket directory, loopback only
  # the port lies in Linux's ephemeral range: a client socket of some other program can hold it for a while, so a
  # start that lost the port is tried again, up to 4 times over about a minute, naming the holder
  local try
  for try in 1 2 3 4; do
    : >"$B/server.log"
    chown postgres: "$B/server.log"
    timeout 90 runuser -u postgres -- "$(bindir)/pg_ctl" -D "$D" -l "$B/server.log" -w -t 60 start \
      -o "-p $PORT -k $B/sock -c listen_addresses=127.0.0.1 -c fsync=off -c synchronous_commit=off \
          -c full_page_writes=off -c max_connections=200 -c shared_buffers=32MB" </dev/null >/dev/null 9>&- && break
    if [ "$try" -lt 4 ] && grep -q "Address already in use" "$B/server.log"; then
      log "port $PORT is taken ($(ss -Htanp "( sport = :$PORT )" 2>/dev/null | head -n 2 | tr -s ' ' | tr '\n' ';')): try $((try + 1)) in 20 s"
      sleep 20
      continue
    fi
    tail -n 20 "$B/server.log" >&2
    die "pg_ctl start failed, log: $B/server.log"
  done
  pid=$(head -n 1 "$D/postmaster.pid" | tr -dc 0-9)
  echo "$pid" >"$PIDF"
  wait_for 30 answers || die "the server does not accept $USER_ on 127.0.0.1:$PORT, log: $B/server.log"
  log "up in $((SECONDS - t0)) s (base $B, port $PORT, pid $pid): $("$(bindir)/postgres" --version)"
}

stop_server() {
  local p
  if p=$(our_pid); then
    kill -INT "$p" 2>/dev/null || true  # fast shutdown: ends sessions, checkpoints, exits
    wait_for 30 gone "$p" \
      || { log "postgres ($p) did not stop: KILL"; kill -9 "$p" 2>/dev/null || true; }
  fi
  rm -f "$PIDF"
}

do_stop() {
  mkdir -p "$B"
  exec 9>"$B/lock"
  flock -w 300 9 || die "another postgres.sh holds $B/lock"
  stop_server
  log "stopped (base $B)"
}

do_status() {
  our_pid >/dev/null || { log "not running (no live server recorded in $PIDF): run tests/cluster/postgres.sh start"; return 1; }
  answers || { log "pid $(our_pid) runs but does not answer on 127.0.0.1:$PORT"; return 1; }
  log "up (base $B, port $PORT, pid $(our_pid))"
}

case "${1:-}" in
  start) do_start ;;
  stop) do_stop ;;
  status) do_status ;;
  url) echo "postgresql://$USER_:$PASS@127.0.0.1:$PORT/postgres" ;;
  *) echo "usage: $0 start|stop|status|url" >&2; exit 2 ;;
esac
