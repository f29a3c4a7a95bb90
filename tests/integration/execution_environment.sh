#!/usr/bin/env bash
# Checks what ansible-builder makes of the collection's execution-environment metadata and of the example fleet's
# execution environment: the collection, built and installed alone, must declare its controller-side Python and
# system packages, and `ansible-builder create` must turn examples/hk-fleet/execution-environment.yml into a
# Containerfile from the chosen base image that installs the fleet's galaxy requirements. No image is built.
# Usage: tests/integration/execution_environment.sh VENV   (VENV has ansible-core and ansible-builder 3)
set -euo pipefail

venv=$(cd "$1" && pwd)
repo=$(cd "$(dirname "$0")/../.." && pwd)
ee_file="$repo/examples/hk-fleet/execution-environment.yml"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

fail() { echo "execution_environment: $*" >&2; exit 1; }

[ -x "$venv/bin/ansible-builder" ] || fail "$venv has no ansible-builder (tests/testbed/requirements.txt pins it)"
[ -x "$venv/bin/ansible-galaxy" ] || fail "$venv has no ansible-galaxy (ansible-core)"
echo "execution_environment: ansible-builder $("$venv/bin/ansible-builder" --version)," \
  "ansible-core $("$venv/bin/python" -c 'import ansible.release as r; print(r.__version__)')"

# What a user's ansible-builder sees: the collection as its tarball installs it, and nothing else beside it.
"$venv/bin/ansible-galaxy" collection build --output-path "$work/dist" "$repo" >/dev/null
tarball=$(ls "$work"/dist/gpufleet-core-*.tar.gz)
contents=$(tar -tzf "$tarball")
for wanted in meta/execution-environment.yml meta/ee-requirements.txt meta/ee-bindep.txt; do
  grep -qx "$wanted" <<<"$contents" || fail "$wanted missing from the tarball (galaxy.yml build_ignore?)"
done
mkdir -p "$work/collections"
"$venv/bin/ansible-galaxy" collection install --no-deps -p "$work/collections" "$tarball" >"$work/install.log" 2>&1 \
  || { cat "$work/install.log" >&2; fail "ansible-galaxy could not install $tarball"; }

"$venv/bin/ansible-builder" introspect --sanitize "$work/collections" >"$work/introspect.yml" \
  || fail "ansible-builder introspect failed: $(cat "$work/introspect.yml")"

# Each entry is written out here, not read from meta/: removing one from the collection must fail this test.
"$venv/bin/python" - "$work/introspect.yml" <<'EOF' || fail "introspection of the installed collection is wrong (above)"
import sys

import yaml
from packaging.requirements import Requirement

COLLECTION = 'gpufleet.core'
# Controller-side Python: none. The collection's plugins need only ansible-core and the standard library, and its
# roles and playbooks call no other collection's filters (no netaddr for ansible.utils' ipaddr, no jmespath).
PYTHON = []
SYSTEM = ['openssh-clients [platform:rpm]', 'openssh-client [platform:dpkg]']  # the ssh connection plugin
NOT_PYTHON = ['nvidia-ml-py', 'pynvml']  # target-side: imported on the GPU hosts only

with open(sys.argv[1]) as f:
    data = yaml.safe_load(f) or {}


def entries(kind):
    """(entry, collection) for each line ansible-builder lists, e.g. 'jmespath  # from collection a.b'."""
    found = []
    for line in data.get(kind) or []:
        entry, _, source = line.partition('  # from collection ')
        found.append((entry.strip(), source.strip()))
    return found


problems = []
python = {Requirement(entry).name.lower(): source for entry, source in entries('python')}
system = dict(entries('system'))
for name in sorted(set(python) - set(PYTHON)):
    if python[name] == COLLECTION:
        problems.append('python: %s is listed (meta/ee-requirements.txt), but the collection needs no such package'
                        % name)
