#!/usr/bin/env bash
# The real-kernel NUMA test: builds (once per input hash, cached in ~/.cache/gpufleet/qemu) and boots a QEMU guest with 2 NUMA nodes,
# runs tests/integration/numa_vm.yml against it over ssh on 127.0.0.1, and always stops the guest.
# Usage: tests/integration/numa_vm.sh [VENV]   (default: .venv, made by tests/run.sh setup)
set -euo pipefail

repo=$(cd "$(dirname "$0")/../.." && pwd)
venv=$(cd "${1:-$repo/.venv}" && pwd)
qemu=$repo/tests/testbed/qemu
run=$repo/build/qemu/run

times=()
clock=$(date +%s)
lap() { local now; now=$(date +%s); times+=("$1 $((now - clock))s"); clock=$now; }
finish() {
  local rc=$?
  [ "${booted:-}" = yes ] && "$qemu/stop.sh" "$run"
  echo "numa_vm: ${times[*]:-nothing ran}; exit $rc"
}
trap finish EXIT

guest=$("$qemu/build.sh" | tail -n1)
lap "guest build"
# boot.sh stops the guest it started when it fails; from here on, this script stops it.
"$qemu/boot.sh" "$guest" "$run"
booted=yes
lap boot

# The checkout as ansible_collections/gpufleet/core, next to the collections the ansible package bundles.
"$repo/tests/testbed/link-collection.sh"
site=$("$venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
export ANSIBLE_COLLECTIONS_PATH="$repo/build/collections:$site" ANSIBLE_COLLECTIONS_SCAN_SYS_PATH=false
export ANSIBLE_HOST_KEY_CHECKING=false ANSIBLE_PIPELINING=true ANSIBLE_RETRY_FILES_ENABLED=false
# Each task's time, and the slowest ones at the end: under software emulation they are what the stage's time is.
export ANSIBLE_CALLBACKS_ENABLED=ansible.posix.profile_tasks
"$venv/bin/ansible-playbook" -i "$repo/tests/integration/numa_vm/inventory.yml" \
  -e "ansible_port=$(cat "$run/port")" -e "ansible_ssh_private_key_file=$(dirname "$guest")/id_ed25519" \
  "$repo/tests/integration/numa_vm.yml" || { lap playbook; exit 1; }
lap playbook
