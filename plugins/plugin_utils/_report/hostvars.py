# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.core contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The fleet report's inputs, read from Ansible's hostvars: one dict per host of the run, as model.py takes them.

What the run found on a host, by the variable that holds it (playbooks/report.yml reads only what is missing):

    topology   ansible_facts['gpufleet_topology'] (the site's preflight, or the report's topology_facts)
    plan       __gpu_services_planned.plan_json (the site's services stage), else the plan file the report read
               (__gpufleet_report_plan, slurped)
    audit      __gpufleet_audit (the site's verify stage), else the report's own numa_audit (__gpufleet_report_audit)
    failure    _gpufleet_failure (a stage's rescue), else _gpufleet_preflight_failure; a host of the run that never
               reached the report (_gpufleet_report_reached) was lost in the stage it was in (_gpufleet_stage)
    problems   what the report's reading could not read (_gpufleet_report_problem), an unreachable host
    drift      what changed on the host since a stage converged it: the site's receipt check at the start of its
               rollout (__gpufleet_receipts; the stages it names ran in that run), else the report's own check of
               every receipt the host has (__gpufleet_report_receipts)

Labels are the inventory's: gpufleet_dc, gpufleet_rack, and the class by the monitoring targets' rule.
This is a private module: its API may change without notice.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import base64

from ansible_collections.gpufleet.core.plugins.module_utils._fleet_inventory import hardware_class
from ansible_collections.gpufleet.core.plugins.module_utils._monitoring_targets import class_groups
from ansible_collections.gpufleet.core.plugins.plugin_utils._report.model import FleetReportError

QUARANTINE_GROUP = 'gpufleet_quarantine'


def _result(inventory, host, name, key):
    """A registered result's value of KEY, or None where the task did not run or did not return it."""
    result = inventory.value(host, name)
    return result.get(key) if isinstance(result, dict) else None


def _plan(inventory, host):
    planned = inventory.value(host, '__gpu_services_planned')
    if isinstance(planned, dict) and 'plan_json' in planned:
        return planned['plan_json']
    content = _result(inventory, host, '__gpufleet_report_plan', 'content')
    return base64.b64decode(content).decode('utf-8', 'replace') if content is not None else None


def _audit(inventory, host):
    for name in ('__gpufleet_audit', '__gpufleet_report_audit'):
        audit = inventory.value(host, name)
        if isinstance(audit, dict) and 'services' in audit:
            return audit
    return None


def _failure(inventory, host):
    """Why the host failed in the run ('' when it did not): its stage's record, else the stage it was lost in."""
    if '_gpufleet_failure' in inventory.hostvars[host]:
        failure = inventory.value(host, '_gpufleet_failure')
    else:
        failure = inventory.value(host, '_gpufleet_preflight_failure', '')
    if failure or inventory.value(host, '_gpufleet_report_reached', False):
        return failure
    return 'lost or failed during the %s stage, so the report has only what was read before' % (
        inventory.value(host, '_gpufleet_stage', 'preflight'),)


def _problems(inventory, host):
    problems = []
    if '_gpufleet_report_problem' in inventory.hostvars[host]:
        problems.append(inventory.value(host, '_gpufleet_report_problem'))
    if _result(inventory, host, '__gpufleet_report_plan_file', 'unreachable'):
        message = _result(inventory, host, '__gpufleet_report_plan_file', 'msg')
        problems.append('unreachable: %s' % ('' if message is None else message,))
    return problems


def _drift(inventory, host):
    """{stage: [what differs]} for each recorded stage whose state drifted (or whose receipt is unreadable)."""
    for name in ('__gpufleet_receipts', '__gpufleet_report_receipts'):
        stages = _result(inventory, host, name, 'stages')
        if isinstance(stages, dict):
            break
    else:
        return {}
    drifted = {}
    for stage, result in stages.items():
        if not isinstance(result, dict):
            continue
        if result.get('error'):
            drifted[stage] = ['receipt unreadable: %s' % result['error']]
        elif result.get('recorded') and result.get('drift'):
            drifted[stage] = list(result['drift'])
    return drifted


def _hardware_class(inventory, host):
    expected = inventory.value(host, 'gpufleet_expected_gpus')
    groups, _variable = class_groups(inventory.values(host, ('gpufleet_class_groups',)),
                                     inventory.values(host, ('monitoring_class_groups',)))
    return hardware_class(inventory.value(host, 'group_names', []), groups,
                          expected.get('model', '') if isinstance(expected, dict) else '')


def host_input(inventory, host):
    """One host's input to the report (model.py's doc), from what the run holds on it."""
    facts = inventory.value(host, 'ansible_facts')
    return {
        'name': host,
        'dc': inventory.value(host, 'gpufleet_dc', ''),
        'rack': inventory.value(host, 'gpufleet_rack', ''),
        'class': _hardware_class(inventory, host),
        'topology': facts.get('gpufleet_topology') if isinstance(facts, dict) else None,
        'plan': _plan(inventory, host),
        'audit': _audit(inventory, host),
        'reserved_cpus': inventory.value(host, 'gpu_services_reserved_cpus') or '',
        'failure': _failure(inventory, host),
        'quarantined': host in inventory.groups.get(QUARANTINE_GROUP, []),
        'problems': _problems(inventory, host),
        'drift': _drift(inventory, host),
    }


def host_inputs(inventory, hosts):
    """The report's inputs for the hosts named (inventory host names); FleetReportError, naming every bad entry, for
    a list that is not of this inventory's host names."""
    if not isinstance(hosts, list):
        raise FleetReportError('hosts must be a list of inventory host names, got %s' % type(hosts).__name__)
    problems = []
    for position, host in enumerate(hosts, 1):
        if not isinstance(host, str) or not host:
            problems.append('hosts entry %d is not a host name (hosts lists the inventory names of the hosts to draw)'
                            % position)
        elif host not in inventory.hostvars:
            problems.append('host %s is not in the inventory; list the inventory names of the hosts to draw' % host)
    if problems:
        raise FleetReportError('; '.join(problems))
    return [host_input(inventory, host) for host in hosts]
