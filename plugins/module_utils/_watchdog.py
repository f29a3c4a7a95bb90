# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.core contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The GPU watchdog's decisions: what one check of a host should do, and why, from what it read.

Pure code. ``decide`` takes the watchdog's configuration (``_watchdog_config``), the placement plan (``_plan``), the
readings of one check (per-device memory of each process, GPUs present or lost, Xid events since the last check,
units' states, the services' processes and binding as ``_numa_audit`` measures them), the state the previous checks
left (``_watchdog_state``) and the clock, and returns the decisions, each with its evidence, and the state to keep.
Each cause of the decision table in docs/gpu_watchdog.md is one function below, called in the table's order;
``_watchdog_check`` reads the system and carries the decisions out.
This is a private module: its API may change without notice.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.gpufleet.core.plugins.module_utils._watchdog_config import check_budgets_name_services
from ansible_collections.gpufleet.core.plugins.module_utils._watchdog_state import (
    QUARANTINE, REBOOT, REPORT, RESET, RESTART, forget_old_history, gpus_by_index, recent_restarts, record_action,
    state_for_check)
from ansible_collections.gpufleet.core.plugins.module_utils._watchdog_xids import merge_xids
from ansible_collections.gpufleet.core.plugins.module_utils._xid_catalog import (
    APPLICATION, FALLEN_OFF_BUS, IGNORE, REBOOT_HOST, RESET_GPU, RESTART_APP, RMA_REPEATS, RMA_WINDOW_SEC, RMA_XIDS,
    SCHEDULE_RESET,
)


def decide(config, plan, readings, state, now):
    """The decisions of one check and the state to keep: (decisions, new_state, summary).

    ``plan`` is the plan (``_plan.read_plan``'s Plan) or None with ``readings['plan_error']``; ``readings``:
    units {unit: {LoadState, ActiveState, SubState}}, services {name: {pids, binding_problems, remote_fraction}},
    gpus [{index, uuid, pci_bus_id, lost}], devices {uuid: {gpu, memory_total_bytes, processes {pid: bytes}}},
    xids [{gpu|pci_bus_id, device, xid, pid, source, message}], xids_skipped, nvml_error, uptime_sec, boot_id,
    fleet_quarantined (hosts of the fleet quarantined now, None when it could not be counted) and fleet_error.
    """
    check = _Check(config, readings, state_for_check(state, readings.get('boot_id'), now), now)
    if plan is None:
        check.report('plan', 'no action: %s' % readings.get('plan_error', 'no plan'), {'plan_file': config['plan_file']},
                     'without a readable plan the watchdog does not guess what runs where')
        return _finish(check)
    services = plan.entries
    gpus = gpus_by_index(check.state, readings.get('gpus', []))
    missing = _units_the_host_lacks(check, services)
    _budgets_of_unplanned_services(check, plan)
    _reading_problems(check)
    for event in merge_xids(gpus, readings.get('xids', [])):
        _xid(check, services, event)
    for gpu in gpus:
        if gpu.get('lost'):
            _lost_gpu(check, gpu)
    if (check.lost_keys or check.reboot_for) and config['allow_reboot']:
        _reboot(check)
    for service in services:
        _service_findings(check, service, service in missing)
    for service in services:
        _restart(check, service)
    if check.blocked:
        _withhold_every_action(check)
    return _finish(check)


class _Check:
    """What one check has read and decided so far; each cause adds its decisions in the decision table's order."""

    def __init__(self, config, readings, state, now):
        self.config = config
        self.readings = readings
        self.state = state
        self.now = now
        self.decisions = []
        self.summary = {'services': {}, 'gpus': {}, 'plan_ok': False, 'quarantine_held': False}
        self.blocked = None  # why nothing is acted on this check (plan and host disagree)
        # GPUs quarantined, or reset or quarantined in this check: their services are not restarted besides.
        self.handled_gpus = set(key for key in state['quarantined'] if not key.startswith('index:'))
        self.restarts = {}  # service name -> what asks for its restart; one restart each, whatever the causes
        self.lost_keys = set()  # GPUs lost (Xid 79, GPU_IS_LOST) in this check
        self.reboot_for = set()  # GPUs whose Xid only a reboot of the host recovers

    def add(self, kind, cause, reason, evidence, services=(), units=(), gpu=None, act=True, why_not=None):
        self.decisions.append({'kind': kind, 'cause': cause, 'reason': reason, 'evidence': evidence,
                               'services': list(services), 'units': list(units), 'gpu': gpu, 'act': act,
                               'why_not': why_not})

    def report(self, cause, reason, evidence, why_not, **details):
        self.add(REPORT, cause, reason, evidence, act=False, why_not=why_not, **details)


