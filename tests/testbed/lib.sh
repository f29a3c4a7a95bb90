#!/usr/bin/env bash
# Shell helpers the test-bed scripts share. Source it: . "$(dirname "$0")/lib.sh"

# install_missing PKG...: apt-installs the packages that are not installed yet (CI starts from a fresh machine).
install_missing() {
  local p missing=()
  for p in "$@"; do
    dpkg-query -W -f='${db:Status-Abbrev}' "$p" 2>/dev/null | grep -q '^ii' || missing+=("$p")
  done
  if [ "${#missing[@]}" -gt 0 ]; then
    # Test stages run side by side (tests/run.sh): one apt at a time, the others wait their turn.
    (
      flock -w 1800 8 || { echo "install_missing: apt was busy for 30 minutes" >&2; exit 1; }
      DEBIAN_FRONTEND=noninteractive apt-get update -qq
      DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
    ) 8>"${TMPDIR:-/tmp}/gpufleet-apt.lock"
  fi
}

# debian_mirror SUITE: the Debian mirror this machine already uses for SUITE (deb822 sources first, then
# sources.list), or deb.debian.org.
debian_mirror() {
  local mirror
  mirror=$(awk -v s="$1" '
    /^URIs:/ {u=$2} /^Suites:/ {for (i=2; i<=NF; i++) if ($i==s && m=="") m=u}
    /^$/ {u=""} END {print m}' /etc/apt/sources.list.d/*.sources 2>/dev/null || true)
  if [ -z "$mirror" ] && [ -f /etc/apt/sources.list ]; then
    mirror=$(awk -v s="$1" '$1=="deb" && $3==s {print $2; exit}' /etc/apt/sources.list)
  fi
  echo "${mirror:-http://deb.debian.org/debian}"
}

# molecule_scenarios REPO: every scenario of REPO/extensions/molecule (a directory with a molecule.yml), one a line:
# first those named in tests/testbed/molecule-first.txt, in its order, then the rest sorted by name.
molecule_scenarios() {
  local repo=$1 first=$1/tests/testbed/molecule-first.txt name
  local -a found=() ordered=()
  for name in "$repo"/extensions/molecule/*/molecule.yml; do
    [ -f "$name" ] && found+=("$(basename "$(dirname "$name")")")
  done
  if [ -f "$first" ]; then
    while read -r name; do
      case "$name" in ''|'#'*) continue ;; esac
      if [ ! -f "$repo/extensions/molecule/$name/molecule.yml" ]; then
        echo "molecule_scenarios: $first names '$name', which has no extensions/molecule/$name/molecule.yml" >&2
        return 1
      fi
      ordered+=("$name")
    done <"$first"
  fi
  { printf '%s\n' "${ordered[@]}"
    printf '%s\n' "${found[@]}" | LC_ALL=C sort | grep -vxF -f <(printf '%s\n' "${ordered[@]}" ''); } | grep -v '^$'
}

# molecule_late REPO: the scenarios tests/run.sh's stage molecule-late runs (REPO/tests/testbed/molecule-late.txt), one
# a line; stage molecule runs the others.
molecule_late() {
  local repo=$1 late=$1/tests/testbed/molecule-late.txt name
  [ -f "$late" ] || return 0
  while read -r name; do
    case "$name" in ''|'#'*) continue ;; esac
    if [ ! -f "$repo/extensions/molecule/$name/molecule.yml" ]; then
      echo "molecule_late: $late names '$name', which has no extensions/molecule/$name/molecule.yml" >&2
      return 1
    fi
    echo "$name"
  done <"$late"
}
