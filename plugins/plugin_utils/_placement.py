# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.core contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Controller-side access to the placement planner and the plan contract.

The filters turn their errors into AnsibleFilterError; the service_plan action plans and joins in one step and
turns them into AnsibleActionFail.
This is a private module: its API may change without notice.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json

from ansible.errors import AnsibleFilterError

from ansible_collections.gpufleet.core.plugins.module_utils._device_env import slot_named, unit_devices
from ansible_collections.gpufleet.core.plugins.module_utils._errors import GpufleetError
from ansible_collections.gpufleet.core.plugins.module_utils._placement import PlacementError, place
from ansible_collections.gpufleet.core.plugins.module_utils._plan import (
    CONTAINER_RUNTIMES, DEFAULT_USER_PREFIX, UNIT_PREFIX, PlanError, plan_json)
from ansible_collections.gpufleet.core.plugins.module_utils._plan import service_units as join_units
from ansible_collections.gpufleet.core.plugins.module_utils._service_specs import service_specs as read_service_specs
from ansible_collections.gpufleet.core.plugins.module_utils._topology import Topology

TOPOLOGY_NEEDED = "the input must be ansible_facts['gpufleet_topology'] from gpufleet.core.topology_facts"


class ServicePlanError(GpufleetError):
    """A plan that cannot be made; the message names the fix."""


def place_services(topology, services, reserved_cpus=None, previous=None, mps_daemons=None):
    if not isinstance(topology, dict) or 'numa_nodes' not in topology:
        raise AnsibleFilterError('gpufleet.core.place_services: %s' % TOPOLOGY_NEEDED)
    try:
        return place(topology, services, reserved_cpus, previous, mps_daemons)
    except PlacementError as exc:
        raise AnsibleFilterError('gpufleet.core.place_services: %s' % exc)


def service_specs(services, user_prefix=DEFAULT_USER_PREFIX):
    # The role's preflight has refused every problem already (its checker reads the same specs): one left is a caller's.
    specs, problems = read_service_specs(services, user_prefix)
    if problems:
        raise AnsibleFilterError('gpufleet.core.service_specs: %s' % '; '.join(problems))
    return specs


def service_units(plan, services, unit_prefix=UNIT_PREFIX, user_prefix=DEFAULT_USER_PREFIX,
                  container_runtime=CONTAINER_RUNTIMES[0]):
    try:
        return join_units(plan, services, unit_prefix, user_prefix, container_runtime)
    except PlanError as exc:
        raise AnsibleFilterError('gpufleet.core.service_units: %s' % exc)


def previous_plan(text, where):
    """The previous plan as read back from the host: None for no text, else its JSON (a document or a list)."""
    if text is None or isinstance(text, (dict, list)):
        return text
    if not isinstance(text, str):
        raise ServicePlanError('previous must be the plan document (or its JSON text) as read back from the plan '
                               'file, got %s' % type(text).__name__)
    if not text.strip():
        return None
    try:
        return json.loads(text)
    except ValueError as exc:
        raise ServicePlanError('%s is not JSON (%s); it should be the plan the gpufleet.core.gpu_services role '
                               'wrote: remove it to place every service afresh' % (where, exc))


def plan_services(topology, services, reserved_cpus=None, previous=None, mps_daemons=None,
                  unit_prefix=UNIT_PREFIX, user_prefix=DEFAULT_USER_PREFIX, container_runtime=CONTAINER_RUNTIMES[0]):
    """place_services and service_units in one step, or ServicePlanError: {'units', 'plan_json', 'gpu_device_nodes',
    'device_map_json' (the device map's text), 'runtime_files' ({unit: its runtime file's text})}; each unit also has
    'devices' (its devices as the map names them) and 'placement' (its explanation, MIG devices named by slot).

    Each unit holds its placement. The plan document comes as the plan file's text, one string: ansible-core 2.19 and
    later convert every value of a task's result on its way from the worker to the main process, and the document
    as a structure cost a quarter of the step (docs/benchmarks/per_host_tasks.md).
    """
    if not isinstance(topology, dict) or 'numa_nodes' not in topology:
        raise ServicePlanError('the host has no gpufleet_topology fact: run gpufleet.core.topology_facts first, or '
                               'pass topology (%s)' % TOPOLOGY_NEEDED[len('the input must be '):])
    try:
        placements = place(topology, services, reserved_cpus, previous, mps_daemons)
        joined = join_units(placements, services, unit_prefix, user_prefix, container_runtime)
    except (PlacementError, PlanError) as exc:
        raise ServicePlanError(str(exc))
    model = Topology(topology)
    # The units name their devices by what survives a reboot (a MIG device by its slot); the runtime files say which
    # UUIDs those are now, as the boot unit's resolution of the same map does (_device_env).
    try:
        devices, runtime = unit_devices(model, joined['units'])
    except GpufleetError as exc:
        raise ServicePlanError('the services\' devices cannot be named for a reboot: %s' % exc)
    for unit in joined['units']:
        unit['devices'] = devices['units'][unit['unit']]['devices']
        unit['placement'] = slot_named(unit['plan'].get('explanation', ''), unit['plan']['gpus'], unit['devices'])
    # The units' DeviceAllow= lines: the host's GPU device nodes, read through the model (Topology caches the index).
    return {'units': joined['units'], 'plan_json': plan_json(joined['plan']),
            'gpu_device_nodes': model.gpu_device_nodes(),
            'device_map_json': json.dumps(devices, indent=2, sort_keys=True), 'runtime_files': runtime}
