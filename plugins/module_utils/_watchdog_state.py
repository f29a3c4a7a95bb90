# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.core contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""What the GPU watchdog keeps between checks, and how a check's actions change it.

Pure code. The state (/var/lib/gpufleet-watchdog/state.json) holds the rate-limit history, the quarantine, pending
resets, Xid counts and memory or bus faults per GPU, the kernel log cursor and each GPU's UUID by index;
``_watchdog.decide`` starts from ``state_for_check`` and records each action it takes with ``record_action``.
This is a private module: its API may change without notice.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.gpufleet.core.plugins.module_utils._xid_catalog import RMA_WINDOW_SEC, SCHEDULE_RESET

STATE_VERSION = 1

# Kinds of decision; each but REPORT is a counter of the state, and each is a label of the actions metric.
RESTART = 'restart'
RESET = 'reset'
QUARANTINE = 'quarantine'
REBOOT = 'reboot'
REPORT = 'report'
KINDS = (RESTART, RESET, QUARANTINE, REBOOT, SCHEDULE_RESET, REPORT)
# The watchdog's own reboots kept, for the cooldown.
_REBOOTS_KEPT = 10


def fresh_state():
    return {'version': STATE_VERSION, 'checks': 0, 'boot_id': None, 'kernel_cursor': None, 'restarts': {},
            'resets': {}, 'reboots': [], 'quarantined': {}, 'reset_pending': {}, 'xid_counts': {}, 'rma_events': {},
            'gpu_index': {},
            'actions_total': dict((kind, 0) for kind in KINDS if kind != REPORT)}


def read_state(document):
    """A state document as the previous check left it; anything unreadable starts afresh (and says so)."""
    state = fresh_state()
    if not isinstance(document, dict) or document.get('version') != STATE_VERSION:
        return state, document is not None
    for key, value in state.items():
        if isinstance(document.get(key), type(value)) if value is not None else key in document:
            state[key] = document[key]
    return state, False


def state_for_check(state, boot_id, now):
    """A copy of the previous check's state for this one to change: faults older than the RMA window forgotten, and
    pending resets done when the host has booted since."""
    state = dict(state, restarts=dict(state['restarts']), resets=dict(state['resets']),
                 quarantined=dict(state['quarantined']), reset_pending=dict(state['reset_pending']),
                 xid_counts=dict((k, dict(v)) for k, v in state['xid_counts'].items()),
                 rma_events=dict((gpu, [t for t in times if now - t < RMA_WINDOW_SEC])
                                 for gpu, times in state['rma_events'].items()),
                 gpu_index=dict(state['gpu_index']), reboots=list(state['reboots']),
                 actions_total=dict(state['actions_total']))
    if boot_id and state['boot_id'] and boot_id != state['boot_id']:
        # A reboot resets every GPU: pending resets are done; a quarantine stays until an operator clears it.
        state['reset_pending'] = {}
    state['boot_id'] = boot_id or state['boot_id']
    state['checks'] += 1
    return state


def gpus_by_index(state, gpus):
    """The GPUs read, each lost one with the UUID and PCI address it had at earlier checks (NVML names it by index
    only); the state remembers those of the GPUs that answer."""
    found = []
    for gpu in gpus:
        known = state['gpu_index'].get(str(gpu['index']), {})
        if gpu.get('uuid') and not gpu.get('lost'):
            state['gpu_index'][str(gpu['index'])] = {'uuid': gpu['uuid'], 'pci_bus_id': gpu.get('pci_bus_id')}
        found.append(dict(gpu, uuid=gpu.get('uuid') or known.get('uuid'),
                          pci_bus_id=gpu.get('pci_bus_id') or known.get('pci_bus_id')))
    return found


def record_action(config, state, decision, now):
    """Count one decision carried out, and keep what later checks need of it."""
    kind = decision['kind']
    state['actions_total'][kind] = state['actions_total'].get(kind, 0) + 1
    window = config['rate_limit_window_sec']
    if kind == RESTART:
        for name in decision['services']:
            state['restarts'][name] = [t for t in state['restarts'].get(name, []) if now - t < window] + [now]
    elif kind == RESET:
        gpu = decision['gpu']
        state['resets'][gpu] = [t for t in state['resets'].get(gpu, []) if now - t < window] + [now]
        state['reset_pending'].pop(gpu, None)
    elif kind == QUARANTINE:
        state['quarantined'][decision['evidence']['key']] = {'since': now, 'reason': decision['reason']}
    elif kind == SCHEDULE_RESET:
        state['reset_pending'][decision['gpu']] = {'since': now, 'xid': decision['evidence']['xid']}
    elif kind == REBOOT:
        state['reboots'] = (state['reboots'] + [now])[-_REBOOTS_KEPT:]


def forget_old_history(config, state, now):
    """Histories of services no longer restarted age out; the state does not grow without bound."""
    window = config['rate_limit_window_sec']
    for table in ('restarts', 'resets'):
        recent = dict((key, [t for t in times if now - t < window]) for key, times in state[table].items())
        state[table] = dict((key, times) for key, times in recent.items() if times)


def recent_restarts(config, history, now):
    """(allowed, times within the window) for one more restart (or reset) after those in history."""
    recent = [t for t in history if now - t < config['rate_limit_window_sec']]
    return len(recent) < config['rate_limit_restarts'], recent
