#!/usr/bin/env bash
# rabbitmq4.sh - run RabbitMQ 4 (Debian 13 "trixie" package) in a chroot on
# 127.0.0.1:5673, next to the host's own RabbitMQ 3.x on 5672, for the
# AMQP 1.0 adapter tests. Needs root. Idempotent: safe to run again at any time.
#
# Usage: scripts/rabbitmq4.sh [start]      build root if needed, start if needed,
#                                          wait, import definitions (default)
#        scripts/rabbitmq4.sh stop         shut the node down, kill its epmd,
#                                          unmount ROOT/proc
#        scripts/rabbitmq4.sh restart      stop, then start
#        scripts/rabbitmq4.sh status       exit 0 if the node is running
#        scripts/rabbitmq4.sh ctl ARGS...  rabbitmqctl ARGS inside the root, e.g.
#                                          ctl list_queues name type messages
#                                          ctl purge_queue NAME / delete_queue NAME
#
# The root is built once with debootstrap into ${RUSTSTREAM_CACHE:-/var/cache/ruststream}/
# rabbitmq4-root (outside the checkout) from the mirror the host's apt uses.
# Node: rabbit4@localhost, AMQP port 5673, dist port 25673, its own epmd on 4370.
# Definitions (scripts/rabbitmq4-definitions.json) are imported on every start.
set -euo pipefail

SCRIPT_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
CACHE=${RUSTSTREAM_CACHE:-/var/cache/ruststream}
ROOT=$CACHE/rabbitmq4-root
SUITE=trixie
PORT=5673 DIST_PORT=25673 EPMD_PORT=4370
START_TIMEOUT=${RABBITMQ4_START_TIMEOUT:-90}
CLEAN_ENV=(env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/var/lib/rabbitmq LANG=C.UTF-8)

log() { echo "rabbitmq4: $*" >&2; }
die() { echo "rabbitmq4: ERROR: $*" >&2; exit 1; }

[ "$(id -u)" = 0 ] || die "must run as root (chroot, mount, debootstrap)"

# rabbitmqctl inside the root, clean environment (finds the node via rabbitmq-env.conf).
ctl() { "${CLEAN_ENV[@]}" chroot "$ROOT" rabbitmqctl "$@"; }
running() { ctl -q await_startup --timeout "${1:-5}" >/dev/null 2>&1; }