# -- what the check read ----------------------------------------------------------------------------------------


def _units_the_host_lacks(check, services):
    """The services whose unit systemd does not know: the plan is stale or the host changed, so nothing is acted on."""
    units = check.readings.get('units', {})
    missing = [s for s in services if units.get(s.unit, {}).get('LoadState') == 'not-found']
    if missing:
        check.blocked = 'the plan names %s, which %s not exist on this host' % (
            ', '.join('%s (%s)' % (s.name, s.unit) for s in missing), 'does' if len(missing) == 1 else 'do')
        check.report('unknown_service', 'no action this check: %s; apply the gpufleet.core.gpu_services role to bring '
                     'plan and units together' % check.blocked, {'missing_units': [s.unit for s in missing]},
                     'plan and host disagree', services=[s.name for s in missing])
    check.summary['plan_ok'] = not missing
    return missing


def _budgets_of_unplanned_services(check, plan):
    unknown = check_budgets_name_services(check.config, plan)
    if unknown:
        check.report('config', 'service_budgets names %s, not services of the plan: their budget is not used'
                     % ', '.join(unknown), {'names': unknown}, 'report only')


def _reading_problems(check):
    readings = check.readings
    if readings.get('nvml_error'):
        check.report('nvml', 'NVML could not be read: %s; memory and NVML Xid events were not checked'
                     % readings['nvml_error'], {}, 'report only')
    if readings.get('xids_skipped'):
        check.report('xid', '%d Xid line(s) in the kernel log from before the watchdog\'s first check were not acted '
                     'on' % readings['xids_skipped'], {}, 'before the first check')


# -- Xids, by bucket ------------------------------------------------------------------------------------------------


def _xid(check, services, event):
    """One Xid event of the check (NVML's and the kernel's merged), acted on by its bucket."""
    gpu = event['gpu']
    evidence = _xid_evidence(check, event)
    if gpu is None:
        check.report('xid', 'Xid %d on PCI %s, which is none of this host\'s GPUs' % (event['xid'], event['pci_bus_id']),
                     evidence, 'unknown GPU')
        return
    if gpu in check.state['quarantined'] and event['bucket'] != FALLEN_OFF_BUS:
        check.report('xid', 'Xid %d (%s) on quarantined GPU %s' % (event['xid'], event['bucket'], gpu), evidence,
                     'GPU quarantined', gpu=gpu)
        return
    if event['xid'] in RMA_XIDS:
        _count_fault(check, gpu, evidence)
    if evidence.get('rma_candidate'):
        _rma_candidate(check, services, event, evidence)
    else:
        _BY_BUCKET.get(event['bucket'], _xid_not_acted_on)(check, services, event, evidence)


def _xid_evidence(check, event):
    """The event's evidence, with how many times this Xid has hit its GPU (counted here)."""
    gpu = event['gpu']
    evidence = dict((k, event[k]) for k in ('xid', 'bucket', 'device', 'pid', 'pci_bus_id', 'sources', 'message'))
    evidence['gpu'] = gpu
    if gpu is not None:
        counts = check.state['xid_counts'].setdefault(gpu, {})
        counts[str(event['xid'])] = counts.get(str(event['xid']), 0) + 1
        evidence['count_on_gpu'] = counts[str(event['xid'])]
    return evidence


def _count_fault(check, gpu, evidence):
    """A memory or bus fault: one is reset; a repeat within the window is hardware to return."""
    faults = check.state['rma_events'][gpu] = check.state['rma_events'].get(gpu, []) + [check.now]
    evidence['rma_faults_in_window'] = len(faults)
    evidence['rma_candidate'] = len(faults) >= RMA_REPEATS


