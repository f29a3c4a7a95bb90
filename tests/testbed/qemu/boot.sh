#!/usr/bin/env bash
# Boot the test guest with 2 NUMA nodes (node0: CPUs 0-1, node1: CPUs 2-3, 1 GiB each) under TCG,
# on a throw-away overlay of the cached disk, and wait until ssh answers on 127.0.0.1:<port>.
# Usage: tests/testbed/qemu/boot.sh GUEST_DIR RUN_DIR
#   GUEST_DIR: printed by build.sh. RUN_DIR: gets qemu.pid, port, console.log, overlay.qcow2, ssh_config.
#   GPUFLEET_QEMU_PORT picks the forwarded port (default: the first free one from 2222);
#   GPUFLEET_QEMU_BOOT_TIMEOUT the seconds one boot may take to answer on ssh (default 450);
#   GPUFLEET_QEMU_BOOT_ATTEMPTS how many boots to try before giving up (default 2).
set -euo pipefail

guest=$(cd "$1" && pwd)
mkdir -p "$2"
run=$(cd "$2" && pwd)
key=$(dirname "$guest")/id_ed25519
timeout=${GPUFLEET_QEMU_BOOT_TIMEOUT:-450}
attempts=${GPUFLEET_QEMU_BOOT_ATTEMPTS:-2}
for setting in "GPUFLEET_QEMU_BOOT_TIMEOUT=$timeout" "GPUFLEET_QEMU_BOOT_ATTEMPTS=$attempts"; do
  case ${setting#*=} in
    '' | *[!0-9]* | 0*) echo "boot.sh: $setting is not a whole number above 0 (digits, no leading zero); set it to one, or unset it" >&2; exit 2 ;;
  esac
done
[ -f "$guest/ready" ] || { echo "boot.sh: $guest is not a built guest; run build.sh first" >&2; exit 1; }
if [ -f "$run/qemu.pid" ] && kill -0 "$(cat "$run/qemu.pid")" 2>/dev/null; then
  echo "boot.sh: a guest from $run is still running (pid $(cat "$run/qemu.pid")); stop it with stop.sh" >&2
  exit 1
fi

port_in_use() { ss -Htln "sport = :$1" | grep -q .; }
port=${GPUFLEET_QEMU_PORT:-}
if [ -z "$port" ]; then
  for candidate in $(seq 2222 2299); do
    if ! port_in_use "$candidate"; then port=$candidate; break; fi
  done
  [ -n "$port" ] || { echo "boot.sh: no free port in 2222-2299; set GPUFLEET_QEMU_PORT" >&2; exit 1; }
elif port_in_use "$port"; then
  echo "boot.sh: port $port on 127.0.0.1 is taken; choose another GPUFLEET_QEMU_PORT" >&2
  exit 1
fi

echo "$port" >"$run/port"
cat >"$run/ssh_config" <<CFG
Host numa-vm
  HostName 127.0.0.1
  Port $port
  User root
  IdentityFile $key
  IdentitiesOnly yes
  StrictHostKeyChecking no
  UserKnownHostsFile /dev/null
  LogLevel ERROR
  BatchMode yes
  ConnectTimeout 10
CFG

# One thread runs all four virtual CPUs (thread=single). With a thread per virtual CPU, on this 2-CPU machine
# beside other stages, a guest once hung in boot with two CPUs in soft lockup for 800 s (2026-12-02); one thread
# cannot overcommit the host, and the guest still has 4 CPUs on 2 NUMA nodes.
boot_once() {
  rm -f "$run/overlay.qcow2" "$run/console.log" "$run/qemu.pid"
  qemu-img create -q -f qcow2 -b "$guest/disk.img" -F raw "$run/overlay.qcow2"
  qemu-system-x86_64 -machine q35 -accel tcg,thread=single -smp 4 -m 2048 \
    -object memory-backend-ram,id=m0,size=1G -object memory-backend-ram,id=m1,size=1G \
    -numa node,nodeid=0,cpus=0-1,memdev=m0 -numa node,nodeid=1,cpus=2-3,memdev=m1 \
    -kernel "$guest/kernel" -initrd "$guest/initrd" -append "root=/dev/vda rw console=ttyS0 quiet" \
    -drive "file=$run/overlay.qcow2,if=virtio,format=qcow2" \
    -netdev "user,id=n0,hostfwd=tcp:127.0.0.1:$port-:22" -device virtio-net-pci,netdev=n0 \
    -display none -serial "file:$run/console.log" -daemonize -pidfile "$run/qemu.pid"
  local start
  start=$(date +%s)
  until ssh -F "$run/ssh_config" numa-vm true 2>/dev/null; do
    if ! kill -0 "$(cat "$run/qemu.pid")" 2>/dev/null; then
      echo "boot.sh: qemu exited during boot; console:" >&2; tail -n 30 "$run/console.log" >&2; return 1
    fi
    if [ $(( $(date +%s) - start )) -ge "$timeout" ]; then
      echo "boot.sh: no ssh after ${timeout}s; console:" >&2; tail -n 30 "$run/console.log" >&2; return 1
    fi
    sleep 3
  done
  echo "boot.sh: guest up, ssh on 127.0.0.1:$port after $(( $(date +%s) - start ))s" >&2
}

# Until ssh answers, a failure stops the guest this script started, and only that one.
trap '"$(dirname "$0")/stop.sh" "$run"' EXIT
for attempt in $(seq 1 "$attempts"); do
  if boot_once; then
    trap - EXIT
    exit 0
  fi
  "$(dirname "$0")/stop.sh" "$run"
  if [ "$attempt" -lt "$attempts" ]; then
    echo "boot.sh: boot $attempt of $attempts failed; booting again" >&2
  fi
done
echo "boot.sh: the guest did not come up in $attempts boot(s)" >&2
exit 1
