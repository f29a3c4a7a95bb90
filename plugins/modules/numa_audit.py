#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.core contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r'''
---
module: numa_audit
short_description: Check that running services sit on the CPUs, memory nodes and GPUs their plan gives them
version_added: 0.1.0
description:
  - For each service (a systemd unit, a container or a PID) reads what the kernel really allows and does, and
    compares it with what the placement plan says.
  - A unit's processes are every PID in its cgroup and the cgroups below it, on cgroup v2 and on v1 hybrid hosts.
    A container's are every PID in the cgroup of its first process, which its runtime's C(inspect) names.
  - Reads C(Cpus_allowed_list) and C(Mems_allowed_list) from C(/proc/<pid>/status), the memory policy and the pages
    on each NUMA node from C(/proc/<pid>/numa_maps), and context switches per second over every thread of the service, measured over
    O(sample_seconds).
  - Asks NVML which GPUs and MIG devices run the service's processes.
  - A service passes when every expectation it has is met exactly and at most O(max_remote_fraction) of its pages
    sit outside its planned memory nodes. Values without an expectation are reported, not judged.
  - Changes nothing on the host.
author:
  - gpufleet.core developers (@gpufleet)
extends_documentation_fragment:
  - gpufleet.core.attributes
  - gpufleet.core.host_roots
  - gpufleet.core.nvml
attributes:
  check_mode:
    support: full
    details: The module only reads; it runs the same in check mode.
  diff_mode:
    support: none
    details: The module changes nothing, so there is no diff.
options:
  services:
    description:
      - The services to audit. Takes precedence over O(plan_file).
    type: list
    elements: dict
    suboptions:
      name:
        description: Name of the service in the results.
        type: str
        required: true
      unit:
        description:
          - The systemd unit that runs the service natively.
          - Give exactly one of O(services[].unit), O(services[].pid) and O(services[].container).
        type: str
      pid:
        description: The PID of a process to audit on its own.
        type: int
      container:
        description:
          - The name of a running container, as the C(gpufleet.core.gpu_services) role names them
            (C(gpufleet-svc-<name>)).
          - Its processes are every PID in the cgroup of its first process (C(<runtime> inspect)), not the unit that
            started it, which holds only the runtime's client.
        type: str
      container_runtime:
        description: The runtime that runs O(services[].container).
        type: str
        choices: [podman, docker]
        default: podman
      expect:
        description: What the plan says. Leave a key out to report that value without judging it.
        type: dict
        suboptions:
          cpus:
            description: The CPUs the service may run on, as a kernel CPU list (V(2-3)) or a list of numbers.
            type: raw
          mems:
            description:
              - The NUMA nodes its memory may come from, as a list (V(1)) or a list of numbers.
              - Compared with RV(services[].memory_nodes_list), the nodes C(Mems_allowed_list) allows narrowed by a
                C(bind) or C(interleave) memory policy (C(NUMAPolicy=bind), C(numactl --membind)).
              - Pages on other nodes count as remote.
            type: raw
          gpus:
            description: The C(GPU-...) and C(MIG-...) UUIDs the service runs on, all of them.
            type: list
            elements: str
          memory_policy:
            description:
              - How the plan binds memory to O(services[].expect.mems), as the C(gpufleet.core.gpu_services) role
                names it.
              - With V(preferred) pages may spill to other nodes by design, so only the remote share is judged, not
                RV(services[].memory_nodes_list). Unset, V(bind) and V(interleave) judge both.
            type: str
            choices: [bind, preferred, interleave]
  plan_file:
    description:
      - A placement plan written by the C(gpufleet.core.gpu_services) role.
      - Each of its C(services) is audited as its C(unit) (C(gpufleet-svc-<name>.service) when the plan names none),
        or as its C(container) when it runs in container mode, expecting its C(cpulist), C(memlist), C(gpus) and
        C(memory_policy).
      - Used when O(services) is not given; without either, the role's default plan file is audited.
    type: path
    default: /etc/gpufleet/placement.json
  max_remote_fraction:
    description: The largest share of a service's pages that may sit on nodes outside O(services[].expect.mems).
    type: float
    default: 0.02
  sample_seconds:
    description:
      - How long to measure context switches for. V(0) skips the measurement.
    type: float
    default: 1.0
  fail_on_violation:
    description: Fail the task when a service does not pass, instead of returning C(passed=false).
    type: bool
    default: false
