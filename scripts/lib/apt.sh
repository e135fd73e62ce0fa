# Shared apt helpers for the broker scripts (sourced, not run).
#
# host_mirror: the URI of the host's apt source that serves "<codename> main", read from
# the host's own apt configuration (deb822 .sources files, then sources.list), so that no
# mirror's host name is ever written into the repository.

host_mirror() {
  local codename f uri=""
  codename=$(. /etc/os-release && echo "${VERSION_CODENAME:-}")
  [ -n "$codename" ] || { echo "cannot read VERSION_CODENAME from /etc/os-release" >&2; return 1; }
  for f in /etc/apt/sources.list.d/*.sources; do
    [ -f "$f" ] || continue
    uri=$(awk -v cn="$codename" '
      function flush() { if (!done && deb && suite && main && uri != "") { print uri; done = 1; exit }
                         deb = suite = main = 0; uri = "" }
      /^[ \t]*$/ { flush(); next }
      /^[ \t]*#/ { next }
      tolower($1) == "types:"      { for (i = 2; i <= NF; i++) if ($i == "deb") deb = 1 }
      tolower($1) == "uris:"       { uri = $2 }
      tolower($1) == "suites:"     { for (i = 2; i <= NF; i++) if ($i == cn) suite = 1 }
      tolower($1) == "components:" { for (i = 2; i <= NF; i++) if ($i == "main") main = 1 }
      END { flush() }' "$f")
    [ -n "$uri" ] && { echo "$uri"; return 0; }
  done
  if [ -f /etc/apt/sources.list ]; then
    uri=$(sed -E 's/\[[^]]*\]//' /etc/apt/sources.list |
      awk -v cn="$codename" '$1 == "deb" && $3 == cn { for (i = 4; i <= NF; i++) if ($i == "main") { print $2; exit } }')
  fi
  [ -n "$uri" ] || { echo "no apt source for '$codename main' in the host's apt config" >&2; return 1; }
  echo "$uri"
}

host_codename() {
  (. /etc/os-release && echo "${VERSION_CODENAME:-}")
}
