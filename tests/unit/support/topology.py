# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""The one builder of hand-made gpufleet_topology facts, in the layout topology_facts returns.

Tests that need a host the simulator does not describe build it here rather than writing the dict out:

    fact = topology(nodes=[node(0, range(0, 8)), node(1, range(8, 16))],
                    gpus=[gpu(0, 'GPU-a', bus='17', node=0),
                          gpu(1, 'GPU-b', bus='B1', node=1, instances=[mig_instance('1g.10gb', ['MIG-x'], start=0)])],
                    smt_siblings=['0,8', ...], mig_profiles=A100_PROFILES)

Only the keys the collection's model reads are filled in; a test that needs another key adds it to the result.
"""

from __future__ import absolute_import, division, print_function

from ansible_collections.gpufleet.core.plugins.module_utils._cpulist import format_cpulist, parse_cpulist
from ansible_collections.gpufleet.core.plugins.module_utils._topology import FACT_VERSION

A100 = 'NVIDIA A100 80GB PCIe'
# The A100's profiles as far as placement and MPS read them (name and memory).
A100_PROFILES = {A100: [{'name': '1g.10gb', 'memory_mb': 9728}, {'name': '3g.40gb', 'memory_mb': 40192}]}


def node(node_id, cpus):
    """A NUMA node with these CPUs; no CPUs makes it a memory-only node."""
    cpus = sorted(cpus)
    return {'id': node_id, 'cpulist': format_cpulist(cpus), 'has_cpus': bool(cpus)}


def node_cpus(found):
    """The CPUs of a node() (or of a node of a fact), as a sorted list."""
    return parse_cpulist(found['cpulist'])


def bus_id(bus):
    """'17' or 0x17 -> '00000000:17:00.0'; a full bus id is kept."""
    if isinstance(bus, int):
        bus = '%02X' % bus
    return bus if ':' in bus else '00000000:%s:00.0' % bus


def mig_instance(profile, uuids, start=None):
    """A GPU instance of a profile with one compute instance per UUID (ids 0, 1, ...)."""
    found = {'profile': profile,
             'compute_instances': [{'id': position, 'uuid': uuid} for position, uuid in enumerate(uuids)]}
    if start is not None:
        found['placement'] = {'start': start}
    return found


def gpu(index, uuid, bus=None, node=0, name=A100, memory_mb=81920, instances=None, mig_mode=None):
    """A GPU; ``instances`` (mig_instance()) puts it in MIG mode, as does mig_mode='enabled'. ``index`` None leaves the
    index out; ``bus`` None leaves the PCI bus id out."""
    found = {'index': index, 'uuid': uuid, 'name': name, 'memory_total_mb': memory_mb, 'numa_node': node,
             'mig': {'capable': True, 'mode_current': mig_mode or ('enabled' if instances else 'disabled'),
                     'gpu_instances': list(instances or [])}}
    if index is None:
        del found['index']
    if bus is not None:
        found['pci_bus_id'] = bus_id(bus)
    return found


def topology(nodes, gpus=(), smt_siblings=None, mig_profiles=None):
    """A gpufleet_topology fact. ``smt_siblings``: the kernel's sibling lists ('0,16'); None gives each CPU a core of
    its own, as on a host without SMT."""
    online = sorted(cpu for item in nodes for cpu in node_cpus(item))
    return {
        'version': FACT_VERSION,
        'cpu': {'online_cpulist': format_cpulist(online), 'offline_cpulist': '',
                'smt_siblings': list(smt_siblings) if smt_siblings is not None else [str(cpu) for cpu in online]},
        'numa_nodes': list(nodes),
        'gpus': list(gpus),
        'mig_profiles': dict(mig_profiles or {}),
    }


def as_version_1(fact):
    """The same fact in layout version 1, as a release before version 2 cached it: CPU sets also as integer lists,
    ``schema_version``, and no ``version`` (the oldest releases wrote none)."""
    old = dict(fact, schema_version=1)
    del old['version']
    cpu = dict(fact['cpu'])
    cpu['online'] = parse_cpulist(cpu['online_cpulist'])
    cpu['offline'] = parse_cpulist(cpu.pop('offline_cpulist', ''))
    old['cpu'] = cpu
    old['numa_nodes'] = [dict(item, cpus=node_cpus(item)) for item in fact['numa_nodes']]
    old['gpus'] = [dict(item, local_cpus=parse_cpulist(item['local_cpulist'])) if 'local_cpulist' in item else item
                   for item in fact.get('gpus', [])]
    return old
