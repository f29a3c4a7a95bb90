# SPDX-License-Identifier: GPL-3.0-or-later
"""Benchmark: the place_services planner on a synthetic fleet, against two baselines.

Each host is DGX-like: 2 NUMA nodes, 56 cores each with SMT (node 0: CPUs 0-55,112-167; node 1: 56-111,168-223),
8 GPUs, 4 per node, and 16 services (gpus: 1, shareable, 2 to 12 CPUs, drawn per host from a fixed seed), with
CPUs 0 and 112 reserved. Reports the planner's total wall time and peak traced memory (tracemalloc, in a second
pass, holding every host's plan as a controller holds hostvars), and placement quality for:
  - place_services;
  - everything on GPU0: the reference deployment's before-state, every service on GPU0 with CPUs and memory
    unbound (all CPUs, all nodes);
  - NUMA-blind round-robin: service i on GPU i mod 8, CPUs taken in order from CPU 0 regardless of node, memory
    first-touch on the CPUs' nodes.
Quality: services whose CPUs are all on their GPU's node; services whose memory nodes are only their GPU's node;
the most services on one GPU; and services moved when the first service is removed (the planner gets the
previous plan).

usage: .venv/bin/python bench/placement.py [--hosts N] [--output docs/benchmarks/placement.md]
"""

import argparse
import datetime
import os
import random
import sys
import time
import tracemalloc

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), '..'))
sys.path[:0] = [os.path.join(REPO, 'build', 'collections')]

from ansible_collections.gpufleet.core.plugins.module_utils._placement import place  # noqa: E402

CORES, GPUS, SERVICES = 56, 8, 16
RESERVED = '0,112'


def topology():
    threads = 2 * CORES
    nodes = []
    for node in range(2):
        first = node * CORES
        cpus = list(range(first, first + CORES)) + list(range(first + threads, first + threads + CORES))
        nodes.append({'id': node, 'cpus': cpus, 'cpulist': '', 'has_cpus': True})
    return {
        'cpu': {'smt_siblings': ['%d,%d' % (cpu, cpu + threads) for cpu in range(threads)]},
        'numa_nodes': nodes,
        'gpus': [{'index': i, 'uuid': 'GPU-%08x-0000-4000-8000-%012d' % (i, i), 'numa_node': i // 4,
                  'pci_bus_id': '00000000:%02X:00.0' % (0x18 + 0x20 * i),
                  'mig': {'mode_current': 'disabled', 'gpu_instances': []}} for i in range(GPUS)],
    }


def services(host):
    rng = random.Random(host)
    return [{'name': 'svc%02d' % i, 'gpus': 1, 'exclusive': False, 'cpus': rng.choice([2, 4, 6, 8, 12]),
             'command': '/usr/bin/serve'} for i in range(SERVICES)]


def everything_on_gpu0(topo, specs):
    every = sorted(cpu for node in topo['numa_nodes'] for cpu in node['cpus'])
    nodes = [node['id'] for node in topo['numa_nodes']]
    return [{'name': s['name'], 'gpus': [topo['gpus'][0]['uuid']], 'cpus': every, 'mems': nodes} for s in specs]


def round_robin(topo, specs):
    order = sorted(cpu for node in topo['numa_nodes'] for cpu in node['cpus'])
    node_of = dict((cpu, node['id']) for node in topo['numa_nodes'] for cpu in node['cpus'])
    plan, at = [], 0
    for i, spec in enumerate(specs):
        cpus = [order[(at + k) % len(order)] for k in range(spec['cpus'])]
        at += spec['cpus']
        plan.append({'name': spec['name'], 'gpus': [topo['gpus'][i % GPUS]['uuid']], 'cpus': cpus,
                     'mems': sorted(set(node_of[c] for c in cpus))})
    return plan


def quality(topo, plans):
    node_of = dict((cpu, node['id']) for node in topo['numa_nodes'] for cpu in node['cpus'])
    gpu_node = dict((g['uuid'], g['numa_node']) for g in topo['gpus'])
    total = cpu_local = mem_local = most = 0
    for plan in plans:
        per_gpu = {}
        for entry in plan:
            total += 1
            nodes = set(gpu_node[u] for u in entry['gpus'])
            cpu_local += set(node_of[c] for c in entry['cpus']) <= nodes
            mem_local += set(entry['mems']) <= nodes
            for uuid in entry['gpus']:
                per_gpu[uuid] = per_gpu.get(uuid, 0) + 1
        most = max([most] + list(per_gpu.values()))
    return cpu_local / total, mem_local / total, most


def moved(before, after):
    kept = dict((e['name'], (e['gpus'], e['cpus'])) for e in before)
    return sum(1 for e in after if kept[e['name']] != (e['gpus'], e['cpus']))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--hosts', type=int, default=1000)
    parser.add_argument('--output')
    args = parser.parse_args()
    topo = topology()
    fleet = [services(host) for host in range(args.hosts)]

    start = time.perf_counter()
    plans = [place(topo, specs, reserved_cpus=RESERVED) for specs in fleet]
    elapsed = time.perf_counter() - start

    tracemalloc.start()
    kept = [place(topo, specs, reserved_cpus=RESERVED) for specs in fleet]
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert kept == plans, 'the planner is not deterministic'

    rows = []
    for label, strategy in (('gpufleet.core.place_services', None), ('everything on GPU0 (before)', everything_on_gpu0),
                            ('NUMA-blind round-robin', round_robin)):
        results = plans if strategy is None else [strategy(topo, specs) for specs in fleet]
        cpu_local, mem_local, most = quality(topo, results)
        moves = 0
        for specs, result in zip(fleet, results):
            if strategy is None:
                after = place(topo, specs[1:], reserved_cpus=RESERVED, previous=result)
            else:
                after = strategy(topo, specs[1:])
            moves += moved(result, after)
        rows.append('| %s | %.1f%% | %.1f%% | %d | %.2f |' % (label, 100 * cpu_local, 100 * mem_local, most,
                                                              moves / float(len(fleet))))
    services_total = args.hosts * SERVICES
    lines = [
        '| strategy | services with CPUs on their GPU\'s node | services with memory on their GPU\'s node '
        '| most services on one GPU | services moved per host when the first is removed |',
        '| --- | --- | --- | --- | --- |',
    ] + rows + [
        '',
        'Planner: %d hosts x %d GPUs x %d services (%d services) in %.2f s (%.2f ms per host, %.0f services/s); '
        'peak traced memory %.1f MiB holding every plan.' % (
            args.hosts, GPUS, SERVICES, services_total, elapsed, 1000 * elapsed / args.hosts,
            services_total / elapsed, peak / 1048576.0),
    ]
    print('\n'.join(lines))
    if args.output:
        with open(args.output, 'w') as handle:
            handle.write(render(lines, args.hosts))


def render(lines, hosts):
    return '\n'.join([
        '# Benchmark: NUMA-aware placement against the before-state and round-robin',
        '',
        'Made by `.venv/bin/python bench/placement.py --hosts %d` (%s) on %s, Python %s.' % (
            hosts, datetime.date.today().isoformat(), 'this development machine: 2 CPUs shared with other jobs',
            sys.version.split()[0]),
        '',
    ] + lines + ['']) + '\n'


if __name__ == '__main__':
    main()
