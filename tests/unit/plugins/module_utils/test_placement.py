# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""The placement planner on hand-written topologies and simulated hosts.

Every expected value is worked out by hand from the rules in _placement's docstring: the pinned node, then the
node with the most free cores (lowest id on a tie), then the lowest PCI bus id; CPUs as whole cores from the
low end of the node.
"""

from __future__ import absolute_import, division, print_function

import copy

import pytest

from ansible_collections.gpufleet.core.plugins.module_utils._placement import PlacementError, place
from ansible_collections.gpufleet.core.plugins.modules import topology_facts

from ...support.topology import A100_PROFILES, as_version_1, gpu, mig_instance, node, topology

# Two nodes, 8 cores each with SMT siblings i and i+16. Indices do not follow the bus order on purpose:
# index 0 is bus 98 (node 1), index 1 bus 17 (node 0), index 2 bus B1 (node 1), index 3 bus 31 (node 0).
G17, G31, G98, GB1 = 'GPU-17', 'GPU-31', 'GPU-98', 'GPU-b1'


def smt_host():
    return topology(
        nodes=[node(0, list(range(0, 8)) + list(range(16, 24))), node(1, list(range(8, 16)) + list(range(24, 32)))],
        gpus=[gpu(0, G98, '98', 1), gpu(1, G17, '17', 0), gpu(2, GB1, 'B1', 1), gpu(3, G31, '31', 0)],
        smt_siblings=['%d,%d' % (i, i + 16) for i in range(16)], mig_profiles=A100_PROFILES)


def quirky_host():
    """Sparse node ids 0 and 2, memory-only node 4; one GPU on each, and one whose node nobody knows."""
    return topology(nodes=[node(0, [0, 2, 4, 6]), node(2, [1, 3, 5, 7]), node(4, [])],
                    gpus=[gpu(0, 'GPU-n0', '41', 0), gpu(1, 'GPU-n2', '81', 2), gpu(2, 'GPU-unknown', 'E1', None),
                          gpu(3, 'GPU-hbm', 'C1', 4)])


def by_name(plan):
    return dict((entry['name'], entry) for entry in plan)


def error(*args, **kwargs):
    with pytest.raises(PlacementError) as caught:
        place(*args, **kwargs)
    return str(caught.value)


def test_one_service_and_the_exact_entry():
    plan = place(smt_host(), [{'name': 'llm', 'command': '/usr/bin/serve', 'image': 'x', 'user': 'infer'}])
    # Both nodes have 8 free cores: node 0 wins the tie; its lowest bus is 17; 4 CPUs are 2 whole cores.
    assert plan == [{
        'name': 'llm',
        'gpus': [G17],
        'gpu_uuids': [G17],
        'numa_node': 0,
        'cpus': [0, 1, 16, 17],
        'cpulist': '0-1,16-17',
        'mems': [0],
        'memlist': '0',
        'memory_policy': 'bind',
        'exclusive': True,
        'mps': None,
        'environment': {'CUDA_VISIBLE_DEVICES': G17, 'CUDA_DEVICE_ORDER': 'PCI_BUS_ID'},
        'explanation': 'GPU-17 (bus 00000000:17:00.0), exclusive, on NUMA node 0: CPUs 0-1,16-17 (2 whole cores) '
                       "from node 0, its GPU's node, lowest free first; memory bind to node 0.",
    }]


def test_services_go_to_the_node_with_the_most_free_cores():
    plan = by_name(place(smt_host(), [{'name': 'a', 'cpus': 4}, {'name': 'b', 'cpus': 6}, {'name': 'c', 'cpus': 3}]))
    # a: tie -> node 0, bus 17, cores 0 and 1. b: node 1 has 8 free cores against 6 -> bus 98, 3 cores.
    # c: node 0 has 6 free against 5 -> bus 31; 3 CPUs round up to 2 whole cores.
    assert (plan['a']['gpus'], plan['a']['cpulist']) == ([G17], '0-1,16-17')
    assert (plan['b']['gpus'], plan['b']['cpulist'], plan['b']['numa_node']) == ([G98], '8-10,24-26', 1)
    assert (plan['c']['gpus'], plan['c']['cpulist'], plan['c']['numa_node']) == ([G31], '2-3,18-19', 0)


@pytest.mark.parametrize('reserved', ['0,16', '0', [0, 16], [16]])
def test_reserved_cpus_take_their_whole_core_out(reserved):
    plan = place(smt_host(), [{'name': 'a', 'gpus': 0, 'cpus': 2, 'node': 0}], reserved_cpus=reserved)
    assert plan[0]['cpus'] == [1, 17]


def test_indices_become_uuids_and_named_gpus_are_claimed_first():
    plan = by_name(place(smt_host(), [{'name': 'x'}, {'name': 'y', 'gpus': [1]}, {'name': 'z', 'gpus': [0, 'GPU-b1']}]))
    # y names index 1 (bus 17), so x, placed first in input order, takes bus 31 instead.
    assert plan['y']['gpus'] == [G17] and plan['y']['environment']['CUDA_VISIBLE_DEVICES'] == G17
    assert plan['x']['gpus'] == [G31]
    assert plan['z']['gpus'] == [G98, GB1] and plan['z']['environment']['CUDA_VISIBLE_DEVICES'] == 'GPU-98,GPU-b1'
    assert plan['z']['numa_node'] == 1


def test_counted_cpus_go_before_all():
    plan = by_name(place(smt_host(), [{'name': 'big', 'gpus': 0, 'cpus': 'all', 'node': 0},
                                      {'name': 'small', 'gpus': 0, 'cpus': 2, 'node': 0}], reserved_cpus='7,23'))
    assert plan['small']['cpus'] == [0, 16]
    assert plan['big']['cpulist'] == '1-6,17-22'


def test_cpu_only_services_pick_the_freer_node():
    plan = by_name(place(smt_host(), [{'name': 'a', 'cpus': 8}, {'name': 'cpu', 'gpus': 0, 'cpus': 2}]))
    assert plan['cpu'] == dict(plan['cpu'], gpus=[], gpu_uuids=[], numa_node=1, cpus=[8, 24], mems=[1])
    assert plan['cpu']['environment'] == {'CUDA_VISIBLE_DEVICES': '', 'CUDA_DEVICE_ORDER': 'PCI_BUS_ID'}
    assert plan['cpu']['explanation'].startswith('CPU-only, on NUMA node 1')


def test_cpu_overlap_only_between_services_that_allow_it():
    plan = by_name(place(smt_host(), [
        {'name': 'solo', 'gpus': 0, 'cpus': 4, 'node': 0},
        {'name': 'p', 'gpus': 0, 'cpus': 'all', 'node': 0, 'allow_cpu_overlap': True},
        {'name': 'q', 'gpus': 0, 'cpus': 'all', 'node': 0, 'allow_cpu_overlap': True}]))
    assert plan['solo']['cpulist'] == '0-1,16-17'
    assert plan['p']['cpulist'] == plan['q']['cpulist'] == '2-7,18-23'
    # An overlapping service takes unshared cores first.
    plan = by_name(place(smt_host(), [
        {'name': 'p', 'gpus': 0, 'cpus': 2, 'node': 0, 'allow_cpu_overlap': True},
        {'name': 'q', 'gpus': 0, 'cpus': 2, 'node': 0, 'allow_cpu_overlap': True}]))
    assert (plan['p']['cpus'], plan['q']['cpus']) == ([0, 16], [1, 17])


def test_shareable_gpus_are_shared_and_exclusive_ones_are_not():
    shared = place(smt_host(), [{'name': 's%d' % i, 'exclusive': False, 'cpus': 2} for i in range(5)])
    assert [e['gpus'][0] for e in shared] == [G17, G98, G31, GB1, G17]
    assert all(e['exclusive'] is False and ', shared,' in e['explanation'] for e in shared)
    text = error(smt_host(), [{'name': 's%d' % i, 'cpus': 2} for i in range(5)])
    assert 'service s4: needs 1 whole GPU (exclusive) on one NUMA node with CPUs' in text
    assert 'GPU-17 taken by s0 (exclusive)' in text and 'GPU-b1 taken by s3 (exclusive)' in text
    assert 'set allow_cross_numa: true' in text and 'exclusive: false' in text


def test_a_gpu_named_twice_names_who_has_it():
    text = error(smt_host(), [{'name': 'a', 'gpus': [G17]}, {'name': 'b', 'gpus': [G17], 'exclusive': False}])
    assert 'service b: GPU-17 is already given to a (exclusive)' in text


@pytest.mark.parametrize('policy, mems', [('bind', [1]), ('preferred', [1]), ('interleave', [1])])
def test_memory_policies_on_one_node(policy, mems):
    entry = place(smt_host(), [{'name': 'a', 'gpus': [G98], 'memory_policy': policy}])[0]
    assert (entry['mems'], entry['memlist'], entry['memory_policy']) == (mems, '1', policy)


def test_cross_numa_only_when_allowed():
    text = error(smt_host(), [{'name': 'a', 'gpus': [G17, G98]}])
    assert 'its GPUs hang off NUMA nodes 0, 1; give it GPUs of one node or set allow_cross_numa: true' in text
    entry = place(smt_host(), [{'name': 'a', 'gpus': [G17, G98], 'cpus': 8, 'allow_cross_numa': True,
                                'memory_policy': 'interleave'}])[0]
    # 8 CPUs split 4 and 4: two whole cores from the low end of each node.
    assert (entry['cpulist'], entry['numa_node'], entry['mems']) == ('0-1,8-9,16-17,24-25', None, [0, 1])
    text = error(smt_host(), [{'name': 'a', 'gpus': [G17], 'node': 1}])
    assert 'pinned to node 1 but its GPUs hang off node 0; pin it to node 0 or set allow_cross_numa: true' in text


def test_a_pin_chooses_the_gpus_node():
    plan = place(smt_host(), [{'name': 'a', 'gpus': 2, 'node': 1}])
    assert plan[0]['gpus'] == [G98, GB1] and plan[0]['cpus'] == [8, 9, 24, 25]


def test_sparse_nodes_unknown_node_and_memory_only_node():
    host = quirky_host()
    plan = by_name(place(host, [{'name': 'a', 'cpus': 2}, {'name': 'b', 'cpus': 2}]))
    # Count-based requests never take the unknown-node GPU nor the one on the memory-only node.
    assert (plan['a']['gpus'], plan['a']['cpus'], plan['a']['numa_node']) == (['GPU-n0'], [0, 2], 0)
    assert (plan['b']['gpus'], plan['b']['cpus'], plan['b']['numa_node']) == (['GPU-n2'], [1, 3], 2)
    text = error(host, [{'name': 'u', 'gpus': ['GPU-unknown']}])
    assert 'the NUMA node of GPU-unknown is unknown' in text and 'node: N' in text and 'allow_cross_numa' in text
    entry = place(host, [{'name': 'u', 'gpus': ['GPU-unknown'], 'node': 2, 'cpus': 1}])[0]
    assert (entry['cpus'], entry['numa_node'], entry['mems']) == ([1], 2, [2])
    assert 'the pinned node' in entry['explanation']
    text = error(host, [{'name': 'h', 'gpus': ['GPU-hbm']}])
    assert 'NUMA node 4, which has no CPUs' in text and 'allow_cross_numa: true' in text
    entry = place(host, [{'name': 'h', 'gpus': ['GPU-hbm'], 'node': 0, 'allow_cross_numa': True, 'cpus': 1,
                          'memory_policy': 'interleave'}])[0]
    assert (entry['cpus'], entry['numa_node'], entry['mems'], entry['memlist']) == ([0], 0, [0, 4], '0,4')
    text = error(host, [{'name': 'm', 'gpus': 0, 'node': 4}, {'name': 'n', 'gpus': 0, 'node': 3}])
    assert 'service m: node 4 has no CPUs (a memory-only node) and cannot run CPU work; pin to one of 0, 2' in text
    assert 'service n: node 3 is not a NUMA node of this host (nodes: 0, 2, 4)' in text


def test_mig_devices_by_profile():
    host = smt_host()
    host['gpus'][3] = gpu(3, G31, '31', 0, instances=[
        mig_instance('3g.40gb', ['MIG-c'], start=4), mig_instance('1g.10gb', ['MIG-b'], start=1),
        mig_instance('1g.10gb', ['MIG-a'], start=0)])
    plan = by_name(place(host, [{'name': 'one', 'gpus': {'mig_profile': '1g.10gb'}, 'cpus': 2},
                                {'name': 'whole', 'gpus': 2, 'cpus': 2},
                                {'name': 'big', 'gpus': ['MIG-c'], 'cpus': 2}]))
    # The lowest placement first; the GPU in MIG mode is never given whole.
    assert plan['one']['gpus'] == ['MIG-a'] and plan['one']['gpu_uuids'] == [G31]
    assert plan['one']['environment']['CUDA_VISIBLE_DEVICES'] == 'MIG-a'
    assert plan['whole']['gpus'] == [G98, GB1]
    assert plan['big']['gpus'] == ['MIG-c'] and plan['big']['numa_node'] == 0
    assert '(3g.40gb on GPU-31)' in plan['big']['explanation']
    text = error(host, [{'name': 'w', 'gpus': [G31]}, {'name': 'v', 'gpus': {'mig_profile': '2g.20gb'}}])
    assert 'service w: GPU-31 is in MIG mode' in text and 'MIG-...' in text
    assert 'service v: there is no MIG device of profile 2g.20gb on this host (profiles present: 1g.10gb, 3g.40gb)' in text
    text = error(host, [{'name': 'x', 'gpus': {'mig_profile': '1g.10gb', 'count': 3}}])
    assert 'needs 3 MIG devices of profile 1g.10gb (exclusive) on one NUMA node with CPUs, but node 0: 2 free' in text


MPS_DAEMONS = [{'device': G17, 'user': 'infer', 'default_active_thread_percentage': 50,
                'clients': [{'name': 'listed', 'pinned_mem_limit': '10G'}]}]


def test_mps_shares():
    plan = by_name(place(smt_host(), [
        {'name': 'share', 'gpus': {'mps': {'active_thread_percentage': 30, 'pinned_mem_limit': '20G'}}, 'cpus': 2},
        {'name': 'listed', 'gpus': {'mps': {}}, 'cpus': 2},
        {'name': 'direct', 'gpus': 2, 'cpus': 2}], mps_daemons=MPS_DAEMONS))
    pipe = '/run/gpufleet-mps/' + G17
    assert plan['share']['mps'] == {'name': G17, 'device': G17, 'pipe_directory': pipe, 'user': 'infer', 'environment': {
        'CUDA_MPS_PIPE_DIRECTORY': pipe, 'CUDA_VISIBLE_DEVICES': G17, 'CUDA_MPS_ACTIVE_THREAD_PERCENTAGE': '30',
        'CUDA_MPS_PINNED_DEVICE_MEM_LIMIT': '0=20G'}}
    assert plan['share']['environment'] == dict(plan['share']['mps']['environment'], CUDA_DEVICE_ORDER='PCI_BUS_ID')
    assert (plan['share']['exclusive'], plan['share']['numa_node'], plan['share']['cpus']) == (False, 0, [0, 16])
    # A client the daemon lists keeps its limits there, with the daemon's default percentage.
    assert plan['listed']['environment']['CUDA_MPS_PINNED_DEVICE_MEM_LIMIT'] == '0=10G'
    assert plan['listed']['environment']['CUDA_MPS_ACTIVE_THREAD_PERCENTAGE'] == '50'
    assert plan['share']['explanation'].startswith('MPS share (30% of the SMs, 20G pinned memory) of GPU-17')
    # The daemon's GPU is never given directly.
    assert plan['direct']['gpus'] == [G98, GB1]
    text = error(smt_host(), [{'name': 'd', 'gpus': [G17]}, {'name': 'e', 'gpus': {'mps': {'device': G31}}},
                              {'name': 'f', 'gpus': {'mps': {'active_thread_percentage': 0}}, 'exclusive': True}],
                 mps_daemons=MPS_DAEMONS)
    assert 'service d: GPU-17 is served by an MPS daemon' in text and "{mps: {device: GPU-17}}" in text
    assert 'service e: no MPS daemon serves GPU-31 (daemons: GPU-17)' in text
    assert 'service f: active_thread_percentage must lie in 1..100, got 0' in text
    assert 'service f: an MPS share is always shared' in text
    text = error(smt_host(), [{'name': 'g', 'gpus': {'mps': {'pinned_mem_limit': '80G'}}},
                              {'name': 'h', 'gpus': {'mps': {'pinned_mem_limit': '10G'}}}], mps_daemons=MPS_DAEMONS)
    assert 'The MPS shares cannot work' in text and 'promised' in text and 'lower the limits' in text


def test_mps_plan_output_is_accepted_too():
    normalised = [{'device': G17, 'gpu_uuid': G17, 'mig_device': False, 'user': 'infer',
                   'pipe_directory': '/srv/mps/17', 'log_directory': '/var/log/x',
                   'default_active_thread_percentage': None, 'default_pinned_mem_limit_mb': 4096,
                   'memory_mb': 81920, 'clients': []}]
    entry = place(smt_host(), [{'name': 's', 'gpus': {'mps': {}}}], mps_daemons=normalised)[0]
    assert entry['environment']['CUDA_MPS_PIPE_DIRECTORY'] == '/srv/mps/17'
    assert entry['environment']['CUDA_MPS_PINNED_DEVICE_MEM_LIMIT'] == '0=4G'


def test_previous_keeps_placements_when_services_come_and_go():
    services = [{'name': 'a', 'cpus': 4}, {'name': 'b', 'cpus': 6}, {'name': 'c', 'cpus': 3},
                {'name': 'd', 'gpus': 0, 'cpus': 'all'}]
    first = place(smt_host(), services)
    # Without previous, removing b would move c (node 1 would then have the most free cores).
    assert by_name(place(smt_host(), [services[0], services[2], services[3]]))['c']['gpus'] == [G98]
    after = place(smt_host(), [services[0], services[2], services[3]], previous=first)
    assert after == [first[0], first[2], first[3]]
    grown = place(smt_host(), [{'name': 'new', 'cpus': 2}] + services[:3], previous=first[:3])
    assert grown[1:] == first[:3]
    assert (grown[0]['gpus'], grown[0]['cpus']) == ([GB1], [11, 27])


def test_a_changed_or_no_longer_valid_service_is_placed_again():
    first = place(smt_host(), [{'name': 'a', 'cpus': 4}, {'name': 'b', 'cpus': 4}])
    again = place(smt_host(), [{'name': 'a', 'cpus': 4}, {'name': 'b', 'cpus': 8}], previous=first)
    assert again[0] == first[0] and again[1]['cpus'] == [8, 9, 10, 11, 24, 25, 26, 27]
    moved = place(smt_host(), [{'name': 'a', 'cpus': 4}, {'name': 'b', 'cpus': 4}], previous=first, reserved_cpus='0')
    assert moved[1] == first[1] and moved[0]['cpus'] == [1, 2, 17, 18]
    policy = place(smt_host(), [{'name': 'a', 'cpus': 4, 'memory_policy': 'preferred'}], previous=first)
    assert policy[0]['memory_policy'] == 'preferred'


def test_previous_must_look_like_a_plan():
    assert 'previous must be the list place_services returned' in error(smt_host(), [], previous={'a': 1})
    assert 'previous entry 1 is not a placement' in error(smt_host(), [], previous=[{'name': 'a'}])


def test_every_problem_at_once():
    text = error(smt_host(), [
        {'name': 'Bad Name'}, {'name': 'dup'}, {'name': 'dup'}, {'name': 'c', 'cpus': 0},
        {'name': 'd', 'memory_policy': 'local'}, {'name': 'e', 'gpus': ['GPU-nope']}, {'name': 'f', 'exclusive': 'yes'},
        {'name': 'g', 'gpus': -1}, {'name': 'h', 'gpus': []}, {'name': 'i', 'gpus': [7]}, 'not a dict',
        {'name': 'j', 'gpus': {'mig_profile': '1g.10gb', 'count': 0, 'extra': 1}}])
    for words in ["service 1: name 'Bad Name' must match", 'service dup: the name is used by services 2 and 3',
                  "service c: cpus must be a number of logical CPUs (1 or more) or 'all', got 0",
                  "service d: memory_policy must be one of bind, preferred, interleave, got 'local'",
                  "service e: no GPU or MIG device 'GPU-nope' on this host (GPUs: GPU-17, GPU-31, GPU-98, GPU-b1)",
                  "service f: exclusive must be true or false, got 'yes'", 'service g: gpus must be 0 (CPU-only) or more',
                  'service h: gpus is an empty list; use gpus: 0', 'service i: there is no GPU index 7 on this host',
                  'service 11: a service must be a dict', 'service j: the count of MIG devices must be 1 or more',
                  'service j: gpus takes mig_profile and count, not extra']:
        assert words in text


def test_short_cpus_names_the_node_the_numbers_and_who_has_them():
    text = error(smt_host(), [{'name': 'a', 'gpus': 0, 'cpus': 10, 'node': 0},
                              {'name': 'b', 'gpus': 1, 'cpus': 8, 'node': 0}], reserved_cpus='7,23')
    assert ('service b: needs 8 CPUs (4 whole cores) on NUMA node 0, but node 0 has 4 usable CPUs of 16 (7,23 '
            'reserved; taken by a (0-4,16-20))') in text
    assert 'lower cpus' in text and 'allow_cpu_overlap' in text


@pytest.mark.parametrize('bad, words', [
    ({'gpus': []}, 'a dict with numa_nodes and gpus'),
    ({'numa_nodes': [{'id': 'x', 'cpus': []}], 'gpus': []}, 'without an integer id'),
])
def test_bad_topologies(bad, words):
    assert words in error(bad, [])


def test_bad_reserved_cpus():
    assert 'malformed CPU list' in error(smt_host(), [], reserved_cpus='0-')
    assert 'reserved_cpus must be a CPU list' in error(smt_host(), [], reserved_cpus={'a': 1})


@pytest.mark.parametrize('reserved, named', [
    ('0,500', 'CPU 500, which this host does not have'),
    ('0-1,32-33', 'CPUs 32-33, which this host does not have'),
    ([40, 7, 41, 64], 'CPUs 40-41,64, which this host does not have'),
])
def test_reserved_cpus_the_host_does_not_have_are_refused(reserved, named):
    # Issue 29: a typo such as "0,500" on a 32-CPU host used to reserve CPU 0 only, silently.
    text = error(smt_host(), [{'name': 'a', 'cpus': 2}], reserved_cpus=reserved)
    assert text == ("reserved_cpus names %s (the host's online CPUs: 0-31); fix reserved_cpus "
                    "(gpu_services_reserved_cpus) to list only CPUs of this host" % named)


def test_reserved_cpus_that_are_offline_are_refused_naming_both_kinds():
    host = smt_host()
    host['cpu']['offline_cpulist'] = '32-63'
    text = error(host, [{'name': 'a', 'cpus': 2}], reserved_cpus='0,40,200')
    assert text == ("reserved_cpus names CPU 200, which this host does not have, and CPU 40, which is offline (the "
                    "host's online CPUs: 0-31); fix reserved_cpus (gpu_services_reserved_cpus) to list only CPUs of "
                    "this host, or bring the offline ones online and gather the topology again")


def test_reserved_cpus_of_a_version_1_fact_are_checked_against_its_cpus():
    host = as_version_1(smt_host())
    host['cpu']['offline'] = [32, 33]
    assert 'CPUs 32-33, which are offline' in error(host, [], reserved_cpus=[32, 33])
    assert place(host, [{'name': 'a', 'cpus': 2, 'node': 0}], reserved_cpus=[0, 16])[0]['cpulist'] == '1,17'


def test_the_same_input_gives_the_same_plan():
    services = [{'name': 'a', 'gpus': 2, 'cpus': 'all', 'exclusive': False}, {'name': 'b', 'cpus': 3},
                {'name': 'c', 'gpus': 0, 'cpus': 5}]
    first = place(smt_host(), copy.deepcopy(services))
    reordered = [dict(reversed(list(spec.items()))) for spec in services]
    assert place(smt_host(), reordered) == first


def gather(run_module, sim_host, name):
    paths = sim_host(name)
    result = run_module(topology_facts, {'sysfs_root': paths['sysfs_root'], 'procfs_root': paths['procfs_root']})
    return result['ansible_facts']['gpufleet_topology']


def test_reference_a100_host(run_module, sim_host):
    topology = gather(run_module, sim_host, 'reference-a100')
    plan = place(topology, [{'name': n, 'cpus': 8} for n in 'abcd'], reserved_cpus='0,32')
    uuid = 'GPU-5c6f7a2e-1b3d-4e8f-9a0b-1c2d3e4f5a6%d'
    # Node 0 first (tie), then alternate as each takes 8 of the 31 free cores; no SMT on this host.
    assert [(e['gpus'], e['numa_node'], e['cpulist']) for e in plan] == [
        ([uuid % 0], 0, '1-8'), ([uuid % 2], 1, '33-40'), ([uuid % 1], 0, '9-16'), ([uuid % 3], 1, '41-48')]


def test_dgx_h100_host_keeps_siblings_together(run_module, sim_host):
    topology = gather(run_module, sim_host, 'dgx-h100')
    plan = place(topology, [{'name': 'llm', 'gpus': 4, 'cpus': 7}, {'name': 'emb', 'gpus': 4, 'cpus': 1}],
                 reserved_cpus='0,112')
    # The reserved core leaves node 0 with 55 free cores against 56: node 1 first. 7 CPUs are 4 whole cores.
    assert (plan[0]['numa_node'], plan[0]['cpulist']) == (1, '56-59,168-171')
    assert (plan[1]['numa_node'], plan[1]['cpulist']) == (0, '1,113')
    assert [g['numa_node'] for g in topology['gpus'] if g['uuid'] in plan[0]['gpus']] == [1, 1, 1, 1]
