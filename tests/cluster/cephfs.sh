#!/usr/bin/env bash
# A real, throw-away CephFS on this one Debian 12 machine, for ddlio's `cephfs` tests, CI and bench/stripes.py:
# 1 mon, 1 mgr, 1 MDS and N BlueStore OSDs, each on a sparse image attached to its own loop device (direct I/O),
# mounted with ceph-fuse. Every OSD's reads are capped (a blkio rule per loop device in a cgroup holding the
# ceph-osd processes), so one OSD behaves like one bandwidth-limited storage target and a file's stripe_count
# decides how many targets a read streams from: the Lustre OST mechanism, on a file system we can really run.
# Derived from the tested recipe /work/shared/recipes/cephfs-one-box.sh (same ports, same pitfalls handled).
#
#   bash tests/cluster/cephfs.sh start       install what is missing (Debian's ceph 16 packages, ~72 s), create
#                                            or restart the cluster, mount; a no-op when everything already runs
#   bash tests/cluster/cephfs.sh status      exit 0 only if our daemons run and the mount is ceph-fuse's
#   bash tests/cluster/cephfs.sh mountpoint  print the mount point (exit 1 if not mounted)
#   bash tests/cluster/cephfs.sh cold        before a cold read: remount ceph-fuse (empties its object cache and
#                                            the kernel's FUSE page cache) + `ceph tell osd.* cache drop`
#   bash tests/cluster/cephfs.sh throttle [READ_MIBS [WRITE_MIBS]]   change the per-OSD caps now (0 = none)
#   bash tests/cluster/cephfs.sh stop        unmount, end only the daemons whose PIDs we recorded, detach the
#                                            loops, remove the cgroup
#   bash tests/cluster/cephfs.sh purge       stop + delete the cluster's data
#
# Env: CEPHFS_BASE (default ${TMPDIR:-/tmp}/ddlio-cephfs-ci), CEPHFS_NOSD=8, CEPHFS_OSD_SIZE=4G,
#      CEPHFS_OSD_READ_MIBS=24 (read cap per OSD, MiB/s, 0 = none), CEPHFS_OSD_WRITE_MIBS=0,
#      CEPHFS_MAX_OBJECT=128M (osd max object size: a layout's object_size may not exceed it; a larger one crashes
#      ceph-fuse, and it cannot be raised after start), CEPHFS_OSD_READ_CACHE=0 (1: BlueStore caches what it reads,
#      Ceph's default; 0: every read reaches a capped device). Ports: mon 3300 (msgr v2), daemons 7100-7300.
#      Clients: export CEPH_CONF=$CEPHFS_BASE/ceph.conf. Needs root, /dev/fuse, loop devices, cgroup blkio/io.
set -euo pipefail

B=${CEPHFS_BASE:-${TMPDIR:-/tmp}/ddlio-cephfs-ci}
NOSD=${CEPHFS_NOSD:-8}
OSD_SIZE=${CEPHFS_OSD_SIZE:-4G}
READ_MIBS=${CEPHFS_OSD_READ_MIBS:-24}
WRITE_MIBS=${CEPHFS_OSD_WRITE_MIBS:-0}
MAX_OBJECT=${CEPHFS_MAX_OBJECT:-128M}
READ_CACHE=${CEPHFS_OSD_READ_CACHE:-0}
MON_PORT=3300
FSNAME=cephfs
DATA_POOL=cephfs_data
META_POOL=cephfs_metadata
CONF=$B/ceph.conf
R=$B/run
L=$B/log
D=$B/data
MNT=$B/mnt
export CEPH_CONF=$CONF
CGNAME=ddlio-cephfs-$(echo -n "$B" | md5sum | cut -c1-8)
PKGS="ceph-mon ceph-mgr ceph-osd ceph-mds ceph-fuse ceph-common attr uuid-runtime mount"

# shellcheck source=tests/cluster/lib.sh
. "$(dirname "$0")/lib.sh"

install_pkgs() { apt_install "$L" "about 72 s" $PKGS; }

# launch <name> <binary> args...: a foreground daemon, backgrounded by us, its PID recorded. OSDs join the
# throttle cgroup before exec, so their very first I/O is accounted there.
launch() {
  local name=$1 bin=$2
  shift 2
  if pid_of "$R/$name.pid" "$bin" >/dev/null; then return 0; fi
  if [ "$bin" = ceph-osd ]; then
    setsid nohup bash -c 'echo $$ >"$1/cgroup.procs" && shift && exec "$@"' _ "$(cg_path)" \
      "$bin" -f -c "$CONF" "$@" >>"$L/$name.stdout" 2>&1 </dev/null 9>&- &
  else
    setsid nohup "$bin" -f -c "$CONF" "$@" >>"$L/$name.stdout" 2>&1 </dev/null 9>&- &
  fi
  echo $! >"$R/$name.pid"
}

