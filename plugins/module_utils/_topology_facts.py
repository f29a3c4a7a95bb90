# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.core contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Gathers the gpufleet_topology fact from sysfs, procfs and NVML.

This is a private module: its API may change without notice.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.gpufleet.core.plugins.module_utils._cpulist import cpus_from_words, format_cpulist
from ansible_collections.gpufleet.core.plugins.module_utils._errors import GpufleetError
from ansible_collections.gpufleet.core.plugins.module_utils._fact_layout import FACT_VERSION
from ansible_collections.gpufleet.core.plugins.module_utils._nvml import Nvml, NvmlError
from ansible_collections.gpufleet.core.plugins.module_utils._sysfs_topology import (
    find_mps_processes,
    read_cpu,
    read_kernel_settings,
    read_numa_nodes,
    read_nvidia_pci,
    read_pci_locality,
    sysfs_pci_address,
)


class TopologyError(GpufleetError):
    """The topology cannot be gathered as asked; the message names the fix."""


def _node_of_cpus(cpus, nodes):
    """The one node that holds all of these CPUs, or None when they span nodes."""
    wanted = set(cpus)
    holders = [node['id'] for node in nodes if wanted and wanted <= set(node['cpus'])]
    return holders[0] if len(holders) == 1 else None


def _locate_gpu(files, nvml, handle, pci_bus_id, online, nodes):
    """NUMA node and local CPUs of a GPU: sysfs first, NVML affinity where the kernel says -1.

    Where the kernel says -1 it also lists every CPU as local, so NVML's CPU affinity is the better answer.
    """
    node, local = read_pci_locality(files, pci_bus_id)
    if node is not None:
        return node, 'sysfs', local if local is not None else []
    words = nvml.memory_affinity_words(handle, max(n['id'] for n in nodes) + 1)
    mem_nodes = cpus_from_words(words) if words else []
    source = None
    if len(mem_nodes) == 1 and mem_nodes[0] in set(n['id'] for n in nodes):
        node, source = mem_nodes[0], 'nvml_memory_affinity'
    words = nvml.cpu_affinity_words(handle, max(online) + 1 if online else 1)
    nvml_cpus = [cpu for cpu in (cpus_from_words(words) if words else []) if cpu in online]
    if node is None and nvml_cpus:
        node = _node_of_cpus(nvml_cpus, nodes)
        source = 'nvml_cpu_affinity' if node is not None else None
    return node, source or 'unknown', nvml_cpus or local or []


def _gpu_facts(files, nvml, index, handle, online, nodes, mig_profiles):
    gpu = {'index': index}
    gpu.update(nvml.identity(handle))
    gpu['pci_address'] = sysfs_pci_address(gpu['pci_bus_id'])
    node, source, local = _locate_gpu(files, nvml, handle, gpu['pci_bus_id'], online, nodes)
    gpu['numa_node'] = node
    gpu['numa_node_source'] = source
    gpu['local_cpulist'] = format_cpulist(local)
    modes = nvml.modes(handle)
    gpu['persistence_mode'] = modes['persistence_mode']
    gpu['compute_mode'] = modes['compute_mode']
    gpu['mig'] = {
        'capable': modes['mig_capable'],
        'mode_current': modes['mig_mode_current'],
        'mode_pending': modes['mig_mode_pending'],
        'gpu_instances': [],
    }
    if modes['mig_capable']:
        # Every GPU of a model offers the same profiles: ask NVML once per model.
        profiles = mig_profiles.get(gpu['name']) or nvml.mig_profiles(handle)
        if profiles:
            mig_profiles[gpu['name']] = profiles
        if modes['mig_mode_current'] == 'enabled':
            instances = nvml.gpu_instances(handle, profiles)
            devices = nvml.mig_devices(handle)
            for gi in instances:
                for ci in gi['compute_instances']:
                    ci['uuid'] = devices.get((gi['id'], ci['id']), {}).get('uuid')
            gpu['mig']['gpu_instances'] = instances
    pids = nvml.compute_pids(handle)
    gpu['compute_processes'] = len(pids)
    gpu['compute_pids'] = pids
    return gpu


