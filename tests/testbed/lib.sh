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

# scenario_list REPO FILE: the scenarios FILE names (one a line; blank lines and # comments skipped), each checked to
# be a scenario of REPO/extensions/molecule.
scenario_list() {
  local repo=$1 list=$2 name
  [ -f "$list" ] || return 0
  while read -r name; do
    case "$name" in ''|'#'*) continue ;; esac
    if [ ! -f "$repo/extensions/molecule/$name/molecule.yml" ]; then
      echo "scenario_list: $list names '$name', which has no extensions/molecule/$name/molecule.yml" >&2
      return 1
    fi
    echo "$name"
  done <"$list"
}

# molecule_scenarios REPO: every scenario of REPO/extensions/molecule (a directory with a molecule.yml), one a line:
# first those named in tests/testbed/molecule-first.txt, in its order, then the rest sorted by name.
molecule_scenarios() {
  local repo=$1 name listed
  local -a found=() ordered=()
  for name in "$repo"/extensions/molecule/*/molecule.yml; do
    [ -f "$name" ] && found+=("$(basename "$(dirname "$name")")")
  done
  listed=$(scenario_list "$repo" "$repo/tests/testbed/molecule-first.txt") || return 1
  [ -n "$listed" ] && mapfile -t ordered <<<"$listed"
  { printf '%s\n' "${ordered[@]}"
    printf '%s\n' "${found[@]}" | LC_ALL=C sort | grep -vxF -f <(printf '%s\n' "${ordered[@]}" ''); } | grep -v '^$'
}

# molecule_late REPO: the scenarios tests/run.sh's stage molecule-late runs (REPO/tests/testbed/molecule-late.txt), one
# a line; stage molecule runs the others.
molecule_late() {
  scenario_list "$1" "$1/tests/testbed/molecule-late.txt"
}