notes:
  - Run it with C(become=true); other users' C(numa_maps) and cgroup files are not readable without it.
  - Page counts are in the host's base page size; a hugetlbfs page counts as the base pages it covers.
  - Automatic NUMA balancing (C(kernel.numa_balancing=1)) moves pages after the fact; the audit sees where they
    are now.
seealso:
  - module: gpufleet.core.topology_facts
  - name: numa_maps in proc(5)
    description: The per-node page counts the audit sums.
    link: https://man7.org/linux/man-pages/man5/proc.5.html
'''

EXAMPLES = r'''
- name: Audit the services the gpu_services role placed
  gpufleet.core.numa_audit:
    plan_file: /etc/gpufleet/placement.json
  become: true
  register: audit

- name: Audit one unit against its plan, and fail the play when it strays
  gpufleet.core.numa_audit:
    services:
      - name: llm-a
        unit: gpufleet-svc-llm-a.service
        expect:
          cpus: 32-63
          mems: 1
          gpus: [GPU-5c6f7a2e-1b3d-4e8f-9a0b-1c2d3e4f5a62]
    fail_on_violation: true
  become: true

- name: Report where a process's memory is, judging nothing
  gpufleet.core.numa_audit:
    services:
      - name: trainer
        pid: 4242
    sample_seconds: 0
  become: true
  register: audit

- name: Show the remote share of each service
  ansible.builtin.debug:
    msg: "{{ item.name }}: {{ item.remote_fraction }} remote, {{ item.reasons | join('; ') or 'ok' }}"
  loop: "{{ audit.services }}"
  loop_control:
    label: "{{ item.name }}"
'''

RETURN = r'''
passed:
  description: Whether every service passed.
  returned: always
  type: bool
  sample: false
failed_services:
  description: Names of the services that did not pass.
  returned: always
  type: list
  elements: str
  sample: [llm-b]
services:
  description: One entry per audited service, in the order given.
  returned: always
  type: list
  elements: dict
  contains:
    name:
      description: The service's name.
      type: str
      returned: always
      sample: llm-a
    unit:
      description: Its systemd unit; null for a service given by PID or container.
      type: str
      returned: always
      sample: gpufleet-svc-llm-a.service
    container:
      description: Its container; null for a service given by unit or PID.
      type: str
      returned: always
      sample: null
    pids:
      description:
        - The processes audited (for a unit or a container, every process in its cgroup subtree); empty when it is
          not running.
      type: list
      elements: int
      returned: always
      sample: [23817, 23840]
    cpus_allowed_list:
      description: The CPUs its processes may run on (C(Cpus_allowed_list)), all processes together; null when not running.
      type: str
      returned: always
      sample: 32-63
    mems_allowed_list:
      description:
        - The NUMA nodes its processes' cpuset allows (C(Mems_allowed_list)); null when not running.
        - C(NUMAPolicy=bind) leaves this alone and sets a memory policy instead; see RV(services[].memory_nodes_list).
      type: str
      returned: always
      sample: 0-1
    memory_policies:
      description:
        - The memory policies C(numa_maps) shows for its mappings, in the kernel's words.
        - The task's policy shows on every mapping without its own, so a bound service shows just one.
      type: list
      elements: str
      returned: always
      sample: ["bind:1"]
    memory_nodes_list:
      description:
        - The nodes its pages may really come from, the one compared with O(services[].expect.mems).
          C(Mems_allowed_list), narrowed by a C(bind) or C(interleave) policy; null when not running.
      type: str
      returned: always
      sample: "1"
    pages_per_node:
      description: Pages of its processes on each NUMA node, from C(numa_maps), keyed by node id (a string).
      type: dict
      returned: always
      sample: {"0": 1211, "1": 65730}
    pages_total:
      description: All pages counted in RV(services[].pages_per_node).
      type: int
      returned: always
      sample: 66941
    local_nodes:
      description: The nodes the plan gives its memory (O(services[].expect.mems)); null without that expectation.
      type: list
      elements: int
      returned: always
      sample: [1]
    remote_pages:
      description: Pages outside RV(services[].local_nodes); null without that expectation.
      type: int
      returned: always
      sample: 1211
    remote_fraction:
      description: RV(services[].remote_pages) divided by RV(services[].pages_total); null without an expectation or pages.
      type: float
      returned: always
      sample: 0.018091
    context_switches_per_second:
      description:
        - Voluntary and involuntary context switches per second, summed over every thread of its processes and
          measured over O(sample_seconds); null when not measured.
      type: float
      returned: always
      sample: 212.0
    gpus_held:
      description:
        - UUIDs of the GPUs and MIG devices whose running compute processes include its processes (MIG devices are
          named instead of their parent GPU).
        - Null when NVML cannot say; RV(services[].gpus_held_reason) then says why.
      type: list
      elements: str
      returned: always
      sample: [GPU-5c6f7a2e-1b3d-4e8f-9a0b-1c2d3e4f5a62]
    gpus_held_reason:
      description: Why RV(services[].gpus_held) is null; null otherwise.
      type: str
      returned: always
      sample: null
    passed:
      description: Whether every expectation was met.
      type: bool
      returned: always
      sample: false
    reasons:
      description: Each way the service strays from its plan, in words; empty when it passed.
      type: list
      elements: str
      returned: always
      sample: ["CPUs 0-1 allowed, plan says 32-63", "41.8% of pages on remote nodes (max 2.0%)"]
