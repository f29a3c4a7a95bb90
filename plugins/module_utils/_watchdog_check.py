# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.core contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""One check of the GPU watchdog: read the host, decide (``_watchdog``), carry the decisions out, write the state and
the metrics, print every decision; and the operator's clearing of the quarantine.

Everything it reads from or does to the system goes through the WatchdogHost it is given (``_watchdog_host``).
docs/gpu_watchdog.md describes one check step by step.
This is a private module: its API may change without notice.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import sys

from ansible_collections.gpufleet.core.plugins.module_utils._errors import GpufleetError
from ansible_collections.gpufleet.core.plugins.module_utils._numa_audit import audit, normalise_services, plan_service
from ansible_collections.gpufleet.core.plugins.module_utils._plan import PlanError
from ansible_collections.gpufleet.core.plugins.module_utils._watchdog import decide
from ansible_collections.gpufleet.core.plugins.module_utils._watchdog_report import TEXTFILE_NAME, journal_lines, metrics
from ansible_collections.gpufleet.core.plugins.module_utils._watchdog_state import REBOOT, RESET, RESTART, read_state

PROGRAM = 'gpufleet-watchdog'  # how its messages name it


def check(host, config):
    """One check; returns the exit code."""
    now = host.now()
    state = _read_state(host, config)
    try:
        plan, plan_error = host.load_plan(config['plan_file']), None
    except PlanError as exc:
        plan, plan_error = None, str(exc)
    readings, cursor = _host_readings(host, config, state, plan_error)
    auditor = host.audit_host()
    if plan is not None:
        services, units, audit_problem = _service_readings(auditor, config, plan)
        readings['services'] = services
        readings['units'] = _units_of(auditor, plan, units)
        if audit_problem:
            host.emit('REPORT binding: %s' % audit_problem)

    decisions, new_state, summary = decide(config, plan, readings, state, now)
    new_state['kernel_cursor'] = cursor
    failures = _carry_out_all(host, auditor, config, decisions)
    for line in journal_lines(decisions):
        host.emit(line)
    for decision in decisions:
        if decision.get('failed'):
            host.emit('FAILED %s: %s' % (decision['kind'], decision['failed']))
    summary['now'] = host.now()
    _write_state(host, config, new_state)
    host.write_atomic(os.path.join(config['textfile_dir'], TEXTFILE_NAME), metrics(decisions, new_state, summary))
    if any(d['kind'] == REBOOT and d['act'] for d in decisions):
        try:
            host.reboot()
        except GpufleetError as exc:
            host.emit('FAILED reboot: %s' % exc)
            return 1
    return 1 if failures else 0


def clear_quarantine(host, config):
    """The operator's word that the quarantined GPUs were looked at; returns the exit code."""
    document, problem = host.read_json(config['state_file'])
    state, _unreadable = read_state(document)
    if problem:
        sys.stderr.write('%s: %s\n' % (PROGRAM, problem))
        return 1
    cleared = sorted(state['quarantined'])
    state['quarantined'] = {}
    _write_state(host, config, state)
    host.emit('quarantine cleared: %s' % (', '.join(cleared) or 'nothing was quarantined'))
    return 0


def _read_state(host, config):
    document, problem = host.read_json(config['state_file'])
    state, unreadable = read_state(document)
    if problem or unreadable:
        host.emit('REPORT state: %s; starting afresh (rate-limit history and quarantine are lost)'
                  % (problem or '%s is not a watchdog state of this release' % config['state_file']))
    return state


def _write_state(host, config, state):
    # 0600: the state is root's alone.
    host.write_atomic(config['state_file'], json.dumps(state, indent=1, sort_keys=True) + '\n', 0o600)


