#!/usr/bin/env bash
# The GPU alert pack (roles/monitoring/templates/gpu_alerts.rules.yml.j2): rendered with the monitoring role's
# default thresholds, checked with `promtool check rules`, and unit-tested with `promtool test rules` against every
# tests/promtool/*_test.yml; then the check that every alert has a test that fires it and one that holds it back.
# Installs Debian's prometheus package (for promtool) if it is missing. Exits non-zero on any failure.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
# shellcheck source=../testbed/lib.sh
. "$repo/tests/testbed/lib.sh"

command -v promtool >/dev/null || install_missing prometheus
"$repo/tests/testbed/venv.sh" main >/dev/null
"$repo/tests/testbed/link-collection.sh"

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

ANSIBLE_COLLECTIONS_PATH="$repo/build/collections" ANSIBLE_NOCOLOR=1 \
  "$repo/.venv/bin/ansible-playbook" -i localhost, -e ansible_python_interpreter="$repo/.venv/bin/python" \
  -e pack_dest="$work/gpufleet-gpu-alerts.rules.yml" "$repo/tests/promtool/render_pack.yml" >"$work/render.log" \
  || { cat "$work/render.log" >&2; echo "alert_rules.sh: rendering the pack failed" >&2; exit 1; }

promtool check rules "$work/gpufleet-gpu-alerts.rules.yml"
cp "$repo"/tests/promtool/*_test.yml "$work/"
promtool test rules "$work"/*_test.yml

cd "$repo"
PYTHONPATH=build/collections .venv/bin/python -m pytest -q -p no:cacheprovider tests/unit/roles/test_monitoring_alert_pack.py
echo "alert_rules.sh: the pack passed promtool check rules and test rules, and every alert is tested"