for name in PYTHON:
    if name not in python:
        problems.append('python: %s is not listed (meta/ee-requirements.txt)' % name)
    elif python[name] != COLLECTION:
        problems.append('python: %s is listed for %r, not %s' % (name, python[name], COLLECTION))
for entry in SYSTEM:
    if entry not in system:
        problems.append('system: %r is not listed (meta/ee-bindep.txt)' % entry)
    elif system[entry] != COLLECTION:
        problems.append('system: %r is listed for %r, not %s' % (entry, system[entry], COLLECTION))
for name in NOT_PYTHON:
    if name in python:
        problems.append('python: %s is a target-side requirement; it does not belong in the EE' % name)
others = sorted((set(python.values()) | set(system.values())) - {COLLECTION})
if others:
    problems.append('entries from collections other than %s: %s' % (COLLECTION, ', '.join(others)))
if problems:
    print('ansible-builder introspect listed:\n' + yaml.safe_dump(data, default_flow_style=False), file=sys.stderr)
    print('\n'.join(problems), file=sys.stderr)
    sys.exit(1)
EOF
echo "execution_environment: introspect lists the ssh client and no Python package for gpufleet.core"

# The example fleet's EE: the build context only (this machine has no registry to pull a base image from).
[ -f "$repo/examples/hk-fleet/requirements.yml" ] \
  || fail "examples/hk-fleet/requirements.yml is missing: the EE installs its collections from it"
(cd "$repo" && "$venv/bin/ansible-builder" create -f "$ee_file" --context "$work/context" \
   --output-filename Containerfile >"$work/create.log" 2>&1) || { cat "$work/create.log" >&2; fail "ansible-builder create failed"; }
containerfile="$work/context/Containerfile"
[ -f "$containerfile" ] || fail "ansible-builder create wrote no $containerfile"

ee_values=$("$venv/bin/python" -c '
import sys, yaml
ee = yaml.safe_load(open(sys.argv[1]))
print(ee["images"]["base_image"]["name"], ee["dependencies"]["ansible_core"]["package_pip"])' "$ee_file")
read -r base_image core_pin <<<"$ee_values"
grep -qxF "ARG EE_BASE_IMAGE=\"$base_image\"" "$containerfile" || fail "the Containerfile does not start from $base_image"
grep -qF "$core_pin" "$containerfile" || fail "the Containerfile does not install $core_pin"
grep -qE '^RUN .*ansible-galaxy collection install .*-r requirements\.yml' "$containerfile" \
  || fail "the Containerfile does not install the galaxy requirements"
grep -qE '^RUN .*introspect\.py introspect' "$containerfile" \
  || fail "the Containerfile does not introspect the collections' dependencies"
cmp -s "$repo/examples/hk-fleet/requirements.yml" "$work/context/_build/requirements.yml" \
  || fail "the build context's requirements.yml is not examples/hk-fleet/requirements.yml"
# The collections whose plugins the fleet's controller runs: gpufleet.core, ansible.posix (the callbacks in the
# example's ansible.cfg); and none it no longer needs.
"$venv/bin/python" - "$work/context/_build/requirements.yml" <<'EOF' || fail "examples/hk-fleet/requirements.yml lacks a collection the fleet's EE needs, or lists one it does not (above)"
import sys

import yaml

with open(sys.argv[1]) as f:
    listed = (yaml.safe_load(f) or {}).get('collections') or []
names = {entry if isinstance(entry, str) else entry.get('name') for entry in listed}
missing = [name for name in ('gpufleet.core', 'ansible.posix') if name not in names]
unneeded = [name for name in ('ansible.utils', 'community.general') if name in names]
if missing or unneeded:
    print('collections listed: %s; missing: %s; not needed: %s' % (', '.join(sorted(map(str, names))),
          ', '.join(missing) or 'none', ', '.join(unneeded) or 'none'), file=sys.stderr)
    sys.exit(1)
EOF
echo "execution_environment: create wrote a Containerfile from $base_image installing examples/hk-fleet/requirements.yml"
