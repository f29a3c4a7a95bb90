# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""The one topology model: the index over the fact, and the one rule that resolves a GPU reference."""

from __future__ import absolute_import, division, print_function

import pytest

from ansible_collections.gpufleet.core.plugins.module_utils import _topology
from ansible_collections.gpufleet.core.plugins.module_utils._errors import GpufleetError
from ansible_collections.gpufleet.core.plugins.module_utils._topology import (
    FACT_VERSION, Topology, TopologyModelError, match_gpu_ref)
from ...support.topology import A100, A100_PROFILES, as_version_1, gpu, mig_instance, node, topology

H100 = 'NVIDIA H100 80GB HBM3'


def _host():
    # Two nodes with SMT (siblings n and n+8); GPU 1 is split into two 1g.10gb devices; GPU 2 is another model.
    return topology(
        nodes=[node(0, list(range(0, 4)) + list(range(8, 12))), node(1, list(range(4, 8)) + list(range(12, 16))),
               node(2, [])],
        gpus=[gpu(0, 'GPU-a', bus='17', node=0),
              gpu(1, 'GPU-b', bus='31', node=0, instances=[
                  mig_instance('1g.10gb', ['MIG-b0'], start=0), mig_instance('1g.10gb', ['MIG-b1'], start=1)]),
              gpu(2, 'GPU-c', bus='B1', node=1, name=H100)],
        smt_siblings=['%d,%d' % (cpu, cpu + 8) for cpu in range(8)],
        mig_profiles=A100_PROFILES)


def test_every_device_is_indexed_by_uuid_with_its_parent_node_and_profile():
    model = Topology(_host())
    assert sorted(model.devices) == ['GPU-a', 'GPU-b', 'GPU-c', 'MIG-b0', 'MIG-b1']
    mig = model.devices['MIG-b1']
    assert (mig['mig'], mig['parent'], mig['node'], mig['profile'], mig['index']) == (True, 'GPU-b', 0, '1g.10gb', None)
    assert mig['memory_mb'] == 9728
    assert model.devices['GPU-b']['mig_mode'] and not model.devices['GPU-a']['mig_mode']
    assert model.by_index == {0: 'GPU-a', 1: 'GPU-b', 2: 'GPU-c'}


def test_each_mig_instance_lies_where_the_profile_table_places_it():
    # The fact's table names profiles without where they lie (A100_PROFILES), so NVIDIA's A100 table places them.
    fact = topology([node(0, range(0, 8))], mig_profiles=A100_PROFILES, gpus=[gpu(0, 'GPU-a', bus='17', instances=[
        mig_instance('3g.40gb', ['MIG-a0', 'MIG-a1'], start=4), mig_instance('1g.20gb', ['MIG-a2'], start=2),
        mig_instance('3g.40gb', ['MIG-a3'], start=7), mig_instance('2g.24gb', [], start=0)])])
    fact['gpus'][0]['mig']['gpu_instances'][3]['placement']['size'] = 2  # a profile no table has: the fact's word
    fact['gpus'][0]['mig']['gpu_instances'][3]['compute_instances'] = [{'id': 0, 'slice_count': 2}]
    model = Topology(fact)
    spans = [(i['profile'], i['start'], i['memory_slices'], i['compute_start'], i['compute_slices'], i['uuids'])
             for i in model.mig_instances['GPU-a']]
    # A 3g at memory slice 4 spans 4 memory slices and computes on slices 4-6; one at 7 lies past the memory slices.
    assert spans == [('3g.40gb', 4, 4, 4, 3, ['MIG-a0', 'MIG-a1']), ('1g.20gb', 2, 2, 2, 1, ['MIG-a2']),
                     ('3g.40gb', None, None, None, None, ['MIG-a3']), ('2g.24gb', 0, 2, 0, 2, [])]
    assert model.devices['MIG-a1']['instance'] is model.mig_instances['GPU-a'][0]
    assert model.devices['GPU-a']['instance'] is None
    geometry = model.mig_geometry(A100)
    assert (geometry.compute_slices, geometry.memory_slices) == (7, 8)