# ---------------------------------------------------------------- loop devices + cgroup throttle
cg_version() {
  if [ -e /sys/fs/cgroup/blkio/blkio.throttle.read_bps_device ]; then echo 1
  elif [ -e /sys/fs/cgroup/cgroup.controllers ] && grep -qw io /sys/fs/cgroup/cgroup.controllers; then echo 2
  else echo 0; fi
}
cg_path() {
  case $(cg_version) in
    1) echo "/sys/fs/cgroup/blkio/$CGNAME" ;;
    2) echo "/sys/fs/cgroup/$CGNAME" ;;
    *) die "no blkio (v1) or io (v2) cgroup controller: cannot cap the OSDs" ;;
  esac
}
cg_create() {
  if [ "$(cg_version)" = 2 ]; then
    grep -qw io /sys/fs/cgroup/cgroup.subtree_control || echo +io >/sys/fs/cgroup/cgroup.subtree_control
  fi
  mkdir -p "$(cg_path)"
}
cg_remove() {
  local cg
  cg=$(cg_path 2>/dev/null) || return 0
  [ -d "$cg" ] || return 0
  if [ -n "$(cat "$cg/cgroup.procs" 2>/dev/null)" ]; then log "cgroup $cg still has processes, kept"; return 0; fi
  rmdir "$cg" 2>/dev/null || true
}
loop_attach() {   # attach osd.$1.img (sparse) to a loop device with direct I/O; osd.$1/block -> /dev/loopM
  local i=$1 img=$D/osd.$1.img dev
  [ -e "$img" ] || truncate -s "$OSD_SIZE" "$img"
  dev=$(losetup -j "$img" -n -O NAME 2>/dev/null | head -1)
  [ -n "$dev" ] || dev=$(losetup --find --show --direct-io=on "$img") || die "losetup failed for $img"
  echo "$dev" >"$R/osd.$i.loop"
  ln -sfn "$dev" "$D/osd.$i/block"
}
loop_detach_all() {
  local img dev
  for img in "$D"/osd.*.img; do
    [ -e "$img" ] || continue
    for dev in $(losetup -j "$img" -n -O NAME 2>/dev/null); do losetup -d "$dev" || true; done
  done
  rm -f "$R"/osd.*.loop
}
apply_throttle() {   # <read MiB/s> <write MiB/s>: one rule per loop device in our cgroup
  local r=$1 w=$2 cg f dev mm rb wb
  cg=$(cg_path)
  for f in "$R"/osd.*.loop; do
    [ -e "$f" ] || continue
    dev=$(cat "$f")
    mm=$(stat -L -c '%t:%T' "$dev")
    mm="$((16#${mm%%:*})):$((16#${mm##*:}))"
    if [ "$(cg_version)" = 1 ]; then
      echo "$mm $((r * 1048576))" >"$cg/blkio.throttle.read_bps_device"
      echo "$mm $((w * 1048576))" >"$cg/blkio.throttle.write_bps_device"
    else
      rb=max wb=max
      [ "$r" = 0 ] || rb=$((r * 1048576))
      [ "$w" = 0 ] || wb=$((w * 1048576))
      echo "$mm rbps=$rb wbps=$wb" >"$cg/io.max"
    fi
  done
  echo "$r $w" >"$B/throttle"
  log "per-OSD caps: read $r MiB/s, write $w MiB/s (0 = none) in $cg"
}

