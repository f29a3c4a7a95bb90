#!/usr/bin/env bash
# Build localhost/gpufleet-testbed:<hash> (+ :latest): a minimal bookworm systemd rootfs, no registry needed.
set -euo pipefail

name=localhost/gpufleet-testbed
suite=bookworm
# python3-apt: the apt and package_facts modules need it, as on any Debian or Ubuntu server.
# openssh-server: tests/lab/lab.sh reaches its hosts over SSH (it gives each container its own host keys).
include=python3,python3-apt,systemd,systemd-sysv,dbus,iproute2,sudo,openssh-server

# shellcheck source=tests/testbed/lib.sh
. "$(dirname "$0")/lib.sh"
mirror=$(debian_mirror "$suite")

hash=$( { echo "$suite $include $mirror"; cat "$0"; } | sha256sum | cut -c1-12)
if podman image exists "$name:$hash"; then
  podman tag "$name:$hash" "$name:latest"
  exit 0
fi

root=$(mktemp -d /var/tmp/gpufleet-rootfs.XXXXXX)
trap 'rm -rf "$root"' EXIT
log="$root.log"
if ! debootstrap --variant=minbase --include="$include" "$suite" "$root" "$mirror" >"$log" 2>&1; then
  tail -n 30 "$log" >&2; rm -f "$log"; exit 1
fi
rm -f "$log"
rm -rf "$root"/var/lib/apt/lists/* "$root"/var/cache/apt/*.bin "$root"/var/cache/apt/archives/*.deb
# An emptied lists dir with a fresh mtime makes apt's cache_valid_time skip "apt-get update".
touch -d @0 "$root/var/lib/apt/lists"
tar -C "$root" -c . | podman import -q - "$name:$hash" >/dev/null
podman tag "$name:$hash" "$name:latest"
echo "image.sh: built $name:$hash"