def test_nodes_and_whole_cores_are_parsed_once_and_memory_only_nodes_run_no_cpu_work():
    model = Topology(_host())
    assert model.nodes == [0, 1, 2]
    assert model.cpu_nodes() == [0, 1]
    assert model.cores[0] == [(0, 8), (1, 9), (2, 10), (3, 11)]
    assert model.core_of[12] == (1, (4, 12))
    assert model.gpu_node_cpus('GPU-c') == [4, 5, 6, 7, 12, 13, 14, 15]


@pytest.mark.parametrize('ref, names, expected', [
    (0, False, ['GPU-a']),
    ('2', False, ['GPU-c']),
    ('GPU-b', False, ['GPU-b']),
    ('MIG-b1', False, ['MIG-b1']),
    (A100, False, []),           # a product name names nothing unless the caller allows names
    (A100, True, ['GPU-a', 'GPU-b']),
    (7, True, []),
    ('GPU-zz', True, []),
])
def test_one_rule_resolves_every_reference(ref, names, expected):
    assert [device['uuid'] for device in Topology(_host()).resolve(ref, names)] == expected


def test_the_rule_is_the_same_on_a_plain_device_list():
    # The mig module resolves NVML's live GPU list with the same function.
    devices = [{'uuid': 'GPU-x', 'index': 0, 'name': H100}, {'uuid': 'GPU-y', 'index': 1, 'name': A100}]
    assert match_gpu_ref('1', devices) == [devices[1]]
    assert match_gpu_ref(H100, devices, names=True) == [devices[0]]


def test_a_mig_uuid_names_its_gpu_when_a_whole_gpu_is_asked_for():
    assert Topology(_host()).gpu('MIG-b0')['uuid'] == 'GPU-b'


def test_an_unknown_gpu_is_refused_naming_the_gpus_there_are():
    with pytest.raises(TopologyModelError, match=r'no GPU GPU-zz on this host \(GPUs: GPU-a, GPU-b, GPU-c\)'):
        Topology(_host()).gpu('GPU-zz')


def test_a_fact_of_another_version_is_refused_with_the_fix_and_none_means_version_1():
    fact = _host()
    fact['version'] = FACT_VERSION + 1
    with pytest.raises(TopologyModelError, match='gather it again with gpufleet.core.topology_facts'):
        Topology(fact)
    assert Topology(as_version_1(_host())).version == 1


@pytest.mark.parametrize('fact', [None, [], {'gpus': []}, {'numa_nodes': [{'id': '0', 'cpus': []}]},
                                  {'numa_nodes': [], 'gpus': [{'index': 0}]}])
def test_what_is_not_a_fact_is_refused_as_our_error(fact):
    with pytest.raises(GpufleetError, match='gpufleet'):
        Topology(fact)


def test_hosts_with_the_same_cpu_lists_share_one_core_index_equal_to_one_built_afresh():
    first, second = _host(), _host()  # equal content, separate objects, as two hosts' facts are
    one, other = Topology(first), Topology(second)
    assert other.cores is one.cores and other.core_of is one.core_of and other.node_cpus is one.node_cpus
    # Version 1's integer lists are never kept: this one is built afresh, and must say the same.
    fresh = Topology(as_version_1(_host()))
    assert fresh.cores is not one.cores
    index = (one.nodes, one.node_cpus, one.cores, one.core_of, one.core_size)
    assert (fresh.nodes, fresh.node_cpus, fresh.cores, fresh.core_of, fresh.core_size) == index
    # The node dicts are each fact's own.
    assert other.node(0) is second['numa_nodes'][0] and one.node(0) is first['numa_nodes'][0]


