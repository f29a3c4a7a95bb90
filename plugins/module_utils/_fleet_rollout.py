# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.core contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The rollout: its settings (checked for the fleet model, _fleet_inventory.check_settings), the hosts that failed
preflight and why, the hosts that passed it in batch order with the canary first, the play's serial and failure limit,
and the watchdog stage's fleet-wide quarantine cap and the Prometheus that counts quarantined hosts (which the health
gate between batches asks too). Pure code; a private module: its API may change without notice.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import math

import re

from ansible_collections.gpufleet.core.plugins.module_utils._values import address, boolean, describe, percentage, whole_number

PROMETHEUS_PORT = 9090
ROLLOUT_SETTINGS = ('gpufleet_serial', 'gpufleet_batch_by', 'gpufleet_max_fail_percentage', 'gpufleet_canary',
                    'gpufleet_health_gate_soak', 'gpufleet_health_gate_required')
_NAME = re.compile(r'[A-Za-z_][A-Za-z0-9_]*')
# Longer than a day between batches is a typo (minutes meant as seconds the other way round is caught by nothing).
MAX_SOAK_SECONDS = 86400


def _serial_item(value):
    """A batch size as Ansible's serial keyword takes it: a whole number of hosts (1 or more) or 'N%' (1-100)."""
    parsed = percentage(value)
    if parsed is None:
        return None
    number, percent = parsed
    if number != int(number) or number < 1 or (percent and number > 100):
        return None
    if percent:
        return '%d%%' % number
    return int(number) if not isinstance(value, str) or value.strip().isdigit() else None


def check_rollout_settings(values, problems):
    """The rollout's settings (ROLLOUT_SETTINGS) normalised; each wrong one is added to ``problems`` with its fix."""
    settings = {}
    serial = values['gpufleet_serial']
    items = serial if isinstance(serial, list) else [serial]
    normalised = [_serial_item(item) for item in items]
    if not items or None in normalised:
        problems.append('gpufleet_serial is %s; give the hosts per batch as a whole number of at least 1 (such as 5), '
                        'a percentage from 1%% to 100%% as a string (such as "20%%"), or a list of those for growing '
                        'batches (such as [1, "10%%", "100%%"])' % describe(serial))
    settings['gpufleet_serial'] = normalised if isinstance(serial, list) else normalised[0]
    batch_by = values['gpufleet_batch_by']
    if batch_by is None:
        batch_by = ''
    if not isinstance(batch_by, str) or (batch_by and not _NAME.fullmatch(batch_by)):
        problems.append("gpufleet_batch_by is %s; give the name of the host variable that names each host's failure "
                        "domain, such as gpufleet_rack or gpufleet_dc, or '' to batch by gpufleet_serial"
                        % describe(batch_by))
    # A wrong setting is reported once, here: the hosts are then checked without it rather than each refused for it.
    settings['gpufleet_batch_by'] = batch_by if isinstance(batch_by, str) and _NAME.fullmatch(batch_by) else ''
    max_fail = whole_number(values['gpufleet_max_fail_percentage'])
    if max_fail is None or not 0 <= max_fail <= 100:
        problems.append('gpufleet_max_fail_percentage is %s; give a whole number from 0 to 100 (the share of a batch '
                        'that may fail before the rollout stops; 0 stops it at the first failure)'
                        % describe(values['gpufleet_max_fail_percentage']))
    settings['gpufleet_max_fail_percentage'] = max_fail
    canary = whole_number(values['gpufleet_canary'])
    if canary is None or canary < 0:
        problems.append('gpufleet_canary is %s; give the number of hosts of the first batch, the canary, as a whole '
                        'number (such as 1), or 0 for no canary' % describe(values['gpufleet_canary']))
    settings['gpufleet_canary'] = canary if canary is not None and canary >= 0 else 0
    if settings['gpufleet_canary'] and max_fail == 100:
        # A batch stops the play only above the limit: at 100 a canary that failed whole would let the next batch go.
        problems.append('gpufleet_max_fail_percentage is 100 with a canary (gpufleet_canary %d): a canary that failed '
                        'would not stop the rollout; give less than 100, or set gpufleet_canary to 0'
                        % settings['gpufleet_canary'])
    soak = whole_number(values['gpufleet_health_gate_soak'])
    if soak is None or not 0 <= soak <= MAX_SOAK_SECONDS:
        problems.append('gpufleet_health_gate_soak is %s; give the seconds to wait after each batch before asking '
                        'Prometheus, as a whole number from 0 to %d (such as 60)'
                        % (describe(values['gpufleet_health_gate_soak']), MAX_SOAK_SECONDS))
    settings['gpufleet_health_gate_soak'] = soak if soak is not None and 0 <= soak <= MAX_SOAK_SECONDS else 0
    required = boolean(values['gpufleet_health_gate_required'])
    if required is None:
        problems.append('gpufleet_health_gate_required is %s; give true (a batch whose health cannot be asked stops '
                        'the rollout) or false' % describe(values['gpufleet_health_gate_required']))
    settings['gpufleet_health_gate_required'] = bool(required)
    return settings


