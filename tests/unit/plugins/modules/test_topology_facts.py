# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""topology_facts against every simulated host.

Every expected value below is written by hand from the host description in
tests/nvml_sim/hosts/, never taken from an earlier run of the module.
"""

from __future__ import absolute_import, division, print_function

import os

import pytest
import yaml

from ansible_collections.gpufleet.core.plugins.module_utils._topology import FACT_VERSION, Topology, TopologyModelError
from ansible_collections.gpufleet.core.plugins.modules import topology_facts

from ...conftest import ModuleFail
from ...support.topology import as_version_1


def gather(run_module, paths, **extra):
    args = {'sysfs_root': paths['sysfs_root'], 'procfs_root': paths['procfs_root']}
    args.update(extra)
    result = run_module(topology_facts, args)
    assert result['changed'] is False
    return result['ansible_facts']['gpufleet_topology']


def test_reference_a100_host(run_module, sim_host):
    topo = gather(run_module, sim_host('reference-a100'))
    cpu = topo['cpu']
    assert cpu['model'] == 'Intel(R) Xeon(R) Gold 6338 CPU @ 2.00GHz'
    assert (cpu['sockets'], cpu['cores_per_socket'], cpu['threads_per_core']) == (2, 32, 1)
    assert cpu['online_cpulist'] == '0-63'
    assert cpu['offline_cpulist'] == ''
    assert cpu['smt_siblings'][:2] == ['0', '1'] and len(cpu['smt_siblings']) == 64

    assert [node['id'] for node in topo['numa_nodes']] == [0, 1]
    node0, node1 = topo['numa_nodes']
    assert node0['cpulist'] == '0-31' and node1['cpulist'] == '32-63'
    assert node0['has_cpus'] and node1['has_cpus']
    assert (node0['memory_total_mb'], node1['memory_total_mb']) == (524288, 524288)
    assert (node0['memory_free_mb'], node1['memory_free_mb']) == (501760, 509952)
    assert node0['distances'] == [10, 20] and node1['distances'] == [20, 10]

    assert topo['kernel'] == {'numa_balancing': 1,
                              'transparent_hugepage': {'enabled': 'madvise', 'defrag': 'madvise'}}
    assert topo['nvml'] == {'available': True, 'reason': None, 'driver_version': '570.133.20',
                            'cuda_driver_version': '12.8', 'nvml_version': '12.570.133.20'}
    assert topo['mps'] == {'control_daemon_running': False, 'control_pids': [], 'server_pids': []}

    gpus = topo['gpus']
    assert [gpu['index'] for gpu in gpus] == [0, 1, 2, 3]
    assert [gpu['uuid'] for gpu in gpus] == ['GPU-5c6f7a2e-1b3d-4e8f-9a0b-1c2d3e4f5a6%d' % i for i in range(4)]
    assert [gpu['pci_bus_id'] for gpu in gpus] == [
        '00000000:17:00.0', '00000000:31:00.0', '00000000:98:00.0', '00000000:B1:00.0']
    assert [gpu['pci_address'] for gpu in gpus] == ['0000:17:00.0', '0000:31:00.0', '0000:98:00.0', '0000:b1:00.0']
    assert [gpu['numa_node'] for gpu in gpus] == [0, 0, 1, 1]
    assert set(gpu['numa_node_source'] for gpu in gpus) == {'sysfs'}
    assert [gpu['local_cpulist'] for gpu in gpus] == ['0-31', '0-31', '32-63', '32-63']
    for gpu in gpus:
        assert gpu['name'] == 'NVIDIA A100 80GB PCIe'
        assert gpu['memory_total_mb'] == 81920
        assert gpu['persistence_mode'] is True
        assert gpu['compute_mode'] == 'default'
        assert gpu['mig']['capable'] is True
        assert (gpu['mig']['mode_current'], gpu['mig']['mode_pending']) == ('disabled', 'disabled')
        assert gpu['mig']['gpu_instances'] == []
        assert gpu['compute_processes'] == 0 and gpu['compute_pids'] == []

    assert list(topo['mig_profiles']) == ['NVIDIA A100 80GB PCIe']
    profiles = dict((p['name'], p) for p in topo['mig_profiles']['NVIDIA A100 80GB PCIe'])
    assert sorted(profiles) == ['1g.10gb', '1g.10gb+me', '1g.20gb', '2g.20gb', '3g.40gb', '4g.40gb', '7g.80gb']
    assert (profiles['1g.10gb']['id'], profiles['1g.10gb']['max_count']) == (19, 7)
    assert (profiles['3g.40gb']['id'], profiles['3g.40gb']['max_count']) == (9, 2)
    assert profiles['3g.40gb']['placements'] == [{'start': 0, 'size': 4}, {'start': 4, 'size': 4}]

    labels = dict((tuple(link['gpus']), link['label']) for link in topo['links'])
    assert labels == {(0, 1): 'NODE', (0, 2): 'SYS', (0, 3): 'SYS', (1, 2): 'SYS', (1, 3): 'SYS', (2, 3): 'NODE'}
    assert all(link['nvlinks'] == 0 for link in topo['links'])
    assert topo['nvswitch'] is False
    assert topo['pci'] == {'gpus': ['0000:17:00.0', '0000:31:00.0', '0000:98:00.0', '0000:b1:00.0'], 'nvswitches': []}


def test_dgx_h100_host_with_smt_and_nvswitch(run_module, sim_host):
    topo = gather(run_module, sim_host('dgx-h100'))
    cpu = topo['cpu']
    assert (cpu['sockets'], cpu['cores_per_socket'], cpu['threads_per_core']) == (2, 56, 2)
    assert cpu['online_cpulist'] == '0-223'
    assert '0,112' in cpu['smt_siblings'] and '56,168' in cpu['smt_siblings']
    assert '111,223' in cpu['smt_siblings'] and len(cpu['smt_siblings']) == 112
    assert [node['cpulist'] for node in topo['numa_nodes']] == ['0-55,112-167', '56-111,168-223']
    assert topo['numa_nodes'][0]['distances'] == [10, 21]
    assert topo['kernel']['numa_balancing'] == 0
    assert topo['kernel']['transparent_hugepage']['enabled'] == 'always'

    gpus = topo['gpus']
    assert len(gpus) == 8
    assert [gpu['numa_node'] for gpu in gpus] == [0, 0, 0, 0, 1, 1, 1, 1]
    assert gpus[4]['local_cpulist'] == '56-111,168-223'
    assert set(gpu['name'] for gpu in gpus) == {'NVIDIA H100 80GB HBM3'}
    assert gpus[7]['compute_pids'] == [31337] and gpus[7]['compute_processes'] == 1
    assert sum(gpu['compute_processes'] for gpu in gpus) == 1

    assert len(topo['links']) == 28  # 8 choose 2
    assert set(link['label'] for link in topo['links']) == {'NV18'}
    levels = dict((tuple(link['gpus']), link['topology']) for link in topo['links'])
    assert levels[(0, 3)] == 'NODE' and levels[(3, 4)] == 'SYS'
    assert topo['nvswitch'] is True
    # From sysfs alone, as a host without a driver shows them: what decides whether fabric manager is needed.
    assert topo['pci']['nvswitches'] == ['0000:05:00.0', '0000:06:00.0', '0000:07:00.0', '0000:08:00.0']
    assert len(topo['pci']['gpus']) == 8 and '0000:18:00.0' in topo['pci']['gpus']


def test_single_h200_with_mig_instances_and_mps(run_module, sim_host):
    topo = gather(run_module, sim_host('single-h200'))
    assert (topo['cpu']['sockets'], topo['cpu']['cores_per_socket'], topo['cpu']['threads_per_core']) == (1, 48, 2)
    assert '0,48' in topo['cpu']['smt_siblings']
    gpu = topo['gpus'][0]
    assert gpu['name'] == 'NVIDIA H200'
    # The kernel says -1 for this PCI device; NVML's memory affinity names node 0.
    assert (gpu['numa_node'], gpu['numa_node_source']) == (0, 'nvml_memory_affinity')
    assert gpu['local_cpulist'] == '0-95'
    assert (gpu['mig']['mode_current'], gpu['mig']['mode_pending']) == ('enabled', 'enabled')
    instances = [(gi['id'], gi['profile'], gi['placement']['start'], gi['placement']['size'],
                  [(ci['id'], ci['slice_count'], ci['uuid']) for ci in gi['compute_instances']])
                 for gi in gpu['mig']['gpu_instances']]
    assert instances == [
        (2, '3g.71gb', 4, 4, [(0, 3, 'MIG-1a2b3c4d-5e6f-5a7b-8c9d-0e1f2a3b4c01')]),
        (3, '2g.35gb', 0, 2, [(0, 2, 'MIG-1a2b3c4d-5e6f-5a7b-8c9d-0e1f2a3b4c02')]),
        (9, '1g.18gb', 2, 1, [(0, 1, 'MIG-1a2b3c4d-5e6f-5a7b-8c9d-0e1f2a3b4c03')]),
        (10, '1g.18gb', 3, 1, [(0, 1, 'MIG-1a2b3c4d-5e6f-5a7b-8c9d-0e1f2a3b4c04')]),
    ]
    assert gpu['compute_pids'] == [5150]
    assert topo['mps'] == {'control_daemon_running': True, 'control_pids': [4242], 'server_pids': [4243]}
    assert topo['links'] == [] and topo['nvswitch'] is False


def test_cpu_only_host_reports_cpu_facts_and_why_there_are_no_gpus(run_module, sim_host):
    topo = gather(run_module, sim_host('cpu-only'))
    assert topo['gpus'] == [] and topo['links'] == []
    assert topo['nvml']['available'] is False
    assert 'driver is not installed' in topo['nvml']['reason']
    assert (topo['cpu']['sockets'], topo['cpu']['cores_per_socket'], topo['cpu']['threads_per_core']) == (1, 8, 2)
    assert [node['cpulist'] for node in topo['numa_nodes']] == ['0-15']


def test_sysfs_quirks(run_module, sim_host):
    topo = gather(run_module, sim_host('quirks'))
    cpu = topo['cpu']
    assert cpu['offline_cpulist'] == '14-15'
    assert cpu['online_cpulist'] == '0-13'
    assert cpu['cores_per_socket'] == 7  # 8 cores per socket, one of each offline
    # Sparse node ids and a CPU-less memory-only node.
    assert [node['id'] for node in topo['numa_nodes']] == [0, 2, 4]
    node0, node2, node4 = topo['numa_nodes']
    assert node0['cpulist'] == '0,2,4,6,8,10,12'
    assert node2['cpulist'] == '1,3,5,7,9,11,13'
    assert (node4['cpulist'], node4['has_cpus']) == ('', False)
    assert node4['memory_total_mb'] == 262144
    assert node4['distances'] == [50, 50, 10]

    gpu0, gpu1, gpu2 = topo['gpus']
    assert (gpu0['numa_node'], gpu0['numa_node_source'], gpu0['local_cpulist']) == (0, 'sysfs', '0,2,4,6,8,10,12')
    # PCI numa_node is -1: NVML knows node 2, and its CPU affinity excludes the offline CPU 15.
    assert (gpu1['numa_node'], gpu1['numa_node_source'], gpu1['local_cpulist']) == (
        2, 'nvml_memory_affinity', '1,3,5,7,9,11,13')
    # Nobody knows this one's node: say so, never guess.
    assert (gpu2['numa_node'], gpu2['numa_node_source']) == (None, 'unknown')
    assert gpu2['pci_address'] == '10000:e1:00.0'
    assert gpu2['mig'] == {'capable': False, 'mode_current': None, 'mode_pending': None,
                           'gpu_instances': []}
    assert sorted(topo['mig_profiles']) == ['NVIDIA A100-SXM4-40GB']  # the L40S has no MIG
    assert topo['kernel']['transparent_hugepage'] == {'enabled': 'never', 'defrag': 'never'}


def test_check_mode_returns_the_same_facts(run_module, sim_host):
    paths = sim_host('reference-a100')
    normal = gather(run_module, paths)
    checked = gather(run_module, paths, _ansible_check_mode=True)
    assert checked == normal


def test_require_gpus_fails_on_a_cpu_only_host(run_module, sim_host):
    paths = sim_host('cpu-only')
    with pytest.raises(ModuleFail) as failed:
        gather(run_module, paths, require_gpus=True)
    msg = failed.value.result['msg']
    assert msg.startswith('require_gpus is true but no GPU was found')
    assert 'driver is not installed' in msg


def test_missing_sysfs_root_names_the_option(run_module, sim_host, tmp_path):
    paths = dict(sim_host('reference-a100'), sysfs_root=str(tmp_path / 'nowhere'))
    with pytest.raises(ModuleFail) as failed:
        gather(run_module, paths)
    assert 'sysfs_root=%s is not a directory' % (tmp_path / 'nowhere') in failed.value.result['msg']


def test_a_tree_that_is_not_sysfs_is_refused(run_module, sim_host, tmp_path):
    paths = dict(sim_host('reference-a100'), sysfs_root=str(tmp_path))
    with pytest.raises(ModuleFail) as failed:
        gather(run_module, paths)
    assert 'does not look like a sysfs tree' in failed.value.result['msg']


def test_malformed_cpulist_is_reported_with_its_file(run_module, sim_host):
    paths = sim_host('reference-a100')
    with open(os.path.join(paths['sysfs_root'], 'devices/system/node/node1/cpulist'), 'w') as handle:
        handle.write('32-x\n')
    with pytest.raises(ModuleFail) as failed:
        gather(run_module, paths)
    msg = failed.value.result['msg']
    assert 'devices/system/node/node1/cpulist' in msg and "'32-x" in msg
    assert 'Traceback' not in msg


@pytest.mark.parametrize('driver_change, words', [
    ({'kernel_module_loaded': False}, 'modprobe nvidia'),
    ({'library_version_mismatch': True}, 'reboot'),
])
def test_nvml_initialisation_failures_are_explained(run_module, sim_host, tmp_path, monkeypatch,
                                                    driver_change, words):
    import json
    paths = sim_host('reference-a100')
    with open(paths['host_file']) as handle:
        host = json.load(handle)
    host['driver'].update(driver_change)
    broken = tmp_path / 'broken-host.json'
    broken.write_text(json.dumps(host))
    monkeypatch.setenv('GPUFLEET_NVML_SIM_HOST', str(broken))
    topo = gather(run_module, paths)
    assert topo['gpus'] == [] and topo['nvml']['available'] is False
    assert words in topo['nvml']['reason']
    assert len(topo['numa_nodes']) == 2  # CPU and NUMA facts survive
    with pytest.raises(ModuleFail) as failed:
        gather(run_module, paths, require_gpus=True)
    assert words in failed.value.result['msg']


def test_without_pynvml_cpu_facts_remain(run_module, sim_host, monkeypatch):
    paths = sim_host('reference-a100')
    monkeypatch.setattr(topology_facts, 'pynvml', None)
    topo = gather(run_module, paths)
    assert topo['gpus'] == []
    assert 'nvidia-ml-py' in topo['nvml']['reason']
    with pytest.raises(ModuleFail) as failed:
        gather(run_module, paths, require_gpus=True)
    assert 'nvidia-ml-py' in failed.value.result['msg']


# The fact's schema is written once, in the module's RETURN; the fact and the model keep to it.


def documented_fact():
    return yaml.safe_load(topology_facts.RETURN)['ansible_facts']['contains']['gpufleet_topology']['contains']


@pytest.mark.parametrize('host', ['reference-a100', 'cpu-only', 'single-h200'])
def test_the_fact_has_exactly_the_documented_top_level_keys_and_its_version(run_module, sim_host, host):
    topo = gather(run_module, sim_host(host))
    documented = documented_fact()
    assert sorted(topo) == sorted(documented)
    assert topo['version'] == FACT_VERSION == documented['version']['sample'] == 2
    assert all(documented[key].get('returned') == 'always' for key in documented)
    # The model reads what the module writes.
    assert Topology(topo).version == FACT_VERSION


def test_a_fact_of_another_version_is_refused_and_one_without_a_version_is_version_1(run_module, sim_host):
    topo = gather(run_module, sim_host('single-h200'))
    with pytest.raises(TopologyModelError) as caught:
        Topology(dict(topo, version=3))
    assert 'layout version 3' in str(caught.value) and 'gather it again with gpufleet.core.topology_facts' in str(caught.value)
    model = Topology(as_version_1(topo))
    assert model.version == 1
    mig = [uuid for uuid, device in model.devices.items() if device['mig']]
    assert mig and all(model.devices[uuid]['parent'] == topo['gpus'][0]['uuid'] for uuid in mig)
    assert all(model.resolve(uuid)[0]['profile'] for uuid in mig)


@pytest.mark.parametrize('host', ['reference-a100', 'dgx-h100', 'quirks'])
def test_a_version_1_fact_cached_by_an_earlier_release_gives_the_same_model(run_module, sim_host, host):
    topo = gather(run_module, sim_host(host))
    new, old = Topology(topo), Topology(as_version_1(topo))
    assert (old.version, new.version) == (1, 2)
    assert (old.nodes, old.node_cpus, old.cores, old.core_of) == (new.nodes, new.node_cpus, new.cores, new.core_of)
    # Each device also holds its GPU's fact dict, which differs by the integer lists.
    assert [dict(d, gpu=None) for d in old.devices.values()] == [dict(d, gpu=None) for d in new.devices.values()]


def _values(value):
    if isinstance(value, dict):
        return 1 + sum(_values(item) for item in value.values())
    if isinstance(value, list):
        return 1 + sum(_values(item) for item in value)
    return 1


def _keys(value):
    if isinstance(value, dict):
        return set(value) | set(key for item in value.values() for key in _keys(item))
    if isinstance(value, list):
        return set(key for item in value for key in _keys(item))
    return set()


def test_the_fact_carries_cpu_sets_as_strings_only(run_module, sim_host):
    # Version 1 of the 8x H100 host's fact had 2,114 values, 1,344 of them CPU numbers in lists the module's
    # result scrub walked for nothing.
    topo = gather(run_module, sim_host('dgx-h100'))
    assert not _keys(topo) & {'cpus', 'local_cpus', 'online', 'offline', 'schema_version'}
    assert _values(topo) < 800
    assert _values(as_version_1(topo)) > 2000
