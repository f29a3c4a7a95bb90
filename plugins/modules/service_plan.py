#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.core contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r'''
---
module: service_plan
short_description: Place a host's GPU services and join them with their units, in one step
version_added: 0.1.0
description:
  - Does what P(gpufleet.core.place_services#filter) followed by P(gpufleet.core.service_units#filter) do, in one
    task that runs on the controller and changes nothing. The planner's rules, and every refusal, are that filter's.
  - The host's C(gpufleet_topology) fact is read from its facts as it is, not passed through templating, so planning
    a host costs about what a task that does nothing costs (see C(docs/benchmarks/service_plan.md)). Gather it first
    with M(gpufleet.core.topology_facts), or pass O(topology).
  - The P(gpufleet.core.gpu_services#role) role plans with this action.
  - This is an action plugin; nothing runs on the host.
author:
  - gpufleet.core developers (@gpufleet)
extends_documentation_fragment:
  - gpufleet.core.attributes
attributes:
  check_mode:
    support: full
    details: It changes nothing, in any mode.
  diff_mode:
    support: none
    details: It changes nothing, so there is nothing to show.
  action:
    description: Runs on the controller only.
    support: full
options:
  services:
    description: The service specs, as P(gpufleet.core.place_services#filter) and the C(gpu_services) role take them.
    type: list
    elements: raw
    required: true
  reserved_cpus:
    description: CPUs never given to services, as a CPU list (C(0,48)) or a list of CPU numbers.
    type: raw
  previous:
    description:
      - The previous plan, so that services that still fit keep their placement. The plan document the role writes
        to C(/etc/gpufleet/placement.json), as a dict or as its JSON text (an empty text is no plan), or the list
        P(gpufleet.core.place_services#filter) returned.
      - A document of another version is not reused; every service is then placed afresh.
    type: raw
  mps_daemons:
    description: The mps role's C(mps_daemons) list, or P(gpufleet.core.mps_plan#filter)'s output; needed for MPS shares.
    type: list
    elements: raw
  topology:
    description:
      - The topology to place on, for example one predicted for after a MIG change.
      - Default is the host's C(ansible_facts['gpufleet_topology']).
    type: dict
  unit_prefix:
    description: Each service's unit is C(<unit_prefix><name>.service).
    type: str
    default: gpufleet-svc-
  user_prefix:
    description: A service without C(user) runs as the dedicated user C(<user_prefix><name>).
    type: str
    default: gpufleet-
  container_runtime:
    description: The runtime of container-mode services, written into the plan for M(gpufleet.core.numa_audit).
    type: str
    default: podman
seealso:
  - plugin: gpufleet.core.place_services
    plugin_type: filter
  - plugin: gpufleet.core.service_units
    plugin_type: filter
  - module: gpufleet.core.topology_facts
'''

EXAMPLES = r'''
- name: Read the previous plan, if there is one
  ansible.builtin.slurp:
    src: /etc/gpufleet/placement.json
  register: __previous
  failed_when: false

- name: Place the services
  gpufleet.core.service_plan:
    services:
      - name: llm
        gpus: 2
        cpus: 16
        command: /opt/llm/bin/serve
      - name: sdxl
        gpus: {mig_profile: 3g.40gb}
        cpus: 8
        command: /opt/sdxl/bin/serve
    reserved_cpus: "0,64"
    previous: "{{ __previous.content | default('') | b64decode }}"
  register: __plan

- name: Show where llm runs
  ansible.builtin.debug:
    msg: "{{ __plan.units[0].plan.explanation }}"
'''

RETURN = r'''
units:
  description:
    - One per service, in input order, as P(gpufleet.core.service_units#filter) returns them, with RV(units[].devices)
      and RV(units[].placement).
  returned: success
  type: list
  elements: dict
  contains:
    name:
      description: The service's name.
      type: str
    stem:
      description: The unit's name without C(.service).
      type: str
    unit:
      description: The unit's name.
      type: str
      sample: gpufleet-svc-llm.service
    mode:
      description: C(native) or C(container).
      type: str
    state:
      description: C(started) or C(stopped).
      type: str
    user:
      description: The user the service runs as (its own, else its MPS daemon's, else the dedicated user).
      type: str
    dedicated_user:
      description: Whether the role creates that user.
      type: bool
    mps_user:
      description: The MPS daemon's user for a share, else C(null).
      type: str
    placed_name:
      description: The name the planner returned for this position (always the service's name).
      type: str
    spec:
      description: The service as given.
      type: dict
    devices:
      description: Its devices as the device map names them (a whole GPU by UUID, a MIG device by its slot); not
        returned by P(gpufleet.core.service_units#filter).
      type: list
      elements: str
    placement:
      description: Its placement's explanation with each MIG device named by its slot, for its unit file, which so
        stays the same when a reboot gives the device a new UUID; not returned by
        P(gpufleet.core.service_units#filter).
      type: str
    plan:
      description: Its placement, as P(gpufleet.core.place_services#filter) returns it.
      type: dict
      contains:
        name:
          description: The service's name.
          type: str
        gpus:
          description: The C(GPU-...) and C(MIG-...) UUIDs given to the service (its MPS device for a share).
          type: list
          elements: str
        gpu_uuids:
          description: Their parent GPUs' UUIDs, without duplicates, in order.
          type: list
          elements: str
        numa_node:
          description: The NUMA node of the service's CPUs and memory; C(null) when its CPUs span nodes.
          type: int
        cpus:
          description: The logical CPUs, sorted, whole cores.
          type: list
          elements: int
        cpulist:
          description: The same in the kernel's list form, for C(CPUAffinity=) and C(--cpuset-cpus).
          type: str
          sample: 2-5,34-37
        mems:
          description: The memory nodes, sorted.
          type: list
          elements: int
        memlist:
          description: The same in list form, for C(NUMAMask=) and C(--cpuset-mems).
          type: str
        memory_policy:
          description: C(bind), C(preferred) or C(interleave).
          type: str
        exclusive:
          description: Whether the service's devices are given to no other service.
          type: bool
        mps:
          description: For an MPS share, C(device), C(pipe_directory), C(user) and C(environment); else C(null).
          type: dict
        environment:
          description: C(CUDA_VISIBLE_DEVICES), C(CUDA_DEVICE_ORDER), and the MPS client variables for a share.
          type: dict
        explanation:
          description: One sentence on which devices, which node, and why these CPUs and memory nodes.
          type: str
plan_json:
  description:
    - The plan document the role writes to C(/etc/gpufleet/placement.json) (with a newline), as JSON text, byte for
      byte what C(to_nice_json(indent=2)) gives; C(from_json) gives the document.
    - Its C(services) are each service's placement with C(unit), and C(container) and C(container_runtime) in
      container mode. It is text rather than a structure because ansible-core converts every value of a task's
      result on its way to the controller's main process, and as a structure it cost a quarter of the step.
  returned: success
  type: str
  sample: "{\n  \"services\": [],\n  \"version\": 1\n}"
gpu_device_nodes:
  description: The character devices of the host's GPUs, which the role's units allow (C(DeviceAllow=)).
  returned: success
  type: list
  elements: str
  sample: [/dev/nvidia0, /dev/nvidia1]
device_map_json:
  description:
    - The device map the role writes to C(/etc/gpufleet/devices.json), as JSON text; each unit's devices by names
      that survive a reboot, a whole GPU by its UUID and a MIG device by its slot (C(GPU-UUID:PROFILE:START:ORDINAL)).
    - At boot C(gpufleet-devices.service) resolves it to the devices present and writes the runtime files.
  returned: success
  type: str
  sample: "{\n  \"units\": {\"gpufleet-svc-llm.service\": {\"container\": false, \"devices\": [\"GPU-5c6f7a2e-...\"]}},\n  \"version\": 1\n}"
runtime_files:
  description:
    - Each unit's runtime file, C(/run/gpufleet/devices/<unit>.env), which its unit reads with C(EnvironmentFile=)
      (C(CUDA_VISIBLE_DEVICES), and C(CDI_DEVICES) for a container), resolved on the host's topology now.
    - The same text as the boot unit writes for the same layout.
  returned: success
  type: dict
  sample: {gpufleet-svc-llm.service: "# gpufleet.core: ...\nCUDA_VISIBLE_DEVICES=GPU-5c6f7a2e-1b3d-4e8f-9a0b-1c2d3e4f5a60\n"}
'''
