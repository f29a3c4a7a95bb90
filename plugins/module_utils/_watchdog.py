# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.core contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The GPU watchdog's decisions: what one check of a host should do, and why, from what it read.

Pure code. ``decide`` takes the watchdog's configuration, the placement plan (``_plan``), the readings of one check
(per-device memory of each process, GPUs present or lost, Xid events since the last check, units' states, the
services' processes and binding as ``_numa_audit`` measures them), the state the previous checks left and the clock,
and returns the decisions, each with its evidence, and the state to keep. ``_helper_watchdog`` reads the system and
carries the decisions out; docs/gpu_watchdog.md has the decision table.
This is a private module: its API may change without notice.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

from ansible_collections.gpufleet.core.plugins.module_utils._errors import GpufleetError
from ansible_collections.gpufleet.core.plugins.module_utils._plan import PLAN_FILE, is_service_name
from ansible_collections.gpufleet.core.plugins.module_utils._values import is_path, is_unit_name, is_unit_prefix
from ansible_collections.gpufleet.core.plugins.module_utils._xid_catalog import (
    APPLICATION, FALLEN_OFF_BUS, IGNORE, REBOOT_HOST, RESET_GPU, RESTART_APP, RMA_REPEATS, RMA_WINDOW_SEC, RMA_XIDS,
    SCHEDULE_RESET, bucket as xid_bucket,
)

CONFIG_VERSION = 1
STATE_VERSION = 1

# Kinds of decision; each is a label of the actions metric.
RESTART = 'restart'
RESET = 'reset'
QUARANTINE = 'quarantine'
REBOOT = 'reboot'
REPORT = 'report'
KINDS = (RESTART, RESET, QUARANTINE, REBOOT, SCHEDULE_RESET, REPORT)

# "NVRM: Xid (PCI:0000:3b:00): 79, pid=1234, name=python3, GPU has fallen off the bus."
_KERNEL_XID = re.compile(r'NVRM: Xid \(PCI:([0-9A-Fa-f]{4,8}):([0-9A-Fa-f]{2}):([0-9A-Fa-f]{2})(?:\.[0-7])?\): '
                         r'(\d+)(?:, pid=(\d+))?')
_BUS_ID = re.compile(r'([0-9A-Fa-f]{4,8}):([0-9A-Fa-f]{2}):([0-9A-Fa-f]{2})(?:\.[0-7])?')

DEFAULTS = {
    'version': CONFIG_VERSION,
    'plan_file': PLAN_FILE,
    'state_file': '/var/lib/gpufleet-watchdog/state.json',
    'textfile_dir': '/var/lib/prometheus/node-exporter',
    'interval_sec': 30,
    'dry_run': False,
    'memory_budget_percent': 85,
    'service_budgets': {},
    'restart_on_memory': True,
    'restart_on_xid': True,
    'restart_on_binding_drift': False,
    'quarantine': True,
    'allow_reset': False,
    'allow_reboot': False,
    'min_uptime_sec': 1800,
    'reboot_cooldown_sec': 21600,
    'rate_limit_restarts': 3,
    'rate_limit_window_sec': 3600,
    'max_remote_fraction': 0.02,
    'xid_event_wait_ms': 1000,
    'gpu_reset_command': ['nvidia-smi', '--gpu-reset', '-i'],
    'reset_stop_units': [],
    'mps_unit_prefix': 'gpufleet-mps@',
    'mig_unit': 'gpufleet-mig.service',
    # The fleet-wide cap (the site playbook's gpufleet_watchdog_max_quarantined): at most this many hosts quarantined
    # at once, counted by the Prometheus that scrapes every host's watchdog metrics; 0 is no cap.
    'fleet_max_quarantined': 0,
    'fleet_prometheus_url': '',
}
# What the watchdog asks that Prometheus: how many hosts are quarantined now (the pack's job label is not assumed).
FLEET_QUARANTINED_QUERY = 'count(max by (host) (gpufleet_watchdog_quarantined == 1))'


class WatchdogError(GpufleetError):
    """A configuration or state the watchdog cannot work with; the message names the setting and the fix."""


# -- configuration --------------------------------------------------------------------------------------------


def _number(value, integer=True):
    kinds = (int,) if integer else (int, float)
    return isinstance(value, kinds) and not isinstance(value, bool)


def _budget_ok(value):
    return _number(value, integer=False) and 1 <= value <= 100


def check_config(raw):
    """The configuration with defaults filled in, or WatchdogError naming every bad setting and its fix."""
    if not isinstance(raw, dict):
        raise WatchdogError('the watchdog configuration must be a JSON object (write it with the '
                            'gpufleet.core.gpu_watchdog role)')
    unknown = sorted(set(raw) - set(DEFAULTS))
    config = dict(DEFAULTS)
    config.update(raw)
    problems = []
    if unknown:
        problems.append('unknown settings %s (this release knows %s)' % (', '.join(unknown), ', '.join(sorted(DEFAULTS))))
    if config['version'] != CONFIG_VERSION:
        problems.append('version is %r; this release reads %d (apply the gpu_watchdog role of this release)'
                        % (config['version'], CONFIG_VERSION))
    for key in ('plan_file', 'state_file', 'textfile_dir'):
        if not is_path(config[key]):
            problems.append('%s must be an absolute path without .., spaces or a trailing / (got %r)' % (key, config[key]))
    for key in ('dry_run', 'restart_on_memory', 'restart_on_xid', 'restart_on_binding_drift', 'quarantine',
                'allow_reset', 'allow_reboot'):
        if not isinstance(config[key], bool):
            problems.append('%s must be true or false (got %r)' % (key, config[key]))
    for key in ('interval_sec', 'rate_limit_restarts', 'rate_limit_window_sec'):
        if not _number(config[key]) or config[key] < 1:
            problems.append('%s must be a whole number of at least 1 (got %r)' % (key, config[key]))
    for key in ('min_uptime_sec', 'reboot_cooldown_sec', 'xid_event_wait_ms', 'fleet_max_quarantined'):
        if not _number(config[key]) or config[key] < 0:
            problems.append('%s must be a whole number, 0 or more (got %r)' % (key, config[key]))
    url = config['fleet_prometheus_url']
    if not isinstance(url, str) or not re.fullmatch(r'(https?://[^\s/?#]+(/[^\s?#]*[^/\s?#])?)?', url):
        problems.append("fleet_prometheus_url must be an http(s) URL without a trailing slash, or '' (got %r)" % (url,))
    if not problems and config['rate_limit_window_sec'] < config['interval_sec']:
        problems.append('rate_limit_window_sec (%d) is shorter than the check interval interval_sec (%d): the rate '
                        'limit would never see two restarts; make the window at least the interval'
                        % (config['rate_limit_window_sec'], config['interval_sec']))
    if not _budget_ok(config['memory_budget_percent']):
        problems.append('memory_budget_percent must be a percentage from 1 to 100 (got %r)'
                        % (config['memory_budget_percent'],))
    budgets = config['service_budgets']
    if not isinstance(budgets, dict):
        problems.append('service_budgets must map service names to percentages (got %r)' % (budgets,))
    else:
        for name, value in sorted(budgets.items()):
            if not is_service_name(name) or not _budget_ok(value):
                problems.append('service_budgets[%r] must be a service name with a percentage from 1 to 100 (got %r)'
                                % (name, value))
    if not _number(config['max_remote_fraction'], integer=False) or not 0 <= config['max_remote_fraction'] <= 1:
        problems.append('max_remote_fraction must be a number from 0 to 1 (got %r)' % (config['max_remote_fraction'],))
    command = config['gpu_reset_command']
    if not isinstance(command, list) or not command or not all(isinstance(w, str) and w for w in command):
        problems.append('gpu_reset_command must be a non-empty list of words; the GPU UUID is appended (got %r)'
                        % (command,))
    units = config['reset_stop_units']
    if not isinstance(units, list) or not all(is_unit_name(u, ('service',)) for u in units):
        problems.append('reset_stop_units must be a list of .service units (got %r)' % (units,))
    if not is_unit_prefix(config['mps_unit_prefix']):
        problems.append('mps_unit_prefix must be a unit name prefix (got %r)' % (config['mps_unit_prefix'],))
    if not isinstance(config['mig_unit'], str) or not (config['mig_unit'] == '' or is_unit_name(config['mig_unit'], ('service',))):
        problems.append("mig_unit must be a .service unit or '' (got %r)" % (config['mig_unit'],))
    if problems:
        raise WatchdogError('The watchdog configuration cannot be used: ' + '; '.join(problems))
    return config


def check_budgets_name_services(config, plan):
    """Names in service_budgets that are not services of the plan (a typo would silently keep the default)."""
    names = set(plan.names())
    return sorted(name for name in config['service_budgets'] if name not in names)


# -- state ------------------------------------------------------------------------------------------------------


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


# -- Xid events -------------------------------------------------------------------------------------------------


def normalise_bus_id(text):
    """(domain, bus, device) of a PCI address in NVML's (00000000:3B:00.0) or the kernel's (0000:3b:00) form."""
    match = _BUS_ID.fullmatch(text or '')
    if not match:
        return None
    return tuple(int(part, 16) for part in match.groups())


def parse_kernel_xid(message):
    """{'pci_bus_id', 'xid', 'pid'} of an "NVRM: Xid" kernel line, or None for any other line."""
    match = _KERNEL_XID.search(message or '')
    if not match:
        return None
    domain, bus, device, xid, pid = match.groups()
    return {'pci_bus_id': '%s:%s:%s' % (domain, bus, device), 'xid': int(xid), 'pid': int(pid) if pid else None}


def _gpu_of_bus(gpus, bus_id):
    wanted = normalise_bus_id(bus_id)
    for gpu in gpus:
        if wanted is not None and normalise_bus_id(gpu.get('pci_bus_id')) == wanted:
            return gpu
    return None


def merge_xids(gpus, events):
    """One event per (GPU, device, Xid) of a check: NVML and the kernel log report the same error, and NVML's names
    the MIG device. Kernel events are matched to GPUs by PCI address."""
    merged = []
    seen = {}
    for event in sorted(events, key=lambda item: item.get('source') != 'nvml'):
        gpu = event.get('gpu')
        if gpu is None and event.get('pci_bus_id'):
            found = _gpu_of_bus(gpus, event['pci_bus_id'])
            gpu = found['uuid'] if found else None
        key = (gpu, event['xid'])
        if gpu is not None and key in seen:
            seen[key]['sources'] = sorted(set(seen[key]['sources'] + [event.get('source', 'kernel')]))
            continue
        item = {'gpu': gpu, 'device': event.get('device'), 'xid': event['xid'], 'bucket': xid_bucket(event['xid']),
                'pid': event.get('pid'), 'pci_bus_id': event.get('pci_bus_id'),
                'sources': [event.get('source', 'kernel')], 'message': event.get('message')}
        seen[key] = item
        merged.append(item)
    return merged


# -- the check --------------------------------------------------------------------------------------------------


def _decision(kind, cause, reason, evidence, services=(), units=(), gpu=None, act=True, why_not=None):
    return {'kind': kind, 'cause': cause, 'reason': reason, 'evidence': evidence, 'services': list(services),
            'units': list(units), 'gpu': gpu, 'act': act, 'why_not': why_not}


def _memory(config, service, reading, devices):
    """(percent used of the budgeted device, budget, evidence) of the worst device, or None when it uses none."""
    budget = config['service_budgets'].get(service.name, config['memory_budget_percent'])
    pids = set(reading.get('pids') or [])
    worst = None
    for uuid in service.devices:
        device = devices.get(uuid)
        if device is None or not device.get('memory_total_bytes'):
            continue
        used = [device['processes'][pid] for pid in sorted(pids) if pid in device['processes']]
        known = [value for value in used if value is not None]
        total = device['memory_total_bytes']
        used_bytes = sum(known)
        # Integer arithmetic for whole-percent budgets, so 85.0% is within 85 and 85.01% is not.
        over = used_bytes * 100 > budget * total
        entry = {'device': uuid, 'used_bytes': used_bytes, 'total_bytes': total, 'budget_percent': budget,
                 'used_percent': round(100.0 * used_bytes / total, 3), 'ratio': round(100.0 * used_bytes / total / budget, 4),
                 'over': over, 'pids': sorted(pid for pid in pids if pid in device['processes']),
                 'unknown_pids': sorted(pid for pid in pids if device['processes'].get(pid, 0) is None)}
        if worst is None or entry['ratio'] > worst['ratio']:
            worst = entry
    return worst


def _restart_limit(config, state, name, now):
    """(allowed, history within the window) for one more restart of a service."""
    window = config['rate_limit_window_sec']
    history = [t for t in state['restarts'].get(name, []) if now - t < window]
    return len(history) < config['rate_limit_restarts'], history


def decide(config, plan, readings, state, now):
    """The decisions of one check and the state to keep: (decisions, new_state, summary).

    ``plan`` is the plan (``_plan.read_plan``'s Plan) or None with ``readings['plan_error']``; ``readings``:
    units {unit: {LoadState, ActiveState, SubState}}, services {name: {pids, binding_problems, remote_fraction}},
    gpus [{index, uuid, pci_bus_id, lost}], devices {uuid: {gpu, memory_total_bytes, processes {pid: bytes}}},
    xids [{gpu|pci_bus_id, device, xid, pid, source, message}], xids_skipped, nvml_error, uptime_sec, boot_id,
    fleet_quarantined (hosts of the fleet quarantined now, None when it could not be counted) and fleet_error.
    """
    state = dict(state, restarts=dict(state['restarts']), resets=dict(state['resets']),
                 quarantined=dict(state['quarantined']), reset_pending=dict(state['reset_pending']),
                 xid_counts=dict((k, dict(v)) for k, v in state['xid_counts'].items()),
                 rma_events=dict((gpu, [t for t in times if now - t < RMA_WINDOW_SEC])
                                 for gpu, times in state['rma_events'].items()),
                 gpu_index=dict(state['gpu_index']), reboots=list(state['reboots']),
                 actions_total=dict(state['actions_total']))
    decisions = []
    summary = {'services': {}, 'gpus': {}, 'plan_ok': False, 'quarantine_held': False}
    boot_id = readings.get('boot_id')
    if boot_id and state['boot_id'] and boot_id != state['boot_id']:
        # A reboot resets every GPU: pending resets are done; a quarantine stays until an operator clears it.
        state['reset_pending'] = {}
    state['boot_id'] = boot_id or state['boot_id']
    state['checks'] += 1

    if plan is None:
        decisions.append(_decision(REPORT, 'plan', 'no action: %s' % readings.get('plan_error', 'no plan'),
                                   {'plan_file': config['plan_file']}, act=False,
                                   why_not='without a readable plan the watchdog does not guess what runs where'))
        return _finish(config, decisions, state, summary, now)

    services = plan.entries
    units = readings.get('units', {})
    devices = readings.get('devices', {})
    # NVML names a lost GPU by index only: the UUID and PCI address it had come from earlier checks.
    gpus = []
    for gpu in readings.get('gpus', []):
        known = state['gpu_index'].get(str(gpu['index']), {})
        if gpu.get('uuid') and not gpu.get('lost'):
            state['gpu_index'][str(gpu['index'])] = {'uuid': gpu['uuid'], 'pci_bus_id': gpu.get('pci_bus_id')}
        gpus.append(dict(gpu, uuid=gpu.get('uuid') or known.get('uuid'),
                         pci_bus_id=gpu.get('pci_bus_id') or known.get('pci_bus_id')))

    # The plan must describe this host: a planned unit systemd does not know means it is stale or the host changed.
    missing = [s for s in services if units.get(s.unit, {}).get('LoadState') == 'not-found']
    blocked = None
    if missing:
        blocked = 'the plan names %s, which %s not exist on this host' % (
            ', '.join('%s (%s)' % (s.name, s.unit) for s in missing), 'does' if len(missing) == 1 else 'do')
        decisions.append(_decision(REPORT, 'unknown_service', 'no action this check: %s; apply the '
                                   'gpufleet.core.gpu_services role to bring plan and units together' % blocked,
                                   {'missing_units': [s.unit for s in missing]}, services=[s.name for s in missing],
                                   act=False, why_not='plan and host disagree'))
    summary['plan_ok'] = not missing
    unknown_budgets = check_budgets_name_services(config, plan)
    if unknown_budgets:
        decisions.append(_decision(REPORT, 'config', 'service_budgets names %s, not services of the plan: their '
                                   'budget is not used' % ', '.join(unknown_budgets), {'names': unknown_budgets},
                                   act=False, why_not='report only'))
    if readings.get('nvml_error'):
        decisions.append(_decision(REPORT, 'nvml', 'NVML could not be read: %s; memory and NVML Xid events were '
                                   'not checked' % readings['nvml_error'], {}, act=False, why_not='report only'))
    if readings.get('xids_skipped'):
        decisions.append(_decision(REPORT, 'xid', '%d Xid line(s) in the kernel log from before the watchdog\'s first '
                                   'check were not acted on' % readings['xids_skipped'], {}, act=False,
                                   why_not='before the first check'))

    # GPUs quarantined, or reset or quarantined in this check: their services are not restarted besides.
    handled_gpus = set(key for key in state['quarantined'] if not key.startswith('index:'))
    restarts = {}  # service name -> what asks for its restart; one restart each, whatever the number of causes

    def quarantine(key, cause, reason, evidence, gpu=None):
        if key in state['quarantined']:
            decisions.append(_decision(REPORT, cause, '%s; already quarantined since %s (%s)' % (
                reason, state['quarantined'][key]['since'], state['quarantined'][key]['reason']), evidence, gpu=gpu,
                act=False, why_not='already quarantined'))
            return
        why_not = None if config['quarantine'] else 'gpu_watchdog_quarantine is off'
        cap = config['fleet_max_quarantined']
        evidence = dict(evidence, key=key)
        # The cap counts hosts: a host already quarantined (for another GPU) adds none.
        if why_not is None and cap and not state['quarantined']:
            counted = readings.get('fleet_quarantined')
            evidence.update(fleet_quarantined=counted, fleet_max_quarantined=cap)
            if counted is None:
                # Quarantine stops the watchdog acting on the GPU, the safe side when the fleet cannot be counted.
                reason = '%s (the fleet cap was not checked: %s)' % (
                    reason, readings.get('fleet_error') or 'no Prometheus to ask')
            elif counted >= cap:
                why_not = ('fleet cap: %d host(s) of the fleet are quarantined, at most %d at once '
                           '(gpufleet_watchdog_max_quarantined); an operator must look at them first' % (counted, cap))
                summary['quarantine_held'] = True
        decisions.append(_decision(QUARANTINE, cause, reason, evidence, gpu=gpu, act=why_not is None,
                                   why_not=why_not))

    xids = merge_xids(gpus, readings.get('xids', []))
    lost = [g for g in gpus if g.get('lost')]
    lost_keys = set()
    reboot_for = set()  # GPUs whose Xid only a reboot of the host recovers
    for event in xids:
        gpu = event['gpu']
        evidence = dict((k, event[k]) for k in ('xid', 'bucket', 'device', 'pid', 'pci_bus_id', 'sources', 'message'))
        evidence['gpu'] = gpu
        if gpu is not None:
            counts = state['xid_counts'].setdefault(gpu, {})
            counts[str(event['xid'])] = counts.get(str(event['xid']), 0) + 1
            evidence['count_on_gpu'] = counts[str(event['xid'])]
        if gpu is None:
            decisions.append(_decision(REPORT, 'xid', 'Xid %d on PCI %s, which is none of this host\'s GPUs'
                                       % (event['xid'], event['pci_bus_id']), evidence, act=False,
                                       why_not='unknown GPU'))
            continue
        bucket = event['bucket']
        if gpu in state['quarantined'] and bucket != FALLEN_OFF_BUS:
            decisions.append(_decision(REPORT, 'xid', 'Xid %d (%s) on quarantined GPU %s' % (event['xid'], bucket, gpu),
                                       evidence, gpu=gpu, act=False, why_not='GPU quarantined'))
            continue
        if event['xid'] in RMA_XIDS:
            # A memory or bus fault: one is reset; a repeat within the window is hardware to return.
            state['rma_events'][gpu] = state['rma_events'].get(gpu, []) + [now]
            evidence['rma_faults_in_window'] = len(state['rma_events'][gpu])
            evidence['rma_candidate'] = len(state['rma_events'][gpu]) >= RMA_REPEATS
        if evidence.get('rma_candidate'):
            handled_gpus.add(gpu)
            if bucket == FALLEN_OFF_BUS:
                lost_keys.add(gpu)
            faults = len(state['rma_events'][gpu])
            quarantine(gpu, 'xid', 'Xid %d on GPU %s is its memory or bus fault number %d within %d days: drain it, '
                       'take it out of service and return it (RMA)' % (event['xid'], gpu, faults, RMA_WINDOW_SEC // 86400),
                       evidence, gpu=gpu)
        elif bucket == FALLEN_OFF_BUS:
            if gpu not in lost_keys:
                lost_keys.add(gpu)
                handled_gpus.add(gpu)
                quarantine(gpu, 'xid', 'Xid 79 on GPU %s: fallen off the bus' % gpu, evidence, gpu=gpu)
        elif bucket == REBOOT_HOST:
            handled_gpus.add(gpu)
            reboot_for.add(gpu)
            quarantine(gpu, 'xid', 'Xid %d on GPU %s: NVIDIA\'s catalog says only a reboot of the host recovers it'
                       % (event['xid'], gpu), evidence, gpu=gpu)
        elif bucket == SCHEDULE_RESET:
            if gpu in state['reset_pending']:
                continue
            decisions.append(_decision(SCHEDULE_RESET, 'xid', 'Xid %d on GPU %s: a row remap waits for the next '
                                       'GPU reset or reboot' % (event['xid'], gpu), evidence, gpu=gpu))
        elif bucket == RESET_GPU:
            handled_gpus.add(gpu)
            on_gpu = [s for s in services if s.uses(gpu)]
            mps_units = sorted(set(config['mps_unit_prefix'] + s.mps_device + '.service' for s in on_gpu
                                   if s.mps_device))
            clients = [s.unit for s in on_gpu] + mps_units + list(config['reset_stop_units'])
            if config['allow_reset']:
                allowed, history = _restart_limit(config, {'restarts': state['resets']}, gpu, now)
                decisions.append(_decision(
                    RESET, 'xid', 'Xid %d (%s) on GPU %s: stop its clients, reset it, re-apply its MIG layout, start '
                    'them' % (event['xid'], bucket, gpu), dict(evidence, resets_in_window=len(history)),
                    services=[s.name for s in on_gpu], units=clients, gpu=gpu, act=allowed,
                    why_not=None if allowed else 'rate limit: %d resets of this GPU in %d s; quarantine it by hand '
                    'or raise the limit' % (len(history), config['rate_limit_window_sec'])))
            else:
                quarantine(gpu, 'xid', 'Xid %d (%s) on GPU %s needs a GPU reset, and gpu_watchdog_allow_reset is off'
                           % (event['xid'], bucket, gpu), evidence, gpu=gpu)
        elif bucket in (APPLICATION, RESTART_APP):
            on_device = [s for s in services if s.uses(gpu, event['device'])]
            if not on_device:
                decisions.append(_decision(REPORT, 'xid', 'Xid %d (%s) on %s, where no planned service runs'
                                           % (event['xid'], bucket, event['device'] or gpu), evidence, gpu=gpu,
                                           act=False, why_not='no service to restart'))
            for service in on_device:
                _request_restart(restarts, service, 'xid', 'Xid %d (%s) on %s' % (
                    event['xid'], bucket, event['device'] or gpu), evidence, config['restart_on_xid'],
                    'gpu_watchdog_restart_on_xid is off')
        elif bucket == IGNORE:
            decisions.append(_decision(REPORT, 'xid', 'Xid %d on GPU %s: NVIDIA\'s catalog says no action is needed'
                                       % (event['xid'], gpu), evidence, gpu=gpu, act=False, why_not='ignore'))
        else:
            decisions.append(_decision(REPORT, 'xid', 'Xid %d (%s) on GPU %s: look it up in NVIDIA\'s Xid catalog; the '
                                       'watchdog does not act on it' % (event['xid'], bucket, gpu), evidence, gpu=gpu,
                                       act=False, why_not=bucket))

    # NVML answers GPU_IS_LOST: quarantined as its Xid 79 is, once.
    for gpu in lost:
        uuid = gpu['uuid']
        key = uuid or 'index:%d' % gpu['index']
        handled_gpus.add(uuid)
        evidence = {'index': gpu['index'], 'uuid': uuid, 'pci_bus_id': gpu['pci_bus_id'], 'nvml': 'GPU_IS_LOST'}
        if key in lost_keys:  # its Xid 79 came in this check too: one decision with both
            for decision in decisions:
                if decision['gpu'] == uuid and decision['evidence'].get('bucket') == FALLEN_OFF_BUS:
                    decision['evidence'].update(evidence)
            continue
        lost_keys.add(key)
        quarantine(key, 'gpu_lost', 'GPU %d (%s) is lost: NVML answers GPU_IS_LOST; its services cannot run until '
                   'the host is rebooted and the GPU checked' % (gpu['index'], uuid or 'UUID unknown'), evidence,
                   gpu=uuid)
    if (lost_keys or reboot_for) and config['allow_reboot']:
        decisions.append(_reboot(config, state, readings, now, sorted(k for k in lost_keys | reboot_for if k)))

    # Per service: memory against its budget, its unit, its binding.
    for service in services:
        reading = readings.get('services', {}).get(service.name, {})
        unit = units.get(service.unit, {})
        info = {'active': unit.get('ActiveState') == 'active', 'ratio': None, 'remote_fraction':
                reading.get('remote_fraction'), 'rate_limited': False}
        summary['services'][service.name] = info
        if service in missing:
            continue
        if set(service.gpus) & handled_gpus or set(service.devices) & handled_gpus:
            continue
        if unit and not info['active']:
            decisions.append(_decision(REPORT, 'unit', '%s is %s (%s); systemd restarts a service that fails, the '
                                       'watchdog does not start one that is stopped' % (
                                           service.unit, unit.get('ActiveState'), unit.get('SubState')),
                                       {'unit': service.unit, 'ActiveState': unit.get('ActiveState'),
                                        'SubState': unit.get('SubState')}, services=[service.name], act=False,
                                       why_not='report only'))
            continue
        memory = _memory(config, service, reading, devices)
        if memory is not None:
            info['ratio'] = memory['ratio']
            if memory['over']:
                _request_restart(restarts, service, 'memory', 'GPU memory %.2f%% of %s, over its budget of %s%%' % (
                    memory['used_percent'], memory['device'], memory['budget_percent']), memory,
                    config['restart_on_memory'], 'gpu_watchdog_restart_on_memory is off')
        problems = reading.get('binding_problems') or []
        if reading.get('pids') and problems:
            _request_restart(restarts, service, 'binding', 'binding drifted: %s' % '; '.join(problems),
                             {'problems': problems, 'remote_fraction': reading.get('remote_fraction')},
                             config['restart_on_binding_drift'], 'gpu_watchdog_restart_on_binding_drift is off')

    for service in services:
        request = restarts.get(service.name)
        if not request:
            continue
        if set(service.gpus) & handled_gpus or set(service.devices) & handled_gpus:
            decisions.append(_decision(REPORT, '+'.join(request['causes']), 'not restarting %s (%s): its GPU is '
                                       'quarantined, or reset in this check' % (service.unit, '; '.join(request['reasons'])),
                                       request['evidence'], services=[service.name], act=False,
                                       why_not='GPU handled'))
            continue
        allowed, history = _restart_limit(config, state, service.name, now)
        act = request['enabled'] and allowed
        why_not = None
        if not request['enabled']:
            why_not = request['why_off']
        elif not allowed:
            why_not = ('rate limit: %d restarts in the last %d s (at most %d); the watchdog leaves %s alone until the '
                       'window has room' % (len(history), config['rate_limit_window_sec'],
                                            config['rate_limit_restarts'], service.unit))
            summary['services'][service.name]['rate_limited'] = True
        decisions.append(_decision(RESTART, '+'.join(request['causes']), 'restart %s: %s' % (
            service.unit, '; '.join(request['reasons'])), dict(request['evidence'], restarts_in_window=len(history)),
            services=[service.name], units=[service.unit], act=act, why_not=why_not))

    if blocked:
        for decision in decisions:
            if decision['act']:
                decision['act'] = False
                decision['why_not'] = 'no action this check: %s' % blocked
    return _finish(config, decisions, state, summary, now)


def _request_restart(restarts, service, cause, reason, evidence, enabled, why_off):
    request = restarts.setdefault(service.name, {'causes': [], 'reasons': [], 'evidence': {}, 'enabled': False,
                                                 'why_off': why_off})
    if cause not in request['causes']:
        request['causes'].append(cause)
    request['reasons'].append(reason)
    request['evidence'][cause] = evidence
    # Any cause whose action is on is reason enough.
    request['enabled'] = request['enabled'] or enabled


def _reboot(config, state, readings, now, keys):
    uptime = readings.get('uptime_sec')
    last = state['reboots'][-1] if state['reboots'] else None
    evidence = {'lost': keys, 'uptime_sec': uptime, 'min_uptime_sec': config['min_uptime_sec'],
                'last_watchdog_reboot': last, 'reboot_cooldown_sec': config['reboot_cooldown_sec']}
    why_not = None
    if uptime is None or uptime < config['min_uptime_sec']:
        why_not = 'up only %s s, less than gpu_watchdog_min_uptime_sec (%d): no reboot loop' % (
            'unknown' if uptime is None else int(uptime), config['min_uptime_sec'])
    elif last is not None and now - last < config['reboot_cooldown_sec']:
        why_not = 'the watchdog rebooted %d s ago, within gpu_watchdog_reboot_cooldown_sec (%d): no reboot loop' % (
            now - last, config['reboot_cooldown_sec'])
    return _decision(REBOOT, 'gpu_lost', 'reboot: %s lost or needing a reboot' % ', '.join(keys), evidence,
                     act=why_not is None,
                     why_not=why_not)


def _finish(config, decisions, state, summary, now):
    """Dry run withholds every action; the state records only what is done."""
    for decision in decisions:
        if decision['act'] and config['dry_run']:
            decision['act'] = False
            decision['why_not'] = 'dry run'
        decision['dry_run'] = config['dry_run']
        if not decision['act']:
            continue
        kind = decision['kind']
        state['actions_total'][kind] = state['actions_total'].get(kind, 0) + 1
        if kind == RESTART:
            for name in decision['services']:
                window = config['rate_limit_window_sec']
                state['restarts'][name] = [t for t in state['restarts'].get(name, []) if now - t < window] + [now]
        elif kind == RESET:
            window = config['rate_limit_window_sec']
            gpu = decision['gpu']
            state['resets'][gpu] = [t for t in state['resets'].get(gpu, []) if now - t < window] + [now]
            state['reset_pending'].pop(gpu, None)
        elif kind == QUARANTINE:
            state['quarantined'][decision['evidence']['key']] = {'since': now, 'reason': decision['reason']}
        elif kind == SCHEDULE_RESET:
            state['reset_pending'][decision['gpu']] = {'since': now, 'xid': decision['evidence']['xid']}
        elif kind == REBOOT:
            state['reboots'] = (state['reboots'] + [now])[-10:]
    # Histories of services no longer restarted age out; the state does not grow without bound.
    window = config['rate_limit_window_sec']
    for table in ('restarts', 'resets'):
        recent = dict((key, [t for t in times if now - t < window]) for key, times in state[table].items())
        state[table] = dict((key, times) for key, times in recent.items() if times)
    summary['quarantined'] = sorted(state['quarantined'])
    summary['reset_pending'] = sorted(state['reset_pending'])
    summary['now'] = now
    return decisions, state, summary
