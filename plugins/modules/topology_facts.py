#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.core contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r'''
---
module: topology_facts
short_description: Gather NUMA, CPU and NVIDIA GPU topology facts
version_added: 0.1.0
description:
  - Reads the host's CPUs, NUMA nodes and NUMA-relevant kernel settings from sysfs and procfs,
    and its NVIDIA GPUs, MIG state and GPU-to-GPU links from NVML through C(pynvml).
  - Returns them as the fact C(gpufleet_topology), the one picture of a host that the
    collection's MIG, MPS, placement and audit features decide from.
  - Without C(pynvml) or without a working driver the CPU and NUMA facts are still returned,
    with O(require_gpus=false), together with C(gpus=[]) and the reason.
  - Starts no subprocess and initialises NVML once per run.
author:
  - gpufleet.core developers (@gpufleet)
extends_documentation_fragment:
  - gpufleet.core.attributes
  - gpufleet.core.attributes.FACTS
  - gpufleet.core.host_roots
  - gpufleet.core.nvml
attributes:
  check_mode:
    support: full
  diff_mode:
    support: none
    details: The module changes nothing, so there is no diff.
options:
  require_gpus:
    description:
      - Fail when no GPU can be found, instead of returning C(gpus=[]) with the reason.
    type: bool
    default: false
seealso:
  - name: NVIDIA NVML API reference
    description: The library behind the GPU facts.
    link: https://docs.nvidia.com/deploy/nvml-api/
'''

EXAMPLES = r'''
- name: Gather the topology of the host
  gpufleet.core.topology_facts:

- name: Show which NUMA node each GPU hangs off
  ansible.builtin.debug:
    msg: "{{ item.uuid }} is on node {{ item.numa_node }} (CPUs {{ item.local_cpulist }})"
  loop: "{{ ansible_facts['gpufleet_topology']['gpus'] }}"
  loop_control:
    label: "{{ item.index }}"

- name: Fail early on a GPU host whose driver is broken
  gpufleet.core.topology_facts:
    require_gpus: true

- name: Analyse a captured tree from another host offline
  gpufleet.core.topology_facts:
    sysfs_root: /srv/captures/gpu-node-17/sys
    procfs_root: /srv/captures/gpu-node-17/proc
  delegate_to: localhost
