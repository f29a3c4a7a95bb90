#!/usr/bin/env bash
# Builds the collection tarball, installs it into an empty collections path, and runs it from there.
# Usage: tests/integration/installed_collection.sh VENV
set -euo pipefail

venv=$(cd "$1" && pwd)
repo=$(cd "$(dirname "$0")/../.." && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
echo "installed_collection: $("$venv/bin/ansible" --version | head -n1)"

"$venv/bin/ansible-galaxy" collection build --output-path "$work/dist" "$repo" >/dev/null
tarball=$(ls "$work"/dist/gpufleet-core-*.tar.gz)
contents=$(tar -tzf "$tarball")
# Tests, lab and dev files stay out of what users install.
leaked=$(grep -E '^(tests|bench|extensions|build|\.[a-z_-]+)/|^(Makefile|\.[a-z_-]+)$' <<<"$contents" || true)
[ -z "$leaked" ] || { echo "installed_collection: the tarball carries dev files:"; echo "$leaked"; exit 1; }
for wanted in plugins/modules/topology_facts.py plugins/filter/topology.py playbooks/site.yml meta/runtime.yml; do
  grep -qx "$wanted" <<<"$contents" || { echo "installed_collection: $wanted missing from the tarball"; exit 1; }
done

mkdir -p "$work/collections"
"$venv/bin/ansible-galaxy" collection install --no-deps -p "$work/collections" "$tarball" >/dev/null
export ANSIBLE_COLLECTIONS_PATH="$work/collections" ANSIBLE_COLLECTIONS_SCAN_SYS_PATH=false

doc=$("$venv/bin/ansible-doc" gpufleet.core.topology_facts)
for section in 'OPTIONS' 'EXAMPLES' 'RETURN VALUES' 'gpufleet_topology' 'numa_node_source' 'sysfs_root' 'require_gpus'; do
  grep -q "$section" <<<"$doc" || { echo "installed_collection: ansible-doc lacks '$section'"; exit 1; }
done
"$venv/bin/ansible-doc" -t filter gpufleet.core.gpu_numa_cpulist | grep -q 'gpufleet_topology'

python3 "$repo/tests/nvml_sim/render_tree.py" "$repo/tests/nvml_sim/hosts/reference-a100.json" "$work/host"
PYTHONPATH="$repo/tests/nvml_sim" \
GPUFLEET_NVML_SIM_HOST="$repo/tests/nvml_sim/hosts/reference-a100.json" \
GPUFLEET_NVML_SIM_STATE="$work/state.json" \
  "$venv/bin/ansible-playbook" -i localhost, -c local -e "host_root=$work/host" \
    -e ansible_python_interpreter=/usr/bin/python3 "$repo/tests/integration/installed_collection.yml"
