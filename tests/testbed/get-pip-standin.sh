#!/usr/bin/env bash
# Install offline stand-ins for ansible-test's get-pip bootstrap script (its download host is unreachable).
# ansible-test (ansible_test/_util/target/setup/requirements.py) looks for
# ~/.ansible/test/cache/get_pip_<pip version, dots as underscores>.py, the pip versions being those in
# get_venv_packages() of ansible_test/_internal/python_requirements.py; we create one per version found.
set -euo pipefail

repo=$(cd "$(dirname "$0")/../.." && pwd)
cache=$HOME/.ansible/test/cache
mkdir -p "$cache"

mapfile -t versions < <(
  for f in "$repo"/.venv*/lib/python*/site-packages/ansible_test/_internal/python_requirements.py; do
    [ -f "$f" ] || continue
    sed -n '/^def get_venv_packages/,/^def /p' "$f" | grep -oE "pip='[0-9.]+'" | cut -d"'" -f2
  done | sort -uV)
[ "${#versions[@]}" -gt 0 ] || { echo "get-pip-standin.sh: no ansible_test in $repo/.venv*; run venv.sh first" >&2; exit 1; }

# Children, not in-process: ensurepip's in-process bootstrap drops the machine's pip config (certificates).
# Kept Python-2.7-compatible since ansible-core 2.16 also bootstraps 2.7 targets through this path.
standin='# gpufleet stand-in for get-pip.py (tests/testbed/get-pip-standin.sh); ansible-test runs it via runpy.
import subprocess
import sys

args = [a for a in sys.argv[1:] if a not in ("--no-setuptools", "--no-wheel")]
rc = subprocess.call([sys.executable, "-m", "ensurepip", "--upgrade"])
if rc == 0:
    rc = subprocess.call([sys.executable, "-m", "pip", "install", "--upgrade"] + args)
sys.exit(rc)
'
for v in "${versions[@]}"; do
  dest=$cache/get_pip_${v//./_}.py
  if [ ! -f "$dest" ] || [ "$(cat "$dest")" != "${standin%$'\n'}" ]; then
    printf '%s' "$standin" >"$dest"
  fi
done
echo "get-pip-standin.sh: pip ${versions[*]} -> $cache"
