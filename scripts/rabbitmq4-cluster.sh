#!/usr/bin/env bash
# rabbitmq4-cluster.sh - a three-node RabbitMQ 4 cluster, run from the same Debian 13
# root as scripts/rabbitmq4.sh (built by it), next to its single node, for the tests that
# take a cluster node down mid-run (crates/ruststream-lapin/tests/cluster.rs).
# Needs root. Idempotent: running nodes are left as they are. The nodes that are down
# start at once (a node restarting from its data waits for its peers' tables, so one by
# one they never came up); data they cannot agree on is wiped and the cluster made afresh
# (it holds only test queues). RABBITMQ4_START_TIMEOUT (default 120 s) bounds the wait.
#
# Nodes rs-cluster-N@localhost (N = 1, 2, 3): AMQP 0-9-1/1.0 on 127.0.0.1:568N,
# distribution on 2568N, their own epmd on 4371, data (mnesia, logs, configuration) in
# ROOT/var/lib/rabbitmq-cluster/N. The single node of scripts/rabbitmq4.sh
# (rabbit4@localhost, 5673, epmd 4370) is never touched.
#
# Usage: scripts/rabbitmq4-cluster.sh [start]    start the nodes that are down, join them
#                                               (10-30 s here; about 70 s when it wipes)
#        scripts/rabbitmq4-cluster.sh stop       shut every node down
#        scripts/rabbitmq4-cluster.sh status     exit 0 if all three run as one cluster
#        scripts/rabbitmq4-cluster.sh kill N     kill node N at once (SIGKILL), as a crash
#        scripts/rabbitmq4-cluster.sh start-node N   start node N again (it rejoins)
#        scripts/rabbitmq4-cluster.sh ctl N ARGS...  rabbitmqctl ARGS on node N
set -euo pipefail

SCRIPT_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
CACHE=${RUSTSTREAM_CACHE:-/var/cache/ruststream}
ROOT=$CACHE/rabbitmq4-root
EPMD_PORT=4371
START_TIMEOUT=${RABBITMQ4_START_TIMEOUT:-120}
NODES=(1 2 3)

log() { echo "rabbitmq4-cluster: $*" >&2; }
die() { echo "rabbitmq4-cluster: ERROR: $*" >&2; exit 1; }

[ "$(id -u)" = 0 ] || die "must run as root (chroot)"

name() { echo "rs-cluster-$1@localhost"; }
port() { echo $((5680 + $1)); }
data() { echo "/var/lib/rabbitmq-cluster/$1"; }  # inside the root

# The environment of node N (and of rabbitmqctl talking to it): its own env file, so
# that the single node's rabbitmq-env.conf (NODENAME=rabbit4@localhost) is not read.
node_env() {
  local d; d=$(data "$1")
  echo env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/var/lib/rabbitmq LANG=C.UTF-8 \
    RABBITMQ_CONF_ENV_FILE="$d/rabbitmq-env.conf"
}

ctl() { local n=$1; shift; $(node_env "$n") chroot "$ROOT" rabbitmqctl -n "$(name "$n")" "$@" 9>&-; }
running() { ctl "$1" -q await_startup --timeout "${2:-5}" >/dev/null 2>&1; }

# The beam.smp of node N (from its pid file, checked).
node_pid() {
  local f pid
  f=$ROOT$(data "$1")/rabbitmq.pid
  pid=$(cat "$f" 2>/dev/null || true)
  [ -n "$pid" ] || return 0
  [ "$(readlink "/proc/$pid/root" 2>/dev/null)" = "$ROOT" ] || return 0
  [ "$(cat "/proc/$pid/comm" 2>/dev/null)" = beam.smp ] || return 0
  echo "$pid"
}

