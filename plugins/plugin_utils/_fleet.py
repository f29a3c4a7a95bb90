# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.core contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Controller-side access to the fleet model for the fleet filters (plugins/filter/fleet.py): the rollout
(_fleet_rollout), a stage plan's receipt check (_stage_plan), a host against its hardware class (_hardware_class) and
the address rule (_values). Checks what the
filters are given and turns the model's errors into AnsibleFilterError.

This is a private module: its API may change without notice.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible.errors import AnsibleFilterError

from ansible_collections.gpufleet.core.plugins.module_utils import _fleet_rollout as rollout
from ansible_collections.gpufleet.core.plugins.module_utils import _values as values
from ansible_collections.gpufleet.core.plugins.module_utils._errors import GpufleetError


def preflight_failures(run_hosts, alive_hosts, reasons):
    if not isinstance(run_hosts, list) or not isinstance(alive_hosts, list) or not isinstance(reasons, list) \
            or len(reasons) != len(run_hosts):
        raise AnsibleFilterError('gpufleet.core.preflight_failures: give ansible_play_hosts_all, ansible_play_hosts '
                                 'and one reason per host of the first list (empty when it passed)')
    return rollout.preflight_failures(run_hosts, alive_hosts, reasons)


def rollout_plan(run_hosts, failures, domains, settings, gpu_hosts=None):
    if not isinstance(run_hosts, list) or not isinstance(failures, dict) or not isinstance(settings, dict) \
            or not isinstance(domains, list) or len(domains) != len(run_hosts) \
            or not isinstance(gpu_hosts or [], list):
        raise AnsibleFilterError('gpufleet.core.rollout_plan: give ansible_play_hosts_all, the preflight failures, '
                                 "each host's failure domain (one per host), the validated settings "
                                 "(hostvars['localhost']['_gpufleet_fleet']['settings']) and the GPU hosts")
    return rollout.rollout_plan(run_hosts, failures, dict(zip(run_hosts, domains)), settings, gpu_hosts or [])


def class_differences(topology, expected_gpus, expected_numa):
    # The topology model is imported only by the filter that needs it: the address filters are used far more.
    from ansible_collections.gpufleet.core.plugins.module_utils import _hardware_class as hardware_class
    from ansible_collections.gpufleet.core.plugins.module_utils._topology import Topology
    promise, problems = hardware_class.contract(expected_gpus, expected_numa)
    if problems:
        raise AnsibleFilterError('gpufleet.core.class_differences: %s' % '; '.join(problems))
    try:
        return hardware_class.class_differences(promise, Topology(topology))
    except GpufleetError as exc:  # TopologyModelError: a fact the model cannot read, and the fix
        raise AnsibleFilterError('gpufleet.core.class_differences: %s' % exc)


def receipt_check(stages, topology):
    if not isinstance(stages, list) or not all(isinstance(stage, dict) and isinstance(stage.get('name'), str)
                                               for stage in stages) or not isinstance(topology, dict):
        raise AnsibleFilterError("gpufleet.core.receipt_check: give the host's stage plan "
                                 "(hostvars['localhost']['_gpufleet_fleet']['stages'][inventory_hostname]) and its "
                                 "topology (ansible_facts['gpufleet_topology'], {} where it has none)")
    from ansible_collections.gpufleet.core.plugins.module_utils import _stage_plan as stage_plan
    try:
        return stage_plan.receipt_check(stages, topology)
    except GpufleetError as exc:  # TopologyModelError: a fact the model cannot read, and the fix
        raise AnsibleFilterError('gpufleet.core.receipt_check: %s' % exc)


def ip_address(value):
    """The address rule's verdict in a form templates test: the canonical address, or '' for no address."""
    found = values.address(value)
    return str(found) if found is not None else ''


def addresses_in(addresses, cidrs):
    if not isinstance(addresses, list) or not isinstance(cidrs, list):
        raise AnsibleFilterError('gpufleet.core.addresses_in: give a list of addresses and a list of networks, got %r '
                                 'and %r' % (addresses, cidrs))
    return values.addresses_in(addresses, cidrs)
