#!/usr/bin/env bash
# The fleet report in headless Chromium (Debian's chromium package, installed if missing): rendered for the lab-like
# fleet of simulated hosts, screenshot at 1400 px, the DOM's drawings and counts, nothing outside its box, no network
# request (steps in report_chromium.py). The page, its JSON, the dumped DOM and the screenshot stay in build/report/.
# Exits non-zero on any failure.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
# shellcheck source=../testbed/lib.sh
. "$repo/tests/testbed/lib.sh"

command -v chromium >/dev/null || install_missing chromium
"$repo/tests/testbed/venv.sh" main >/dev/null
"$repo/tests/testbed/link-collection.sh"

cd "$repo"
PYTHONPATH=build/collections .venv/bin/python tests/integration/report_chromium.py build/report