configure() {
  local n=$1 d owner
  d=$ROOT$(data "$n")
  owner=$(awk -F: '$1 == "rabbitmq" { print $3 ":" $4 }' "$ROOT/etc/passwd")
  install -d -m 0755 -o "${owner%:*}" -g "${owner#*:}" "$d" "$d/mnesia" "$d/log"
  cat >"$d/rabbitmq-env.conf" <<ENV
# written by ruststream scripts/rabbitmq4-cluster.sh
NODENAME=$(name "$n")
NODE_PORT=$(port "$n")
DIST_PORT=$((25680 + n))
ERL_EPMD_PORT=$EPMD_PORT
export ERL_EPMD_ADDRESS=127.0.0.1
MNESIA_BASE=$(data "$n")/mnesia
LOG_BASE=$(data "$n")/log
CONFIG_FILE=$(data "$n")/rabbitmq.conf
ENABLED_PLUGINS_FILE=$(data "$n")/enabled_plugins
PID_FILE=$(data "$n")/rabbitmq.pid
SERVER_ADDITIONAL_ERL_ARGS="-kernel inet_dist_use_interface {127,0,0,1}"
CTL_ERL_ARGS="-kernel inet_dist_use_interface {127,0,0,1}"
ENV
  cat >"$d/rabbitmq.conf" <<CONF
# written by ruststream scripts/rabbitmq4-cluster.sh
listeners.tcp.default = 127.0.0.1:$(port "$n")
loopback_users = none
cluster_partition_handling = pause_minority
CONF
  echo '[].' >"$d/enabled_plugins"
  chown "$owner" "$d/rabbitmq-env.conf" "$d/rabbitmq.conf" "$d/enabled_plugins"
}

listening() { ss -Hltn "sport = :$1" | grep -q .; }

# The cluster's own epmd (port 4371), started once before the nodes (three nodes
# starting at the same time would each try to start it).
epmd_pids() {
  local pid
  for pid in $(pgrep -x epmd || true); do
    tr '\0' ' ' <"/proc/$pid/environ" 2>/dev/null | grep -q "ERL_EPMD_PORT=$EPMD_PORT" && echo "$pid"
  done
  return 0
}
start_epmd() {
  listening "$EPMD_PORT" && return
  env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin ERL_EPMD_PORT=$EPMD_PORT ERL_EPMD_ADDRESS=127.0.0.1 \
    chroot "$ROOT" epmd -daemon 9>&-
  for _ in $(seq 50); do listening "$EPMD_PORT" && return; sleep 0.1; done
  die "the cluster's epmd did not listen on $EPMD_PORT"
}

prepare() {
  [ -x "$ROOT/usr/sbin/rabbitmq-server" ] || "$SCRIPT_DIR/rabbitmq4.sh" start >/dev/null
  mountpoint -q "$ROOT/proc" || mount -t proc proc "$ROOT/proc"
  local n; for n in "${NODES[@]}"; do configure "$n"; done
  start_epmd
}

# Launch node N (not waiting for it), unless it runs.
launch() {
  local n=$1
  [ -z "$(node_pid "$n")" ] || return 0
  ! listening "$(port "$n")" || die "port $(port "$n") is taken by another process: $(ss -Hltnp "sport = :$(port "$n")")"
  rm -f "$ROOT$(data "$n")/rabbitmq.pid"
  log "starting $(name "$n") on 127.0.0.1:$(port "$n")"
  $(node_env "$n") chroot "$ROOT" rabbitmq-server -detached >&2 9>&- || die "rabbitmq-server -detached failed"
}

# Wait until every node given is up: its AMQP port listens (cheap to poll; RabbitMQ opens
# it once its tables are loaded), then rabbitmqctl confirms. A node restarting from
# existing data waits for its peers' tables: they must all be launched first.
await_nodes() {
  local t0=$SECONDS n left=("$@") still
  while [ "${#left[@]}" -gt 0 ]; do
    still=()
    for n in "${left[@]}"; do
      if [ -z "$(node_pid "$n")" ] && [ $((SECONDS - t0)) -gt 10 ]; then
        log "$(name "$n") exited while starting; see $ROOT$(data "$n")/log"; return 1
      fi
      if listening "$(port "$n")" && running "$n" 10; then
        log "$(name "$n") up after $((SECONDS - t0)) s"
      else
        still+=("$n")
      fi
    done
    left=("${still[@]}")
    [ "${#left[@]}" -eq 0 ] && return 0
    if [ $((SECONDS - t0)) -ge "$START_TIMEOUT" ]; then
      log "not up after $START_TIMEOUT s: $(for n in "${left[@]}"; do name "$n"; done | xargs); see $ROOT/var/lib/rabbitmq-cluster/N/log"
      return 1
    fi
    sleep 1
  done
}

