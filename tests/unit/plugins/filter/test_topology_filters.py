# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import absolute_import, division, print_function

import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.gpufleet.core.plugins.filter.topology import FilterModule
from ansible_collections.gpufleet.core.plugins.module_utils._mig_layout import select_gpus
from ansible_collections.gpufleet.core.plugins.module_utils._mig_plan import LayoutError
from ansible_collections.gpufleet.core.plugins.module_utils._topology import FACT_VERSION, Topology

from ...support.topology import gpu, mig_instance, node, topology

FILTERS = FilterModule().filters()

# A hand-written fact in the shape topology_facts returns: node 4 is memory-only.
TOPOLOGY = topology(nodes=[node(0, [0, 2, 4, 6]), node(2, [1, 3, 5, 7]), node(4, [])],
                    gpus=[gpu(0, 'GPU-aaa', node=2, instances=[mig_instance('1g.10gb', ['MIG-bbb'])]),
                          gpu(1, 'GPU-ccc', node=None), gpu(2, 'GPU-ddd', node=4)])


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


# The topology model behind the filters: one index, one rule for GPU references.


def test_the_model_indexes_devices_nodes_and_cores():
    model = Topology(TOPOLOGY)
    assert model.version == FACT_VERSION and model.nodes == [0, 2, 4] and model.cpu_nodes() == [0, 2]
    assert model.devices['MIG-bbb']['parent'] == 'GPU-aaa' and model.devices['MIG-bbb']['profile'] == '1g.10gb'
    assert model.devices['MIG-bbb']['node'] == 2 and model.devices['MIG-bbb']['index'] is None
    assert model.cores[2] == [(1,), (3,), (5,), (7,)] and model.core_of[5] == (2, (5,))
    assert model.describe('MIG-bbb') == 'MIG-bbb (1g.10gb on GPU-aaa)'


@pytest.mark.parametrize('ref, names, found', [
    (0, False, ['GPU-aaa']), ('2', False, ['GPU-ddd']), ('GPU-ccc', False, ['GPU-ccc']),
    ('MIG-bbb', False, ['MIG-bbb']), (7, False, []), ('GPU-zzz', False, []), (True, False, []),
    ('NVIDIA A100 80GB PCIe', False, []), ('NVIDIA A100 80GB PCIe', True, ['GPU-aaa', 'GPU-ccc', 'GPU-ddd']),
])
def test_one_rule_resolves_gpu_references(ref, names, found):
    assert [d['uuid'] for d in Topology(TOPOLOGY).resolve(ref, names)] == found


def test_mig_layouts_select_gpus_by_the_same_rule():
    # The mig module matches NVML's GPU list, not the fact; a MIG UUID names no whole GPU there.
    nvml_gpus = [{'index': g['index'], 'uuid': g['uuid'], 'name': g['name']} for g in TOPOLOGY['gpus']]
    for ref in (0, '1', 'GPU-ddd', 'NVIDIA A100 80GB PCIe'):
        assert [g['uuid'] for g in select_gpus(ref, nvml_gpus, 'x')] == [
            d['uuid'] for d in Topology(TOPOLOGY).resolve(str(ref), names=True)]
    with pytest.raises(LayoutError) as caught:
        select_gpus('MIG-bbb', nvml_gpus, 'layout')
    assert "layout: no GPU matches 'MIG-bbb'" in str(caught.value)


def test_a_fact_of_another_version_names_the_fix():
    with pytest.raises(AnsibleFilterError) as caught:
        FILTERS['gpu_numa_cpulist'](dict(TOPOLOGY, version=7), 0)
    assert 'layout version 7' in str(caught.value) and 'gather it again with gpufleet.core.topology_facts' in str(caught.value)


def test_topology_after_mig_returns_the_projected_fact_and_names_itself_when_it_refuses():
    plan = [{'uuid': 'GPU-aaa', 'mig_wanted': {'mig_mode': 'disabled', 'gpu_instances': []}}]
    projected = FILTERS['topology_after_mig'](TOPOLOGY, plan)
    assert projected['gpus'][0]['mig']['gpu_instances'] == [] and projected['gpus'][1:] == TOPOLOGY['gpus'][1:]
    assert TOPOLOGY['gpus'][0]['mig']['gpu_instances'][0]['compute_instances'][0]['uuid'] == 'MIG-bbb'
    with pytest.raises(AnsibleFilterError) as caught:
        FILTERS['topology_after_mig'](TOPOLOGY, [{'uuid': 'GPU-aaa', 'layout_wanted': 'disabled'}])
    assert str(caught.value).startswith('gpufleet.core.topology_after_mig: GPU GPU-aaa: mig_wanted is None')
