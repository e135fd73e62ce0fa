#!/usr/bin/env bash
# redis-tls.sh - run a Redis that speaks TLS only, on 127.0.0.1:6390, with the server
# certificate of scripts/tls-certs.sh (clients need no certificate of their own), keeping
# nothing on disk, for the Redis adapter's TLS tests (crates/ruststream-redis/tests/tls.rs).
# Idempotent: makes the certificates if needed, starts the server if it does not answer
# over TLS with the current CA (one left running with an older certificate is replaced),
# then waits until `redis-cli --tls --cacert ca.pem ping` answers.
#
# Usage: scripts/redis-tls.sh [start|stop|status]
#
# Folder: ${RUSTSTREAM_CACHE:-/var/cache/ruststream}/redis-tls (log, pid file).
set -euo pipefail

SCRIPT_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
CACHE=${RUSTSTREAM_CACHE:-/var/cache/ruststream}
DIR=$CACHE/redis-tls
TLS=$CACHE/tls
PORT=${REDIS_TLS_PORT:-6390}
HOST=127.0.0.1
log() { echo "redis-tls: $*" >&2; }
die() { echo "redis-tls: ERROR: $*" >&2; exit 1; }

cli() { redis-cli --tls --cacert "$TLS/ca.pem" -h "$HOST" -p "$PORT" "$@"; }
answering() { cli ping 2>/dev/null | grep -q PONG; }
listening() { ss -Hltn "sport = :$PORT" | grep -q .; }

# The pid of the server we started, if it is still a redis-server.
our_pid() {
  local pid
  pid=$(cat "$DIR/redis.pid" 2>/dev/null) || return 1
  [ -n "$pid" ] && [ "$(cat "/proc/$pid/comm" 2>/dev/null)" = redis-server ] && echo "$pid"
}

kill_ours() {
  local pid
  pid=$(our_pid) || return 0
  kill "$pid" 2>/dev/null || true
  for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
  kill -9 "$pid" 2>/dev/null || true
  rm -f "$DIR/redis.pid"
}

install() {
  command -v redis-server >/dev/null && return
  [ "$(id -u)" = 0 ] || die "install redis-server (apt-get install redis-server)"
  { apt-get install -y -qq redis-server || { apt-get update -qq && apt-get install -y -qq redis-server; }; } >&2 ||
    die "cannot install redis-server"
}

start() {
  "$SCRIPT_DIR/tls-certs.sh"
  install
  answering && return 0
  if listening; then
    # Ours with a certificate the current CA does not sign (the certificates were made
    # anew), or still starting: replace it. Anything else on the port is not ours.
    our_pid >/dev/null || die "port $PORT is taken by another process: $(ss -Hltnp "sport = :$PORT")"
    log "replacing the server on $PORT (it does not answer with the current certificates)"
    kill_ours
  fi
  mkdir -p "$DIR"
  redis-server --daemonize yes --bind "$HOST" --port 0 --tls-port "$PORT" \
    --tls-cert-file "$TLS/server.pem" --tls-key-file "$TLS/server.key" \
    --tls-ca-cert-file "$TLS/ca.pem" --tls-auth-clients no \
    --save '' --appendonly no --dir "$DIR" --logfile "$DIR/redis.log" \
    --pidfile "$DIR/redis.pid" >&2 || die "redis-server did not start (see $DIR/redis.log)"
  for _ in $(seq 50); do answering && break; sleep 0.1; done
  answering || die "no TLS answer on $HOST:$PORT (see $DIR/redis.log)"
  log "ready on rediss://$HOST:$PORT (CA: $TLS/ca.pem)"
}

stop() {
  if [ -s "$TLS/ca.pem" ]; then cli shutdown nosave >/dev/null 2>&1 || true; fi
  kill_ours
}

case "${1:-start}" in
  start) start ;;
  stop) stop ;;
  status) answering ;;
  *) die "usage: $0 [start|stop|status]" ;;
esac
