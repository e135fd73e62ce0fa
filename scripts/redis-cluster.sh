#!/usr/bin/env bash
# redis-cluster.sh - run a Redis Cluster on 127.0.0.1: three masters on 7001-7003, each
# with a replica (7004-7006) so that a master's death fails over, keeping nothing on disk
# but each node's nodes.conf. For the Redis adapter's cluster tests
# (crates/ruststream-redis/tests/cluster.rs, and cluster_failover.rs, which kills the
# master of its stream). Idempotent: starts the nodes that do not answer, adds the
# replicas to a cluster formed without them, forms the cluster only if it is not formed
# yet, puts 7001-7003 back as the masters (a replica's `CLUSTER FAILOVER`, which loses
# nothing), then waits for `cluster_state:ok`.
#
# Usage: scripts/redis-cluster.sh [start|stop|status|url]
#        scripts/redis-cluster.sh kill PORT    SIGKILL the node on PORT (as a crash)
#        scripts/redis-cluster.sh start PORT   start that node again (it rejoins; a
#                                              master that failed over comes back as a
#                                              replica) and wait until it is in sync
#
# Clients connect with the masters as seeds:
#   redis-cluster://127.0.0.1:7001?node=127.0.0.1:7002&node=127.0.0.1:7003
# Node directories: ${RUSTSTREAM_CACHE:-/var/cache/ruststream}/redis-cluster/<port>.
#
# Nodes keep no data on disk: a killed master must not be started again before its
# replica has taken over (cluster-node-timeout 5 s, then an election), or it comes back
# empty, still a master.
set -euo pipefail

MASTERS=(7001 7002 7003)
REPLICAS=(7004 7005 7006)  # 7004 replicates 7001, 7005 7002, 7006 7003
PORTS=("${MASTERS[@]}" "${REPLICAS[@]}")
HOST=127.0.0.1
BASE=${RUSTSTREAM_CACHE:-/var/cache/ruststream}/redis-cluster
log() { echo "redis-cluster: $*" >&2; }
die() { echo "redis-cluster: ERROR: $*" >&2; exit 1; }
. "$(dirname "${BASH_SOURCE[0]}")/lib/redis-node.sh"

state_ok() { [ "$(info_field "${MASTERS[0]}" 'cluster info' cluster_state)" = ok ]; }
node_id() { cli "$1" cluster myid 2>/dev/null | tr -d '\r'; }
url() { echo "redis-cluster://$HOST:${MASTERS[0]}?node=$HOST:${MASTERS[1]}&node=$HOST:${MASTERS[2]}"; }

# The masters were made a cluster: each knows the others and every slot is served.
masters_formed() {
  local port known
  for port in "${MASTERS[@]}"; do
    known=$(info_field "$port" 'cluster info' cluster_known_nodes)
    [ "${known:-0}" -ge "${#MASTERS[@]}" ] || return 1
  done
  [ "$(info_field "${MASTERS[0]}" 'cluster info' cluster_slots_assigned)" = 16384 ]
}

start_node() {
  local port=$1 dir="$BASE/$1"
  answering "$port" && return
  command -v redis-server >/dev/null || die "redis-server is not installed (apt-get install redis-server)"
  mkdir -p "$dir"
  redis-server --daemonize yes --bind "$HOST" --port "$port" \
    --cluster-enabled yes --cluster-config-file nodes.conf --cluster-node-timeout 5000 \
    --save '' --appendonly no --dir "$dir" --logfile "$dir/redis.log" \
    --pidfile "$dir/redis.pid" >&2 9>&-
  for _ in $(seq 50); do answering "$port" && return; sleep 0.1; done
  die "node $port did not answer (see $dir/redis.log)"
}



# A replica for each master that has none yet (a cluster formed before the replicas).
add_replicas() {
  local i master replica
  for i in 0 1 2; do
    master=${MASTERS[$i]} replica=${REPLICAS[$i]}
    [ "$(info_field "$replica" 'cluster info' cluster_known_nodes)" = 1 ] || continue
    log "adding $replica as a replica of $master"
    cli "$replica" flushall >/dev/null 2>&1 || true
    cli "$replica" cluster reset hard >/dev/null
    redis-cli --cluster add-node "$HOST:$replica" "$HOST:$master" \
      --cluster-slave --cluster-master-id "$(node_id "$master")" >&2 ||
      die "redis-cli --cluster add-node $replica failed"
  done
}

