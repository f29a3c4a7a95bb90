# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.core contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Questions answered from a gpufleet_topology fact, with no system access.

Modules on targets and filter plugins on the controller (through plugin_utils)
share these. This is a private module: its API may change without notice.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type


class TopologyModelError(ValueError):
    """A question the topology cannot answer; the message says why."""


def find_gpu(topology, ref):
    """The GPU named by UUID (GPU-...), by one of its MIG UUIDs (MIG-...), or by index."""
    gpus = topology.get('gpus') or []
    text = str(ref)
    for gpu in gpus:
        if text == gpu['uuid'] or (text.isdigit() and int(text) == gpu['index']):
            return gpu
        if text.startswith('MIG-'):
            for gi in gpu.get('mig', {}).get('gpu_instances', []):
                if any(ci.get('uuid') == text for ci in gi['compute_instances']):
                    return gpu
    known = ', '.join(gpu['uuid'] for gpu in gpus) or 'none'
    raise TopologyModelError('no GPU %s on this host (GPUs: %s); name GPUs by UUID from gpufleet_topology'
                             % (text, known))


def find_node(topology, node_id):
    for node in topology.get('numa_nodes') or []:
        if node['id'] == node_id:
            return node
    raise TopologyModelError('no NUMA node %s on this host' % node_id)


def gpu_node_cpus(topology, ref):
    """The online CPUs of the NUMA node a GPU hangs off."""
    gpu = find_gpu(topology, ref)
    if gpu.get('numa_node') is None:
        raise TopologyModelError('the NUMA node of %s is unknown (neither sysfs nor NVML report it); '
                                 'pin the service to a node explicitly' % gpu['uuid'])
    node = find_node(topology, gpu['numa_node'])
    if not node['cpus']:
        raise TopologyModelError('NUMA node %d of %s has no CPUs; it cannot run CPU work'
                                 % (node['id'], gpu['uuid']))
    return list(node['cpus'])
