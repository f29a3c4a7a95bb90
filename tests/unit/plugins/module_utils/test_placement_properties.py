# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""Properties of the placement planner over random topologies and specs (hypothesis).

Topologies: sparse node ids, CPU-less memory nodes, non-contiguous CPU numbers, SMT on, off and mixed (a core
whose sibling is offline), GPUs on unknown nodes, GPUs in MIG mode, reserved CPUs. Every plan either succeeds
and keeps every rule, or fails with an error that names a service.
"""

from __future__ import absolute_import, division, print_function

import itertools

from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from ansible_collections.gpufleet.core.plugins.module_utils._cpulist import format_cpulist
from ansible_collections.gpufleet.core.plugins.module_utils._placement import PlacementError, place
from ansible_collections.gpufleet.core.plugins.module_utils._placement_spec import Spec
from ansible_collections.gpufleet.core.plugins.module_utils._planner import Planner, Unplaceable
from ansible_collections.gpufleet.core.plugins.module_utils._topology import Topology

from ...support.topology import gpu, mig_instance
from ...support.topology import node as node_fact
from ...support.topology import node_cpus
from ...support.topology import topology as topology_fact

SETTINGS = settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@st.composite
def topologies(draw):
    node_ids = sorted(draw(st.sets(st.integers(0, 9), min_size=1, max_size=3)))
    cpu_less = draw(st.sets(st.sampled_from(node_ids), max_size=len(node_ids) - 1))
    numbers = itertools.count(draw(st.integers(0, 3)))
    nodes, siblings = [], []
    for node in node_ids:
        cpus = []
        if node not in cpu_less:
            for dummy in range(draw(st.integers(1, 6))):
                # Gaps between cores make the CPU lists non-contiguous; a single-CPU core is one whose
                # sibling is offline (or SMT off).
                for dummy in range(draw(st.integers(0, 2))):
                    next(numbers)
                core = [next(numbers) for dummy in range(draw(st.sampled_from([1, 2, 2])))]
                siblings.append(format_cpulist(core))
                cpus.extend(core)
        nodes.append(node_fact(node, cpus))
    gpus = []
    buses = draw(st.lists(st.integers(1, 250), min_size=6, max_size=6, unique=True))
    order = draw(st.permutations(range(6)))
    for index in range(draw(st.integers(0, 6))):
        instances = []
        if draw(st.integers(0, 5)) == 0:
            instances = [mig_instance('1g.10gb', ['MIG-%d-%d' % (index, s)], start=s) for s in range(2)]
        gpus.append(gpu(order[index], 'GPU-%02d' % index, buses[index], draw(st.sampled_from(node_ids + [None])),
                        instances=instances))
    gpus.sort(key=lambda g: g['index'])
    reserved = draw(st.lists(st.sampled_from([c for n in nodes for c in node_cpus(n)]), max_size=3)) \
        if any(n['has_cpus'] for n in nodes) else []
    return topology_fact(nodes, gpus, smt_siblings=siblings), reserved


@st.composite
def specs(draw, topology, name):
    uuids = [g['uuid'] for g in topology['gpus']]
    migs = [ci['uuid'] for g in topology['gpus'] for gi in g['mig']['gpu_instances'] for ci in gi['compute_instances']]
    kinds = [st.integers(0, 2)]
    if uuids:
        kinds.append(st.lists(st.sampled_from(uuids + migs), min_size=1, max_size=2, unique=True))
    if migs:
        kinds.append(st.fixed_dictionaries({'mig_profile': st.just('1g.10gb'), 'count': st.integers(1, 2)}))
    spec = {'name': name, 'gpus': draw(st.one_of(kinds)), 'cpus': draw(st.one_of(st.integers(1, 5), st.just('all'))),
            'memory_policy': draw(st.sampled_from(['bind', 'preferred', 'interleave'])),
            'exclusive': draw(st.booleans()), 'allow_cpu_overlap': draw(st.booleans()),
            'allow_cross_numa': draw(st.sampled_from([False, False, True])), 'command': '/bin/true'}
    if draw(st.integers(0, 3)) == 0:
        spec['node'] = draw(st.sampled_from([n['id'] for n in topology['numa_nodes'] if n['has_cpus']] or [0]))
    return spec


@st.composite
def cases(draw, low=1, high=5):
    topology, reserved = draw(topologies())
    services = [draw(specs(topology, 's%d' % i)) for i in range(draw(st.integers(low, high)))]
    return topology, reserved, services


@st.composite
def feasible_cases(draw, low=1):
    """Services drawn one by one, each kept only if the plan still works: random, yet mostly placeable."""
    topology, reserved = draw(topologies())
    services, plan = [], []
    for i in range(draw(st.integers(low, 6))):
        spec = draw(specs(topology, 's%d' % i))
        result = plan_or_error(topology, services + [spec], reserved)
        if not isinstance(result, str):
            services, plan = services + [spec], result
    assume(len(services) >= low)
    return topology, reserved, services, plan


def plan_or_error(topology, services, reserved, previous=None):
    try:
        return place(topology, services, reserved_cpus=reserved, previous=previous)
    except PlacementError as exc:
        text = str(exc)
        assert text.startswith('The services cannot be placed: service ') or 'no NUMA node with CPUs' in text, text
        return text


def node_of(topology):
    return dict((cpu, node['id']) for node in topology['numa_nodes'] for cpu in node_cpus(node))


def check_rules(topology, reserved, services, plan):
    nodes = node_of(topology)
    gpu_node = dict((g['uuid'], g['numa_node']) for g in topology['gpus'])
    parent = dict((g['uuid'], g['uuid']) for g in topology['gpus'])
    for g in topology['gpus']:
        for gi in g['mig']['gpu_instances']:
            for ci in gi['compute_instances']:
                gpu_node[ci['uuid']], parent[ci['uuid']] = g['numa_node'], g['uuid']
    sibling_sets = [set(int(c) for c in s.replace('-', ',').split(',')) for s in topology['cpu']['smt_siblings']]
    assert [entry['name'] for entry in plan] == [spec['name'] for spec in services]
    for spec, entry in zip(services, plan):
        assert set(entry) == set(['name', 'gpus', 'gpu_uuids', 'numa_node', 'cpus', 'cpulist', 'mems', 'memlist',
                                  'memory_policy', 'exclusive', 'mps', 'environment', 'explanation'])
        cpus = entry['cpus']
        assert cpus and cpus == sorted(set(cpus)) and entry['cpulist'] == format_cpulist(cpus)
        assert entry['memlist'] == format_cpulist(entry['mems'])
        assert not set(cpus) & set(reserved), 'reserved CPUs used'
        for group in sibling_sets:
            if group & set(cpus):
                assert group <= set(cpus), 'a core split: %s of %s' % (group, cpus)
        if isinstance(spec['cpus'], int):
            assert len(cpus) >= spec['cpus']
        cpu_nodes = set(nodes[c] for c in cpus)
        known = set(gpu_node[u] for u in entry['gpus']) - set([None])
        if not spec['allow_cross_numa']:
            assert len(cpu_nodes) == 1 and cpu_nodes == set([entry['numa_node']])
            assert known <= cpu_nodes, 'GPUs on another node than the CPUs'
            assert None not in [gpu_node[u] for u in entry['gpus']] or spec.get('node') == entry['numa_node']
            if entry['memory_policy'] == 'bind':
                assert entry['mems'] == [entry['numa_node']]
        if spec.get('node') is not None:
            assert cpu_nodes == set([spec['node']])
        if isinstance(spec['gpus'], int):
            assert len(entry['gpus']) == spec['gpus']
        elif isinstance(spec['gpus'], list):
            assert entry['gpus'] == spec['gpus']
        else:
            assert len(entry['gpus']) == spec['gpus']['count'] and all(u.startswith('MIG-') for u in entry['gpus'])
        assert entry['gpu_uuids'] == list(dict.fromkeys(parent[u] for u in entry['gpus']))
        assert entry['environment']['CUDA_VISIBLE_DEVICES'] == ','.join(entry['gpus'])
        assert entry['exclusive'] is spec['exclusive']
    for (spec_a, a), (spec_b, b) in itertools.combinations(zip(services, plan), 2):
        if set(a['cpus']) & set(b['cpus']):
            assert spec_a['allow_cpu_overlap'] and spec_b['allow_cpu_overlap'], 'CPU overlap not allowed'
        if set(a['gpus']) & set(b['gpus']):
            assert not a['exclusive'] and not b['exclusive'], 'an exclusive device given twice'


@SETTINGS
@given(cases())
def test_plans_keep_every_rule_and_are_deterministic(case):
    topology, reserved, services = case
    result = plan_or_error(topology, services, reserved)
    # Same input, same output; the order of a spec's keys does not matter.
    assert plan_or_error(topology, [dict(reversed(list(s.items()))) for s in services], reserved) == result
    if not isinstance(result, str):
        check_rules(topology, reserved, services, result)


@SETTINGS
@given(feasible_cases(), st.data())
def test_removing_a_service_moves_no_other(case, data):
    topology, reserved, services, first = case
    gone = data.draw(st.integers(0, len(services) - 1))
    rest = services[:gone] + services[gone + 1:]
    after = place(topology, rest, reserved_cpus=reserved, previous=first)
    assert after == first[:gone] + first[gone + 1:]


@SETTINGS
@given(feasible_cases(), st.data())
def test_adding_a_service_moves_no_other(case, data):
    topology, reserved, services, first = case
    new = data.draw(specs(topology, 'new'))
    where = data.draw(st.integers(0, len(services)))
    grown = services[:where] + [new] + services[where:]
    after = plan_or_error(topology, grown, reserved, previous=first)
    if not isinstance(after, str):
        check_rules(topology, reserved, grown, after)
        assert after[:where] + after[where + 1:] == first


@SETTINGS
@given(topologies(), st.data())
def test_a_gpu_on_an_unknown_node_needs_a_pin_or_cross_numa(drawn, data):
    topology, reserved = drawn
    topology['gpus'].append(gpu(9, 'GPU-lost', 'FF', None))
    spec = {'name': 'u', 'gpus': ['GPU-lost'], 'cpus': 1, 'node': None}
    text = plan_or_error(topology, [spec], reserved)
    assert isinstance(text, str) and 'the NUMA node of GPU-lost is unknown' in text
    assert 'node: N' in text and 'allow_cross_numa' in text
    # With a pin, or with cross-NUMA allowed, it is placed (where the host has a free core).
    spec[data.draw(st.sampled_from(['node', 'allow_cross_numa']))] = True
    if spec['node'] is True:
        spec['node'] = data.draw(st.sampled_from([n['id'] for n in topology['numa_nodes'] if n['has_cpus']]))
    result = plan_or_error(topology, [spec], reserved)
    if isinstance(result, str):
        assert 'usable CPUs' in result
    else:
        assert result[0]['gpus'] == ['GPU-lost'] and result[0]['numa_node'] in (spec['node'], result[0]['numa_node'])
        if spec['node'] is not None:
            assert result[0]['numa_node'] == spec['node']


def _free_devices_the_plain_way(planner, spec, node):
    """A node's devices free for the spec, least shared first, then in ``sort`` order: filtered and sorted afresh,
    as the planner did before it kept ranks."""
    host = planner.topology
    taken = planner.gpu_users if spec.exclusive else planner.held_exclusively
    found = [d for d in host.devices.values() if d['node'] == node and planner.device_kind_fits(spec, d)
             and planner.direct_use(d['uuid']) and d['uuid'] not in taken]
    found.sort(key=lambda d: d['sort'])
    found.sort(key=lambda d: planner.use_count[d['uuid']])
    return [d['uuid'] for d in found]


@SETTINGS
@given(st.lists(st.tuples(st.integers(1, 3), st.booleans(), st.sampled_from([None, 0, 1])), min_size=1, max_size=12),
       st.lists(st.integers(0, 7), max_size=3))
def test_kept_device_ranks_choose_as_filtering_and_sorting_afresh_would(requests, listed_first):
    """Devices claimed before the pool is built (listed GPUs) and after it, exclusive and shareable, pinned or not:
    every choice is the plainly computed best node's first free devices."""
    gpus = [gpu(i, 'GPU-%d' % i, bus=0x90 - 0x10 * i, node=i % 2) for i in range(8)]  # bus order is not index order
    host = Topology(topology_fact([node_fact(0, range(0, 16)), node_fact(1, range(16, 32))], gpus))
    planner = Planner(host, [], {})
    for position, index in enumerate(listed_first):
        spec = Spec(100 + position)
        spec.name, spec.mode, spec.exclusive = 'listed%d' % position, 'list', False
        planner.claim_devices(spec, ['GPU-%d' % index])
    for position, (count, exclusive, pinned) in enumerate(requests):
        spec = Spec(position)
        spec.name, spec.count, spec.exclusive, spec.node = 'svc%d' % position, count, exclusive, pinned
        candidates = {}
        for node in [pinned] if pinned is not None else planner.cpu_nodes:
            free = _free_devices_the_plain_way(planner, spec, node)
            if len(free) >= count:
                shared = sum(planner.use_count[uuid] for uuid in free[:count])
                candidates[(shared, -len(planner.unclaimed[node]), node)] = free[:count]
        try:
            chosen = planner.choose_devices(spec)
        except Unplaceable:
            assert not candidates
            continue
        assert chosen == candidates[min(candidates)]
        planner.claim_devices(spec, chosen)
