#!/usr/bin/env bash
# The site playbook on a fresh lab (tests/lab/): refused and quarantined hosts, a full converge and a run with
# nothing to change, a rolling MIG change, a host lost mid-run, monitoring, the report, a driver upgrade with a canary
# and health gates, one stopped by a fault and rolled back, faults for the watchdog (tests/integration/lab_site.py).
# The lab is made from nothing and removed at the end, passed or not, so that no state leaks into the next run. Steps
# start where the previous one left the lab: a subset may need the steps before it (such as again, to converge).
# Usage: tests/integration/lab_site.sh [STEP...]   (steps: see lab_site.py; default: all)
set -euo pipefail

repo=$(cd "$(dirname "$0")/../.." && pwd)
lab=$repo/tests/lab/lab.sh
finish() {
  local rc=$?
  "$lab" down >/dev/null 2>&1 || true
  exit "$rc"
}
trap finish EXIT

"$repo/tests/testbed/venv.sh" main
"$repo/tests/testbed/link-collection.sh"
"$lab" down >/dev/null
"$lab" up
"$repo/.venv/bin/python" "$repo/tests/integration/lab_site.py" "$@"
