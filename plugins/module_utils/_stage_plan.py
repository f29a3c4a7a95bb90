# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.core contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The site playbook's stages, once: their order, the roles each may run, and which of them a host goes through.

Validate computes each host's plan from the inventory (plugin_utils/_fleet_inventory.py) and checks the variables of
exactly the roles in it; the rollout play reads the plan (``_gpufleet_fleet['stages']``) and decides nothing itself.
Pure code; a private module: its API may change without notice.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.gpufleet.core.plugins.module_utils._cpulist import format_cpulist
from ansible_collections.gpufleet.core.plugins.module_utils._topology import Topology
from ansible_collections.gpufleet.core.plugins.module_utils._values import Unrendered

# In the order a host goes through them in each batch.
STAGES = ('drivers', 'exporter', 'partition', 'services', 'verify', 'watchdog', 'monitoring')
# The roles a stage may run, in order; which of them it runs on a host is the plan's (host_stages).
STAGE_ROLES = {
    'drivers': ('nvidia_driver', 'container_toolkit', 'cuda'),
    'exporter': ('dcgm_exporter',),
    'partition': ('mig', 'mps'),
    'services': ('gpu_services',),
    'verify': (),
    'watchdog': ('gpu_watchdog',),
    'monitoring': ('monitoring',),
}
# The stages whose state a receipt records on the host: one whose receipt is current is skipped whole (docs/drift.md).
# Verify audits every run; monitoring is the monitoring host's, and its targets follow the whole fleet.
RECEIPT_STAGES = ('drivers', 'exporter', 'partition', 'services', 'watchdog')
# The stages whose receipts also hold the host's GPUs and NUMA nodes: they place work on them.
TOPOLOGY_STAGES = ('partition', 'services')
# The stages whose failure can leave a host's GPU services stopped until a later run converges it.
SERVICE_STAGES = ('partition', 'services')
# The inventory values that decide which roles a host's stages run (host_stages' ``given``).
PLAN_VALUES = ('mig_layouts', 'mig_parted_config_file', 'mps_daemons', 'gpu_services_services')


def _set(value):
    """Whether a role value asks for something: a non-empty value, or one the host cannot render (its role's checker
    names that, so the role is in the plan)."""
    return isinstance(value, Unrendered) or bool(value)


def host_stages(settings, is_gpu, is_monitoring, given):
    """The stages a host goes through, in order: [{'name', 'roles', 'receipt', 'topology', 'stops_services'}].

    ``settings`` are the run's settings as validate normalised them (the stage switches, gpufleet_drivers_roles);
    ``given`` maps PLAN_VALUES to the host's values (absent: not set).
    """
    services = _set(given.get('gpu_services_services'))
    roles = {
        'drivers': [role for role in STAGE_ROLES['drivers'] if role in settings['gpufleet_drivers_roles']]
        if is_gpu else [],
        'exporter': ['dcgm_exporter'] if is_gpu else [],
        'partition': ((['mig'] if _set(given.get('mig_layouts')) or _set(given.get('mig_parted_config_file')) else [])
                      + (['mps'] if _set(given.get('mps_daemons')) else [])) if is_gpu else [],
        'services': ['gpu_services'] if services else [],
        'watchdog': ['gpu_watchdog'] if is_gpu and services else [],
        'monitoring': ['monitoring'] if is_monitoring else [],
    }
    runs = dict((stage, bool(found)) for stage, found in roles.items())
    runs['verify'] = services  # the audit of the placed services; it has no role of its own
    return [{'name': stage, 'roles': roles.get(stage, []), 'receipt': stage in RECEIPT_STAGES,
             'topology': stage in TOPOLOGY_STAGES, 'stops_services': stage in SERVICE_STAGES}
            for stage in STAGES if runs[stage] and settings['gpufleet_%s_enabled' % stage]]


def plan_roles(stages):
    """The roles a plan runs, in the order it runs them: the roles whose variables validate checks on the host."""
    return [role for stage in stages for role in stage['roles']]


def receipt_check(stages, topology):
    """What gpufleet.core.state_receipt checks a host's receipts against: {'order': the plan's receipt-kept stages,
    'stages': {stage: {'roles', 'inputs'}}}, where a stage that places work has as inputs the host's GPUs (UUIDs) and
    NUMA nodes (CPU lists) from ``topology``, preflight's fact ({} where the host has none)."""
    kept = [stage for stage in stages if stage['receipt']]
    inputs = None
    if any(stage['topology'] for stage in kept):
        model = Topology(topology) if topology else None
        inputs = {'gpus': [gpu.get('uuid') for gpu in model.gpus] if model else [],
                  'numa_nodes': [format_cpulist(model.node_cpus[node]) for node in model.nodes] if model else []}
    return {'order': [stage['name'] for stage in kept],
            'stages': dict((stage['name'], {'roles': stage['roles'], 'inputs': inputs if stage['topology'] else None})
                           for stage in kept)}