def _host_readings(host, config, state, plan_error):
    """(readings, the kernel log's cursor for the next check): NVML, the kernel log, the clock, the fleet's count."""
    gpus, devices, nvml_xids, nvml_error = host.nvml_readings(config['xid_event_wait_ms'])
    kernel_events, cursor, kernel_problem = host.kernel_xids(state['kernel_cursor'])
    readings = {'plan_error': plan_error, 'gpus': gpus, 'devices': devices, 'nvml_error': nvml_error,
                'uptime_sec': host.uptime(), 'boot_id': host.boot_id(), 'units': {}, 'services': {}}
    if state['checks'] == 0 and state['kernel_cursor'] is None:
        readings['xids_skipped'] = len(kernel_events)  # history from before the watchdog: reported, not acted on
        kernel_events = []
    readings['xids'] = nvml_xids + kernel_events
    if config['fleet_max_quarantined'] and config['fleet_prometheus_url']:
        readings['fleet_quarantined'], readings['fleet_error'] = host.fleet_quarantined(config['fleet_prometheus_url'])
    elif config['fleet_max_quarantined']:
        readings['fleet_quarantined'], readings['fleet_error'] = None, 'fleet_prometheus_url is empty'
    if kernel_problem:
        host.emit('REPORT kernel_log: %s; Xid lines since the last check may be missed' % kernel_problem)
    return readings, cursor


def _service_readings(auditor, config, plan):
    """{name: {pids, binding_problems, remote_fraction}} and {unit: properties}, numa_audit's measurement of the
    plan's services."""
    try:
        services = [plan_service(entry) for entry in plan.entries]
        for service in services:
            service['expect']['gpus'] = None  # which GPUs hold whom is NVML's reading, judged per device
        services = normalise_services(services)
    except GpufleetError as exc:
        return {}, {}, 'the binding could not be measured: %s' % exc
    try:
        results, _failed = audit(auditor, services, None, max_remote_fraction=config['max_remote_fraction'],
                                 sample_seconds=0)
    except GpufleetError as exc:
        return {}, auditor.known_units(), 'the binding could not be measured: %s' % exc
    readings = {}
    for result in results:
        running = bool(result['pids'])
        readings[result['name']] = {'pids': result['pids'], 'remote_fraction': result['remote_fraction'],
                                    'binding_problems': result['reasons'] if running else []}
    return readings, auditor.known_units(), None


def _units_of(auditor, plan, units):
    """Every planned unit's properties, containers' units included (the audit asks about their runtime)."""
    for entry in plan.entries:
        unit = entry.unit
        if unit not in units:
            try:
                units[unit] = auditor.unit_properties(unit)
            except GpufleetError:
                units[unit] = {}
    return units


def _carry_out_all(host, auditor, config, decisions):
    """Do each decision that acts, the reboot excepted (it comes last of all); returns how many failed."""
    failures = 0
    for decision in decisions:
        if decision['act'] and decision['kind'] != REBOOT:
            failed = _carry_out(host, auditor, config, decision)
            if failed:
                failures += 1
                decision['failed'] = failed
    return failures


def _carry_out(host, auditor, config, decision):
    """Do one decision; returns None or why it failed."""
    kind = decision['kind']
    try:
        if kind == RESTART:
            for unit in decision['units']:
                host.systemctl_do('restart', unit)
        elif kind == RESET:
            _reset(host, auditor, config, decision)
        # QUARANTINE and SCHEDULE_RESET are records in the state and the metrics.
    except GpufleetError as exc:
        return str(exc)
    return None


def _reset(host, auditor, config, decision):
    """Stop the GPU's clients (services, MPS daemons, exporters), reset it, re-apply its MIG layout, start them."""
    running = [unit for unit in decision['units'] if auditor.unit_properties(unit).get('ActiveState') == 'active']
    for unit in running:
        host.systemctl_do('stop', unit)
    try:
        host.run_command(list(config['gpu_reset_command']) + [decision['gpu']])
        if config['mig_unit'] and auditor.unit_properties(config['mig_unit']).get('LoadState') == 'loaded':
            host.systemctl_do('restart', config['mig_unit'])
    finally:
        # Clients come back in reverse order: exporters and MPS daemons before the services that use them.
        for unit in reversed(running):
            host.systemctl_do('start', unit)