'''

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.gpufleet.core.plugins.module_utils._argspec import HOST_ROOTS, argument_spec
from ansible_collections.gpufleet.core.plugins.module_utils._host import HostFiles, HostFilesError
from ansible_collections.gpufleet.core.plugins.module_utils._numa_audit import (
    NumaAuditError,
    ServiceHost,
    audit,
    load_plan,
    normalise_services,
)
from ansible_collections.gpufleet.core.plugins.module_utils._nvml import pynvml
from ansible_collections.gpufleet.core.plugins.module_utils._plan import PLAN_FILE

SERVICE_SPEC = {
    'name': {'type': 'str', 'required': True},
    'unit': {'type': 'str'},
    'pid': {'type': 'int'},
    'container': {'type': 'str'},
    'container_runtime': {'type': 'str', 'choices': ['podman', 'docker'], 'default': 'podman'},
    'expect': {'type': 'dict', 'options': {
        'cpus': {'type': 'raw'},
        'mems': {'type': 'raw'},
        'gpus': {'type': 'list', 'elements': 'str'},
        'memory_policy': {'type': 'str', 'choices': ['bind', 'preferred', 'interleave']},
    }},
}


def main():
    module = AnsibleModule(
        argument_spec=argument_spec(
            HOST_ROOTS,
            services={'type': 'list', 'elements': 'dict', 'options': SERVICE_SPEC,
                      'mutually_exclusive': [['unit', 'pid', 'container']],
                      'required_one_of': [['unit', 'pid', 'container']]},
            plan_file={'type': 'path', 'default': PLAN_FILE},
            max_remote_fraction={'type': 'float', 'default': 0.02},
            sample_seconds={'type': 'float', 'default': 1.0},
            fail_on_violation={'type': 'bool', 'default': False},
        ),
        supports_check_mode=True,
    )
    params = module.params
    files = HostFiles(params['sysfs_root'], params['procfs_root'])
    host = ServiceHost(files, module.run_command, module.get_bin_path('systemctl'), module.get_bin_path)
    try:
        files.check_roots()
        services = normalise_services(params['services'] if params['services'] is not None
                                      else load_plan(params['plan_file']))
        results, failed = audit(host, services, pynvml, params['max_remote_fraction'], params['sample_seconds'])
    except (HostFilesError, NumaAuditError) as exc:
        module.fail_json(msg=str(exc))
    result = {'changed': False, 'passed': not failed, 'failed_services': failed, 'services': results}
    if failed and params['fail_on_violation']:
        details = '; '.join('%s: %s' % (entry['name'], ', '.join(entry['reasons'])) for entry in results if entry['reasons'])
        module.fail_json(msg='%d of %d services stray from their placement plan: %s' % (len(failed), len(results), details),
                         **result)
    module.exit_json(**result)


if __name__ == '__main__':
    main()
