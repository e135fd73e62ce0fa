#!/usr/bin/env bash
# redis-sentinel.sh - run Redis with Sentinel on 127.0.0.1 from the machine's
# redis-server: one master (6501), two replicas (6502, 6503) and three sentinels
# (26501-26503) watching them as the master `ruststream` (quorum 2), keeping nothing on
# disk but the sentinels' own configuration. For the Redis adapter's Sentinel tests
# (crates/ruststream-redis/tests/sentinel*.rs; sentinel_failover.rs kills the master).
# Idempotent: starts what does not answer, and waits until every sentinel knows the
# master, both replicas and the other sentinels.
#
# Usage: scripts/redis-sentinel.sh [start|stop|status|url|master]
#        scripts/redis-sentinel.sh kill PORT    SIGKILL the Redis node on PORT (as a crash)
#        scripts/redis-sentinel.sh start PORT   start that node again, as a replica of
#                                               the master the sentinels name, and wait
#                                               until it is in sync
#        scripts/redis-sentinel.sh reset        the master back on 6501 (a failover the
#                                               sentinels run, which loses nothing)
#
# Clients: redis-sentinel://127.0.0.1:26501,127.0.0.1:26502,127.0.0.1:26503/ruststream
# Directories: ${RUSTSTREAM_CACHE:-/var/cache/ruststream}/redis-sentinel/<port>.
#
# The sentinels take a master for down after 2 s without an answer
# (`down-after-milliseconds 2000`; Redis's default is 30 s) so that a failover test runs
# in seconds; the rest is Sentinel's defaults.
set -euo pipefail

MASTER=6501
REPLICAS=(6502 6503)
NODES=("$MASTER" "${REPLICAS[@]}")
SENTINELS=(26501 26502 26503)
NAME=ruststream
HOST=127.0.0.1
BASE=${RUSTSTREAM_CACHE:-/var/cache/ruststream}/redis-sentinel
log() { echo "redis-sentinel: $*" >&2; }
die() { echo "redis-sentinel: ERROR: $*" >&2; exit 1; }

. "$(dirname "${BASH_SOURCE[0]}")/lib/redis-node.sh"
url() {
  local port hosts=()
  for port in "${SENTINELS[@]}"; do hosts+=("$HOST:$port"); done
  echo "redis-sentinel://$(IFS=,; echo "${hosts[*]}")/$NAME"
}

# The master's port as the first sentinel that answers names it.
current_master() {
  local port out
  for port in "${SENTINELS[@]}"; do
    out=$(cli "$port" sentinel get-master-addr-by-name "$NAME" 2>/dev/null | tr -d '\r' | sed -n 2p)
    [ -n "$out" ] && { echo "$out"; return; }
  done
  return 1
}

start_node() {
  local port=$1 dir="$BASE/$1" master=${2:-}
  answering "$port" && return
  command -v redis-server >/dev/null || die "redis-server is not installed (apt-get install redis-server)"
  mkdir -p "$dir"
  local replica=()
  [ -n "$master" ] && [ "$master" != "$port" ] && replica=(--replicaof "$HOST" "$master")
  redis-server --daemonize yes --bind "$HOST" --port "$port" \
    --save '' --appendonly no --dir "$dir" --logfile "$dir/redis.log" \
    --pidfile "$dir/redis.pid" "${replica[@]}" >&2 9>&-
  for _ in $(seq 50); do answering "$port" && return; sleep 0.1; done
  die "node $port did not answer (see $dir/redis.log)"
}

start_sentinel() {
  local port=$1 dir="$BASE/$1"
  answering "$port" && return
  mkdir -p "$dir"
  # A sentinel rewrites its configuration file as it learns: one of its own, kept
  # between runs (a sentinel started again knows the master's current address).
  if [ ! -f "$dir/sentinel.conf" ]; then
    cat >"$dir/sentinel.conf" <<EOF
port $port
bind $HOST
dir $dir
sentinel monitor $NAME $HOST $MASTER 2
sentinel down-after-milliseconds $NAME 2000
EOF
  fi
  redis-server "$dir/sentinel.conf" --sentinel --daemonize yes \
    --logfile "$dir/sentinel.log" --pidfile "$dir/sentinel.pid" >&2 9>&-
  for _ in $(seq 50); do answering "$port" && return; sleep 0.1; done
  die "sentinel $port did not answer (see $dir/sentinel.log)"
}


