#!/usr/bin/env bash
# nats-cluster.sh - run a three-node NATS cluster with JetStream on 127.0.0.1 (clients
# on 4231-4233, routes on 6231-6233, servers n1-n3, cluster `ruststream`), each node with
# a store directory of its own, so the NATS adapter's cluster test
# (crates/ruststream-nats/tests/cluster.rs) can kill and restart nodes of an R3 stream.
# Idempotent: starts the nodes that do not answer, then waits for JetStream to have a
# meta leader.
#
# Usage: scripts/nats-cluster.sh [start|stop|status|url]
#        scripts/nats-cluster.sh kill NODE      (SIGKILL; NODE is n1, n2 or n3)
#        scripts/nats-cluster.sh start NODE     (again, on its store)
#
# Node directories: ${RUSTSTREAM_CACHE:-/var/cache/ruststream}/nats-cluster/<node>.
#
# Another server build, as a second cluster beside the first (scripts/nats-current.sh):
# RUSTSTREAM_NATS_SERVER names the binary (default nats-server on PATH),
# NATS_CLUSTER_PORTS the first client port less one (default 4230: routes are 2,000
# above, monitoring 4,000 above) and NATS_CLUSTER_DIR the folder under the cache
# (default nats-cluster).
set -euo pipefail

NODES=(n1 n2 n3)
HOST=127.0.0.1
SERVER=${RUSTSTREAM_NATS_SERVER:-nats-server}
PORTS=${NATS_CLUSTER_PORTS:-4230}
BASE=${RUSTSTREAM_CACHE:-/var/cache/ruststream}/${NATS_CLUSTER_DIR:-nats-cluster}
log() { echo "nats-cluster: $*" >&2; }
die() { echo "nats-cluster: ERROR: $*" >&2; exit 1; }

index() { case "$1" in n1) echo 1 ;; n2) echo 2 ;; n3) echo 3 ;; *) die "no node $1 (n1, n2, n3)" ;; esac; }
client_port() { echo $((PORTS + $(index "$1"))); }
route_port() { echo $((PORTS + 2000 + $(index "$1"))); }
monitor_port() { echo $((PORTS + 4000 + $(index "$1"))); }
answering() { (exec 3<>"/dev/tcp/$HOST/$(client_port "$1")") 2>/dev/null; }
url() {
  local node urls=()
  for node in "${NODES[@]}"; do urls+=("nats://$HOST:$(client_port "$node")"); done
  (IFS=,; echo "${urls[*]}")
}

start_node() {
  local node=$1 dir="$BASE/$1" routes=() other
  answering "$node" && return
  command -v "$SERVER" >/dev/null || die "$SERVER is not installed (apt-get install nats-server)"
  mkdir -p "$dir"
  for other in "${NODES[@]}"; do
    [ "$other" = "$node" ] || routes+=("nats-route://$HOST:$(route_port "$other")")
  done
  nohup "$SERVER" -n "$node" -a "$HOST" -p "$(client_port "$node")" \
    -m "$(monitor_port "$node")" -js -sd "$dir/store" \
    --cluster_name ruststream --cluster "nats://$HOST:$(route_port "$node")" \
    --routes "$(IFS=,; echo "${routes[*]}")" \
    -l "$dir/nats.log" -P "$dir/nats.pid" >/dev/null 2>&1 &
  for _ in $(seq 100); do answering "$node" && return; sleep 0.1; done
  die "node $node did not answer (see $dir/nats.log)"
}

kill_node() {
  local pid_file="$BASE/$1/nats.pid"
  index "$1" >/dev/null
  [ -f "$pid_file" ] || { log "$1 has no pid file"; return; }
  kill -9 "$(cat "$pid_file")" 2>/dev/null || true
  rm -f "$pid_file"
  for _ in $(seq 50); do answering "$1" || return 0; sleep 0.1; done
  die "node $1 still answers"
}

# The monitoring endpoint's /jsz of a node (bash's /dev/tcp: no HTTP client needed).
jsz() {
  local port
  port=$(monitor_port "$1")
  (exec 3<>"/dev/tcp/$HOST/$port" &&
    printf 'GET /jsz HTTP/1.0\r\nHost: %s\r\n\r\n' "$HOST" >&3 && timeout 2 cat <&3) 2>/dev/null
}

# JetStream answers once the cluster has a meta leader.
meta_ready() {
  local node
  for node in "${NODES[@]}"; do
    jsz "$node" | grep -q '"leader"' && return 0
  done
  return 1
}

start() {
  local node
  for node in "${NODES[@]}"; do start_node "$node"; done
  for _ in $(seq 150); do meta_ready && { log "up: $(url)"; return; }; sleep 0.2; done
  die "JetStream has no meta leader after 30 s (see $BASE/*/nats.log)"
}

case "${1:-start}" in
  start) if [ -n "${2:-}" ]; then start_node "$2"; else start; fi ;;
  kill) kill_node "${2:?kill which node: n1, n2 or n3}" ;;
  stop) for node in "${NODES[@]}"; do kill_node "$node"; done ;;
  status) for node in "${NODES[@]}"; do
            if answering "$node"; then echo "$node up"; else echo "$node down"; fi
          done ;;
  url) url ;;
  *) die "usage: $0 [start|stop|status|url] | kill NODE | start NODE" ;;
esac
