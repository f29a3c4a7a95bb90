# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""place_services through the filter plugin: the contract the gpu_services role reads, and errors as AnsibleFilterError."""

from __future__ import absolute_import, division, print_function

import json

import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.gpufleet.core.plugins.filter.placement import FilterModule

PLACE = FilterModule().filters()['place_services']

# Node 0: CPUs 0-3 (SMT siblings 0,2 and 1,3); node 1: CPUs 4-7 (4,6 and 5,7).
TOPOLOGY = {
    'cpu': {'smt_siblings': ['0,2', '1,3', '4,6', '5,7']},
    'numa_nodes': [{'id': 0, 'cpus': [0, 1, 2, 3], 'has_cpus': True}, {'id': 1, 'cpus': [4, 5, 6, 7], 'has_cpus': True}],
    'gpus': [{'index': 0, 'uuid': 'GPU-b', 'pci_bus_id': '00000000:B1:00.0', 'numa_node': 1, 'name': 'X',
              'memory_total_mb': 81920, 'mig': {'mode_current': 'disabled', 'gpu_instances': []}},
             {'index': 1, 'uuid': 'GPU-a', 'pci_bus_id': '00000000:17:00.0', 'numa_node': 0, 'name': 'X',
              'memory_total_mb': 81920, 'mig': {'mode_current': 'disabled', 'gpu_instances': []}}],
}


def test_the_contract():
    plan = PLACE(TOPOLOGY, [{'name': 'llm', 'cpus': 2, 'image': 'registry/llm:1', 'environment': {'A': '1'}},
                            {'name': 'emb', 'gpus': {'mps': {'active_thread_percentage': 25}}, 'cpus': 1}],
                 reserved_cpus='0,2', mps_daemons=[{'device': 'GPU-b', 'user': 'infer'}])
    llm, emb = plan
    # Node 0 loses its reserved core: node 1 has more free cores, but GPU-b is MPS's, so llm takes GPU-a on node 0.
    assert llm == {
        'name': 'llm', 'gpus': ['GPU-a'], 'gpu_uuids': ['GPU-a'], 'numa_node': 0, 'cpus': [1, 3], 'cpulist': '1,3',
        'mems': [0], 'memlist': '0', 'memory_policy': 'bind', 'exclusive': True, 'mps': None,
        'environment': {'CUDA_VISIBLE_DEVICES': 'GPU-a', 'CUDA_DEVICE_ORDER': 'PCI_BUS_ID'},
        'explanation': llm['explanation'],
    }
    assert 'GPU-a (bus 00000000:17:00.0)' in llm['explanation'] and 'node 0' in llm['explanation']
    assert emb['environment'] == {
        'CUDA_VISIBLE_DEVICES': 'GPU-b', 'CUDA_DEVICE_ORDER': 'PCI_BUS_ID',
        'CUDA_MPS_PIPE_DIRECTORY': '/run/gpufleet-mps/GPU-b', 'CUDA_MPS_ACTIVE_THREAD_PERCENTAGE': '25'}
    assert emb['mps']['user'] == 'infer' and (emb['numa_node'], emb['cpus']) == (1, [4, 6])
    # What the role writes to /etc/gpufleet/placement.json and reads back as previous.
    assert PLACE(TOPOLOGY, [{'name': 'emb', 'gpus': {'mps': {'active_thread_percentage': 25}}, 'cpus': 1}],
                 reserved_cpus=[0, 2], previous=json.loads(json.dumps(plan)),
                 mps_daemons=[{'device': 'GPU-b', 'user': 'infer'}]) == [emb]


@pytest.mark.parametrize('args, words', [
    (({'not': 'a topology'}, []), "the input must be ansible_facts['gpufleet_topology']"),
    ((TOPOLOGY, [{'name': 'a', 'gpus': 3}]), 'service a: needs 3 whole GPUs (exclusive)'),
    ((TOPOLOGY, 'a'), 'services must be a list'),
    ((TOPOLOGY, [{'name': 'a', 'cpus': 2}], '0-'), 'malformed CPU list'),
    ((TOPOLOGY, [{'name': 'a', 'gpus': {'mps': {}}}], None, None, [{'device': 'GPU-zzz', 'user': 'u'}]),
     'mps_daemons: The MPS plan cannot work'),
])
def test_errors_are_filter_errors_that_name_the_filter(args, words):
    with pytest.raises(AnsibleFilterError) as caught:
        PLACE(*args)
    assert str(caught.value).startswith('gpufleet.core.place_services: ')
    assert words in str(caught.value)
