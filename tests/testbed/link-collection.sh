#!/usr/bin/env bash
# Expose this checkout as build/collections/ansible_collections/gpufleet/core, so that gpufleet.core resolves by
# FQCN (ANSIBLE_COLLECTIONS_PATH=build/collections) and imports as ansible_collections.gpufleet.core (PYTHONPATH).
# The one place that makes this link; Makefile, tests/run.sh and the test-bed scripts call it.
# Usage: tests/testbed/link-collection.sh
set -euo pipefail

repo=$(cd "$(dirname "$0")/../.." && pwd)
link=$repo/build/collections/ansible_collections/gpufleet/core
target=../../../..
[ "$(readlink "$link" 2>/dev/null)" = "$target" ] && exit 0
mkdir -p "$(dirname "$link")"
# ln -sfn unlinks, then links: two callers at once (parallel stages) can fail with "File exists". A rename is atomic.
ln -sn "$target" "$link.$$"
mv -Tf "$link.$$" "$link"
