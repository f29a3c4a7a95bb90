# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""Plans and refusals are byte-identical to those the planner gave as of commit 1b0b304, before it was made incremental.

fixtures/placement_differential.json.gz holds about 2,500 seeded random cases, recorded by ``record`` below from the
planner as of commit 1b0b304 (run from an export of that commit). It is never regenerated from the current code: a
change of outcome on purpose is listed in the test, with its reason, as test_placement_golden.py does.

The space is wider than the golden file's: the simulated hosts' facts (tests/nvml_sim/hosts, as gathered by
topology_facts into fixtures/placement_golden.json) and synthetic hosts (sparse node ids, memory-only and CPU-less
nodes, non-contiguous CPUs, SMT on, off and mixed, MIG devices of two profiles, GPUs on unknown and memory-only
nodes, a DGX-like host); specs mixing GPU counts, lists (UUIDs, MIG UUIDs, indices), MIG profiles, MPS shares (with
mps_daemons), exclusive and shareable, CPU overlap, cpus 'all', pinned nodes and allow_cross_numa; reserved CPUs in
every accepted form; and re-plans with ``previous`` after removing, adding or changing a service, with reserved
CPUs changed, or with a tampered previous entry, which exercise ``keep``. Refusals are recorded as (type, message).

To check the recording, run it from an export of the old code with this file copied in (never from the current
code); it writes the committed fixture byte for byte:
    git archive 1b0b304 | tar -x -C /tmp/old && /tmp/old/tests/testbed/link-collection.sh
    cp tests/unit/plugins/module_utils/test_placement_differential.py /tmp/old/tests/unit/plugins/module_utils/
    cd /tmp/old && PYTHONPATH=build/collections:tests python -c \\
        'from unit.plugins.module_utils.test_placement_differential import record; record("/tmp/OUT.json.gz")'
"""

from __future__ import absolute_import, division, print_function

import copy
import gzip
import json
import os
import random

import pytest

from ansible_collections.gpufleet.core.plugins.module_utils._cpulist import format_cpulist, parse_cpulist
from ansible_collections.gpufleet.core.plugins.module_utils._placement import place

from ...support.mps_names import named_by_slot
from ...support.topology import A100_PROFILES, gpu, mig_instance, node, topology

HERE = os.path.dirname(__file__)
FIXTURE = os.path.join(HERE, 'fixtures', 'placement_differential.json.gz')
GOLDEN = os.path.join(HERE, 'fixtures', 'placement_golden.json')
SEED = 20261201


def _load():
    with gzip.open(FIXTURE, 'rt') as handle:
        return json.load(handle)


RECORDED = _load() if os.path.exists(FIXTURE) else {'topologies': {}, 'cases': []}
# Recorded cases whose outcome changed on purpose, by position in the fixture: why (none so far).
CHANGED_ON_PURPOSE = {}


def outcome(topology_fact, inputs):
    """place()'s plan, or the (type name, message) of what it raised."""
    try:
        return {'plan': place(topology_fact, **inputs)}
    except Exception as exc:  # pylint: disable=broad-except
        return {'error': {'type': type(exc).__name__, 'message': str(exc)}}


def test_the_fixture_is_there_and_wide():
    cases = RECORDED['cases']
    assert len(cases) >= 1500
    assert sum(1 for case in cases if 'error' in case) >= 150
    assert sum(1 for case in cases if case['inputs']['previous'] is not None) >= 500


@pytest.mark.parametrize('position', [position for position in range(len(RECORDED['cases']))
                                      if position not in CHANGED_ON_PURPOSE])
def test_the_plan_or_error_is_the_recorded_one(position):
    case = RECORDED['cases'][position]
    inputs = dict(case['inputs'])
    topology_fact = RECORDED['topologies'][inputs.pop('topology')]
    found = outcome(topology_fact, inputs)
    if 'error' in case:
        assert found.get('error') == case['error'], 'case %d (%s)' % (position, case['origin'])
    else:
        assert 'plan' in found, 'case %d (%s) used to place, now: %s' % (position, case['origin'], found['error'])
        # Byte-identical: the same JSON text, key order and all (MPS daemons named by slot since issue 42).
        assert json.dumps(found['plan']) == named_by_slot(json.dumps(case['plan']), topology_fact)


# -- the recording (run once, from the old code) -------------------------------------------------------------------