'''

RETURN = r'''
ansible_facts:
  description: Facts to add to C(ansible_facts).
  returned: always
  type: dict
  contains:
    gpufleet_topology:
      description: The host's CPU, NUMA and GPU topology.
      returned: always
      type: dict
      contains:
        version:
          description:
            - Version of this fact's layout (this page); bumped on incompatible changes. The collection's plugins
              read versions 1 and 2 and refuse others (gather it again); a fact without one, cached by an early
              release, is version 1.
            - Version 2 gives every CPU set as the kernel's CPU-list string only (V(0-31,64-95)). Version 1 also
              gave C(cpu.online), C(cpu.offline), C(numa_nodes[].cpus) and C(gpus[].local_cpus) as lists of
              integers, and C(schema_version); use P(gpufleet.core.cpulist_expand#filter) where a list is needed.
          type: int
          returned: always
          sample: 2
        sources:
          description: The trees that were read.
          type: dict
          returned: always
          sample: {"sysfs_root": "/sys", "procfs_root": "/proc"}
        cpu:
          description: The host's processors.
          type: dict
          returned: always
          contains:
            model:
              description: Model name from C(/proc/cpuinfo); null when the kernel does not say.
              type: str
              returned: always
              sample: Intel(R) Xeon(R) Gold 6338 CPU @ 2.00GHz
            sockets:
              description: Number of populated sockets (physical packages) with online CPUs.
              type: int
              returned: always
              sample: 2
            cores_per_socket:
              description: Physical cores per socket, counting online CPUs only.
              type: int
              returned: always
              sample: 32
            threads_per_core:
              description: Hardware threads per core (2 with SMT on).
              type: int
              returned: always
              sample: 1
            online_cpulist:
              description: The online CPUs, in the kernel's list form.
              type: str
              returned: always
              sample: 0-63
            offline_cpulist:
              description: CPUs present but offline, in the kernel's list form (empty when none); never place work on them.
              type: str
              returned: always
              sample: ''
            smt_siblings:
              description: Groups of online hardware threads that share a core, each in the kernel's list form.
              type: list
              elements: str
              returned: always
              sample: ["0,112", "1,113"]
        numa_nodes:
          description:
            - One entry per online NUMA node, in the kernel's id order. Ids can be sparse (for example 0 and 8).
          type: list
          elements: dict
          returned: always
          contains:
            id:
              description: The kernel's node number.
              type: int
              returned: always
              sample: 0
            cpulist:
              description:
                - Online CPUs of the node in the kernel's list form, for C(CPUAffinity=) or C(--cpuset-cpus); empty
                  for a CPU-less (memory-only) node.
              type: str
              returned: always
              sample: 0-31
            has_cpus:
              description:
                - False for memory-only nodes (HBM, CXL, GPU memory exposed as a node).
                  Never place CPU work on such a node.
              type: bool
              returned: always
              sample: true
            memory_total_mb:
              description: Memory of the node in MiB.
              type: int
              returned: always
              sample: 515890
            memory_free_mb:
              description: Free memory of the node in MiB when the facts were gathered.
              type: int
              returned: always
              sample: 498000
            distances:
              description: SLIT distances from this node to every node, in the order of RV(ansible_facts.gpufleet_topology.numa_nodes).
              type: list
              elements: int
              returned: always
              sample: [10, 20]
        kernel:
          description: Kernel settings that move memory behind a NUMA binding's back.
          type: dict
          returned: always
          contains:
            numa_balancing:
              description: Value of C(/proc/sys/kernel/numa_balancing); null when absent.
              type: int
              returned: always
              sample: 1
            transparent_hugepage:
              description: The selected C(enabled) and C(defrag) modes of transparent hugepages.
              type: dict
              returned: always
              sample: {"enabled": "madvise", "defrag": "madvise"}
        mps:
          description: Running CUDA MPS processes, found in procfs.
          type: dict
          returned: always
          sample: {"control_daemon_running": false, "control_pids": [], "server_pids": []}
        nvml:
          description: State of NVML on the host.
          type: dict
          returned: always
          contains:
            available:
              description: Whether NVML initialised.
              type: bool
              returned: always
              sample: true
            reason:
              description: Why there are no GPU facts, with the fix; null when there are GPUs.
              type: str
              returned: always
              sample: null
            driver_version:
              description: Version of the NVIDIA driver.
              type: str
              returned: always
              sample: 570.133.20
            cuda_driver_version:
              description: Highest CUDA version the driver supports.
              type: str
              returned: always
              sample: "12.8"
            nvml_version:
              description: Version of the NVML library.
              type: str
              returned: always
              sample: 12.570.133.20
        gpus:
          description: One entry per GPU, in NVML index order. Refer to GPUs by RV(ansible_facts.gpufleet_topology.gpus[].uuid).
          type: list
          elements: dict
          returned: always
          contains:
            index:
              description: NVML index; it can change between boots, the UUID does not.
              type: int
              returned: always
              sample: 0
            uuid:
              description: The GPU's UUID, for C(CUDA_VISIBLE_DEVICES).
              type: str
              returned: always
              sample: GPU-2f0c8a1e-6b1d-4c55-9a53-5f7c0b1d0a01
            name:
              description: Product name.
              type: str
              returned: always
              sample: NVIDIA A100 80GB PCIe
            pci_bus_id:
              description: PCI address as NVML and nvidia-smi write it (8-digit domain).
              type: str
              returned: always
              sample: "00000000:17:00.0"
            pci_device_id:
              description: PCI device and vendor id as NVML reports it, the form mig-parted's C(device-filter) uses.
              type: str
              returned: always
              sample: "0x20B510DE"
            pci_address:
              description: PCI address as sysfs and lspci write it (4-digit domain).
              type: str
              returned: always
              sample: "0000:17:00.0"
            memory_total_mb:
              description: Frame-buffer memory in MiB.
              type: int
              returned: always
              sample: 81920
            numa_node:
              description: The NUMA node the GPU hangs off; null when neither the kernel nor NVML knows.
              type: int
              returned: always
              sample: 0
            numa_node_source:
              description:
                - Where RV(ansible_facts.gpufleet_topology.gpus[].numa_node) came from.
                - V(sysfs) is the PCI device's C(numa_node). Where the kernel says -1,
                  V(nvml_memory_affinity) or V(nvml_cpu_affinity); V(unknown) when none says.
              type: str
              returned: always
              choices: [sysfs, nvml_memory_affinity, nvml_cpu_affinity, unknown]
              sample: sysfs
            local_cpulist:
              description: CPUs local to the GPU (PCI C(local_cpulist), else NVML's CPU affinity), in the kernel's list form.
              type: str
              returned: always
              sample: 0-31
            persistence_mode:
              description: Whether persistence mode is on; null where NVML does not support it.
              type: bool
              returned: always
              sample: true
            compute_mode:
              description: Compute mode; null where NVML does not support it.
              type: str
              returned: always
              choices: [default, exclusive_thread, prohibited, exclusive_process]
              sample: default
            mig:
              description:
                - MIG capability, modes and the instances that exist.
                - The profiles the GPU offers are in RV(ansible_facts.gpufleet_topology.mig_profiles), under its name.
              type: dict
              returned: always
              contains:
                capable:
                  description: Whether the GPU supports MIG.
                  type: bool
                  returned: always
                  sample: true
                mode_current:
                  description: Current MIG mode; null on GPUs without MIG.
                  type: str
                  returned: always
                  sample: enabled
                mode_pending:
                  description: MIG mode after the next GPU reset or reboot; differs from the current one while a change waits.
                  type: str
                  returned: always
                  sample: enabled
                gpu_instances:
                  description: Existing GPU instances, each with its compute instances and their C(MIG-...) UUIDs.
                  type: list
                  elements: dict
                  returned: always
                  sample:
                    - {"id": 1, "profile_id": 9, "profile": "3g.40gb", "placement": {"start": 4, "size": 4},
                       "compute_instances": [{"id": 0, "profile_id": 2, "slice_count": 3,
                                              "uuid": "MIG-0c8d7b3e-7f1a-5a2b-9c4d-3e2f1a0b9c8d"}]}
            compute_processes:
              description: Number of compute processes running on the GPU (all its MIG instances included).
              type: int
              returned: always
              sample: 0
            compute_pids:
              description: PIDs of those processes, as NVML sees them.
              type: list
              elements: int
              returned: always
              sample: []
        links:
          description: One entry per pair of GPUs, the matrix that C(nvidia-smi topo -m) shows.
          type: list
          elements: dict
          returned: always
          contains:
            gpus:
              description: The two GPU indices.
              type: list
              elements: int
              returned: always
              sample: [0, 1]
            uuids:
              description: The two GPU UUIDs.
              type: list
              elements: str
              returned: always
              sample: [GPU-2f0c8a1e-6b1d-4c55-9a53-5f7c0b1d0a01, GPU-2f0c8a1e-6b1d-4c55-9a53-5f7c0b1d0a02]
            topology:
              description: NVML's common-ancestor level in nvidia-smi's words.
              type: str
              returned: always
              choices: [PIX, PXB, PHB, NODE, SYS]
              sample: NODE
            nvlinks:
              description: Active NVLinks between the two, directly or through NVSwitches.
              type: int
              returned: always
              sample: 0
            label:
              description: What C(nvidia-smi topo -m) prints for the pair (C(NV18), C(NODE), C(SYS), ...).
              type: str
              returned: always
              sample: NODE
        nvswitch:
          description: Whether any GPU has NVLinks to an NVSwitch (fabric manager is needed).
          type: bool
          returned: always
          sample: false
        pci:
          description:
            - NVIDIA devices on the PCI bus, read from sysfs, so known before a driver is installed.
            - The install roles decide from it whether a host needs fabric manager.
          type: dict
          returned: always
          contains:
            gpus:
              description: PCI addresses of NVIDIA GPUs (class 0x0300 or 0x0302).
              type: list
              elements: str
              returned: always
              sample: ["0000:17:00.0", "0000:65:00.0"]
            nvswitches:
              description: PCI addresses of NVSwitches (NVIDIA bridges, class 0x0680).
              type: list
              elements: str
              returned: always
              sample: []
        mig_profiles:
          description:
            - The GPU-instance profiles NVML offers, per GPU model name; every GPU of a model offers the same.
            - Empty for models without MIG. Placements are in memory slices (8 per GPU on A100, H100 and H200).
          type: dict
          returned: always
          sample:
            NVIDIA A100 80GB PCIe:
              - {"profile_index": 0, "id": 19, "name": "1g.10gb", "slice_count": 1, "max_count": 7,
                 "memory_mb": 9728, "multiprocessor_count": 14,
                 "placements": [{"start": 0, "size": 1}, {"start": 1, "size": 1}]}
'''

from ansible.module_utils.basic import AnsibleModule, missing_required_lib

from ansible_collections.gpufleet.core.plugins.module_utils._argspec import HOST_ROOTS, argument_spec
from ansible_collections.gpufleet.core.plugins.module_utils._host import HostFiles, HostFilesError
from ansible_collections.gpufleet.core.plugins.module_utils._nvml import PYNVML_IMPORT_ERROR, PYNVML_PACKAGE, pynvml
from ansible_collections.gpufleet.core.plugins.module_utils._sysfs_topology import TopologyReadError
from ansible_collections.gpufleet.core.plugins.module_utils._topology_facts import TopologyError, gather


def main():
    module = AnsibleModule(
        argument_spec=argument_spec(HOST_ROOTS, require_gpus={'type': 'bool', 'default': False}),
        supports_check_mode=True,
    )
    if module.params['require_gpus'] and pynvml is None:
        module.fail_json(msg=missing_required_lib(PYNVML_PACKAGE), exception=PYNVML_IMPORT_ERROR)
    files = HostFiles(module.params['sysfs_root'], module.params['procfs_root'])
    try:
        facts = gather(files, pynvml, module.params['require_gpus'])
    except (HostFilesError, TopologyReadError, TopologyError) as exc:
        module.fail_json(msg=str(exc))
    module.exit_json(changed=False, ansible_facts={'gpufleet_topology': facts})


if __name__ == '__main__':
    main()
