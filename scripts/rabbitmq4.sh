#!/usr/bin/env bash
# rabbitmq4.sh - run RabbitMQ 4 (Debian 13 "trixie" package) in a chroot on
# 127.0.0.1:5673, next to the host's own RabbitMQ 3.x on 5672, for the
# AMQP 1.0 adapter tests, with a TLS listener on 127.0.0.1:5674 (amqps://, the server
# certificate of scripts/tls-certs.sh; clients need no certificate of their own).
# Needs root. Idempotent: safe to run again at any time; a running node whose
# configuration or certificates changed (one without the TLS listener) is restarted.
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
# Node: rabbit4@localhost, AMQP port 5673, AMQP over TLS 5674, dist port 25673, its own
# epmd on 4370. With RABBITMQ4_RELEASE=4.3 (scripts/rabbitmq43.sh): RabbitMQ 4.3 from
# Debian's next release ("forky") in a root of its own, rabbitmq43-root: node
# rabbit43@localhost, AMQP 5675, TLS 5676, dist port 25675, epmd on 4372.
# The certificates are copied to ROOT/etc/rabbitmq/tls on every start.
# Definitions (scripts/rabbitmq4-definitions.json) are imported on every start.
set -euo pipefail

SCRIPT_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
CACHE=${RUSTSTREAM_CACHE:-/var/cache/ruststream}
case "${RABBITMQ4_RELEASE:-4.0}" in
  4.0) NAME=rabbitmq4 SUITE=trixie NODE=rabbit4
       PORT=5673 TLS_PORT=5674 DIST_PORT=25673 EPMD_PORT=4370 ;;
  # Debian's testing suite, or its unstable one where testing has no rabbitmq-server.
  4.3) NAME=rabbitmq43 SUITE="forky sid" NODE=rabbit43
       PORT=5675 TLS_PORT=5676 DIST_PORT=25675 EPMD_PORT=4372 ;;
  *) echo "rabbitmq4: ERROR: RABBITMQ4_RELEASE must be 4.0 or 4.3" >&2; exit 1 ;;
esac
ROOT=$CACHE/$NAME-root
START_TIMEOUT=${RABBITMQ4_START_TIMEOUT:-90}
CLEAN_ENV=(env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/var/lib/rabbitmq LANG=C.UTF-8)

log() { echo "$NAME: $*" >&2; }
die() { echo "$NAME: ERROR: $*" >&2; exit 1; }

[ "$(id -u)" = 0 ] || die "must run as root (chroot, mount, debootstrap)"

# rabbitmqctl inside the root, clean environment (finds the node via rabbitmq-env.conf).
# fd 9 (our lock) is closed so that daemons started from the root (epmd) don't keep it.
ctl() { "${CLEAN_ENV[@]}" chroot "$ROOT" rabbitmqctl "$@" 9>&-; }
running() { ctl -q await_startup --timeout "${1:-5}" >/dev/null 2>&1; }

# host_mirror: the URI the host's apt uses for "<codename> main".
. "$SCRIPT_DIR/lib/apt.sh"

# Unmount everything mounted below $1 (deepest first).
umount_below() {
  awk -v p="$1" '$2 == p || index($2, p "/") == 1 { print $2 }' /proc/mounts | sort -r |
    while read -r m; do umount -l "$m" || true; done
}

