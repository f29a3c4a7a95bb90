#!/usr/bin/env bash
# Create/refresh the virtual environments Ansible runs from.
#   main:   .venv, Python 3.12 (pyenv, or the system's), ansible-core 2.21 and the test tooling
#   oldest: .venv-oldest, Python 3.11 (pyenv), ansible-core 2.16, the oldest meta/runtime.yml admits
#   site:   .venv for `make site`, from the newest Python on the machine that a supported ansible-core accepts:
#           3.12 as main; else 3.13 (ansible-core 2.21), 3.11 (2.19) or 3.10 (2.17), with only what the site needs
#   all:    main and oldest
# Usage: tests/testbed/venv.sh [all|main|oldest|site]   (default: all)
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
pyroot=$(pyenv root 2>/dev/null || echo "${PYENV_ROOT:-$HOME/.pyenv}")

find_python() { # find_python MINOR: pyenv's newest MINOR.x, else the system's pythonMINOR; nothing if neither
  local py
  py=$(find "$pyroot/versions" -maxdepth 3 -path "*/versions/$1.*/bin/python" 2>/dev/null | sort -V | tail -n1)
  if [ -z "$py" ]; then
    for py in "/usr/local/bin/python$1" "/usr/bin/python$1"; do [ -x "$py" ] && break; py=; done
  fi
  # A Python without its venv module (Debian's python3.X-venv missing) cannot make the environment.
  if [ -n "$py" ] && "$py" -c 'import venv, ensurepip' 2>/dev/null; then echo "$py"; fi
}

pick_python() { # pick_python MINOR: as find_python, or fail naming the fix
  local py
  py=$(find_python "$1")
  [ -n "$py" ] || { echo "venv.sh: no Python $1 with its venv module (under $pyroot/versions or /usr/bin); install" \
                         "it with pyenv, or apt-get install python$1-venv" >&2; exit 1; }
  echo "$py"
}

make_venv() { # make_venv DIR PYTHON REQUIREMENTS
  local dir=$1 python=$2 req=$3 want log
  want=$(sha256sum "$req" | cut -d' ' -f1)
  # Kept when the requirements are the same and it was made with the same Python (.python: a venv made before that
  # file existed was made by this script's only Python then, pyenv's 3.12 or 3.11).
  if [ -f "$dir/.requirements.sha256" ] && [ "$(cat "$dir/.requirements.sha256")" = "$want" ] \
     && [ -x "$dir/bin/python" ] && { [ ! -f "$dir/.python" ] || [ "$(cat "$dir/.python")" = "$python" ]; }; then
    return 0
  fi
  rm -rf "$dir"
  "$python" -m venv "$dir"
  log=$(mktemp)
  # pip chatters about this machine's local find-links/index dirs; show the log only on failure.
  if ! { "$dir/bin/python" -m pip install -q "$(grep '^pip==' "$req")" \
         && "$dir/bin/python" -m pip install -q -r "$req"; } >"$log" 2>&1; then
    cat "$log" >&2; rm -f "$log"; exit 1
  fi
  rm -f "$log"
  echo "$want" >"$dir/.requirements.sha256"
  echo "$python" >"$dir/.python"
  echo "venv.sh: built $dir with $python ($("$dir/bin/python" -c 'import ansible.release as r; print("ansible-core", r.__version__)'))"
}

site_venv() {
  local py
  if py=$(find_python 3.12) && [ -n "$py" ]; then
    make_venv "$repo/.venv" "$py" "$here/requirements.txt"
  elif py=$(find_python 3.13) && [ -n "$py" ]; then
    make_venv "$repo/.venv" "$py" "$here/requirements-site-py313.txt"
  elif py=$(find_python 3.11) && [ -n "$py" ]; then
    make_venv "$repo/.venv" "$py" "$here/requirements-site-py311.txt"
  elif py=$(find_python 3.10) && [ -n "$py" ]; then
    make_venv "$repo/.venv" "$py" "$here/requirements-site-py310.txt"
  else
    echo "venv.sh: the site needs Python 3.10 or newer with its venv module (apt-get install python3-venv)" >&2
    exit 1
  fi
}

main_venv() { local py; py=$(pick_python 3.12); make_venv "$repo/.venv" "$py" "$here/requirements.txt"; }
oldest_venv() { local py; py=$(pick_python 3.11); make_venv "$repo/.venv-oldest" "$py" "$here/requirements-oldest.txt"; }

case "${1:-all}" in
  all)    main_venv; oldest_venv ;;
  main)   main_venv ;;
  oldest) oldest_venv ;;
  site)   site_venv ;;
  *) echo "usage: $0 [all|main|oldest|site]" >&2; exit 2 ;;
esac