def preflight_failures(run_hosts, alive_hosts, reasons):
    """Host -> why it failed preflight: its recorded reason (``reasons``, one per run host, empty when it passed), or
    that it went away (unreachable, or a failure the rescue could not catch)."""
    alive = set(alive_hosts)
    failures = {}
    for host, reason in zip(run_hosts, reasons):
        if reason:
            failures[host] = str(reason)
        elif host not in alive:
            failures[host] = 'unreachable, or failed before preflight could record why'
    return failures


def rollout_plan(run_hosts, failed, domains, settings, gpu_hosts=()):
    """The hosts that passed preflight in batch order, the play's serial and max_fail_percentage, and the canary.

    The canary is the first gpufleet_canary GPU hosts (``gpu_hosts``) of that order, others only where there are too
    few: a batch of its own, before any other, because a host without GPUs tries nothing of a driver change. Then,
    with gpufleet_batch_by, each batch is one failure domain (``domains`` maps each host to its domain), the domains
    in the sorted order of their names; otherwise gpufleet_serial's batches.
    """
    # Sets and one pass over the hosts for each step: a 10,000-host inventory is planned as cheaply per host as a
    # 10-host one, however many failure domains it has.
    failed = set(failed)
    passed = [host for host in run_hosts if host not in failed]
    batch_by = settings['gpufleet_batch_by']
    by_domain = {}
    if batch_by:
        for host in passed:
            by_domain.setdefault(str(domains.get(host, '')), []).append(host)
        ordered = [host for domain in sorted(by_domain) for host in by_domain[domain]]
    else:
        ordered = passed
    with_gpus = set(gpu_hosts)
    candidates = [host for host in ordered if host in with_gpus] + [host for host in ordered if host not in with_gpus]
    canary = candidates[:settings['gpufleet_canary']]
    in_canary = set(canary)
    rest = [host for host in ordered if host not in in_canary]
    ordered = canary + rest
    if batch_by:
        serial = [count for count in (sum(1 for host in by_domain[domain] if host not in in_canary)
                                      for domain in sorted(by_domain)) if count]
    else:
        serial = settings['gpufleet_serial']
    if canary:
        serial = [len(canary)] + (serial if isinstance(serial, list) else [serial])
    return {'hosts': ordered, 'serial': serial or [1], 'batch_by': batch_by, 'canary': canary,
            'max_fail_percentage': settings['gpufleet_max_fail_percentage']}


def watchdog_cap(settings, gpu_hosts):
    """The fleet-wide cap on quarantined hosts as a number of hosts (a percentage of the GPU hosts, rounded up)."""
    number, percent = settings['gpufleet_watchdog_max_quarantined']
    return int(math.ceil(gpu_hosts * number / 100.0)) if percent else int(number)


def watchdog_prometheus_url(settings, monitoring_host, monitoring_address):
    """The Prometheus that counts quarantined hosts: the setting, else the monitoring host's on port 9090."""
    if settings['gpufleet_watchdog_prometheus_url']:
        return settings['gpufleet_watchdog_prometheus_url']
    if not monitoring_host:
        return ''
    ip = address(monitoring_address)
    where = ('[%s]' % ip if ip.version == 6 else str(ip)) if ip is not None else monitoring_address or monitoring_host
    return 'http://%s:%d' % (where, PROMETHEUS_PORT)
