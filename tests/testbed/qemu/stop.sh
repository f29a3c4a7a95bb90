#!/usr/bin/env bash
# Stop the guest started by boot.sh from RUN_DIR: only the QEMU whose pid is in RUN_DIR/qemu.pid.
# Usage: tests/testbed/qemu/stop.sh RUN_DIR
set -uo pipefail

run=$(cd "$1" 2>/dev/null && pwd) || exit 0
pidfile=$run/qemu.pid
[ -f "$pidfile" ] || exit 0
pid=$(cat "$pidfile")
# A stale pidfile can name a reused pid: only signal it when it is still our QEMU.
if [ -n "$pid" ] && tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -qF "$run/overlay.qcow2"; then
  kill "$pid" 2>/dev/null
  for _ in $(seq 1 20); do kill -0 "$pid" 2>/dev/null || break; sleep 0.5; done
  if kill -0 "$pid" 2>/dev/null; then
    kill -9 "$pid" 2>/dev/null
    # SIGKILL is asynchronous too: return once the QEMU is gone, so the next boot finds its port and files free.
    for _ in $(seq 1 20); do kill -0 "$pid" 2>/dev/null || break; sleep 0.5; done
  fi
fi
rm -f "$pidfile" "$run/overlay.qcow2"
exit 0
