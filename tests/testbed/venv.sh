#!/usr/bin/env bash
# Create/refresh .venv (py3.12, ansible-core 2.21 + tooling) and .venv-oldest (py3.11, ansible-core 2.16).
# Usage: tests/testbed/venv.sh [all|main|oldest]   (default: all)
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
pyroot=$(pyenv root 2>/dev/null || echo "${PYENV_ROOT:-$HOME/.pyenv}")

pick_python() { # newest pyenv interpreter for a minor version, e.g. 3.12
  local py
  py=$(find "$pyroot/versions" -maxdepth 3 -path "*/versions/$1.*/bin/python" 2>/dev/null | sort -V | tail -n1)
  [ -x "$py" ] || { echo "venv.sh: no Python $1 under $pyroot/versions" >&2; exit 1; }
  echo "$py"
}

make_venv() { # make_venv DIR PYTHON_MINOR REQUIREMENTS
  local dir=$1 minor=$2 req=$3 want log
  want=$(sha256sum "$req" | cut -d' ' -f1)
  if [ -f "$dir/.requirements.sha256" ] && [ "$(cat "$dir/.requirements.sha256")" = "$want" ] \
     && [ -x "$dir/bin/python" ]; then
    return 0
  fi
  rm -rf "$dir"
  "$(pick_python "$minor")" -m venv "$dir"
  log=$(mktemp)
  # pip chatters about this machine's local find-links/index dirs; show the log only on failure.
  if ! { "$dir/bin/python" -m pip install -q "$(grep '^pip==' "$req")" \
         && "$dir/bin/python" -m pip install -q -r "$req"; } >"$log" 2>&1; then
    cat "$log" >&2; rm -f "$log"; exit 1
  fi
  rm -f "$log"
  echo "$want" >"$dir/.requirements.sha256"
  echo "venv.sh: built $dir ($("$dir/bin/python" -c 'import ansible.release as r; print("ansible-core", r.__version__)'))"
}

case "${1:-all}" in
  all)    make_venv "$repo/.venv" 3.12 "$here/requirements.txt"
          make_venv "$repo/.venv-oldest" 3.11 "$here/requirements-oldest.txt" ;;
  main)   make_venv "$repo/.venv" 3.12 "$here/requirements.txt" ;;
  oldest) make_venv "$repo/.venv-oldest" 3.11 "$here/requirements-oldest.txt" ;;
  *) echo "usage: $0 [all|main|oldest]" >&2; exit 2 ;;
esac
