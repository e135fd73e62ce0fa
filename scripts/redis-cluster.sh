#!/usr/bin/env bash
# redis-cluster.sh - run a 3-master Redis Cluster (no replicas) on 127.0.0.1:7001-7003,
# keeping nothing on disk but each node's nodes.conf, so the Redis adapter's cluster test
# (crates/ruststream-redis/tests/cluster.rs) has a cluster to run against. Idempotent:
# starts the nodes that do not answer, forms the cluster only if it is not formed yet,
# then waits for `cluster_state:ok`.
#
# Usage: scripts/redis-cluster.sh [start|stop|status]
#
# Node directories: ${RUSTSTREAM_CACHE:-/var/cache/ruststream}/redis-cluster/<port>.
set -euo pipefail

PORTS=(7001 7002 7003)
HOST=127.0.0.1
BASE=${RUSTSTREAM_CACHE:-/var/cache/ruststream}/redis-cluster
log() { echo "redis-cluster: $*" >&2; }
die() { echo "redis-cluster: ERROR: $*" >&2; exit 1; }

cli() { local port=$1; shift; redis-cli -h "$HOST" -p "$port" "$@"; }
answering() { cli "$1" ping 2>/dev/null | grep -q PONG; }
state_ok() { cli "${PORTS[0]}" cluster info 2>/dev/null | tr -d '\r' | grep -qx 'cluster_state:ok'; }
# A node knows of the others and serves slots: the cluster was formed.
formed() {
  local port known
  for port in "${PORTS[@]}"; do
    known=$(cli "$port" cluster info 2>/dev/null | tr -d '\r' | sed -n 's/^cluster_known_nodes://p')
    [ "${known:-0}" -ge "${#PORTS[@]}" ] || return 1
  done
  [ "$(cli "${PORTS[0]}" cluster info 2>/dev/null | tr -d '\r' | sed -n 's/^cluster_slots_assigned://p')" = 16384 ]
}

start_node() {
  local port=$1 dir="$BASE/$1"
  answering "$port" && return
  command -v redis-server >/dev/null || die "redis-server is not installed (apt-get install redis-server)"
  mkdir -p "$dir"
  redis-server --daemonize yes --bind "$HOST" --port "$port" \
    --cluster-enabled yes --cluster-config-file nodes.conf --cluster-node-timeout 5000 \
    --save '' --appendonly no --dir "$dir" --logfile "$dir/redis.log" \
    --pidfile "$dir/redis.pid" >&2
  for _ in $(seq 50); do answering "$port" && return; sleep 0.1; done
  die "node $port did not answer (see $dir/redis.log)"
}

start() {
  local port
  for port in "${PORTS[@]}"; do start_node "$port"; done
  if ! formed; then
    # A node left over from a half-formed cluster (or one whose peers lost their
    # nodes.conf) would refuse to join: start every node from a clean slate.
    for port in "${PORTS[@]}"; do
      cli "$port" flushall >/dev/null 2>&1 || true
      cli "$port" cluster reset hard >/dev/null
    done
    local nodes=()
    for port in "${PORTS[@]}"; do nodes+=("$HOST:$port"); done
    log "creating the cluster on ${nodes[*]}"
    redis-cli --cluster create "${nodes[@]}" --cluster-replicas 0 --cluster-yes >&2 ||
      die "redis-cli --cluster create failed"
  fi
  for _ in $(seq 100); do state_ok && break; sleep 0.1; done
  state_ok || die "cluster_state is not ok after 10 s (cluster info on ${PORTS[0]}: $(cli "${PORTS[0]}" cluster info | tr -d '\r' | head -1))"
  echo "redis cluster ready on $HOST:${PORTS[0]}-${PORTS[-1]}"
}

stop() {
  local port
  for port in "${PORTS[@]}"; do
    cli "$port" shutdown nosave >/dev/null 2>&1 || true
  done
  log "stopped"
}

case "${1:-start}" in
  start) start ;;
  stop) stop ;;
  status) state_ok ;;
  *) die "usage: $0 [start|stop|status]" ;;
esac
