#!/usr/bin/env bash
# Runs every test stage, prints how long each took, and fails if any stage failed.
# Usage: tests/run.sh [STAGE...]   (default: all stages; named stages run one after another, in the order given)
set -uo pipefail

repo=$(cd "$(dirname "$0")/.." && pwd)
cd "$repo" || exit 1
all_stages=(setup units units-oldest sanity lint galaxy molecule molecule-late lab numa-vm)
# The full run puts stages that share no state side by side, because one alone leaves a CPU idle. The lab waits a
# third of its time (upgrade batches, reboots, Prometheus's round trips) and is the longest stage, so it starts first and
# keeps its priority, while the CPU-only stages (pytest, ansible-test, ansible-lint, the galaxy build) go beside it in
# the background (a lane written nice:STAGE+STAGE, in the cgroup below) and take what it leaves idle. Molecule and
# numa-vm (QEMU keeps one core busy) then run side by side; both wait on time-outs of their own, so neither is in the
# background, and nothing else runs beside them: sanity and lint in the background there slowed molecule by a third
# (docs/testing.md, "Where the time goes"). Molecule's scenarios run one after another on about one core, so the
# scenarios of tests/testbed/molecule-late.txt (stage molecule-late) follow numa-vm on the other. In a group, lanes run
# side by side and a lane's stages (joined by +) one after another. A group's first lane prints as it runs; the
# others' output follows it.
full_schedule=(setup "lab nice:units+sanity nice:units-oldest+lint+galaxy" "molecule numa-vm+molecule-late")

if [ "$#" -gt 0 ]; then schedule=("$@"); else schedule=("${full_schedule[@]}"); fi

export PYTHONDONTWRITEBYTECODE=1 ANSIBLE_FORCE_COLOR=0 PY_COLORS=0 ANSIBLE_NOCOLOR=1
collections="$repo/build/collections"

. "$repo/tests/testbed/lib.sh"  # molecule_scenarios

link_collection() { # the checkout as ansible_collections/gpufleet/core, for imports and FQCNs
  tests/testbed/link-collection.sh
}

copy_collection() { # DEST: a real copy of the tracked tree; ansible-test refuses a symlinked root
  rm -rf "$1" && mkdir -p "$1"
  git ls-files -co --exclude-standard -z | tar --null -cf - -T - | tar -xf - -C "$1"
}

stage_setup() {
  tests/testbed/venv.sh all
  link_collection
}

stage_units() {
  link_collection
  PYTHONPATH="$collections" .venv/bin/python -m pytest -q -p no:cacheprovider tests/unit || return 1
  tests/integration/alert_rules.sh || return 1  # the GPU alert pack through promtool check rules and test rules
  tests/integration/report_chromium.sh  # the fleet report in headless Chromium
}

stage_units-oldest() { # every test, but of the tables of playbook runs a sample (tests/unit/support/core_sample.py)
  link_collection
  GPUFLEET_CORE_SAMPLE=4 PYTHONPATH="$collections" .venv-oldest/bin/python -m pytest -q -p no:cacheprovider tests/unit
}

stage_sanity() {
  # Outside the checkout: inside it, ansible-test would list files with git and skip the ignored copy.
  local copy="${TMPDIR:-/tmp}/gpufleet-sanity/ansible_collections/gpufleet/core"
  tests/testbed/get-pip-standin.sh
  copy_collection "$copy"
  # Target-side code must compile on every Python from 3.8 (Ubuntu 20.04) to 3.13.
  local pybin="$repo/build/pythons" root v
  root=$(pyenv root 2>/dev/null || echo "$HOME/.pyenv")
  mkdir -p "$pybin"
  for v in 3.8 3.9 3.10 3.11 3.12 3.13; do
    ln -sfn "$(find "$root"/versions -maxdepth 3 -path "*/versions/$v.*/bin/python$v" | sort -V | tail -n1)" \
      "$pybin/python$v"
  done
  (cd "$copy" && PATH="$pybin:$repo/.venv/bin:$PATH" \
     ansible-test sanity --local --requirements --python 3.12 2>&1 \
     | grep -vE '^(Looking in|WARNING: Location|  Downloading|Collecting|Processing|Installing|Successfully|Requirement already|Attempting|Found existing|Uninstalling|Using cached| +━|$)'
   exit "${PIPESTATUS[0]}") || return 1
  for v in 3.9 3.10 3.11 3.13; do
    (cd "$copy" && PATH="$pybin:$repo/.venv/bin:$PATH" ansible-test sanity --local --test compile --python "$v") || return 1
  done
  # ansible-core 2.21 no longer knows Python 3.8 targets; the oldest supported core (2.16) still does.
  (cd "$copy" && PATH="$pybin:$repo/.venv-oldest/bin:$PATH" ansible-test sanity --local --test compile --python 3.8)
}

