#!/usr/bin/env bash
# mosquitto-tls.sh - run a Mosquitto 2 that speaks MQTT over TLS only, on 127.0.0.1:8884,
# anonymous, with the server certificate of scripts/tls-certs.sh (clients need no
# certificate of their own) and no persistence, for the MQTT adapter's TLS test
# (crates/ruststream-mqtt/tests/tls.rs). The machine's own Mosquitto on 1883 is left alone.
# Idempotent: makes the certificates if needed, starts the broker if nothing listens,
# then waits until a TLS client with the CA gets through.
#
# Usage: scripts/mosquitto-tls.sh [start|stop]
#
# Folder: ${RUSTSTREAM_CACHE:-/var/cache/ruststream}/mosquitto-tls (config, log, pid file).
set -euo pipefail

SCRIPT_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
CACHE=${RUSTSTREAM_CACHE:-/var/cache/ruststream}
DIR=$CACHE/mosquitto-tls
TLS=$CACHE/tls
PORT=${MOSQUITTO_TLS_PORT:-8884}
log() { echo "mosquitto-tls: $*" >&2; }
die() { echo "mosquitto-tls: ERROR: $*" >&2; exit 1; }

answering() {
  timeout 5 mosquitto_pub --cafile "$TLS/ca.pem" -h localhost -p "$PORT" -V mqttv5 \
    -t rstest/tls-probe -m up -q 1 >/dev/null 2>&1
}
listening() { ss -Hltn "sport = :$PORT" | grep -q .; }

our_pid() {
  local pid
  pid=$(cat "$DIR/mosquitto.pid" 2>/dev/null) || return 1
  [ -n "$pid" ] && [ "$(cat "/proc/$pid/comm" 2>/dev/null)" = mosquitto ] && echo "$pid"
}

stop() {
  local pid
  pid=$(our_pid) || return 0
  kill "$pid" 2>/dev/null || true
  for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
  rm -f "$DIR/mosquitto.pid"
}

start() {
  "$SCRIPT_DIR/tls-certs.sh"
  command -v mosquitto >/dev/null || die "install mosquitto (apt-get install mosquitto mosquitto-clients)"
  command -v mosquitto_pub >/dev/null || die "install mosquitto-clients (apt-get install mosquitto-clients)"
  answering && return 0
  if listening; then
    our_pid >/dev/null || die "port $PORT is taken by another process: $(ss -Hltnp "sport = :$PORT")"
    log "replacing the broker on $PORT (it does not answer with the current certificates)"
    stop
  fi
  mkdir -p "$DIR"
  cat >"$DIR/mosquitto.conf" <<CONF
# Written by scripts/mosquitto-tls.sh.
user root
pid_file $DIR/mosquitto.pid
persistence false
log_dest file $DIR/mosquitto.log
listener $PORT 127.0.0.1
allow_anonymous true
cafile $TLS/ca.pem
certfile $TLS/server.pem
keyfile $TLS/server.key
CONF
  mosquitto -d -c "$DIR/mosquitto.conf"
  for _ in $(seq 50); do answering && return 0; sleep 0.1; done
  die "no TLS answer on $PORT; see $DIR/mosquitto.log"
}

case "${1:-start}" in
  start) start ;;
  stop) stop ;;
  *) die "usage: $0 [start|stop]" ;;
esac
