#!/usr/bin/env bash
# tls-certs.sh - make a throwaway CA and a server certificate for localhost / 127.0.0.1,
# for the TLS tests (scripts/redis-tls.sh, the TLS listener of scripts/rabbitmq4.sh).
# Idempotent: keeps what is there while it is whole, verifies against the CA, names
# DNS:localhost and IP:127.0.0.1 and is valid for 30 more days; otherwise makes all anew.
# Prints nothing but errors unless asked.
#
# Usage: scripts/tls-certs.sh [-v]     make the files if needed (-v: say what it did)
#        scripts/tls-certs.sh dir      make them if needed, print the folder
#        scripts/tls-certs.sh renew    make them anew in any case
#
# Folder: ${RUSTSTREAM_CACHE:-/var/cache/ruststream}/tls (outside the checkout):
#   ca.pem      the CA certificate (what clients trust)   ca.key      its key
#   server.pem  the server certificate, signed by the CA  server.key  its key
# Test material only: the keys are not protected by anything but file modes.
set -euo pipefail

CACHE=${RUSTSTREAM_CACHE:-/var/cache/ruststream}
DIR=$CACHE/tls
VERBOSE=0
log() { [ "$VERBOSE" = 0 ] || echo "tls-certs: $*" >&2; }
die() { echo "tls-certs: ERROR: $*" >&2; exit 1; }

# The files are there, fit together, and do for at least 30 more days.
whole() {
  local f
  for f in ca.pem ca.key server.pem server.key; do [ -s "$DIR/$f" ] || return 1; done
  openssl verify -CAfile "$DIR/ca.pem" "$DIR/server.pem" >/dev/null 2>&1 || return 1
  openssl x509 -in "$DIR/server.pem" -noout -checkend $((30 * 86400)) >/dev/null 2>&1 || return 1
  openssl x509 -in "$DIR/ca.pem" -noout -checkend $((30 * 86400)) >/dev/null 2>&1 || return 1
  local san
  san=$(openssl x509 -in "$DIR/server.pem" -noout -ext subjectAltName 2>/dev/null) || return 1
  grep -q 'DNS:localhost' <<<"$san" && grep -q 'IP Address:127.0.0.1' <<<"$san" || return 1
  # The key is the certificate's.
  [ "$(openssl x509 -in "$DIR/server.pem" -noout -pubkey 2>/dev/null)" = \
    "$(openssl pkey -in "$DIR/server.key" -pubout 2>/dev/null)" ]
}

make_all() {
  local tmp
  tmp=$(mktemp -d "$DIR/.new.XXXXXX")
  # shellcheck disable=SC2064 # expand now: the trap runs after tmp is out of scope
  trap "rm -rf '$tmp'" EXIT
  openssl req -x509 -newkey rsa:2048 -nodes -days 3650 -sha256 \
    -keyout "$tmp/ca.key" -out "$tmp/ca.pem" -subj "/CN=ruststream test CA" \
    -addext "basicConstraints=critical,CA:TRUE" \
    -addext "keyUsage=critical,keyCertSign,cRLSign" \
    -addext "subjectKeyIdentifier=hash" 2>"$tmp/err" ||
    die "openssl could not make the CA: $(cat "$tmp/err")"
  openssl req -newkey rsa:2048 -nodes -keyout "$tmp/server.key" -out "$tmp/server.csr" \
    -subj "/CN=localhost" 2>"$tmp/err" ||
    die "openssl could not make the server key: $(cat "$tmp/err")"
  cat >"$tmp/server.ext" <<'EOF'
basicConstraints = critical, CA:FALSE
keyUsage = critical, digitalSignature, keyEncipherment
extendedKeyUsage = serverAuth
subjectAltName = DNS:localhost, IP:127.0.0.1
subjectKeyIdentifier = hash
authorityKeyIdentifier = keyid
EOF
  openssl x509 -req -in "$tmp/server.csr" -CA "$tmp/ca.pem" -CAkey "$tmp/ca.key" \
    -CAcreateserial -days 825 -sha256 -extfile "$tmp/server.ext" -out "$tmp/server.pem" \
    2>"$tmp/err" || die "openssl could not sign the server certificate: $(cat "$tmp/err")"
  chmod 0600 "$tmp/ca.key" "$tmp/server.key"
  chmod 0644 "$tmp/ca.pem" "$tmp/server.pem"
  # Keys first, certificates last: a reader that sees the new ca.pem sees a whole set.
  local f
  for f in ca.key server.key server.pem ca.pem; do mv -f "$tmp/$f" "$DIR/$f"; done
  rm -rf "$tmp"
  trap - EXIT
  log "made a CA and a server certificate for localhost / 127.0.0.1 in $DIR"
}

ensure() {
  command -v openssl >/dev/null || {
    [ "$(id -u)" = 0 ] || die "openssl is not installed (apt-get install openssl)"
    { apt-get install -y -qq openssl || { apt-get update -qq && apt-get install -y -qq openssl; }; } \
      >/dev/null 2>&1 || die "cannot install openssl"
  }
  mkdir -p "$DIR" 2>/dev/null || die "cannot make $DIR (run as root, or set RUSTSTREAM_CACHE)"
  chmod 0755 "$DIR"
  exec 8>"$DIR/.lock"
  flock 8
  if [ "${1:-}" = renew ] || ! whole; then
    make_all
    whole || die "the certificates made in $DIR do not check out"
  else
    log "certificates in $DIR are fine"
  fi
}

case "${1:-}" in
  "") ensure ;;
  -v) VERBOSE=1; ensure ;;
  dir) ensure; echo "$DIR" ;;
  renew) ensure renew ;;
  *) die "usage: $0 [-v|dir|renew]" ;;
esac
