#!/usr/bin/env bash
# Usage: prometheus_repo.sh DEST
# Builds an unsigned file: apt repository in DEST with Debian's prometheus package and every package it depends on,
# downloaded through this machine's apt (its Debian mirror). The test containers have no network: apt inside them
# sees this directory only. Rebuilt only when the candidate version of prometheus changes.
set -euo pipefail

[ $# -eq 1 ] || { echo "usage: $0 DEST" >&2; exit 2; }
dest=$1
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=../../../tests/testbed/lib.sh
. "$here/../../../tests/testbed/lib.sh"
install_missing dpkg-dev

version=$(apt-cache policy prometheus | awk '/Candidate:/ {print $2}')
if [ -z "$version" ] || [ "$version" = "(none)" ]; then
  echo "prometheus_repo.sh: apt knows no prometheus package; run apt-get update" >&2
  exit 1
fi
if [ -f "$dest/Packages" ] && [ "$(cat "$dest/.prometheus-version" 2>/dev/null)" = "$version" ]; then
  exit 0
fi

rm -rf "$dest" && mkdir -p "$dest"
# The whole dependency closure, recommends left out as the role installs without them; virtual names (<...>) are
# provided by a real package of the closure.
mapfile -t packages < <(apt-cache depends --recurse --no-recommends --no-suggests --no-conflicts --no-breaks \
  --no-replaces --no-enhances prometheus | grep -v '^[ <]' | sort -u)
(cd "$dest" && apt-get download -qq -o APT::Sandbox::User=root "${packages[@]}")
(cd "$dest" && dpkg-scanpackages --multiversion . /dev/null >Packages 2>/dev/null)
echo "$version" >"$dest/.prometheus-version"
echo "prometheus_repo.sh: $(find "$dest" -name '*.deb' | wc -l) packages for prometheus $version in $dest"
