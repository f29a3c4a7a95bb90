#!/usr/bin/env bash
# Run one molecule scenario from extensions/molecule/ against local podman containers.
# Usage: tests/testbed/molecule.sh SCENARIO [extra molecule test args...]
set -euo pipefail

[ $# -ge 1 ] || { echo "usage: $0 SCENARIO [molecule test args...]" >&2; exit 2; }
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)

# One run of a scenario at a time on this machine: the same scenario of two checkouts (a CI clone and a work tree)
# has the same container names. Two different scenarios may run at once (tests/run.sh's molecule-late lane). This
# shell holds the lock until it exits; molecule and the containers it starts do not inherit it (9>&- below), so a
# lingering process cannot keep it.
exec 9>"${TMPDIR:-/tmp}/gpufleet-molecule-$1.lock"
flock -w 7200 9 || { echo "molecule.sh: another run of scenario $1 held the lock for 2 hours" >&2; exit 1; }

# All idempotent and near-instant once done; one scenario at a time does them (the first builds the image).
(
  flock -w 3600 8 || { echo "molecule.sh: the set-up lock was held for an hour" >&2; exit 1; }
  "$here/podman.sh"
  "$here/image.sh"
  "$here/venv.sh" main
) 8>"${TMPDIR:-/tmp}/gpufleet-molecule-setup.lock"

# gpufleet.core must be resolvable by FQCN: expose the repo as ansible_collections/gpufleet/core.
"$here/link-collection.sh"
site=$("$repo/.venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
# build/collections first so our checkout wins; site-packages holds the `ansible` package's bundled collections.
export ANSIBLE_COLLECTIONS_PATH="$repo/build/collections:$site"
export VIRTUAL_ENV="$repo/.venv" PATH="$repo/.venv/bin:$PATH"
export ANSIBLE_FORCE_COLOR="${ANSIBLE_FORCE_COLOR:-0}" PY_COLORS="${PY_COLORS:-0}"

# molecule finds extensions/molecule/{config.yml,*/molecule.yml} only from the collection root (galaxy.yml in cwd).
cd "$repo"
# The test sequence (extensions/molecule/config.yml) starts with create, not with a destroy playbook that finds
# nothing to remove (a few seconds per scenario): what a stopped run left behind is destroyed here, when there is any.
if podman ps -a --format '{{.Names}}' | grep -Eq "^gpufleet-$1(-.*)?\$"; then
  molecule destroy -s "$1" 9>&-
else
  # A run killed after create, its container removed since, leaves molecule's state saying "created": create would
  # be skipped and converge find no container. No container: no state (the lock above makes this scenario ours).
  rm -rf "$HOME"/.ansible/tmp/molecule.*."$1"
fi
# Each of molecule's actions (create, prepare, converge, idempotence, verify, destroy) ends with the seconds since the
# scenario started, so that a slow scenario says which action its time went to (docs/testing.md).
started=$SECONDS
molecule test -s "$1" "${@:2}" 9>&- 2>&1 | while IFS= read -r line; do
  case $line in
    *INFO*'] Executed: '*) printf '%s (at %d s)\n' "$line" "$((SECONDS - started))" ;;
    *) printf '%s\n' "$line" ;;
  esac
done
