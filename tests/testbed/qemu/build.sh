#!/usr/bin/env bash
# Build the 2-NUMA-node test guest once: a Debian bookworm disk image, its kernel and initrd, and an ssh key.
# Cached by input hash outside the checkout (GPUFLEET_QEMU_CACHE, default ~/.cache/gpufleet/qemu), as podman keeps
# the lab's and molecule's images: a second run with the same inputs, from any clone, does nothing.
# Usage: tests/testbed/qemu/build.sh        (prints the guest directory on its last line)
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
cache=${GPUFLEET_QEMU_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/gpufleet/qemu}
suite=bookworm
# podman and netavark: the container-mode service runs under the real podman (crun: the guest is cgroup v2).
include=linux-image-amd64,systemd,systemd-sysv,udev,dbus,kmod,openssh-server,numactl,iproute2,python3,procps
include=$include,podman,netavark

# Host tools, installed when missing: CI starts from a fresh machine.
# shellcheck source=tests/testbed/lib.sh
. "$here/../lib.sh"
install_missing qemu-system-x86 qemu-utils e2fsprogs debootstrap openssh-client

mirror=$(debian_mirror "$suite")

mkdir -p "$cache"
# One build at a time: two clones may share the cache.
exec 9>"$cache/.lock"
flock 9
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
trap 'rm -rf "$root" "$root.log" "$root.image"' EXIT
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

# The container test image (no registry): python3 with its standard library and the libraries its programs
# load, taken from the guest's own packages, imported into the guest's podman by the test.
guest_path() { # a guest path with its directories resolved, the file itself kept (it may be a symlink)
  printf '%s/%s\n' "$(chroot "$root" readlink -f "$(dirname "$1")")" "$(basename "$1")"
}
image_list=$root.image
{
  programs=(/usr/bin/python3.11 /usr/bin/dash /usr/bin/cp)
  for path in "${programs[@]}" /usr/bin/python3 /usr/bin/sh; do guest_path "$path"; done
  echo /usr/lib/python3.11
  echo /etc/passwd
  echo /etc/group
  modules=("$root"/usr/lib/python3.11/lib-dynload/*.so)
  # shellcheck disable=SC2016  # expanded by the guest's shell
  chroot "$root" sh -c 'ldd "$@" 2>/dev/null' ldd "${programs[@]}" "${modules[@]#"$root"}" \
    | awk '$2 == "=>" && $3 ~ /^\// {print $3} $1 ~ /^\// && $1 !~ /:$/ {print $1}' | sort -u \
    | while read -r lib; do guest_path "$lib"; chroot "$root" readlink -f "$lib"; done
  for link in bin lib lib64 sbin; do [ -L "$root/$link" ] && echo "/$link"; done
  echo /tmp
} | sed 's|^/||' | sort -u >"$image_list"
tar -C "$root" -cf "$root/opt/gpufleet-python-image.tar" -T "$image_list"
rm -f "$image_list"

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
