# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import absolute_import, division, print_function

import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.gpufleet.core.plugins.filter.topology import FilterModule

FILTERS = FilterModule().filters()

# A hand-written fact in the shape topology_facts returns: node 4 is memory-only.
TOPOLOGY = {
    'numa_nodes': [
        {'id': 0, 'cpus': [0, 2, 4, 6]},
        {'id': 2, 'cpus': [1, 3, 5, 7]},
        {'id': 4, 'cpus': []},
    ],
    'gpus': [
        {'index': 0, 'uuid': 'GPU-aaa', 'numa_node': 2, 'mig': {'gpu_instances': [
            {'compute_instances': [{'uuid': 'MIG-bbb'}]}]}},
        {'index': 1, 'uuid': 'GPU-ccc', 'numa_node': None, 'mig': {'gpu_instances': []}},
        {'index': 2, 'uuid': 'GPU-ddd', 'numa_node': 4, 'mig': {'gpu_instances': []}},
    ],
}


def test_cpulist_round_trip():
    assert FILTERS['cpulist_expand']('0-2,8') == [0, 1, 2, 8]
    assert FILTERS['cpulist_compact']([8, 2, 1, 0]) == '0-2,8'


@pytest.mark.parametrize('ref', ['GPU-aaa', 'MIG-bbb', 0, '0'])
def test_gpu_numa_cpulist_by_uuid_mig_uuid_or_index(ref):
    assert FILTERS['gpu_numa_cpulist'](TOPOLOGY, ref) == '1,3,5,7'


@pytest.mark.parametrize('ref, words', [
    ('GPU-zzz', 'no GPU GPU-zzz'),
    ('GPU-ccc', 'NUMA node of GPU-ccc is unknown'),
    ('GPU-ddd', 'has no CPUs'),
])
def test_gpu_numa_cpulist_refuses_what_it_cannot_answer(ref, words):
    with pytest.raises(AnsibleFilterError) as caught:
        FILTERS['gpu_numa_cpulist'](TOPOLOGY, ref)
    assert words in str(caught.value)


@pytest.mark.parametrize('name, value', [('cpulist_expand', '0-'), ('cpulist_compact', '0-3'),
                                         ('gpu_numa_cpulist', {'not': 'a topology'})])
def test_bad_input_names_the_filter(name, value):
    args = (value, 0) if name == 'gpu_numa_cpulist' else (value,)
    with pytest.raises(AnsibleFilterError) as caught:
        FILTERS[name](*args)
    assert 'gpufleet.core.%s' % name in str(caught.value)
