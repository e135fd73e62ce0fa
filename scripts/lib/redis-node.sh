# Shared helpers for the scripts that run groups of redis-server processes on loopback
# ports (redis-cluster.sh, redis-sentinel.sh); sourced, not run. The caller sets HOST and
# BASE (a folder per port: BASE/PORT/redis.pid) and defines log and die.

cli() { local port=$1; shift; redis-cli -h "$HOST" -p "$port" "$@"; }
answering() { cli "$1" ping 2>/dev/null | grep -q PONG; }
# info_field PORT 'SECTION COMMAND' FIELD, e.g. info_field 7001 'info replication' role.
info_field() { cli "$1" $2 2>/dev/null | tr -d '\r' | sed -n "s/^$3://p"; }
role() { info_field "$1" 'info replication' role; }

# SIGKILL the node on PORT, as a crash, and wait until it is gone.
kill_node() {
  local port=$1 pid
  pid=$(cat "$BASE/$port/redis.pid" 2>/dev/null || true)
  [ -n "$pid" ] && [ "$(cat "/proc/$pid/comm" 2>/dev/null)" = redis-server ] || die "node $port is not running"
  kill -9 "$pid"
  while kill -0 "$pid" 2>/dev/null; do sleep 0.05; done
  rm -f "$BASE/$port/redis.pid"
  log "killed node $port (pid $pid)"
}

# Wait until the replica on PORT has its master link up (in sync).
await_sync() {
  local port=$1
  for _ in $(seq 300); do
    [ "$(role "$port")" = slave ] && [ "$(info_field "$port" 'info replication' master_link_status)" = up ] && return
    sleep 0.1
  done
  die "replica $port not in sync after 30 s (see $BASE/$port/redis.log)"
}