stage_lint() {
  local failed=0
  link_collection
  ANSIBLE_COLLECTIONS_PATH="$collections" .venv/bin/ansible-lint --profile production || failed=1
  # The plugins' and roles' docs as the docsite builds them: schemas, markup (a role is P(fqcn#role), a filter
  # P(fqcn#filter)), every reference to this collection or ansible.builtin resolved, none to an unknown collection,
  # and rstcheck on the generated RST. It calls ansible-doc, hence the venv first on PATH.
  (cd "$collections/ansible_collections/gpufleet/core" && PATH="$repo/.venv/bin:$PATH" \
     ANSIBLE_COLLECTIONS_PATH="$collections" antsibull-docs lint-collection-docs --plugin-docs \
     --validate-collection-refs dependent --disallow-unknown-collection-refs .) || failed=1
  # The changelog fragments (sections of changelogs/config.yaml, valid RST) and changelogs/changelog.yaml.
  .venv/bin/antsibull-changelog lint || failed=1
  .venv/bin/antsibull-changelog lint-changelog-yaml --strict changelogs/changelog.yaml || failed=1
  return "$failed"
}

stage_galaxy() {
  tests/integration/installed_collection.sh "$repo/.venv" && \
  tests/integration/installed_collection.sh "$repo/.venv-oldest" && \
  tests/integration/execution_environment.sh "$repo/.venv"
}

run_molecule() { # SCENARIO...: each through tests/testbed/molecule.sh, its time printed
  local scenario started busy
  local -a took=()
  for scenario in "$@"; do
    started=$(date +%s) busy=$(machine_busy)
    tests/testbed/molecule.sh "$scenario" || return 1
    # The machine's busy CPU-seconds include what runs beside it (numa-vm's QEMU, the other molecule lane).
    took+=("$scenario $(($(date +%s) - started))s/$(( $(machine_busy) - busy ))cpu")
    # Each scenario's time, so that a slow CI run says where its time went.
    echo "=== molecule: ${took[*]}"
  done
}

stage_molecule() { # every scenario under extensions/molecule but molecule-late's, the quick ones first (molecule-first.txt)
  local scenarios late
  scenarios=$(molecule_scenarios "$repo") || return 1
  late=$(molecule_late "$repo") || return 1
  # shellcheck disable=SC2046,SC2086  # scenario names are single words
  run_molecule $(grep -vxF -f <(printf '%s\n' $late '') <<<"$scenarios")
}

stage_molecule-late() { # the scenarios of tests/testbed/molecule-late.txt, in its order
  local late
  late=$(molecule_late "$repo") || return 1
  # shellcheck disable=SC2086  # scenario names are single words
  run_molecule $late
}

stage_lab() { # the site playbook on the lab of simulated GPU hosts over SSH (tests/lab/), from nothing
  tests/integration/lab_site.sh
}

stage_numa-vm() { # a real kernel with two NUMA nodes (QEMU, software emulation): the binding, measured
  tests/integration/numa_vm.sh "$repo/.venv"
}

