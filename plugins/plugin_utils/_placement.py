# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.core contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Controller-side access to the placement planner and the plan contract: turns their errors into AnsibleFilterError.

This is a private module: its API may change without notice.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible.errors import AnsibleFilterError

from ansible_collections.gpufleet.core.plugins.module_utils._placement import PlacementError, place
from ansible_collections.gpufleet.core.plugins.module_utils._plan import PlanError
from ansible_collections.gpufleet.core.plugins.module_utils._plan import service_units as join_units


def place_services(topology, services, reserved_cpus=None, previous=None, mps_daemons=None):
    if not isinstance(topology, dict) or 'numa_nodes' not in topology:
        raise AnsibleFilterError('gpufleet.core.place_services: the input must be '
                                 "ansible_facts['gpufleet_topology'] from gpufleet.core.topology_facts")
    try:
        return place(topology, services, reserved_cpus, previous, mps_daemons)
    except PlacementError as exc:
        raise AnsibleFilterError('gpufleet.core.place_services: %s' % exc)


def service_units(plan, services, unit_prefix='gpufleet-svc-', user_prefix='gpufleet-', container_runtime='podman'):
    try:
        return join_units(plan, services, unit_prefix, user_prefix, container_runtime)
    except PlanError as exc:
        raise AnsibleFilterError('gpufleet.core.service_units: %s' % exc)
