#!/usr/bin/env bash
# Usage: prometheus_repo.sh DEST
# Builds an unsigned file: apt repository in DEST with Debian's prometheus and prometheus-node-exporter packages and
# every package they depend on, downloaded through this machine's apt (its Debian mirror). Test containers have no
# network: apt inside them sees this directory only (the monitoring scenario's, and every lab host's). Rebuilt only
# when a candidate version changes.
set -euo pipefail

[ $# -eq 1 ] || { echo "usage: $0 DEST" >&2; exit 2; }
dest=$1
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=lib.sh
. "$here/lib.sh"
install_missing dpkg-dev

wanted=(prometheus prometheus-node-exporter)
versions=$(apt-cache policy "${wanted[@]}" | awk '/^[^ ]/ {name = $1} /Candidate:/ {print name, $2}')
if [ "$(grep -cv ' (none)$' <<<"$versions")" -ne "${#wanted[@]}" ]; then
  echo "prometheus_repo.sh: apt does not know all of ${wanted[*]} (it has: $(xargs <<<"$versions")); run apt-get update" >&2
  exit 1
fi
if [ -f "$dest/Packages" ] && [ "$(cat "$dest/.versions" 2>/dev/null)" = "$versions" ]; then
  exit 0
fi

rm -rf "$dest" && mkdir -p "$dest"
# The whole dependency closure, recommends left out as the role installs without them; virtual names (<...>) are
# provided by a real package of the closure.
mapfile -t packages < <(apt-cache depends --recurse --no-recommends --no-suggests --no-conflicts --no-breaks \
  --no-replaces --no-enhances "${wanted[@]}" | grep -v '^[ <]' | sort -u)
(cd "$dest" && apt-get download -qq -o APT::Sandbox::User=root "${packages[@]}")
(cd "$dest" && dpkg-scanpackages --multiversion . /dev/null >Packages 2>/dev/null)
echo "$versions" >"$dest/.versions"
echo "prometheus_repo.sh: $(find "$dest" -name '*.deb' | wc -l) packages for $(xargs <<<"$versions") in $dest"
