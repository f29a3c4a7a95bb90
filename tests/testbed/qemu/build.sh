#!/usr/bin/env bash
# Build the 2-NUMA-node test guest once: a Debian bookworm disk image, its kernel and initrd, and an ssh key.
# Cached under build/qemu/ by input hash; a second run with the same inputs does nothing.
# Usage: tests/testbed/qemu/build.sh        (prints the guest directory on its last line)
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../../.." && pwd)
cache=${GPUFLEET_QEMU_CACHE:-$repo/build/qemu}
suite=bookworm
include=linux-image-amd64,systemd,systemd-sysv,udev,dbus,kmod,openssh-server,numactl,iproute2,python3,procps

# Host tools, installed when missing: CI starts from a fresh machine.
# shellcheck source=tests/testbed/lib.sh
. "$here/../lib.sh"
install_missing qemu-system-x86 qemu-utils e2fsprogs debootstrap openssh-client

mirror=$(debian_mirror "$suite")

mkdir -p "$cache"
# The guest trusts this key; it lives next to the images it was baked into.
if [ ! -f "$cache/id_ed25519" ]; then
  ssh-keygen -q -t ed25519 -N '' -C gpufleet-numa-vm -f "$cache/id_ed25519"
fi

hash=$( { echo "$suite $include $mirror"; cat "$0" "$cache/id_ed25519.pub"; } | sha256sum | cut -c1-12)
guest=$cache/guest-$hash
if [ -f "$guest/ready" ]; then
  echo "$guest"
  exit 0
fi

start=$(date +%s)
rm -rf "$guest" && mkdir -p "$guest"
root=$(mktemp -d /var/tmp/gpufleet-guest.XXXXXX)
trap 'rm -rf "$root" "$root.log"' EXIT
if ! debootstrap --variant=minbase --include="$include" "$suite" "$root" "$mirror" >"$root.log" 2>&1; then
  tail -n 30 "$root.log" >&2
  exit 1
fi

install -d -m 700 "$root/root/.ssh"
install -m 600 "$cache/id_ed25519.pub" "$root/root/.ssh/authorized_keys"
echo '/dev/vda / ext4 rw,relatime 0 1' >"$root/etc/fstab"
echo numa-vm >"$root/etc/hostname"
printf '127.0.0.1 localhost\n127.0.1.1 numa-vm\n' >"$root/etc/hosts"
cat >"$root/etc/systemd/network/10-dhcp.network" <<'NET'
[Match]
Name=en* eth*

[Network]
DHCP=yes
NET
# Key-only root login; no DNS lookups of the (NATed) client.
printf 'PermitRootLogin prohibit-password\nPasswordAuthentication no\nUseDNS no\n' \
  >"$root/etc/ssh/sshd_config.d/gpufleet.conf"
chroot "$root" systemctl enable systemd-networkd ssh >/dev/null 2>&1
chroot "$root" systemctl mask systemd-networkd-wait-online.service getty@tty1.service \
  serial-getty@ttyS0.service apt-daily.timer apt-daily-upgrade.timer man-db.timer e2scrub_all.timer \
  fstrim.timer >/dev/null 2>&1
rm -rf "$root"/var/lib/apt/lists/* "$root"/var/cache/apt/*.bin "$root"/var/cache/apt/archives/*.deb

cp "$(readlink -f "$root/vmlinuz")" "$guest/kernel"
cp "$(readlink -f "$root/initrd.img")" "$guest/initrd"
chmod 644 "$guest/kernel" "$guest/initrd"
truncate -s 3G "$guest/disk.img"
mkfs.ext4 -q -F -L gpufleet-guest -d "$root" "$guest/disk.img"
touch "$guest/ready"
# Older guests of other input hashes are no longer used.
find "$cache" -maxdepth 1 -name 'guest-*' ! -name "guest-$hash" -exec rm -rf {} +
echo "qemu/build.sh: built $guest in $(( $(date +%s) - start ))s" >&2
echo "$guest"
