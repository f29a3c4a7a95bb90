# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.core contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible.errors import AnsibleFilterError


def _model():
    # Imported on first use: ansible-core imports every filter file of the collection to find any one filter.
    from ansible_collections.gpufleet.core.plugins.module_utils import _fleet_inventory
    return _fleet_inventory


def preflight_failures(run_hosts, alive_hosts, reasons):
    """Host -> why it failed preflight: its recorded reason, or that it went away (unreachable, or a failure the
    rescue could not catch)."""
    if not isinstance(run_hosts, list) or not isinstance(alive_hosts, list) or not isinstance(reasons, list) \
            or len(reasons) != len(run_hosts):
        raise AnsibleFilterError('gpufleet.core.preflight_failures: give ansible_play_hosts_all, ansible_play_hosts '
                                 'and one reason per host of the first list (empty when it passed)')
    failures = {}
    for host, reason in zip(run_hosts, reasons):
        if reason:
            failures[host] = str(reason)
        elif host not in alive_hosts:
            failures[host] = 'unreachable, or failed before preflight could record why'
    return failures


def rollout_plan(run_hosts, failures, domains, settings, gpu_hosts=None):
    """The hosts that passed preflight in batch order, with the play's serial and max_fail_percentage."""
    if not isinstance(run_hosts, list) or not isinstance(failures, dict) or not isinstance(settings, dict) \
            or not isinstance(domains, list) or len(domains) != len(run_hosts) \
            or not isinstance(gpu_hosts or [], list):
        raise AnsibleFilterError('gpufleet.core.rollout_plan: give ansible_play_hosts_all, the preflight failures, '
                                 "each host's failure domain (one per host), the validated settings "
                                 "(hostvars['localhost']['_gpufleet_fleet']['settings']) and the GPU hosts")
    from ansible_collections.gpufleet.core.plugins.module_utils._fleet_rollout import rollout_plan as plan
    return plan(run_hosts, failures, dict(zip(run_hosts, domains)), settings, gpu_hosts or [])


def class_differences(topology, expected_gpus, expected_numa):
    """How a host differs from the GPUs and the NUMA shape its hardware class promises, one sentence each."""
    from ansible_collections.gpufleet.core.plugins.module_utils._hardware_class import class_differences as differences, contract
    from ansible_collections.gpufleet.core.plugins.module_utils._topology import Topology, TopologyModelError
    promise, problems = contract(expected_gpus, expected_numa)
    if problems:
        raise AnsibleFilterError('gpufleet.core.class_differences: %s' % '; '.join(problems))
    try:
        return differences(promise, Topology(topology))
    except TopologyModelError as exc:
        raise AnsibleFilterError('gpufleet.core.class_differences: %s' % exc)


def ip_address(value):
    """The management-address rule's verdict on one value: the address in its one canonical form (FD00::5 and
    fd00:0:0:0:0:0:0:5 are both fd00::5), or '' when it is not an IP address alone."""
    from ansible_collections.gpufleet.core.plugins.module_utils._values import address
    found = address(value)
    return str(found) if found is not None else ''


def addresses_in(addresses, networks):
    """The addresses (canonical, each once, in order) that a host can have inside any of the networks; entries that
    are not addresses or networks count for nothing."""
    from ansible_collections.gpufleet.core.plugins.module_utils._values import address, network, networks_of
    if not isinstance(addresses, list) or not isinstance(networks, list):
        raise AnsibleFilterError('gpufleet.core.addresses_in: give a list of addresses and a list of networks, got %r '
                                 'and %r' % (addresses, networks))
    nets = [net for net in (network(item) for item in networks) if net is not None]
    found = []
    for item in addresses:
        ip = address(item)
        if ip is not None and networks_of(ip, nets) and str(ip) not in found:
            found.append(str(ip))
    return found


class FilterModule:
    """The fleet model's rollout (which hosts failed preflight, the batches of the others), a host against its
    hardware class, and the management-address rule for templates."""

    def filters(self):
        return {'preflight_failures': preflight_failures, 'rollout_plan': rollout_plan,
                'class_differences': class_differences, 'ip_address': ip_address, 'addresses_in': addresses_in}