def test_other_cpu_lists_get_their_own_index():
    plain = Topology(_host())
    fact = _host()
    fact['cpu']['smt_siblings'] = [str(cpu) for cpu in range(16)]  # SMT off: every CPU a core of its own
    assert Topology(fact).cores[0] == [(0,), (1,), (2,), (3,), (8,), (9,), (10,), (11,)]
    assert plain.cores[0] == [(0, 8), (1, 9), (2, 10), (3, 11)]
    fact = _host()
    fact['numa_nodes'][0]['cpulist'] = '0-3'
    assert Topology(fact).cores[0] == [(0,), (1,), (2,), (3,)]


@pytest.mark.parametrize('spoil', [
    lambda fact: fact['numa_nodes'][1].update(id=True),        # True == 1 as a key, but it is no node id
    lambda fact: fact['numa_nodes'][1].update(id=1.0),
    lambda fact: fact['cpu']['smt_siblings'].__setitem__(0, True),
])
def test_a_kept_index_never_answers_for_a_fact_that_building_one_refuses(spoil):
    Topology(_host())  # keeps the index of the good fact
    fact = _host()
    spoil(fact)
    with pytest.raises(GpufleetError):
        Topology(fact)


def test_sibling_lists_joined_alike_are_told_apart():
    """The index is kept by the sibling lists joined with newlines: lists that join alike, one read well and one
    refused, must each be read as building an index reads them."""
    good, bad = _host(), _host()
    good['cpu']['smt_siblings'][:2] = ['0-\n8', '1,9']  # '0-\n8' is the range 0-8, space allowed
    bad['cpu']['smt_siblings'][:2] = ['0-', '8\n1,9']  # the same text joined, but '0-' is no CPU list
    assert Topology(good).cores[0][0] == (0, 1, 2, 3, 8)
    with pytest.raises(GpufleetError):
        Topology(bad)


def test_core_size_is_the_cpus_per_core_where_every_core_of_the_node_has_as_many():
    assert Topology(_host()).core_size == {0: 2, 1: 2, 2: None}  # node 2 has no CPUs
    fact = _host()
    fact['cpu']['smt_siblings'] = [str(cpu) for cpu in range(16)]
    assert Topology(fact).core_size == {0: 1, 1: 1, 2: None}
    fact = _host()
    fact['numa_nodes'][0]['cpulist'] = '0-3,8-10'  # CPU 11 offline: its sibling 3 is a core of its own
    assert Topology(fact).core_size[0] is None


def test_the_kept_indexes_are_bounded():
    for cpus in range(1, _topology._CPU_INDEX_LIMIT + 10):
        Topology(topology(nodes=[node(0, range(cpus))]))
    assert len(_topology._CPU_INDEXES) <= _topology._CPU_INDEX_LIMIT
    assert Topology(topology(nodes=[node(0, range(3))])).cores == {0: [(0,), (1,), (2,)]}


def test_the_summary_the_roles_format_is_read_through_the_model():
    fact = _host()
    summary = Topology(fact).summary()
    assert summary == {'gpu_names': [A100, A100, H100], 'nvml_reason': None, 'nvswitch': False,
                       'gpu_device_nodes': ['/dev/nvidia0', '/dev/nvidia1', '/dev/nvidia2']}
    # Without NVML, the GPUs on the PCI bus are named, with why NVML was not read; an NVSwitch there needs fabric manager.
    blind = dict(fact, gpus=[], nvml={'available': False, 'reason': 'libnvidia-ml.so.1 not found'},
                 pci={'gpus': ['0000:17:00.0', '0000:65:00.0'], 'nvswitches': ['0000:05:00.0']})
    assert Topology(blind).summary() == {'gpu_names': ['unknown model at 0000:17:00.0', 'unknown model at 0000:65:00.0'],
                                         'nvml_reason': 'libnvidia-ml.so.1 not found',
                                         'nvswitch': True, 'gpu_device_nodes': []}


@pytest.mark.parametrize('layout', [2, 1])
def test_offline_cpus_are_read_in_either_layout(layout):
    fact = dict(_host())
    fact['cpu'] = dict(fact['cpu'], offline_cpulist='16-17')
    fact = fact if layout == 2 else as_version_1(fact)
    assert Topology(fact).offline_cpus() == [16, 17]
