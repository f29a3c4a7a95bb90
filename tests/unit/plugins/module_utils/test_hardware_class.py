# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""A hardware class as a contract (module_utils/_hardware_class.py): the promise, the class's layouts and services
against it, and a host against it; and the MIG catalog validate uses against the simulator's tables (both from
NVIDIA's published profiles), with how each of its tables divides a GPU."""

from __future__ import absolute_import, division, print_function

import json
import os

import pytest

from ansible_collections.gpufleet.core.plugins.module_utils import _hardware_class as hc
from ansible_collections.gpufleet.core.plugins.module_utils._mig_catalog import (
    PROFILES, WIDEST_DIVISION, geometry, profiles)
from ansible_collections.gpufleet.core.plugins.module_utils._topology import Topology

from ...support.topology import A100, gpu, node, topology
from ...conftest import SIM_DIR

A100_CLASS = {'count': 4, 'model': A100}
A100_NUMA = {'nodes': 2, 'cpus_per_node': 8, 'gpus_per_node': {0: 2, 1: 2}}


def promise(numa=None, gpus=None):
    found, problems = hc.contract(gpus or A100_CLASS, A100_NUMA if numa is None else numa)
    assert problems == [], problems
    return found


def test_the_catalog_is_the_simulators_table_of_every_mig_model():
    with open(os.path.join(SIM_DIR, 'gpu_models.json')) as handle:
        models = json.load(handle)['models']
    for model in models.values():
        if not model['mig']:
            assert profiles(model['name']) is None
            continue
        expected = [(p['name'], p['id'], p['compute_slices'], p['memory_slices'], p['max_count'],
                     tuple(p['placement_starts']), p['memory_mb']) for p in model['mig']]
        assert list(PROFILES[model['name']]) == expected, model['name']
    # The mission's fact: profile 19 is 1g.10gb on an A100 80GB, and at most two 3g.40gb fit.
    table = dict((p['name'], p) for p in profiles(A100))
    assert table['1g.10gb']['id'] == 19 and table['3g.40gb']['max_count'] == 2


def test_each_model_divides_as_its_table_says_and_an_instance_lies_from_its_memory_start():
    for model in PROFILES:
        widest = max(profiles(model), key=lambda profile: profile['slice_count'])
        furthest = max(placement['start'] + placement['size']
                       for profile in profiles(model) for placement in profile['placements'])
        assert (geometry(model).compute_slices, geometry(model).memory_slices) == (widest['slice_count'], furthest)
    assert WIDEST_DIVISION == (7, 8)
    a100 = geometry(A100)
    # NVIDIA's two 3g: memory slices 0-3 and 4-7, compute slices 0-2 and 4-6 (compute slice 3 idle).
    assert a100.span('3g.40gb', 0) == {'start': 0, 'memory_slices': 4, 'compute_start': 0, 'compute_slices': 3}
    assert a100.span('3g.40gb', 4) == {'start': 4, 'memory_slices': 4, 'compute_start': 4, 'compute_slices': 3}
    assert a100.span('1g.20gb', 6) == {'start': 6, 'memory_slices': 2, 'compute_start': 6, 'compute_slices': 1}
    assert a100.span('7g.80gb', 0) == {'start': 0, 'memory_slices': 8, 'compute_start': 0, 'compute_slices': 7}
    assert a100.span('3g.40gb', 7) is None and a100.span('3g.40gb', -1) is None and a100.span('3g.40gb', None) is None
    assert a100.placement('1g.20gb', 6) == {'start': 6, 'size': 2} and a100.placement('1g.20gb', 5) is None
    # A profile the table lacks lies where the fact says, or nowhere.
    assert a100.span('2g.24gb', 2, memory=2, compute=2)['compute_start'] == 2 and a100.span('2g.24gb', 2) is None
    # A model the catalog lacks: its host's table, else the widest division with no profiles of its own.
    a30 = [{'name': '4g.24gb', 'slice_count': 4, 'placements': [{'start': 0, 'size': 4}]},
           {'name': '1g.6gb', 'slice_count': 1, 'placements': [{'start': 3, 'size': 1}]}]
    assert (geometry('NVIDIA A30', a30).compute_slices, geometry('NVIDIA A30', a30).memory_slices) == (4, 4)
    unknown = geometry('NVIDIA A30')
    assert (unknown.compute_slices, unknown.memory_slices, unknown.profiles) == (7, 8, {})
    # A table that does not say where instances lie gives way to NVIDIA's.
    assert geometry(A100, [{'name': '1g.10gb', 'memory_mb': 9728}]).profiles == a100.profiles


@pytest.mark.parametrize('gpus, numa, words', [
    ({'count': 4, 'model': A100, 'nodes': 2}, {}, 'gpufleet_expected_gpus has nodes'),
    ({'count': '4x', 'model': A100}, {}, 'gpufleet_expected_gpus.count is the string "4x"'),
    (A100_CLASS, {'nodes': 0}, 'gpufleet_expected_numa.nodes is the integer 0'),
    (A100_CLASS, {'gpus_per_node': {0: 4, 1: 4}}, 'adds up to 8 GPUs'),
    (A100_CLASS, {'gpus_per_node': [2, 2]}, 'gpufleet_expected_numa.gpus_per_node is the list [2, 2]'),
    (A100_CLASS, 'two sockets', 'gpufleet_expected_numa is the string "two sockets"'),
])
def test_a_wrong_promise_is_named_with_its_value(gpus, numa, words):
    _found, problems = hc.contract(gpus, numa)
    assert len(problems) == 1 and words in problems[0], problems