# URI of the host's apt source for "<codename> main" (not -security/-updates).
host_mirror() {
  local codename f uri
  codename=$(. /etc/os-release && echo "${VERSION_CODENAME:-}")
  [ -n "$codename" ] || die "cannot read VERSION_CODENAME from /etc/os-release"
  for f in /etc/apt/sources.list.d/*.sources; do
    [ -f "$f" ] || continue
    uri=$(awk -v cn="$codename" '
      function flush() { if (!done && deb && suite && main && uri != "") { print uri; done = 1; exit }
                         deb = suite = main = 0; uri = "" }
      /^[ \t]*$/ { flush(); next }
      /^[ \t]*#/ { next }
      tolower($1) == "types:"      { for (i = 2; i <= NF; i++) if ($i == "deb") deb = 1 }
      tolower($1) == "uris:"       { uri = $2 }
      tolower($1) == "suites:"     { for (i = 2; i <= NF; i++) if ($i == cn) suite = 1 }
      tolower($1) == "components:" { for (i = 2; i <= NF; i++) if ($i == "main") main = 1 }
      END { flush() }' "$f")
    [ -n "$uri" ] && { echo "$uri"; return; }
  done
  [ -f /etc/apt/sources.list ] && uri=$(sed -E 's/\[[^]]*\]//' /etc/apt/sources.list |
    awk -v cn="$codename" '$1 == "deb" && $3 == cn { for (i = 4; i <= NF; i++) if ($i == "main") { print $2; exit } }')
  [ -n "${uri:-}" ] || die "no apt source for '$codename main' in /etc/apt/sources.list{,.d/*.sources}"
  echo "$uri"
}

# Unmount everything mounted below $1 (deepest first).
umount_below() {
  awk -v p="$1" '$2 == p || index($2, p "/") == 1 { print $2 }' /proc/mounts | sort -r |
    while read -r m; do umount -l "$m" || true; done
}

build_root() {
  [ -x "$ROOT/usr/sbin/rabbitmq-server" ] && return
  mkdir -p "$CACHE"
  local d
  for d in "$CACHE"/rabbitmq4-root.tmp.*; do  # leftovers of interrupted builds
    [ -d "$d" ] || continue
    log "removing unfinished build $d"; umount_below "$d"; rm -rf --one-file-system "$d"
  done
  if ! command -v debootstrap >/dev/null; then
    log "installing debootstrap"
    DEBIAN_FRONTEND=noninteractive apt-get install -y debootstrap >&2 ||
      { apt-get update >&2 && DEBIAN_FRONTEND=noninteractive apt-get install -y debootstrap >&2; } ||
      die "cannot install debootstrap"
  fi
  local mirror tmp t0=$SECONDS
  mirror=$(host_mirror)
  tmp=$(mktemp -d "$CACHE/rabbitmq4-root.tmp.XXXXXX")
  chmod 0755 "$tmp"  # mktemp makes it 0700: the rabbitmq user could not use the root
  log "building $SUITE root with rabbitmq-server from $mirror (about 1 min, ~300 MB)"
  if ! debootstrap --variant=minbase --include=rabbitmq-server "$SUITE" "$tmp" "$mirror" >&2; then
    umount_below "$tmp"; die "debootstrap failed (log: $tmp/debootstrap/debootstrap.log)"
  fi
  umount_below "$tmp"
  rm -f "$tmp"/var/cache/apt/archives/*.deb  # ~75 MB not needed any more
  umount_below "$ROOT"; rm -rf --one-file-system "$ROOT"  # unfinished: no rabbitmq-server
  mv "$tmp" "$ROOT"
  log "root built in $((SECONDS - t0)) s: $ROOT"
}

configure_root() {
  mountpoint -q "$ROOT/proc" || mount -t proc proc "$ROOT/proc"
  grep -qsE '^[^#]*[[:space:]]localhost([[:space:]]|$)' "$ROOT/etc/hosts" ||
    printf '127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n' >>"$ROOT/etc/hosts"
  cat >"$ROOT/etc/rabbitmq/rabbitmq-env.conf" <<EOF
# written by ruststream scripts/rabbitmq4.sh
ulimit -n "\$(ulimit -Hn)" 2>/dev/null || true
NODENAME=rabbit4@localhost
DIST_PORT=$DIST_PORT
ERL_EPMD_PORT=$EPMD_PORT
EOF
  cat >"$ROOT/etc/rabbitmq/rabbitmq.conf" <<EOF
# written by ruststream scripts/rabbitmq4.sh
listeners.tcp.default = 127.0.0.1:$PORT
loopback_users = none
EOF
  install -m 0644 "$SCRIPT_DIR/rabbitmq4-definitions.json" "$ROOT/etc/rabbitmq/ruststream-definitions.json"
}

# Kill what is left running from the root (its epmd on 4370, a dead node's helpers).
kill_root_procs() {
  local p pids=()
  for p in /proc/[0-9]*; do
    [ "$(readlink "$p/root" 2>/dev/null)" = "$ROOT" ] && pids+=("${p#/proc/}")
  done
  [ ${#pids[@]} -eq 0 ] && return
  log "killing leftover processes of the root: ${pids[*]}"
  kill "${pids[@]}" 2>/dev/null || true
  sleep 1
  kill -9 "${pids[@]}" 2>/dev/null || true
}

start() {
  build_root
  configure_root
  if running 1; then
    log "node already running"
  else
    kill_root_procs  # stale epmd / half-dead node from an earlier run
    rm -f "$ROOT"/var/lib/rabbitmq/mnesia/rabbit4@localhost.pid
    if ss -Hltn "sport = :$PORT" | grep -q .; then
      die "port $PORT is already taken by another process: $(ss -Hltnp "sport = :$PORT")"
    fi
    log "starting rabbit4@localhost"
    local t0=$SECONDS
    "${CLEAN_ENV[@]}" chroot "$ROOT" rabbitmq-server -detached >&2 || die "rabbitmq-server -detached failed"
    until running 5; do
      [ $((SECONDS - t0)) -lt "$START_TIMEOUT" ] ||
        die "node not up after ${START_TIMEOUT} s; see $ROOT/var/log/rabbitmq/"
      sleep 1
    done
    log "node up in $((SECONDS - t0)) s"
  fi
  ctl -q import_definitions /etc/rabbitmq/ruststream-definitions.json >&2 ||
    die "import_definitions failed"
  echo "rabbitmq4 ready on 127.0.0.1:$PORT"
}

stop() {
  [ -d "$ROOT" ] || { log "no root at $ROOT, nothing to stop"; return; }
  if running 1; then
    log "shutting down rabbit4@localhost"
    ctl -q shutdown >&2 || log "shutdown reported an error; killing leftovers"
  fi
  kill_root_procs
  umount_below "$ROOT"
  log "stopped"
}

status() {
  [ -x "$ROOT/usr/sbin/rabbitmq-server" ] || { echo "rabbitmq4: root not built ($ROOT)"; return 3; }
  if mountpoint -q "$ROOT/proc" && running 1; then
    echo "rabbitmq4 running on 127.0.0.1:$PORT, version $(ctl -q version)"
  else
    echo "rabbitmq4 not running"; return 3
  fi
}

lock() { mkdir -p "$CACHE"; exec 9>"$CACHE/rabbitmq4.lock"; flock 9; }

case "${1:-start}" in
  start)   lock; start ;;
  stop)    lock; stop ;;
  restart) lock; stop; start ;;
  status)  status ;;
  ctl)     shift; [ -x "$ROOT/usr/sbin/rabbitmqctl" ] || die "root not built; run $0 start"; ctl "$@" ;;
  *)       die "usage: $0 [start|stop|restart|status|ctl ARGS...]" ;;
esac
