#!/usr/bin/env bash
# redis.sh - make sure a Redis answers on 127.0.0.1:6379 (the service machine starts one;
# a fresh machine may not have it). Keeps nothing on disk. Idempotent.
set -euo pipefail
PORT=${REDIS_PORT:-6379}
answering() { redis-cli -p "$PORT" ping 2>/dev/null | grep -q PONG; }
answering && exit 0
if ! command -v redis-server >/dev/null; then
  [ "$(id -u)" = 0 ] || { echo "redis: install redis-server (apt-get install redis-server)" >&2; exit 1; }
  apt-get update -qq >&2 && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq redis-server >&2
fi
mkdir -p /var/lib/redis /var/log/redis
redis-server --daemonize yes --bind 127.0.0.1 --port "$PORT" --save "" --appendonly no \
  --dir /var/lib/redis --logfile /var/log/redis/ruststream.log >&2
for _ in $(seq 50); do answering && break; sleep 0.1; done
answering || { echo "redis: not answering on $PORT" >&2; exit 1; }
echo "redis: ready on 127.0.0.1:$PORT" >&2