# ---------------------------------------------------------------- configuration
write_conf() {
  cat >"$CONF" <<CONF
# written by ddlio tests/cluster/cephfs.sh (base $B) -- overwritten at every start
[global]
fsid = $1
mon host = v2:127.0.0.1:$MON_PORT
mon initial members = a
public addr = 127.0.0.1
cluster addr = 127.0.0.1
ms bind msgr1 = false
ms bind ipv6 = false
ms bind port min = 7100
ms bind port max = 7300
auth cluster required = cephx
auth service required = cephx
auth client required = cephx
run dir = $R
admin socket = \$run_dir/\$cluster-\$name.asok
log file = $L/\$name.log
crash dir = $B/crash
osd pool default size = 1
osd pool default min size = 1
osd pool default pg autoscale mode = off
osd crush chooseleaf type = 0
mon allow pool size one = true
mon allow pool delete = true
mon warn on pool no redundancy = false
mon data avail warn = 2
mon data avail crit = 1
mon osd full ratio = .97
mon osd backfillfull ratio = .95
mon osd nearfull ratio = .93

[mon]
mon data = $D/mon.\$id
keyring = $D/mon.\$id/keyring
mon cluster log file = $L/cluster.log

[mgr]
mgr data = $D/mgr.\$id
keyring = $D/mgr.\$id/keyring

[osd]
osd data = $D/osd.\$id
keyring = $D/osd.\$id/keyring
osd objectstore = bluestore
bluestore block create = false
bluestore block size = $(numfmt --from=iec "$OSD_SIZE")
bluestore block db create = false
bluestore block wal create = false
bluestore fsck on mount = false
osd memory target = 1073741824
osd max object size = $(numfmt --from=iec "$MAX_OBJECT")

[mds]
mds data = $D/mds.\$id
keyring = $D/mds.\$id/keyring
mds cache memory limit = 268435456

[client]
keyring = $B/keyring

[client.fuse]
keyring = $B/fuse.keyring
client mount timeout = 60
CONF
}

osds_up() {
  ceph osd stat -f json | python3 -c "import json,sys; sys.exit(json.load(sys.stdin)['num_up_osds'] != $NOSD)"
}

create_cluster() {
  local fsid i uuid key id pids=()
  fsid=$(uuidgen)
  log "creating a new cluster (fsid $fsid, $NOSD OSDs)"
  write_conf "$fsid"
  ceph-authtool --create-keyring "$B/keyring" --gen-key -n mon. --cap mon 'allow *' >/dev/null
  ceph-authtool "$B/keyring" --gen-key -n client.admin \
    --cap mon 'allow *' --cap osd 'allow *' --cap mds 'allow *' --cap mgr 'allow *' >/dev/null
  monmaptool --create --fsid "$fsid" --addv a "[v2:127.0.0.1:$MON_PORT]" "$B/monmap" >/dev/null
  mkdir -p "$D/mon.a" "$D/mgr.x" "$D/mds.a"
  ceph-mon -c "$CONF" --mkfs -i a --monmap "$B/monmap" --keyring "$B/keyring"
  launch mon.a ceph-mon -i a
  wait_for 60 timeout 5 ceph --connect-timeout 5 quorum_status || die "no mon quorum, log: $L/mon.a.log"
  ceph config set mon auth_allow_insecure_global_id_reclaim false >/dev/null 2>&1 || true
  ceph auth get-or-create mgr.x mon 'allow profile mgr' osd 'allow *' mds 'allow *' -o "$D/mgr.x/keyring"
  launch mgr.x ceph-mgr -i x
  cg_create
  for ((i = 0; i < NOSD; i++)); do
    uuid=$(uuidgen)
    mkdir -p "$D/osd.$i"
    key=$(ceph-authtool --gen-print-key)
    # the OSD's key is registered before mkfs (ceph osd new UUID -i {cephx_secret}), each daemon its own keyring
    printf '{"cephx_secret": "%s"}' "$key" >"$D/osd.$i/new.json"
    id=$(ceph osd new "$uuid" -i "$D/osd.$i/new.json")
    rm -f "$D/osd.$i/new.json"
    [ "$id" = "$i" ] || die "expected osd id $i, got $id"
    ceph-authtool --create-keyring "$D/osd.$i/keyring" --name "osd.$i" --add-key "$key" >/dev/null
    loop_attach "$i"
    (ceph-osd -c "$CONF" -i "$i" --mkfs --key "$key" --osd-uuid "$uuid" >"$L/osd.$i.mkfs.log" 2>&1 \
      || touch "$D/osd.$i/mkfs.failed") 9>&- &
    pids+=($!)
  done
  wait "${pids[@]}"   # not a bare `wait`: the daemons launched above are our children too
  for ((i = 0; i < NOSD; i++)); do
    [ ! -e "$D/osd.$i/mkfs.failed" ] || die "ceph-osd --mkfs failed for osd.$i, log: $L/osd.$i.mkfs.log"
    launch "osd.$i" ceph-osd -i "$i"
  done
  apply_throttle "$READ_MIBS" "$WRITE_MIBS"
  wait_for 120 osds_up || die "not all $NOSD OSDs came up, logs: $L/osd.*.log"
  ceph osd pool create "$META_POOL" 8 >/dev/null 2>&1
  ceph osd pool create "$DATA_POOL" 64 >/dev/null 2>&1
  ceph osd pool set "$META_POOL" size 1 --yes-i-really-mean-it >/dev/null 2>&1 || true
  ceph osd pool set "$DATA_POOL" size 1 --yes-i-really-mean-it >/dev/null 2>&1 || true
  ceph fs new "$FSNAME" "$META_POOL" "$DATA_POOL" >/dev/null 2>&1
  local pool   # CRUSH on few tiny OSDs gives lopsided PG counts: even them out with upmap
  for pool in "$DATA_POOL" "$META_POOL"; do
    ceph osd getmap -o "$B/osdmap.bin" >/dev/null 2>&1
    osdmaptool "$B/osdmap.bin" --upmap "$B/upmap.sh" --upmap-pool "$pool" --upmap-deviation 1 --upmap-max 100 \
      >/dev/null 2>&1 && bash "$B/upmap.sh" >/dev/null 2>&1 || true
  done
  rm -f "$B/osdmap.bin" "$B/upmap.sh"
  ceph auth get-or-create mds.a mon 'allow profile mds' osd 'allow rwx' mds 'allow' mgr 'allow profile mds' \
    -o "$D/mds.a/keyring"
  launch mds.a ceph-mds -i a
  touch "$B/.created"
}

