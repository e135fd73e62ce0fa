#!/usr/bin/env bash
# kafka-secure.sh - three Kafka-protocol brokers (nisshi 0.8.1, the binary of
# scripts/kafka.sh) for the Kafka adapter's TLS and SASL tests
# (crates/ruststream-kafka/tests/tls.rs, feature `tls`):
#   127.0.0.1:9093  TLS only, no SASL; memory storage
#   127.0.0.1:9094  TLS and SASL (SCRAM); PostgreSQL storage, database ruststream_kafka_sasl_tls
#   127.0.0.1:9095  SASL (SCRAM) over plain text; PostgreSQL storage, database ruststream_kafka_sasl
# TLS with the server certificate of scripts/tls-certs.sh (DNS:localhost, IP:127.0.0.1).
# nisshi speaks SCRAM-SHA-256 and SCRAM-SHA-512 (no PLAIN) and keeps SCRAM credentials
# only in SQL storage, hence PostgreSQL (the machine's, postgres@localhost, trust auth).
# Users, made anew at each start: alice / alice-secret (SCRAM-SHA-512) and
# bob / bob-secret (SCRAM-SHA-256). Test material only.
# Idempotent: starts what does not answer. The users of a SASL broker are made through
# a broker without authentication on its storage (port + 100), stopped before it starts.
#
# Usage: scripts/kafka-secure.sh [start|stop]
# Folder: ${RUSTSTREAM_CACHE:-/var/cache/ruststream}/kafka-secure (logs, pid files).
set -euo pipefail

SCRIPT_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
CACHE=${RUSTSTREAM_CACHE:-/var/cache/ruststream}
BIN=$CACHE/nisshi-0.8.1/bin/nisshi
DIR=$CACHE/kafka-secure
TLS=$CACHE/tls
HOST=127.0.0.1
# nisshi's storage URL names localhost: its TLS name check refuses 127.0.0.1.
PG=${RUSTSTREAM_NISSHI_PG:-postgres://postgres@localhost}
log() { echo "kafka-secure: $*" >&2; }
die() { echo "kafka-secure: ERROR: $*" >&2; exit 1; }

answering() { (exec 3<>"/dev/tcp/$HOST/$1") 2>/dev/null; }

stop_one() {
  local port=$1 pid
  pid=$(cat "$DIR/nisshi-$port.pid" 2>/dev/null) || return 0
  if [ "$(cat "/proc/$pid/comm" 2>/dev/null)" = nisshi ]; then
    kill "$pid" 2>/dev/null || true
    for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -9 "$pid" 2>/dev/null || true
  fi
  rm -f "$DIR/nisshi-$port.pid"
}

# run PORT STORAGE [nisshi broker flags…]: a broker on PORT, waited for.
run() {
  local port=$1 storage=$2
  shift 2
  nohup "$BIN" broker \
    --listener-url "tcp://$HOST:$port" \
    --advertised-listener-url "tcp://$HOST:$port" \
    --storage-engine "$storage" \
    --group-initial-rebalance-delay 0s \
    "$@" >>"$DIR/nisshi-$port.log" 2>&1 9>&- 8>&- &
  echo $! >"$DIR/nisshi-$port.pid"
  for _ in $(seq 100); do answering "$port" && return 0; sleep 0.1; done
  die "nisshi did not answer on $HOST:$port (see $DIR/nisshi-$port.log)"
}

# sasl PORT DATABASE [flags…]: a SASL broker on a database made anew with its users.
sasl() {
  local port=$1 database=$2
  shift 2
  PGOPTIONS="-c client_min_messages=warning" psql -q -h localhost -U postgres -d postgres -v ON_ERROR_STOP=1 \
    -c "DROP DATABASE IF EXISTS $database WITH (FORCE)" \
    -c "CREATE DATABASE $database" >/dev/null ||
    die "cannot make the database $database on the machine's PostgreSQL"
  # The users are made through a broker without authentication on the same storage,
  # on a port of its own, then that one stops.
  local admin=$((port + 100))
  run "$admin" "$PG/$database"
  "$BIN" user create --broker "tcp://$HOST:$admin" --mechanism scram512 alice alice-secret \
    >>"$DIR/users.log" 2>&1 || die "cannot make the user alice (see $DIR/users.log)"
  "$BIN" user create --broker "tcp://$HOST:$admin" --mechanism scram256 bob bob-secret \
    >>"$DIR/users.log" 2>&1 || die "cannot make the user bob (see $DIR/users.log)"
  stop_one "$admin"
  run "$port" "$PG/$database" --authentication "$@"
}

start() {
  [ -x "$BIN" ] || "$SCRIPT_DIR/kafka.sh" install
  "$SCRIPT_DIR/tls-certs.sh"
  mkdir -p "$DIR"
  local tls=(--cert "$TLS/server.pem" --key "$TLS/server.key")
  answering 9093 || run 9093 memory://nisshi/ "${tls[@]}"
  answering 9094 || sasl 9094 ruststream_kafka_sasl_tls "${tls[@]}"
  answering 9095 || sasl 9095 ruststream_kafka_sasl
  log "nisshi: TLS on $HOST:9093, TLS and SASL on 9094, SASL on 9095 (logs in $DIR)"
}

stop() {
  local port
  for port in 9093 9094 9095 9194 9195; do stop_one "$port"; done
}

case "${1:-start}" in
  start) start ;;
  stop) stop ;;
  *) die "usage: $0 [start|stop]" ;;
esac