for group in "${schedule[@]}"; do
  group=${group//nice:/}
  for stage in ${group//+/ }; do
    if ! declare -F "stage_$stage" >/dev/null; then
      echo "tests/run.sh: unknown stage '$stage' (stages: ${all_stages[*]})" >&2
      exit 2
    fi
  done
done

# Each stage's budget in seconds of wall time on a 2-core machine like CI's: the slower kind's fresh-clone figures in
# docs/testing.md ("Where the time goes"), with about 15 % of room. A stage over its budget is reported in the table,
# not failed: a slow change is seen when it lands. The whole run's budget is the 40 minutes CI must stay within; the
# stages' budgets add up to more today, and the table says so.
declare -A budget=([setup]=300 [units]=1700 [units-oldest]=1600 [sanity]=300 [lint]=400 [galaxy]=100 [molecule]=950
                   [molecule-late]=400 [numa-vm]=650 [lab]=1350)
total_budget=2400

# Busy CPU-seconds of the whole machine so far (/proc/stat: every state but idle and iowait), for what the stages'
# own process trees do not count: the containers' processes (podman's conmon is not our child) and QEMU's.
machine_busy() {
  local _cpu user nice system _idle _iowait irq softirq steal _rest
  read -r _cpu user nice system _idle _iowait irq softirq steal _rest </proc/stat
  echo $(( (user + nice + system + irq + softirq + steal) / $(getconf CLK_TCK) ))
}

# A lane written nice:STAGE gets the CPU only when nothing else wants it: this shell and all it starts go into a
# cgroup the scheduler serves last (cpu.idle; cpu.shares or cpu.weight where a kernel lacks it). nice alone does not
# do it: ansible's workers each start a session, which the kernel's autogroups then schedule as equals of the lab's
# own, while podman puts every lab host into one group (libpod_parent), so a niced unit run took most of the lab's
# CPU. Where no cgroup can be made, the lane is only niced, and says so.
background_group=''
if [ -w /sys/fs/cgroup/cpu/cgroup.procs ]; then  # cgroup v1's cpu controller
  background_group=/sys/fs/cgroup/cpu/gpufleet-background
elif grep -qw cpu /sys/fs/cgroup/cgroup.controllers 2>/dev/null &&
     { grep -qw cpu /sys/fs/cgroup/cgroup.subtree_control || echo +cpu >/sys/fs/cgroup/cgroup.subtree_control; } 2>/dev/null
then
  background_group=/sys/fs/cgroup/gpufleet-background  # cgroup v2, its cpu controller on for the root's children
fi
in_background_group() {
  local made=''
  renice -n 19 -p "$BASHPID" >/dev/null 2>&1
  ionice -c 2 -n 7 -p "$BASHPID" >/dev/null 2>&1  # a no-op under the `none` I/O scheduler; helps under bfq
  if [ -n "$background_group" ]; then
    mkdir -p "$background_group" 2>/dev/null &&
      { echo 1 >"$background_group/cpu.idle" || echo 2 >"$background_group/cpu.shares" ||
        echo 1 >"$background_group/cpu.weight"; } 2>/dev/null &&
      echo "$BASHPID" >"$background_group/cgroup.procs" 2>/dev/null && made=yes
  fi
  [ -n "$made" ] || echo "tests/run.sh: no cgroup for the background lane; it runs under nice 19 only" >&2
}

results=$(mktemp -d "${TMPDIR:-/tmp}/gpufleet-stages.XXXXXX")
run_stage() { # STAGE: runs it and keeps its result line in $results/STAGE
  local stage=$1 start seconds result cpu over=''
  echo "=== stage $stage"
  start=$(date +%s)
  # In a subshell, whose `times` then gives the CPU of the stage's own processes (those it waited for).
  if ( "stage_$stage"; rc=$?; times >"$results/$stage.times"; exit "$rc" ); then result=ok; else result=FAILED; fi
  seconds=$(( $(date +%s) - start ))
  cpu=$(awk 'NR == 2 { split($1, u, /[ms]/); split($2, s, /[ms]/); printf "%d", u[1] * 60 + u[2] + s[1] * 60 + s[2] }' \
        "$results/$stage.times" 2>/dev/null)
  [ "$seconds" -gt "${budget[$stage]:-0}" ] && over="  OVER its budget of ${budget[$stage]}s"
  printf '%-14s %-7s %5ss  (own CPU %5ss, budget %5ss)%s\n' "$stage" "$result" "$seconds" "${cpu:-?}" \
    "${budget[$stage]:-?}" "$over" >"$results/$stage"
  echo "=== stage $stage: $result in ${seconds}s"
}
run_lane() { # STAGE[+STAGE...]: one after another, each to its end even when one before it failed
  local stage
  for stage in ${1//+/ }; do run_stage "$stage"; done
}

order=()
groups=()
run_started=$(date +%s)
for group in "${schedule[@]}"; do
  read -ra members <<<"$group"
  group_started=$(date +%s) busy_before=$(machine_busy)
  for lane in "${members[@]}"; do lane=${lane#nice:}; read -ra stages <<<"${lane//+/ }"; order+=("${stages[@]}"); done
  pids=() logs=()
  for lane in "${members[@]:1}"; do
    logs+=("$results/lane.${#logs[@]}.log")
    if [ "${lane#nice:}" != "$lane" ]; then
      (in_background_group; run_lane "${lane#nice:}") >"${logs[-1]}" 2>&1 &
    else
      run_lane "$lane" >"${logs[-1]}" 2>&1 &
    fi
    pids+=("$!")
  done
  [ "${#members[@]}" -gt 1 ] && echo "=== ${members[*]:1} run beside ${members[0]}; their output follows its"
  run_lane "${members[0]#nice:}"
  for pid in "${pids[@]}"; do wait "$pid"; done
  for log in "${logs[@]}"; do cat "$log"; done
  group_seconds=$(( $(date +%s) - group_started )) group_busy=$(( $(machine_busy) - busy_before ))
  groups+=("$(printf '%-40s %5ss, the machine busy %5s CPU-s of %5s (%s%%)' "$group" "$group_seconds" \
    "$group_busy" "$(( group_seconds * $(nproc) ))" \
    "$(( group_seconds > 0 ? group_busy * 100 / (group_seconds * $(nproc)) : 0 ))")")
done
run_seconds=$(( $(date +%s) - run_started ))

passed=0 failed=0
echo
echo "Stage timings:"
for stage in "${order[@]}"; do
  line=$(cat "$results/$stage" 2>/dev/null || printf '%-14s %-7s' "$stage" "FAILED (no result)")
  echo "  $line"
  case $line in *" ok "*) passed=$((passed + 1)) ;; *) failed=$((failed + 1)) ;; esac
done
echo "Side by side (wall time of each group, and how busy the machine's CPUs were):"
for line in "${groups[@]}"; do echo "  $line"; done
if [ "$#" -eq 0 ]; then
  over=''
  [ "$run_seconds" -gt "$total_budget" ] && over="  OVER its budget of ${total_budget}s"
  echo "  the whole run: ${run_seconds}s (budget ${total_budget}s)$over"
fi
rm -rf "$results"
[ -n "$background_group" ] && rmdir "$background_group" 2>/dev/null  # once no lane is left in it
echo "stages: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
