#!/usr/bin/env bash
# valkey8.sh - run Valkey 8 (Debian's valkey-server from <codename>-backports) on
# 127.0.0.1:6380, keeping nothing on disk, so the Redis adapter's suite can run against
# it too. Needs root. Idempotent: installs once, starts if not answering.
#
# Usage: scripts/valkey8.sh [start|stop|status]
set -euo pipefail

SCRIPT_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
. "$SCRIPT_DIR/lib/apt.sh"
PORT=${VALKEY_PORT:-6380}
log() { echo "valkey8: $*" >&2; }
die() { echo "valkey8: ERROR: $*" >&2; exit 1; }

answering() { valkey-cli -p "$PORT" ping 2>/dev/null | grep -q PONG; }

install() {
  command -v valkey-server >/dev/null && return
  [ "$(id -u)" = 0 ] || die "must run as root to install valkey-server"
  local codename mirror list=/etc/apt/sources.list.d/ruststream-backports.sources
  codename=$(host_codename)
  if [ ! -f "$list" ]; then
    mirror=$(host_mirror) || die "cannot find the host's Debian mirror"
    log "adding ${codename}-backports from the host's mirror"
    printf 'Types: deb\nURIs: %s\nSuites: %s-backports\nComponents: main\nSigned-By: /usr/share/keyrings/debian-archive-keyring.gpg\n' \
      "$mirror" "$codename" >"$list"
  fi
  apt-get update -qq -o Dir::Etc::sourcelist="$list" -o Dir::Etc::sourceparts=- -o APT::Get::List-Cleanup=0 >&2 ||
    apt-get update -qq >&2
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq -t "${codename}-backports" valkey-server >&2 ||
    die "cannot install valkey-server from ${codename}-backports"
  # Debian starts its own instance on 6379 where a service manager runs; we use our own.
}

start() {
  answering && { log "already answering on $PORT"; return; }
  install
  mkdir -p /var/lib/ruststream-valkey
  valkey-server --port "$PORT" --bind 127.0.0.1 --daemonize yes --save '' --appendonly no \
    --dir /var/lib/ruststream-valkey --logfile /var/lib/ruststream-valkey/valkey.log >&2
  for _ in $(seq 50); do answering && break; sleep 0.1; done
  answering || die "valkey did not answer on $PORT (see /var/lib/ruststream-valkey/valkey.log)"
  log "valkey $(valkey-server --version | grep -o 'v=[0-9.]*') ready on 127.0.0.1:$PORT"
}

case "${1:-start}" in
  start) start ;;
  stop) valkey-cli -p "$PORT" shutdown nosave >/dev/null 2>&1 || true ;;
  status) answering ;;
  *) die "usage: $0 [start|stop|status]" ;;
esac
