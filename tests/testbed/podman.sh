#!/usr/bin/env bash
# Install and configure rootful podman for molecule on this cgroup-v1 hybrid Debian 12 host.
set -euo pipefail

# shellcheck source=tests/testbed/lib.sh
. "$(dirname "$0")/lib.sh"
install_missing podman runc debootstrap uidmap slirp4netns fuse-overlayfs

# crun cannot run on a cgroup-v1 hybrid host, and podman's default ulimits (1048576)
# exceed our hard limit without CAP_SYS_RESOURCE, so runc's setrlimit would fail.
conf=/etc/containers/containers.conf
want='[containers]
default_ulimits = [
  "nofile=16384:16384",
  "nproc=16384:16384",
]

[engine]
runtime = "runc"
cgroup_manager = "cgroupfs"
events_logger = "file"'
mkdir -p /etc/containers
if [ ! -f "$conf" ] || [ "$(cat "$conf")" != "$want" ]; then
  printf '%s\n' "$want" >"$conf"
fi

# Many systemd containers exhaust the default 128 inotify instances and hang at "initializing".
if [ "$(sysctl -n fs.inotify.max_user_instances)" -lt 4096 ]; then
  sysctl -q -w fs.inotify.max_user_instances=4096
fi