# 7001-7003 masters again: a master that failed over comes back as a replica (of the
# node that took its slots); a manual failover on it swaps them back without loss.
restore_masters() {
  local port
  for port in "${MASTERS[@]}"; do
    [ "$(role "$port")" = slave ] || continue
    await_sync "$port"
    log "making $port a master again (CLUSTER FAILOVER)"
    cli "$port" cluster failover >/dev/null
    for _ in $(seq 100); do [ "$(role "$port")" = master ] && break; sleep 0.1; done
    [ "$(role "$port")" = master ] || die "node $port did not become a master again"
    # Until the seed node sees it too (clients read the topology from the seeds).
    for _ in $(seq 100); do
      cli "${MASTERS[0]}" cluster nodes 2>/dev/null | tr -d '\r' |
        awk -v a="$HOST:$port@" 'index($2, a) == 1 && $3 ~ /master/ && NF > 8 { ok = 1 } END { exit !ok }' && break
      sleep 0.1
    done
  done
}

# Before a node that was a master starts again: wait until another node took its slots
# (it would otherwise come back empty, still their master).
await_failover() {
  local port=$1 id other
  id=$(awk '/myself/ { print $1 }' "$BASE/$port/nodes.conf" 2>/dev/null || true)
  [ -n "$id" ] || return 0
  for other in "${PORTS[@]}"; do
    [ "$other" != "$port" ] && answering "$other" && break
  done
  for _ in $(seq 300); do
    # CLUSTER NODES: id addr flags master ping pong epoch link slots...; slots make a master.
    cli "$other" cluster nodes 2>/dev/null | tr -d '\r' |
      awk -v id="$id" '$1 == id && $3 ~ /master/ && NF > 8 { found = 1 } END { exit !found }' || return 0
    sleep 0.1
  done
  die "node $port still serves its slots in the others' view after 30 s: no replica took over"
}

start() {
  local port
  for port in "${PORTS[@]}"; do start_node "$port"; done
  if ! masters_formed; then
    # A node left over from a half-formed cluster (or one whose peers lost their
    # nodes.conf) would refuse to join: start every node from a clean slate.
    for port in "${PORTS[@]}"; do
      cli "$port" flushall >/dev/null 2>&1 || true
      cli "$port" cluster reset hard >/dev/null
    done
    local nodes=()
    for port in "${MASTERS[@]}"; do nodes+=("$HOST:$port"); done
    log "creating the cluster on ${nodes[*]}"
    redis-cli --cluster create "${nodes[@]}" --cluster-replicas 0 --cluster-yes >&2 ||
      die "redis-cli --cluster create failed"
  fi
  for _ in $(seq 100); do state_ok && break; sleep 0.1; done
  add_replicas
  for port in "${REPLICAS[@]}" "${MASTERS[@]}"; do
    [ "$(role "$port")" != slave ] || await_sync "$port"
  done
  restore_masters
  for _ in $(seq 100); do state_ok && break; sleep 0.1; done
  state_ok || die "cluster_state is not ok after 10 s (cluster info on ${MASTERS[0]}: $(cli "${MASTERS[0]}" cluster info | tr -d '\r' | head -1))"
  echo "redis cluster ready: masters $HOST:${MASTERS[0]}-${MASTERS[-1]}, replicas $HOST:${REPLICAS[0]}-${REPLICAS[-1]}"
}

stop() {
  local port
  for port in "${PORTS[@]}"; do
    cli "$port" shutdown nosave >/dev/null 2>&1 || true
  done
  log "stopped"
}

lock() { mkdir -p "$BASE"; exec 9>"$BASE/.lock"; flock 9; }

case "${1:-start}" in
  start) lock
         if [ -n "${2:-}" ]; then
           answering "$2" || await_failover "$2"
           start_node "$2"
           [ "$(role "$2")" != slave ] || await_sync "$2"
         else
           start
         fi ;;
  kill) kill_node "${2:?kill which node: a port, 7001-7006}" ;;
  stop) lock; stop ;;
  status) state_ok ;;
  url) url ;;
  *) die "usage: $0 [start|stop|status|url] | kill PORT | start PORT" ;;
esac
