#!/usr/bin/env bash
# kafka.sh - run a Kafka-protocol broker on 127.0.0.1:9092 for the Kafka adapter's tests
# (crates/ruststream-kafka). Apache Kafka is not packaged for this machine; the broker is
# nisshi 0.8.1 (a Kafka-protocol broker with classic consumer groups, written in Rust),
# keeping everything in memory. How it differs from Kafka: docs/kafka.md.
# Idempotent: installs once, starts if not answering.
#
# Usage: scripts/kafka.sh [start|stop|status|restart|url|install]
#   install: only build the broker if it is missing (.ci/run starts this first, in the
#            background, so that the build overlaps the workspace's).
#
# Install: when ${RUSTSTREAM_CACHE:-/var/cache/ruststream}/nisshi-0.8.1/bin/nisshi is
# missing, `cargo install --locked nisshi@0.8.1` builds it there (memory and PostgreSQL
# storage only), with a target directory of its own that is deleted afterwards. That
# build takes about 16 minutes on 2 cores (959 s measured beside small builds; 25 to 35
# minutes with the default features, whose libsql storage is a C build with bindgen),
# once per machine.
# (--ignore-rust-version: its `rama` dependency declares Rust 1.96 and builds on 1.95.)
# Pid file and log: ${RUSTSTREAM_CACHE:-/var/cache/ruststream}/kafka/nisshi.{pid,log}.
set -euo pipefail

VERSION=0.8.1
CACHE=${RUSTSTREAM_CACHE:-/var/cache/ruststream}
ROOT=$CACHE/nisshi-$VERSION
BIN=$ROOT/bin/nisshi
DIR=$CACHE/kafka
HOST=127.0.0.1
PORT=${KAFKA_PORT:-9092}
log() { echo "kafka: $*" >&2; }
die() { echo "kafka: ERROR: $*" >&2; exit 1; }

answering() { (exec 3<>"/dev/tcp/$HOST/$PORT") 2>/dev/null; }

install() {
  [ -x "$BIN" ] && return
  command -v cargo >/dev/null || die "cargo is needed to build nisshi"
  mkdir -p "$CACHE"
  # One build at a time: a second caller waits for the first one's binary.
  exec 8>"$CACHE/nisshi-$VERSION.lock"
  flock 8
  [ -x "$BIN" ] && { exec 8>&-; return; }
  local target t0=$SECONDS
  target=$(mktemp -d "${TMPDIR:-/tmp}/nisshi-build.XXXXXX")
  log "building nisshi $VERSION into $ROOT (about 16 minutes on 2 cores, once)"
  # Memory storage (dynostore) for the suite and PostgreSQL storage for restart faults;
  # the default libsql storage (SQLite, a C build with bindgen) is left out.
  if ! CARGO_TARGET_DIR=$target cargo install --locked --ignore-rust-version \
      --no-default-features --features dynostore,postgres \
      "nisshi@$VERSION" --root "$ROOT" >&2; then
    rm -rf "$target"
    die "cargo install nisshi@$VERSION failed"
  fi
  rm -rf "$target"
  log "nisshi built in $((SECONDS - t0)) s"
  exec 8>&-
}

start() {
  answering && { log "already running on $HOST:$PORT"; return; }
  install
  mkdir -p "$DIR"
  # The first rebalance of a new group does not wait for more members (Kafka's
  # group.initial.rebalance.delay.ms, 3 s by default): each test's group is new.
  nohup "$BIN" broker \
    --listener-url "tcp://$HOST:$PORT" \
    --advertised-listener-url "tcp://$HOST:$PORT" \
    --storage-engine memory://nisshi/ \
    --group-initial-rebalance-delay 0s \
    >"$DIR/nisshi.log" 2>&1 9>&- &
  echo $! >"$DIR/nisshi.pid"
  for _ in $(seq 100); do answering && break; sleep 0.1; done
  answering || die "nisshi did not answer on $HOST:$PORT (see $DIR/nisshi.log)"
  log "nisshi $VERSION ready on $HOST:$PORT (memory storage; log $DIR/nisshi.log)"
}

stop() {
  local pid
  [ -f "$DIR/nisshi.pid" ] || { log "no pid file"; return; }
  pid=$(cat "$DIR/nisshi.pid")
  kill "$pid" 2>/dev/null || true
  for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
  kill -9 "$pid" 2>/dev/null || true
  rm -f "$DIR/nisshi.pid"
}

case "${1:-start}" in
  start) start ;;
  stop) stop ;;
  restart) stop; start ;;
  status) answering ;;
  url) echo "kafka://$HOST:$PORT" ;;
  install) install ;;
  *) die "usage: $0 [start|stop|status|restart|url|install]" ;;
esac
