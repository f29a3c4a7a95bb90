# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.core contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The rollout, from the run's settings as the fleet model (_fleet_inventory.check_settings) normalised them: the
hosts that passed preflight in batch order with the play's serial and failure limit, and the watchdog stage's
fleet-wide quarantine cap and the Prometheus that counts quarantined hosts. The fleet model re-exports these, so its
callers reach them as before. Pure code; a private module: its API may change without notice.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import math

from ansible_collections.gpufleet.core.plugins.module_utils._values import address

PROMETHEUS_PORT = 9090


def rollout_plan(run_hosts, failed, domains, settings):
    """The hosts that passed preflight in batch order, the play's serial and max_fail_percentage.

    With gpufleet_batch_by, each batch is one failure domain (``domains`` maps each host to its domain), the domains
    in the sorted order of their names; otherwise gpufleet_serial's batches.
    """
    passed = [host for host in run_hosts if host not in failed]
    batch_by = settings['gpufleet_batch_by']
    if batch_by:
        order = sorted(set(str(domains.get(host, '')) for host in passed))
        ordered = [host for domain in order for host in passed if str(domains.get(host, '')) == domain]
        serial = [sum(1 for host in passed if str(domains.get(host, '')) == domain) for domain in order]
    else:
        ordered = passed
        serial = settings['gpufleet_serial']
    return {'hosts': ordered, 'serial': serial, 'batch_by': batch_by,
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