start_node() {
  prepare
  launch "$1"
  await_nodes "$1" || die "$(name "$1") did not start"
}

members() { ctl "$1" -q cluster_status --formatter json 2>/dev/null | python3 -c '
import json, sys
print(" ".join(sorted(json.load(sys.stdin).get("running_nodes", []))))'; }

join() {
  local n=$1 first; first=$(name 1)
  if members "$n" | grep -qw "$first"; then return; fi
  log "joining $(name "$n") to $first"
  ctl "$n" -q stop_app >&2
  ctl "$n" -q join_cluster "$first" >&2 || { ctl "$n" -q reset >&2; ctl "$n" -q join_cluster "$first" >&2; }
  ctl "$n" -q start_app >&2
}

kill_nodes() {
  local n pid pids=()
  for n in "${NODES[@]}"; do pid=$(node_pid "$n"); [ -z "$pid" ] || pids+=("$pid"); done
  [ "${#pids[@]}" -eq 0 ] || kill -9 "${pids[@]}" 2>/dev/null || true
  for _ in $(seq 50); do
    for n in "${NODES[@]}"; do [ -z "$(node_pid "$n")" ] || { sleep 0.1; continue 2; }; done
    return 0
  done
}

# Launch every node that is down at once, wait for all, join the fresh ones.
form() {
  local n
  prepare
  for n in "${NODES[@]}"; do launch "$n"; done
  await_nodes "${NODES[@]}" || return 1
  for n in 2 3; do join "$n" || return 1; done
  [ "$(members 1)" = "$(want)" ]
}

want() { echo "$(name 1) $(name 2) $(name 3)"; }

start() {
  local t0=$SECONDS
  if ! form; then
    # Data the nodes cannot agree on (a node wiped while the others remember it, a
    # half-made join): the cluster holds only test queues, so start it afresh.
    log "the cluster did not form from its data: wiping it and starting afresh"
    kill_nodes
    local n; for n in "${NODES[@]}"; do rm -rf --one-file-system "$ROOT$(data "$n")"; done
    form || die "the cluster did not form from a fresh state either (members of node 1: $(members 1 || true))"
  fi
  log "cluster formed in $((SECONDS - t0)) s"
  echo "rabbitmq4 cluster ready: 127.0.0.1:5681, 127.0.0.1:5682, 127.0.0.1:5683"
}

stop() {
  local n
  # All at once: stopped one by one, the last two would each be a minority.
  for n in "${NODES[@]}"; do
    [ -z "$(node_pid "$n")" ] || { log "shutting down $(name "$n")"; ctl "$n" -q -t 60 shutdown >&2 || true; } &
  done
  wait
  kill_nodes
  local pid; for pid in $(epmd_pids); do kill "$pid" 2>/dev/null || true; done
  log "stopped"
}

status() {
  # No node, no rabbitmqctl call: it would start an epmd of its own.
  if [ -n "$(node_pid 1)" ] && [ "$(members 1 2>/dev/null || true)" = "$(want)" ]; then
    echo "rabbitmq4 cluster running: $(want)"
  else
    echo "rabbitmq4 cluster not running as three nodes"; return 3
  fi
}

lock() { mkdir -p "$CACHE"; exec 9>"$CACHE/rabbitmq4-cluster.lock"; flock 9; }

case "${1:-start}" in
  start)      lock; start ;;
  stop)       lock; stop ;;
  status)     status ;;
  kill)       pid=$(node_pid "${2:?node number}"); [ -n "$pid" ] || die "$(name "$2") is not running"
              kill -9 "$pid"; while kill -0 "$pid" 2>/dev/null; do sleep 0.05; done
              log "killed $(name "$2") (pid $pid)" ;;
  start-node) lock; start_node "${2:?node number}" ;;
  ctl)        shift; n=${1:?node number}; shift; ctl "$n" "$@" ;;
  *)          die "usage: $0 [start|stop|status|kill N|start-node N|ctl N ARGS...]" ;;
esac