def _rma_candidate(check, services, event, evidence):
    gpu = event['gpu']
    check.handled_gpus.add(gpu)
    if event['bucket'] == FALLEN_OFF_BUS:
        check.lost_keys.add(gpu)
    faults = len(check.state['rma_events'][gpu])
    _quarantine(check, gpu, 'xid', 'Xid %d on GPU %s is its memory or bus fault number %d within %d days: drain it, '
                'take it out of service and return it (RMA)' % (event['xid'], gpu, faults, RMA_WINDOW_SEC // 86400),
                evidence, gpu=gpu)


def _fallen_off_bus(check, services, event, evidence):
    gpu = event['gpu']
    if gpu in check.lost_keys:
        return
    check.lost_keys.add(gpu)
    check.handled_gpus.add(gpu)
    _quarantine(check, gpu, 'xid', 'Xid 79 on GPU %s: fallen off the bus' % gpu, evidence, gpu=gpu)


def _reboot_host(check, services, event, evidence):
    gpu = event['gpu']
    check.handled_gpus.add(gpu)
    check.reboot_for.add(gpu)
    _quarantine(check, gpu, 'xid', 'Xid %d on GPU %s: NVIDIA\'s catalog says only a reboot of the host recovers it'
                % (event['xid'], gpu), evidence, gpu=gpu)


def _schedule_reset(check, services, event, evidence):
    gpu = event['gpu']
    if gpu in check.state['reset_pending']:
        return
    check.add(SCHEDULE_RESET, 'xid', 'Xid %d on GPU %s: a row remap waits for the next GPU reset or reboot'
              % (event['xid'], gpu), evidence, gpu=gpu)


def _reset_gpu(check, services, event, evidence):
    """Reset the GPU, its clients stopped around it, when allowed and within the rate limit; else quarantine it."""
    config, gpu, bucket = check.config, event['gpu'], event['bucket']
    check.handled_gpus.add(gpu)
    if not config['allow_reset']:
        _quarantine(check, gpu, 'xid', 'Xid %d (%s) on GPU %s needs a GPU reset, and gpu_watchdog_allow_reset is off'
                    % (event['xid'], bucket, gpu), evidence, gpu=gpu)
        return
    on_gpu = [s for s in services if s.uses(gpu)]
    mps_units = sorted(set(config['mps_unit_prefix'] + s.mps_device + '.service' for s in on_gpu if s.mps_device))
    clients = [s.unit for s in on_gpu] + mps_units + list(config['reset_stop_units'])
    allowed, history = recent_restarts(config, check.state['resets'].get(gpu, []), check.now)
    check.add(RESET, 'xid', 'Xid %d (%s) on GPU %s: stop its clients, reset it, re-apply its MIG layout, start them'
              % (event['xid'], bucket, gpu), dict(evidence, resets_in_window=len(history)),
              services=[s.name for s in on_gpu], units=clients, gpu=gpu, act=allowed,
              why_not=None if allowed else 'rate limit: %d resets of this GPU in %d s; quarantine it by hand or raise '
              'the limit' % (len(history), config['rate_limit_window_sec']))


def _restart_applications(check, services, event, evidence):
    """Ask for a restart of the services on the MIG device NVML names, else on the GPU."""
    gpu, where = event['gpu'], event['device'] or event['gpu']
    on_device = [s for s in services if s.uses(gpu, event['device'])]
    if not on_device:
        check.report('xid', 'Xid %d (%s) on %s, where no planned service runs' % (event['xid'], event['bucket'], where),
                     evidence, 'no service to restart', gpu=gpu)
    for service in on_device:
        _request_restart(check, service, 'xid', 'Xid %d (%s) on %s' % (event['xid'], event['bucket'], where), evidence,
                         check.config['restart_on_xid'], 'gpu_watchdog_restart_on_xid is off')


def _xid_ignored(check, services, event, evidence):
    check.report('xid', 'Xid %d on GPU %s: NVIDIA\'s catalog says no action is needed' % (event['xid'], event['gpu']),
                 evidence, 'ignore', gpu=event['gpu'])


def _xid_not_acted_on(check, services, event, evidence):
    check.report('xid', 'Xid %d (%s) on GPU %s: look it up in NVIDIA\'s Xid catalog; the watchdog does not act on it'
                 % (event['xid'], event['bucket'], event['gpu']), evidence, event['bucket'], gpu=event['gpu'])


# The investigate bucket and unlisted Xids are _xid_not_acted_on's.
_BY_BUCKET = {FALLEN_OFF_BUS: _fallen_off_bus, REBOOT_HOST: _reboot_host, SCHEDULE_RESET: _schedule_reset,
              RESET_GPU: _reset_gpu, APPLICATION: _restart_applications, RESTART_APP: _restart_applications,
              IGNORE: _xid_ignored}


# -- lost GPUs, quarantine and reboot ---------------------------------------------------------------------------


def _lost_gpu(check, gpu):
    """NVML answers GPU_IS_LOST: quarantined as its Xid 79 is, once."""
    uuid = gpu['uuid']
    key = uuid or 'index:%d' % gpu['index']
    check.handled_gpus.add(uuid)
    evidence = {'index': gpu['index'], 'uuid': uuid, 'pci_bus_id': gpu['pci_bus_id'], 'nvml': 'GPU_IS_LOST'}
    if key in check.lost_keys:  # its Xid 79 came in this check too: one decision with both
        for decision in check.decisions:
            if decision['gpu'] == uuid and decision['evidence'].get('bucket') == FALLEN_OFF_BUS:
                decision['evidence'].update(evidence)
        return
    check.lost_keys.add(key)
    _quarantine(check, key, 'gpu_lost', 'GPU %d (%s) is lost: NVML answers GPU_IS_LOST; its services cannot run until '
                'the host is rebooted and the GPU checked' % (gpu['index'], uuid or 'UUID unknown'), evidence, gpu=uuid)


def _quarantine(check, key, cause, reason, evidence, gpu=None):
    """Quarantine a GPU (key: its UUID, or index:N without one) once, within the fleet cap."""
    quarantined = check.state['quarantined']
    if key in quarantined:
        check.report(cause, '%s; already quarantined since %s (%s)' % (
            reason, quarantined[key]['since'], quarantined[key]['reason']), evidence, 'already quarantined', gpu=gpu)
        return
    why_not = None if check.config['quarantine'] else 'gpu_watchdog_quarantine is off'
    evidence = dict(evidence, key=key)
    # The cap counts hosts: a host already quarantined (for another GPU) adds none.
    if why_not is None and check.config['fleet_max_quarantined'] and not quarantined:
        reason, why_not = _fleet_cap(check, reason, evidence)
    check.add(QUARANTINE, cause, reason, evidence, gpu=gpu, act=why_not is None, why_not=why_not)


def _fleet_cap(check, reason, evidence):
    """(reason, why not) of a host's first quarantine against the fleet's count of quarantined hosts."""
    cap = check.config['fleet_max_quarantined']
    counted = check.readings.get('fleet_quarantined')
    evidence.update(fleet_quarantined=counted, fleet_max_quarantined=cap)
    if counted is None:
        # Quarantine stops the watchdog acting on the GPU, the safe side when the fleet cannot be counted.
        return '%s (the fleet cap was not checked: %s)' % (
            reason, check.readings.get('fleet_error') or 'no Prometheus to ask'), None
    if counted >= cap:
        check.summary['quarantine_held'] = True
        return reason, ('fleet cap: %d host(s) of the fleet are quarantined, at most %d at once '
                        '(gpufleet_watchdog_max_quarantined); an operator must look at them first' % (counted, cap))
    return reason, None


def _reboot(check):
    """Reboot for lost GPUs (or a reboot_host Xid), guarded against a reboot loop."""
    config, keys = check.config, sorted(k for k in check.lost_keys | check.reboot_for if k)
    uptime = check.readings.get('uptime_sec')
    last = check.state['reboots'][-1] if check.state['reboots'] else None
    evidence = {'lost': keys, 'uptime_sec': uptime, 'min_uptime_sec': config['min_uptime_sec'],
                'last_watchdog_reboot': last, 'reboot_cooldown_sec': config['reboot_cooldown_sec']}
    why_not = None
    if uptime is None or uptime < config['min_uptime_sec']:
        why_not = 'up only %s s, less than gpu_watchdog_min_uptime_sec (%d): no reboot loop' % (
            'unknown' if uptime is None else int(uptime), config['min_uptime_sec'])
    elif last is not None and check.now - last < config['reboot_cooldown_sec']:
        why_not = 'the watchdog rebooted %d s ago, within gpu_watchdog_reboot_cooldown_sec (%d): no reboot loop' % (
            check.now - last, config['reboot_cooldown_sec'])
    check.add(REBOOT, 'gpu_lost', 'reboot: %s lost or needing a reboot' % ', '.join(keys), evidence,
              act=why_not is None, why_not=why_not)


# -- services: memory, unit, binding, and one restart each ------------------------------------------------------


def _gpu_handled(check, service):
    return set(service.gpus) & check.handled_gpus or set(service.devices) & check.handled_gpus


def _service_findings(check, service, missing):
    """A service's memory against its budget, its unit and its binding."""
    reading = check.readings.get('services', {}).get(service.name, {})
    unit = check.readings.get('units', {}).get(service.unit, {})
    info = {'active': unit.get('ActiveState') == 'active', 'ratio': None, 'remote_fraction':
            reading.get('remote_fraction'), 'rate_limited': False}
    check.summary['services'][service.name] = info
    if missing or _gpu_handled(check, service):
        return
    if unit and not info['active']:
        check.report('unit', '%s is %s (%s); systemd restarts a service that fails, the watchdog does not start one '
                     'that is stopped' % (service.unit, unit.get('ActiveState'), unit.get('SubState')),
                     {'unit': service.unit, 'ActiveState': unit.get('ActiveState'), 'SubState': unit.get('SubState')},
                     'report only', services=[service.name])
        return
    memory = _memory(check.config, service, reading, check.readings.get('devices', {}))
    if memory is not None:
        info['ratio'] = memory['ratio']
        if memory['over']:
            _request_restart(check, service, 'memory', 'GPU memory %.2f%% of %s, over its budget of %s%%' % (
                memory['used_percent'], memory['device'], memory['budget_percent']), memory,
                check.config['restart_on_memory'], 'gpu_watchdog_restart_on_memory is off')
    problems = reading.get('binding_problems') or []
    if reading.get('pids') and problems:
        _request_restart(check, service, 'binding', 'binding drifted: %s' % '; '.join(problems),
                         {'problems': problems, 'remote_fraction': reading.get('remote_fraction')},
                         check.config['restart_on_binding_drift'], 'gpu_watchdog_restart_on_binding_drift is off')


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


def _request_restart(check, service, cause, reason, evidence, enabled, why_off):
    request = check.restarts.setdefault(service.name, {'causes': [], 'reasons': [], 'evidence': {}, 'enabled': False,
                                                       'why_off': why_off})
    if cause not in request['causes']:
        request['causes'].append(cause)
    request['reasons'].append(reason)
    request['evidence'][cause] = evidence
    # Any cause whose action is on is reason enough.
    request['enabled'] = request['enabled'] or enabled


def _restart(check, service):
    """One restart of a service, whatever the number of causes, unless its GPU is handled or the rate limit holds."""
    request = check.restarts.get(service.name)
    if not request:
        return
    config, causes, reasons = check.config, '+'.join(request['causes']), '; '.join(request['reasons'])
    if _gpu_handled(check, service):
        check.report(causes, 'not restarting %s (%s): its GPU is quarantined, or reset in this check' % (
            service.unit, reasons), request['evidence'], 'GPU handled', services=[service.name])
        return
    allowed, history = recent_restarts(config, check.state['restarts'].get(service.name, []), check.now)
    why_not = None
    if not request['enabled']:
        why_not = request['why_off']
    elif not allowed:
        why_not = ('rate limit: %d restarts in the last %d s (at most %d); the watchdog leaves %s alone until the '
                   'window has room' % (len(history), config['rate_limit_window_sec'], config['rate_limit_restarts'],
                                        service.unit))
        check.summary['services'][service.name]['rate_limited'] = True
    check.add(RESTART, causes, 'restart %s: %s' % (service.unit, reasons),
              dict(request['evidence'], restarts_in_window=len(history)), services=[service.name],
              units=[service.unit], act=request['enabled'] and allowed, why_not=why_not)


# -- the end of a check -----------------------------------------------------------------------------------------


def _withhold_every_action(check):
    for decision in check.decisions:
        if decision['act']:
            decision['act'] = False
            decision['why_not'] = 'no action this check: %s' % check.blocked


def _finish(check):
    """Dry run withholds every action; the state records only what is done."""
    config, state, summary = check.config, check.state, check.summary
    for decision in check.decisions:
        if decision['act'] and config['dry_run']:
            decision['act'] = False
            decision['why_not'] = 'dry run'
        decision['dry_run'] = config['dry_run']
        if decision['act']:
            record_action(config, state, decision, check.now)
    forget_old_history(config, state, check.now)
    summary['quarantined'] = sorted(state['quarantined'])
    summary['reset_pending'] = sorted(state['reset_pending'])
    summary['now'] = check.now
    return check.decisions, state, summary