def test_the_reference_pair_fits_the_a100_class():
    layouts = [{'gpus': [2, 3], 'layout': ['3g.40gb', '3g.40gb']}]
    services = [{'name': 'llm', 'gpus': 2, 'cpus': 8}, {'name': 'imagegen', 'gpus': {'mig_profile': '3g.40gb'}}]
    assert hc.plan_problems(promise(), services, layouts) == []
    devices, mig_gpus = hc.mig_devices(promise(), layouts, [])
    assert devices == {'3g.40gb': 4} and mig_gpus == set([2, 3])


@pytest.mark.parametrize('services, layouts, words', [
    ([{'name': 'llm', 'gpus': 3}], [], 'service llm asks for 3 whole GPUs on one NUMA node'),
    ([{'name': 'llm', 'gpus': 3, 'cpus': 9}], [], 'service llm asks for 9 CPUs'),
    ([{'name': 'a', 'gpus': 2}, {'name': 'b', 'gpus': 1}], [{'gpus': [0, 1], 'layout': ['7g.80gb']}],
     'the services ask for 3 whole GPUs (a 2, b 1), but the class has 4 GPU(s), 2 of them in MIG mode'),
    ([{'name': 'img', 'gpus': {'mig_profile': '1g.10gb', 'count': 3}}], [{'gpus': 3, 'layout': ['1g.10gb', '1g.10gb']}],
     'the services ask for 3 MIG device(s) of profile 1g.10gb (img 3), but the class\'s mig_layouts create 2'),
    # gpus left out or null is one GPU, as the planner reads it (_service_specs).
    ([{'name': 'a', 'gpus': 2}, {'name': 'b', 'gpus': None}], [{'gpus': [0, 1], 'layout': ['7g.80gb']}],
     'the services ask for 3 whole GPUs (a 2, b 1)'),
    ([{'name': 'a', 'gpus': 2}, {'name': 'b', 'cpus': 2}], [{'gpus': [0, 1], 'layout': ['7g.80gb']}],
     'the services ask for 3 whole GPUs (a 2, b 1)'),
    ([], [{'gpus': 'all', 'layout': ['4g.40gb', '4g.40gb']}], '4g.40gb allows at most 1 per GPU'),
    ([], [{'gpus': ['NVIDIA H100 80GB HBM3'], 'layout': ['7g.80gb']}], "selects the string \"NVIDIA H100 80GB HBM3\""),
])
def test_what_the_class_cannot_give_is_named(services, layouts, words):
    problems = hc.plan_problems(promise(), services, layouts)
    assert any(words in problem for problem in problems), problems


def test_services_may_cross_nodes_when_they_say_so_and_uuid_layouts_wait_for_the_host():
    services = [{'name': 'llm', 'gpus': 3, 'cpus': 12, 'allow_cross_numa': True},
                {'name': 'imagegen', 'gpus': {'mig_profile': '3g.40gb'}}]
    layouts = [{'gpus': ['GPU-5f1c'], 'layout': ['3g.40gb', '3g.40gb']}]
    assert hc.plan_problems(promise(), services, layouts) == []


def _host(nodes_cpus, gpu_nodes):
    nodes = [node(index, cpus) for index, cpus in enumerate(nodes_cpus)]
    return Topology(topology(nodes, [gpu(i, 'GPU-%d' % i, bus=0x17 + i, node=n) for i, n in enumerate(gpu_nodes)]))


def test_a_host_that_keeps_the_promise_differs_in_nothing():
    assert hc.host_differences(promise(), _host([range(0, 8), range(8, 16)], [0, 0, 1, 1])) == []


def test_sub_numa_clustering_a_gpu_on_the_wrong_node_and_fewer_cpus_are_named():
    snc = hc.host_differences(promise(), _host([range(0, 4), range(4, 8), range(8, 12), range(12, 16)], [0, 1, 2, 3]))
    assert snc[0].startswith('the class promises 2 NUMA node(s) with CPUs and the host has 4 (0, 1, 2, 3): is '
                             'Sub-NUMA Clustering or NPS switched on')
    assert 'node 0 has 4' in snc[1] and 'GPU-3 on node 3' in snc[2]
    moved = hc.host_differences(promise(), _host([range(0, 8), range(8, 16)], [0, 0, 0, 1]))
    assert moved == ['the class promises GPUs per NUMA node {0: 2, 1: 2} and the host has {0: 3, 1: 1} (GPU-0 on '
                     'node 0, GPU-1 on node 0, GPU-2 on node 0, GPU-3 on node 1)']
    # A memory-only node (CXL, HBM) is not a node with CPUs.
    assert hc.host_differences(promise(), _host([range(0, 8), range(8, 16), []], [0, 0, 1, 1])) == []


def test_a_host_missing_a_gpu_or_with_another_model_is_named_with_the_fix():
    host = _host([range(0, 8), range(8, 16)], [0, 0, 1])
    differences = hc.class_differences(promise(numa={}), host)
    assert differences == ['gpufleet_expected_gpus promises 4 x %s, but the host has 3 (%s): move the host to the '
                           'hardware-class group that matches it, or find the missing GPU (nvidia-smi, dmesg)'
                           % (A100, ', '.join([A100] * 3))]
    shape = hc.class_differences(promise(), _host([range(0, 4), range(4, 8), range(8, 12), range(12, 16)], [0, 1, 2, 3]))
    assert len(shape) == 1 and shape[0].endswith(": fix the host's BIOS or cabling, or move it to the hardware-class "
                                                 "group that matches it (gpufleet_expected_numa)")
    assert hc.class_differences(promise(), _host([range(0, 8), range(8, 16)], [0, 0, 1, 1])) == []