def _links(nvml, handles, gpus):
    by_bus = dict((gpu['pci_bus_id'].lower(), gpu['index']) for gpu in gpus)
    nvlinks = [nvml.nvlink_peers(handle) for handle in handles]
    links = []
    for a in range(len(gpus)):
        for b in range(a + 1, len(gpus)):
            peers_a, switch_a = nvlinks[a]
            _peers_b, switch_b = nvlinks[b]
            direct = sum(count for bus, count in peers_a.items() if by_bus.get(bus) == b)
            # Through NVSwitches every pair gets the smaller of the two GPUs' switch links (nvidia-smi's NV#).
            count = direct + min(switch_a, switch_b)
            level = nvml.common_ancestor(handles[a], handles[b])
            links.append({
                'gpus': [a, b],
                'uuids': [gpus[a]['uuid'], gpus[b]['uuid']],
                'topology': level,
                'nvlinks': count,
                'label': 'NV%d' % count if count else level,
            })
    return links, any(switch for _peers, switch in nvlinks)


def _gpu_section(files, nvml_library, online, nodes):
    """NVML facts; NvmlError means no usable NVML, which the caller reports."""
    with Nvml(nvml_library) as nvml:
        system = nvml.system()
        handles = nvml.device_handles()
        mig_profiles = {}
        gpus = [_gpu_facts(files, nvml, index, handle, online, nodes, mig_profiles)
                for index, handle in enumerate(handles)]
        links, nvswitch = _links(nvml, handles, gpus)
    return system, gpus, links, nvswitch, mig_profiles


def _as_cpulists(cpu, nodes):
    """The CPU sets of the fact's layout version 2: the kernel's CPU-list strings only.

    The integer lists were most of the fact's values (a 224-CPU, 8-GPU host: 1,300 of 2,100) and every consumer
    either wanted the string or parses it once; the cpulist_expand filter gives the integers.
    """
    cpu = dict(cpu, offline_cpulist=format_cpulist(cpu['offline']))
    del cpu['online'], cpu['offline']
    return cpu, [dict((key, value) for key, value in node.items() if key != 'cpus') for node in nodes]


def gather(files, nvml_library=None, require_gpus=False):
    """Build the gpufleet_topology fact.

    nvml_library is the pynvml module (None when it could not be imported);
    CPU and NUMA facts are returned even when NVML is unusable.
    """
    files.check_roots()
    cpu = read_cpu(files)
    nodes = read_numa_nodes(files, cpu['online'])
    cpu_fact, node_facts = _as_cpulists(cpu, nodes)
    facts = {
        # The layout's version (_topology.Topology reads the versions it knows).
        'version': FACT_VERSION,
        'sources': {'sysfs_root': files.sysfs_root, 'procfs_root': files.procfs_root},
        'cpu': cpu_fact,
        'numa_nodes': node_facts,
        'kernel': read_kernel_settings(files),
        'mps': find_mps_processes(files),
        'nvml': {'available': False, 'reason': None, 'driver_version': None,
                 'cuda_driver_version': None, 'nvml_version': None},
        'gpus': [],
        'links': [],
        'nvswitch': False,
        'mig_profiles': {},
        'pci': read_nvidia_pci(files),
    }
    if nvml_library is None:
        facts['nvml']['reason'] = ('the Python package nvidia-ml-py (module pynvml) is not installed '
                                   'on the target; install it to gather GPU facts')
    else:
        try:
            system, gpus, links, nvswitch, mig_profiles = _gpu_section(
                files, nvml_library, frozenset(cpu['online']), nodes)
        except NvmlError as exc:
            facts['nvml']['reason'] = str(exc)
        else:
            facts['nvml'].update(system)
            facts['nvml']['available'] = True
            facts.update({'gpus': gpus, 'links': links, 'nvswitch': nvswitch, 'mig_profiles': mig_profiles})
            if not gpus:
                facts['nvml']['reason'] = 'NVML is working but reports no GPUs'
    if require_gpus and not facts['gpus']:
        raise TopologyError('require_gpus is true but no GPU was found: %s' % facts['nvml']['reason'])
    return facts