restart_cluster() {
  local d i
  log "restarting the cluster in $D"
  write_conf "$(ceph-conf -c "$CONF" --lookup fsid)"
  launch mon.a ceph-mon -i a
  wait_for 60 timeout 5 ceph --connect-timeout 5 quorum_status || die "no mon quorum, log: $L/mon.a.log"
  launch mgr.x ceph-mgr -i x
  cg_create
  for d in "$D"/osd.*/; do
    d=${d%/}
    i=${d##*/osd.}
    loop_attach "$i"   # device numbers may change: the caps are re-applied below
    launch "osd.$i" ceph-osd -i "$i"
  done
  apply_throttle "$READ_MIBS" "$WRITE_MIBS"
  launch mds.a ceph-mds -i a
}

# ---------------------------------------------------------------- mount
# mountinfo: "ID PARENT MAJ:MIN ROOT MOUNTPOINT OPTS [OPTIONAL...] - FSTYPE SOURCE SUPEROPTS"
mounted() {
  awk -v m="$MNT" '$5 == m { for (i = 7; i <= NF; i++) if ($i == "-") { if ($(i + 1) == "fuse.ceph-fuse") f = 1; break } }
                   END { exit !f }' /proc/self/mountinfo
}
fuse_pid() { pid_of "$R/ceph-fuse.pid" ceph-fuse; }
mds_active() { timeout 5 ceph mds stat 2>/dev/null | grep -q up:active; }
# a mount whose ceph-fuse is gone (killed with the machine's session, say) answers every stat with ENOTCONN, even
# the mkdir of its own mount point: detach it before anything touches $MNT
drop_stale_mount() {
  if mounted && ! fuse_pid >/dev/null; then log "stale mount at $MNT (no ceph-fuse): lazy unmount"; umount -l "$MNT" || true; fi
}
mount_fs() {
  drop_stale_mount
  mkdir -p "$MNT"
  if mounted && fuse_pid >/dev/null; then return 0; fi
  wait_for 120 mds_active || die "no active MDS, log: $L/mds.a.log"
  # its own client id (not client.admin: the admin sockets would clash); `p` lets it set ceph.*.layout xattrs
  [ -s "$B/fuse.keyring" ] || ceph fs authorize "$FSNAME" client.fuse / rwp >"$B/fuse.keyring"
  setsid nohup ceph-fuse -f -c "$CONF" --id fuse "$MNT" >>"$L/ceph-fuse.stdout" 2>&1 </dev/null 9>&- &
  echo $! >"$R/ceph-fuse.pid"
  wait_for 60 mounted || { tail -n 5 "$L/ceph-fuse.stdout" >&2; die "ceph-fuse did not mount $MNT"; }
}
unmount_fs() {
  if mounted; then umount "$MNT" 2>/dev/null || { log "umount busy: lazy unmount"; umount -l "$MNT" || true; }; fi
  stop_pid "$R/ceph-fuse.pid" ceph-fuse
}

# ---------------------------------------------------------------- daemons
osd_pidfiles() { ls "$R"/osd.*.pid 2>/dev/null || true; }
ours_up() {
  local f
  [ -f "$B/.created" ] && pid_of "$R/mon.a.pid" ceph-mon >/dev/null && pid_of "$R/mgr.x.pid" ceph-mgr >/dev/null \
    && pid_of "$R/mds.a.pid" ceph-mds >/dev/null && fuse_pid >/dev/null && mounted || return 1
  for f in "$D"/osd.*/; do f=${f%/}; pid_of "$R/osd.${f##*/osd.}.pid" ceph-osd >/dev/null || return 1; done
}
# stop_pid <pidfile> <comm>: TERM, up to 30 s, then KILL; only if the recorded PID still is <comm>
stop_pid() {
  local p
  if p=$(pid_of "$1" "$2"); then
    kill "$p" 2>/dev/null || true
    wait_for 30 gone "$p" || { log "$2 ($p) ignored TERM: KILL"; kill -9 "$p" 2>/dev/null || true; }
  fi
  rm -f "$1"
}
stop_daemons() {
  local f p
  unmount_fs
  stop_pid "$R/mds.a.pid" ceph-mds
  for f in $(osd_pidfiles); do
    p=$(pid_of "$f" ceph-osd) && kill "$p" 2>/dev/null || true   # all OSDs at once, then wait for each
  done
  for f in $(osd_pidfiles); do stop_pid "$f" ceph-osd; done
  stop_pid "$R/mgr.x.pid" ceph-mgr
  stop_pid "$R/mon.a.pid" ceph-mon
  loop_detach_all
  cg_remove
}

do_start() {
  local t0=$SECONDS
  [ "$(id -u)" = 0 ] || die "needs root (packages, loop devices, cgroups, FUSE)"
  mkdir -p "$B" "$R" "$L" "$D" "$B/crash"
  exec 9>"$B/lock"
  flock -w 600 9 || die "another cephfs.sh holds $B/lock"
  drop_stale_mount
  mkdir -p "$MNT"
  if ours_up; then log "already up, mounted at $MNT"; return 0; fi
  install_pkgs
  [ -e /dev/fuse ] || die "/dev/fuse missing"
  if [ -f "$B/.created" ]; then
    restart_cluster
  else
    [ ! -d "$D/mon.a" ] || die "half-created cluster in $D: run '$0 purge' first"
    create_cluster
  fi
  mount_fs
  # the OSDs keep no read cache of their own (BlueStore caches what it reads by default): every read of a client
  # whose own caches are empty reaches a capped device, as the stripe measurements need (CEPHFS_OSD_READ_CACHE=1:
  # Ceph's default)
  timeout 30 ceph config set osd bluestore_default_buffered_read "$([ "$READ_CACHE" = 1 ] && echo true || echo false)" \
    || log "could not set bluestore_default_buffered_read"
  wait_for 180 sh -c 'timeout 5 ceph health | grep -q HEALTH_OK' || log "health: $(timeout 5 ceph health 2>&1)"
  log "up in $((SECONDS - t0)) s: $NOSD OSDs, reads capped at $READ_MIBS MiB/s each, mounted at $MNT"
}

do_cold() {   # what a cold read needs: ceph-fuse's object cache + the kernel's FUSE page cache, and the OSDs'
  mounted || die "not mounted: $MNT"
  exec 9>"$B/lock"
  flock -w 120 9 || die "another cephfs.sh holds $B/lock"
  unmount_fs
  mount_fs
  timeout 60 ceph tell 'osd.*' cache drop >/dev/null 2>&1 || log "osd cache drop failed"
}

do_status() {
  local f p
  for f in "$R"/*.pid; do
    [ -e "$f" ] || continue
    p=$(tr -dc 0-9 <"$f")
    printf '%-10s pid %-7s %s\n' "$(basename "$f" .pid)" "$p" "$(ps -o comm= -p "$p" 2>/dev/null || echo DEAD)"
  done
  [ -f "$B/throttle" ] && echo "per-OSD caps (read write, MiB/s): $(cat "$B/throttle")"
  timeout 10 ceph -s 2>&1 || true
  ours_up || { log "not up (base $B)"; return 1; }
  log "up, mounted at $MNT"
}

case "${1:-}" in
  start) do_start ;;
  stop) exec 9>"$B/lock" 2>/dev/null && flock -w 600 9; stop_daemons; log "stopped (base $B)" ;;
  status) do_status ;;
  mountpoint) mounted || die "not mounted: $MNT"; echo "$MNT" ;;
  cold) do_cold ;;
  throttle) apply_throttle "${2:-$READ_MIBS}" "${3:-$WRITE_MIBS}" ;;
  purge)
    stop_daemons
    rm -rf "$D" "$R" "$L" "$B/crash" "$CONF" "$B/keyring" "$B/monmap" "$B/.created" "$B/fuse.keyring" "$B/throttle"
    log "purged (base $B)" ;;
  *) echo "usage: $0 start|stop|status|mountpoint|cold|throttle [READ_MIBS [WRITE_MIBS]]|purge" >&2; exit 2 ;;
esac