def _simulated_hosts():
    """One fact per simulated host, as topology_facts gathered them for the golden file."""
    with open(GOLDEN) as handle:
        golden = json.load(handle)
    found = {}
    for fact in golden['topologies'].values():
        root = (fact.get('sources') or {}).get('sysfs_root')
        if root:
            name = root.rstrip('/').split('/')[-2]
            if name not in found:
                fact = dict(fact)
                fact.pop('sources')
                found[name] = fact
    return [found[name] for name in sorted(found)]


def _fixed_hosts():
    smt = ['%d,%d' % (i, i + 16) for i in range(16)]
    mig = topology(
        nodes=[node(0, list(range(0, 8)) + list(range(16, 24))), node(1, list(range(8, 16)) + list(range(24, 32)))],
        gpus=[gpu(0, 'GPU-98', '98', 1), gpu(1, 'GPU-17', '17', 0), gpu(2, 'GPU-b1', 'B1', 1),
              gpu(3, 'GPU-31', '31', 0, instances=[mig_instance('1g.10gb', ['MIG-a', 'MIG-b'], start=0),
                                                   mig_instance('3g.40gb', ['MIG-c'], start=4)]),
              gpu(4, 'GPU-c4', 'C4', 1, instances=[mig_instance('1g.10gb', ['MIG-d'], start=0),
                                                   mig_instance('1g.10gb', ['MIG-e'], start=1)])],
        smt_siblings=smt, mig_profiles=A100_PROFILES)
    quirky = topology(nodes=[node(0, [0, 2, 4, 6]), node(2, [1, 3, 5, 7]), node(4, [])],
                      gpus=[gpu(0, 'GPU-n0', '41', 0), gpu(1, 'GPU-n2', '81', 2), gpu(2, 'GPU-unknown', 'E1', None),
                            gpu(3, 'GPU-hbm', 'C1', 4), gpu(None, 'GPU-nobus', None, 0)])
    cpu_less = topology(nodes=[node(0, []), node(1, [])], gpus=[gpu(0, 'GPU-x', '11', 0), gpu(1, 'GPU-y', '12', None)])
    mixed = topology(nodes=[node(1, [0, 1, 2, 3, 8, 9]), node(3, [4, 5, 6, 7, 10, 12])],
                     gpus=[gpu(0, 'GPU-m1', '21', 1), gpu(1, 'GPU-m3', '22', 3), gpu(2, 'GPU-m3b', '20', 3)],
                     smt_siblings=['0,8', '1,9', '2', '3', '4,10', '5', '6,12', '7'])
    cores, threads = 56, 112
    dgx_nodes = [node(n, list(range(n * cores, (n + 1) * cores)) + list(range(threads + n * cores, threads + (n + 1) * cores)))
                 for n in range(2)]
    dgx = topology(nodes=dgx_nodes, gpus=[gpu(i, 'GPU-%08x-0000-4000-8000-%012d' % (i, i), 0x18 + 0x20 * i, i // 4)
                                          for i in range(8)],
                   smt_siblings=['%d,%d' % (cpu, cpu + threads) for cpu in range(threads)])
    return [mig, quirky, cpu_less, mixed, dgx]


def _random_host(rng):
    node_ids = sorted(rng.sample(range(10), rng.randint(1, 4)))
    cpu_less = set(rng.sample(node_ids, rng.randint(0, len(node_ids) - 1)))
    number = rng.randint(0, 3)
    nodes, siblings = [], []
    for node_id in node_ids:
        cpus = []
        if node_id not in cpu_less:
            for dummy in range(rng.randint(1, 10)):
                number += rng.choice([0, 0, 0, 1, 2])
                core = list(range(number, number + rng.choice([1, 2, 2, 2])))
                number = core[-1] + 1
                siblings.append(format_cpulist(core))
                cpus.extend(core)
        nodes.append(node(node_id, cpus))
    gpus = []
    count = rng.randint(0, 7)
    buses = rng.sample(range(1, 250), count)
    indices = rng.sample(range(count), count)
    for position in range(count):
        instances = []
        if rng.random() < 0.25:
            instances = [mig_instance(rng.choice(['1g.10gb', '1g.10gb', '3g.40gb']),
                                      ['MIG-%d-%d-%d' % (position, slot, ci) for ci in range(rng.randint(1, 2))],
                                      start=slot) for slot in range(rng.randint(1, 3))]
        gpus.append(gpu(indices[position], 'GPU-%02d' % position, buses[position],
                        rng.choice(node_ids + [None]), instances=instances,
                        mig_mode='enabled' if not instances and rng.random() < 0.05 else None))
    rng.shuffle(gpus)
    return topology(nodes, gpus, smt_siblings=siblings if rng.random() < 0.85 else None, mig_profiles=A100_PROFILES)


def _cpus(found):
    """A fact node's CPUs, in layout 1 (a cpus list) or 2 (a cpulist string)."""
    return found['cpus'] if 'cpus' in found else parse_cpulist(found['cpulist'])


def _devices(fact):
    whole = [g['uuid'] for g in fact['gpus']]
    migs = [ci['uuid'] for g in fact['gpus'] for gi in (g.get('mig') or {}).get('gpu_instances') or []
            for ci in gi.get('compute_instances') or []]
    return whole, migs


def _daemons(rng, fact, names):
    whole, migs = _devices(fact)
    plain = [g['uuid'] for g in fact['gpus'] if (g.get('mig') or {}).get('mode_current') != 'enabled']
    choices = plain + migs
    if not choices or rng.random() < 0.55:
        return None
    daemons = []
    for device in rng.sample(choices, min(len(choices), rng.randint(1, 2))):
        daemon = {'device': device, 'user': rng.choice(['infer', 'mps'])}
        if rng.random() < 0.5:
            daemon['default_active_thread_percentage'] = rng.choice([25, 50, 100])
        if rng.random() < 0.3:
            daemon['default_pinned_mem_limit'] = rng.choice(['2G', '8G'])
        listed = rng.sample(names, min(len(names), rng.randint(0, 2)))
        daemon['clients'] = [dict({'name': name}, **({'pinned_mem_limit': '1G'} if rng.random() < 0.3 else {}))
                             for name in listed]
        daemons.append(daemon)
    return daemons


def _spec(rng, fact, name, daemons):
    whole, migs = _devices(fact)
    cpu_nodes = [n['id'] for n in fact['numa_nodes'] if _cpus(n)]
    kind = rng.random()
    if kind < 0.45 or not whole:
        gpus = rng.choice([0, 1, 1, 1, 2, 2, 3, '1', None])
    elif kind < 0.65:
        refs = whole + migs + [g['index'] for g in fact['gpus'] if 'index' in g and g['index'] is not None]
        gpus = rng.sample(refs, min(len(refs), rng.choice([1, 1, 2])))
        if rng.random() < 0.1:
            gpus = [str(ref) if isinstance(ref, int) else ref for ref in gpus]
    elif kind < 0.8 and migs:
        gpus = {'mig_profile': rng.choice(['1g.10gb', '1g.10gb', '3g.40gb']), 'count': rng.choice([1, 1, 2])}
    elif daemons:
        share = {}
        if rng.random() < 0.3:
            share['device'] = rng.choice(daemons)['device']
        if rng.random() < 0.4:
            share['active_thread_percentage'] = rng.choice([10, 20, 30])
        if rng.random() < 0.2:
            share['pinned_mem_limit'] = rng.choice(['512M', '1G'])
        gpus = {'mps': share}
    else:
        gpus = rng.choice([1, 2])
    spec = {'name': name, 'gpus': gpus, 'cpus': rng.choice([1, 2, 2, 3, 4, 4, 6, 8, 12, 'all', '4']),
            'command': '/usr/bin/serve'}
    if gpus is None:
        del spec['gpus']
    if rng.random() < 0.6:
        spec['memory_policy'] = rng.choice(['bind', 'preferred', 'interleave'])
    if rng.random() < 0.6:
        spec['exclusive'] = rng.random() < 0.4
    if rng.random() < 0.3:
        spec['allow_cpu_overlap'] = rng.random() < 0.7
    if rng.random() < 0.3:
        spec['allow_cross_numa'] = rng.random() < 0.7
    if rng.random() < 0.2:
        spec['node'] = rng.choice(cpu_nodes or [0]) if rng.random() < 0.9 else rng.choice([7, 'x', 0])
    return spec


def _reserved(rng, fact):
    cpus = sorted(c for n in fact['numa_nodes'] for c in _cpus(n))
    if not cpus or rng.random() < 0.5:
        return None
    picked = sorted(rng.sample(cpus, min(len(cpus), rng.randint(1, 3))))
    form = rng.random()
    if form < 0.5:
        return format_cpulist(picked)
    if form < 0.85:
        return picked
    return picked[0]


def _tampered(rng, fact, plan):
    """A previous plan with one entry changed the way a stale or hand-edited plan is."""
    changed = copy.deepcopy(plan)
    target = rng.choice(changed)
    how = rng.randint(0, 5)
    if how == 0 and target['cpus']:
        target['cpus'] = target['cpus'][:-1]  # not whole cores any more
    elif how == 1:
        target['numa_node'] = None if target['numa_node'] is not None else 0
    elif how == 2:
        target['gpus'] = list(reversed(target['gpus'])) or [fact['gpus'][0]['uuid'] if fact['gpus'] else 'GPU-gone']
    elif how == 3:
        target['memory_policy'] = 'interleave' if target['memory_policy'] != 'interleave' else 'bind'
    elif how == 4:
        target['cpus'] = [cpu + 1 for cpu in target['cpus']]
    else:
        target['mems'] = list(target['mems']) + [99]
    return changed


def record(path=FIXTURE, seed=SEED):
    """Write the fixture from the planner imported here; run it from an export of the old code only."""
    rng = random.Random(seed)
    hosts = _simulated_hosts() + _fixed_hosts() + [_random_host(rng) for dummy in range(40)]
    topologies = dict(('t%d' % i, fact) for i, fact in enumerate(hosts))
    cases = []

    def add(origin, key, services, reserved, previous, daemons):
        inputs = {'services': services, 'reserved_cpus': reserved, 'previous': previous, 'mps_daemons': daemons}
        found = outcome(topologies[key], copy.deepcopy(inputs))
        cases.append(dict({'origin': origin, 'inputs': dict({'topology': key}, **inputs)}, **found))
        return found.get('plan')

    for key in sorted(topologies, key=lambda k: int(k[1:])):
        fact = topologies[key]
        big = sum(len(_cpus(n)) for n in fact['numa_nodes']) > 64
        for dummy in range(14 if big else 9):
            count = rng.randint(1, 16 if big else 7)
            names = ['s%d' % i for i in range(count)]
            daemons = _daemons(rng, fact, names)
            drawn = [_spec(rng, fact, name, daemons) for name in names]
            reserved = _reserved(rng, fact)
            if rng.random() < 0.3:
                add('fresh, as drawn', key, drawn, reserved, None, daemons)
            # Services kept one by one while the plan still works: random, yet mostly placeable.
            services = []
            for spec in drawn:
                if 'plan' in outcome(fact, copy.deepcopy({'services': services + [spec], 'reserved_cpus': reserved,
                                                          'previous': None, 'mps_daemons': daemons})):
                    services.append(spec)
            if not services:
                continue
            plan = add('fresh', key, services, reserved, None, daemons)
            document = {'version': 1, 'services': plan}
            if len(services) > 1:
                gone = rng.randrange(len(services))
                add('removed', key, services[:gone] + services[gone + 1:], reserved, plan, daemons)
            extra = _spec(rng, fact, 'added', daemons)
            at = rng.randint(0, len(services))
            add('added', key, services[:at] + [extra] + services[at:], reserved,
                document if rng.random() < 0.5 else plan, daemons)
            changed = copy.deepcopy(services)
            target = rng.choice(changed)
            what = rng.choice(['cpus', 'exclusive', 'memory_policy', 'gpus', 'allow_cpu_overlap', 'node'])
            target.update(dict((k, v) for k, v in _spec(rng, fact, target['name'], daemons).items() if k == what))
            add('changed %s' % what, key, changed, reserved, plan, daemons)
            add('same again', key, services, reserved, plan, daemons)
            add('reserved changed', key, services, _reserved(rng, fact), plan, daemons)
            add('tampered previous', key, services, reserved, _tampered(rng, fact, plan), daemons)
            shuffled = list(services)
            rng.shuffle(shuffled)
            add('reordered', key, shuffled, reserved, plan, daemons)
    document = {'about': 'Plans and errors of _placement.place as of commit 1b0b304, recorded by '
                         'test_placement_differential.record (seed %d). Never regenerate it from the current code.'
                         % seed,
                'topologies': topologies, 'cases': cases}
    with open(path, 'wb') as raw:
        with gzip.GzipFile(filename='', mode='wb', fileobj=raw, mtime=0) as handle:
            handle.write(json.dumps(document, separators=(',', ':')).encode('utf-8'))
    return document