build_root() {
  [ -x "$ROOT/usr/sbin/rabbitmq-server" ] && return
  mkdir -p "$CACHE"
  local d
  for d in "$CACHE"/$NAME-root.tmp.*; do  # leftovers of interrupted builds
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
  mirror=$(host_mirror) || die "cannot find the host's Debian mirror"
  tmp=$(mktemp -d "$CACHE/$NAME-root.tmp.XXXXXX")
  chmod 0755 "$tmp"  # mktemp makes it 0700: the rabbitmq user could not use the root
  local suite script built=
  for suite in $SUITE; do
    log "building $suite root with rabbitmq-server from $mirror (about 1 min, ~300 MB)"
    # A suite this debootstrap is older than is built as its "sid" script builds.
    script=/usr/share/debootstrap/scripts/$suite
    [ -e "$script" ] || script=/usr/share/debootstrap/scripts/sid
    if debootstrap --variant=minbase --include=rabbitmq-server "$suite" "$tmp" "$mirror" "$script" >&2; then
      built=$suite; break
    fi
    log "debootstrap of $suite failed; the end of its log:"
    tail -n 5 "$tmp/debootstrap/debootstrap.log" >&2 2>/dev/null || true
    umount_below "$tmp"; rm -rf --one-file-system "$tmp"; mkdir -m 0755 "$tmp"
  done
  [ -n "$built" ] || die "debootstrap failed for $SUITE"
  umount_below "$tmp"
  rm -f "$tmp"/var/cache/apt/archives/*.deb  # ~75 MB not needed any more
  umount_below "$ROOT"; rm -rf --one-file-system "$ROOT"  # unfinished: no rabbitmq-server
  mv "$tmp" "$ROOT"
  log "root built in $((SECONDS - t0)) s: $ROOT"
}

# Write stdin to $1 atomically (rabbitmqctl may be reading it right now), mode 0644.
# Sets CHANGED=1 when the content is new: a running node must restart to read it.
CHANGED=0
put() {
  cat >"$1.new" && chmod 0644 "$1.new"
  if cmp -s "$1.new" "$1"; then rm -f "$1.new"; else mv -f "$1.new" "$1"; CHANGED=1; fi
}

# The certificates of scripts/tls-certs.sh into the root, readable by rabbitmq only.
put_certs() {
  local tls owner f
  tls=$("$SCRIPT_DIR/tls-certs.sh" dir) || die "scripts/tls-certs.sh failed"
  owner=$(awk -F: '$1 == "rabbitmq" { print $3 ":" $4 }' "$ROOT/etc/passwd")
  [ -n "$owner" ] || die "no rabbitmq user in $ROOT/etc/passwd"
  install -d -m 0750 -o "${owner%:*}" -g "${owner#*:}" "$ROOT/etc/rabbitmq/tls"
  for f in ca.pem server.pem server.key; do
    if ! cmp -s "$tls/$f" "$ROOT/etc/rabbitmq/tls/$f"; then
      install -m 0600 -o "${owner%:*}" -g "${owner#*:}" "$tls/$f" "$ROOT/etc/rabbitmq/tls/$f.new"
      mv -f "$ROOT/etc/rabbitmq/tls/$f.new" "$ROOT/etc/rabbitmq/tls/$f"
      CHANGED=1
    fi
  done
}

configure_root() {
  mountpoint -q "$ROOT/proc" || mount -t proc proc "$ROOT/proc"
  grep -qsE '^[^#]*[[:space:]]localhost([[:space:]]|$)' "$ROOT/etc/hosts" ||
    printf '127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n' >>"$ROOT/etc/hosts"
  put "$ROOT/etc/rabbitmq/rabbitmq-env.conf" <<EOF
# written by ruststream scripts/rabbitmq4.sh
ulimit -n "\$(ulimit -Hn)" 2>/dev/null || true
NODENAME=$NODE@localhost
DIST_PORT=$DIST_PORT
ERL_EPMD_PORT=$EPMD_PORT
export ERL_EPMD_ADDRESS=127.0.0.1  # epmd and distribution on loopback only
SERVER_ADDITIONAL_ERL_ARGS="-kernel inet_dist_use_interface {127,0,0,1}"
CTL_ERL_ARGS="-kernel inet_dist_use_interface {127,0,0,1}"
EOF
  put "$ROOT/etc/rabbitmq/rabbitmq.conf" <<EOF
# written by ruststream scripts/rabbitmq4.sh
listeners.tcp.default = 127.0.0.1:$PORT
listeners.ssl.default = 127.0.0.1:$TLS_PORT
ssl_options.cacertfile = /etc/rabbitmq/tls/ca.pem
ssl_options.certfile = /etc/rabbitmq/tls/server.pem
ssl_options.keyfile = /etc/rabbitmq/tls/server.key
ssl_options.verify = verify_none
ssl_options.fail_if_no_peer_cert = false
loopback_users = none
EOF
  put_certs
  local changed=$CHANGED  # definitions are imported on every start: no restart for them
  put "$ROOT/etc/rabbitmq/ruststream-definitions.json" <"$SCRIPT_DIR/rabbitmq4-definitions.json"
  CHANGED=$changed
}

# Pids of the node's beam.smp (arg "-s rabbit") and of the epmd run from the root;
# rabbitmqctl calls in flight are not listed.
root_procs() {
  local p
  for p in /proc/[0-9]*; do
    [ "$(readlink "$p/root" 2>/dev/null)" = "$ROOT" ] || continue
    case "$(cat "$p/comm" 2>/dev/null)" in
      # Not those of scripts/rabbitmq4-cluster.sh (same root, epmd on 4371).
      epmd) tr '\0' ' ' <"$p/environ" 2>/dev/null | grep -q 'ERL_EPMD_PORT=4371' ||
              echo "${p#/proc/} epmd" ;;
      beam.smp) tr '\0' ' ' <"$p/cmdline" 2>/dev/null | grep -- ' -s rabbit ' | grep -qv -- '-epmd_port 4371 ' &&
                  echo "${p#/proc/} node" ;;
    esac
  done
  return 0
}
node_alive() { root_procs | grep ' node$' >/dev/null; }  # no -q: pipefail + SIGPIPE

# Kill what is left of an earlier node: its beam.smp (stale or hung) and the root's epmd.
kill_root_procs() {
  local i pids
  pids=$(root_procs | cut -d' ' -f1 | xargs)
  [ -n "$pids" ] || return 0
  log "killing leftover node/epmd processes of the root: $pids"
  kill $pids 2>/dev/null || true
  for i in 1 2 3 4 5; do kill -0 $pids 2>/dev/null || return 0; sleep 1; done
  kill -9 $pids 2>/dev/null || true
}

listening() { ss -Hltn "sport = :$1" | grep -q .; }

start() {
  build_root
  configure_root
  if node_alive && running 15 && { [ "$CHANGED" = 1 ] || ! listening "$TLS_PORT"; }; then
    # Started with another configuration (before the TLS listener, or older
    # certificates): the node reads it at boot only.
    log "configuration changed: restarting the node"
    stop
    configure_root
  fi
  if node_alive && running 15; then  # returns at once when up; waits a little if busy
    log "node already running"
  else
    kill_root_procs  # stale epmd / half-dead node from an earlier run
    rm -f "$ROOT"/var/lib/rabbitmq/mnesia/$NODE@localhost.pid
    local p
    for p in "$PORT" "$TLS_PORT"; do
      ! listening "$p" || die "port $p is already taken by another process: $(ss -Hltnp "sport = :$p")"
    done
    log "starting $NODE@localhost"
    local t0=$SECONDS
    "${CLEAN_ENV[@]}" chroot "$ROOT" rabbitmq-server -detached >&2 9>&- || die "rabbitmq-server -detached failed"
    until running 5; do
      [ $((SECONDS - t0)) -lt "$START_TIMEOUT" ] ||
        die "node not up after ${START_TIMEOUT} s; see $ROOT/var/log/rabbitmq/"
      sleep 1
    done
    log "node up in $((SECONDS - t0)) s"
  fi
  local i
  for i in $(seq 50); do listening "$TLS_PORT" && break; sleep 0.2; done
  listening "$TLS_PORT" || die "no TLS listener on $TLS_PORT; see $ROOT/var/log/rabbitmq/"
  ctl -q import_definitions /etc/rabbitmq/ruststream-definitions.json >&2 ||
    die "import_definitions failed"
  # the CLI calls the import asynchronous: wait until the queues exist
  for i in $(seq 20); do
    [ "$(ctl -q list_queues name | grep -cxE 'rs\.(quorum|quorum\.limited|dead|classic)')" = 4 ] && break
    [ "$i" = 20 ] && die "definitions not visible after import"; sleep 0.5
  done
  echo "$NAME ready on 127.0.0.1:$PORT (TLS: $TLS_PORT)"
}

stop() {
  [ -d "$ROOT" ] || { log "no root at $ROOT, nothing to stop"; return; }
  if node_alive && running 5; then
    log "shutting down $NODE@localhost"
    ctl -q shutdown >&2 || log "shutdown reported an error; killing leftovers"
  fi
  kill_root_procs
  umount_below "$ROOT"
  log "stopped"
}

status() {
  [ -x "$ROOT/usr/sbin/rabbitmq-server" ] || { echo "$NAME: root not built ($ROOT)"; return 3; }
  if node_alive && running 5; then
    echo "$NAME running on 127.0.0.1:$PORT (TLS: $TLS_PORT), version $(ctl -q version)"
  else
    echo "$NAME not running"; return 3
  fi
}

# ctl with import_definitions and no file: rabbitmqctl 4.0.5 hangs reading definitions
# from stdin (rabbitmq-server#13157), so hand it stdin as a file in the root instead.
ctl_cmd() {
  local last=${!#} f rc=0 args=("$@")
  [ "$last" = - ] && unset 'args[-1]'  # "-" (stdin) is accepted by the help text only
  if [[ " $* " == *" import_definitions "* && " $* " != *" help "* && ( $last == import_definitions || $last == -* ||
        $last == json || $last == erlang ) ]]; then
    f=$(mktemp --suffix=.json "$ROOT/tmp/rs-definitions.XXXXXX")
    chmod 0644 "$f"; cat >"$f"
    ctl "${args[@]}" "${f#"$ROOT"}" || rc=$?
    rm -f "$f"; return "$rc"
  fi
  ctl "$@"
}

lock() { mkdir -p "$CACHE"; exec 9>"$CACHE/$NAME.lock"; flock 9; }

case "${1:-start}" in
  start)   lock; start ;;
  stop)    lock; stop ;;
  restart) lock; stop; start ;;
  status)  status ;;
  ctl)     shift; [ -x "$ROOT/usr/sbin/rabbitmqctl" ] || die "root not built; run $0 start"; ctl_cmd "$@" ;;
  *)       die "usage: $0 [start|stop|restart|status|ctl ARGS...]" ;;
esac