stop_pid() {
  local file=$1 pid
  pid=$(cat "$file" 2>/dev/null || true)
  [ -n "$pid" ] && kill "$pid" 2>/dev/null || true
  rm -f "$file"
}


# Every sentinel knows the master, its two replicas and the two other sentinels.
await_sentinels() {
  local port
  for _ in $(seq 300); do
    local ready=1
    for port in "${SENTINELS[@]}"; do
      local facts
      facts=$(cli "$port" sentinel master "$NAME" 2>/dev/null | tr -d '\r' | paste - - )
      echo "$facts" | grep -qP '^num-slaves\t2$' || ready=0
      echo "$facts" | grep -qP '^num-other-sentinels\t2$' || ready=0
      echo "$facts" | grep -qP '^flags\tmaster$' || ready=0
    done
    [ "$ready" = 1 ] && return
    sleep 0.2
  done
  die "the sentinels do not agree on $NAME after 60 s (see $BASE/*/sentinel.log)"
}

start() {
  local master port
  master=$(current_master 2>/dev/null || echo "$MASTER")
  start_node "$master"
  for port in "${NODES[@]}"; do start_node "$port" "$master"; done
  for port in "${SENTINELS[@]}"; do start_sentinel "$port"; done
  for port in "${NODES[@]}"; do [ "$port" = "$master" ] || await_sync "$port"; done
  await_sentinels
  log "up: $(url) (master on $master)"
}

# The master back on 6501: the sentinels fail over to it while it is a replica in sync.
reset() {
  local master
  start
  master=$(current_master)
  [ "$master" = "$MASTER" ] && return
  # A replica's priority decides which one a failover promotes.
  cli "${REPLICAS[0]}" config set replica-priority 1000 >/dev/null
  cli "${REPLICAS[1]}" config set replica-priority 1000 >/dev/null
  cli "$MASTER" config set replica-priority 1 >/dev/null
  [ "$master" = "$MASTER" ] || cli "$master" config set replica-priority 1000 >/dev/null
  cli "${SENTINELS[0]}" sentinel failover "$NAME" >/dev/null
  for _ in $(seq 300); do
    [ "$(current_master)" = "$MASTER" ] && [ "$(role "$MASTER")" = master ] && break
    sleep 0.1
  done
  [ "$(current_master)" = "$MASTER" ] || die "the failover back to $MASTER did not happen"
  for port in "${NODES[@]}"; do cli "$port" config set replica-priority 100 >/dev/null; done
  for port in "${REPLICAS[@]}"; do await_sync "$port"; done
  await_sentinels
  log "master back on $MASTER"
}

case "${1:-start}" in
  start) if [ -n "${2:-}" ]; then
           start_node "$2" "$(current_master)"
           await_sync "$2"
           log "node $2 back, a replica of $(current_master)"
         else start; fi ;;
  kill) kill_node "${2:?kill which node: 6501, 6502 or 6503}" ;;
  stop) for port in "${SENTINELS[@]}"; do stop_pid "$BASE/$port/sentinel.pid"; done
        for port in "${NODES[@]}"; do stop_pid "$BASE/$port/redis.pid"; done ;;
  status) for port in "${NODES[@]}" "${SENTINELS[@]}"; do
            if answering "$port"; then echo "$port up"; else echo "$port down"; fi
          done
          echo "master: $(current_master 2>/dev/null || echo unknown)" ;;
  url) url ;;
  master) current_master ;;
  reset) reset ;;
  *) die "usage: $0 [start|stop|status|url|master|reset] | kill PORT | start PORT" ;;
esac
