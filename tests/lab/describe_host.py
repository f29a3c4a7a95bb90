# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""Write a lab host's NVML simulator description: a host description's GPUs on this machine's real CPUs and nodes.

usage: python3 describe_host.py SOURCE.json HOSTNAME [SYSFS_ROOT]
       python3 describe_host.py --write DIR HOSTNAME=SOURCE.json...

The first prints the description as JSON. The second writes DIR/HOSTNAME.json for each pair and prints
"HOSTNAME GPUS" lines.

--write leaves a file that is already right untouched, and writes none for a source without a driver (and
removes an old one): such a host has no NVML library.

A lab host (tests/lab/lab.sh, docs/lab.md) is a container: its CPUs and NUMA nodes are this machine's, which the
collection reads from the real /sys, and a service bound to them must really run there. So the `cpu` and
`numa_nodes` of SOURCE are replaced by this machine's layout, read from SYSFS_ROOT (default /sys) and
/proc/cpuinfo (without free memory: it changes from run to run, and the description must not), and each GPU's
numa_node is a real node that has CPUs (round-robin). The GPUs' PCI devices are absent from the real /sys, so the
collection takes their node from NVML.

Everything else that describes the GPUs is kept: driver, models, memory, PCI bus ids, NVLink and NVSwitch fields.
UUIDs are derived from HOSTNAME (GPU-<uuid5>), so they are unique per host and stable across runs; MIG devices
get the simulator's own MIG-<uuid5>, made from their GPU's. Every lab host starts clean, as a freshly installed
one: MIG off, no GPU or compute instances, no processes on its GPUs and no MPS daemon. What only the rendered
sysfs/procfs trees used (`kernel`, a GPU's `sysfs_numa_node`, `proc_processes`) goes: the lab's kernel is the
real one.
"""

from __future__ import absolute_import, division, print_function

import json
import os
import re
import sys
import uuid

# The simulator's CPU-list helpers (tests/nvml_sim/render_tree.py), one copy for both.
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', 'nvml_sim'))
from render_tree import compact, expand  # noqa: E402

# The namespace of every lab UUID; the name under it says which host, GPU and instance.
_NAMESPACE = uuid.uuid5(uuid.NAMESPACE_DNS, 'lab.gpufleet.invalid')


def _read(path, default=None):
    try:
        with open(path) as handle:
            return handle.read().strip()
    except (IOError, OSError):
        if default is None:
            raise
        return default


def real_layout(sysfs_root='/sys', cpuinfo='/proc/cpuinfo'):
    """This machine's `cpu` and `numa_nodes`, in the host descriptions' format."""
    cpu_dir = os.path.join(sysfs_root, 'devices', 'system', 'cpu')
    node_dir = os.path.join(sysfs_root, 'devices', 'system', 'node')
    online = expand(_read(os.path.join(cpu_dir, 'online')))
    sockets, threads_per_core = {}, 1
    for cpu in online:
        topology = os.path.join(cpu_dir, 'cpu%d' % cpu, 'topology')
        package = int(_read(os.path.join(topology, 'physical_package_id'), '0'))
        sockets.setdefault(package, []).append(cpu)
        siblings = _read(os.path.join(topology, 'thread_siblings_list'), str(cpu))
        threads_per_core = max(threads_per_core, len(expand(siblings)))
    model = 'unknown'
    for line in _read(cpuinfo, '').splitlines():
        if line.startswith('model name'):
            model = line.split(':', 1)[1].strip()
            break
    nodes = []
    if os.path.isdir(node_dir):
        ids = sorted(int(match.group(1)) for match in
                     (re.match(r'node(\d+)$', name) for name in os.listdir(node_dir)) if match)
        for node in ids:
            path = os.path.join(node_dir, 'node%d' % node)
            meminfo = dict((m.group(1), int(m.group(2))) for m in
                           re.finditer(r'Node \d+ (\w+):\s+(\d+) kB', _read(os.path.join(path, 'meminfo'), '')))
            nodes.append({'id': node,
                          'cpus': compact(set(expand(_read(os.path.join(path, 'cpulist'), ''))) & set(online)),
                          'memory_mb': meminfo.get('MemTotal', 0) // 1024,
                          'distances': [int(d) for d in _read(os.path.join(path, 'distance'), '10').split()]})
    if not nodes:
        # A kernel without NUMA: one node with every CPU, as the kernel itself presents it.
        nodes = [{'id': 0, 'cpus': compact(online), 'memory_mb': 0, 'distances': [10]}]
    cpu = {'model': model, 'threads_per_core': threads_per_core,
           'sockets': [{'id': package, 'cpus': compact(cpus)} for package, cpus in sorted(sockets.items())]}
    return cpu, nodes


def lab_uuid(prefix, hostname, *path):
    return '%s-%s' % (prefix, uuid.uuid5(_NAMESPACE, '/'.join([hostname] + [str(part) for part in path])))


def describe(source, source_name, hostname, cpu, nodes):
    """SOURCE (a host description) as lab host HOSTNAME on the given real `cpu` and `nodes`."""
    with_cpus = [node['id'] for node in nodes if node['cpus']]
    if not with_cpus:
        raise SystemExit('describe_host.py: no NUMA node of this machine has an online CPU')
    described = {
        'description': 'Lab host %s (tests/lab/lab.sh): the GPUs of %s on this machine\'s real CPUs and NUMA '
                       'nodes, UUIDs derived from the host name, starting clean (MIG off, no processes).'
                       % (hostname, source_name),
        'cpu': cpu,
        'numa_nodes': nodes,
        'driver': source.get('driver'),
        'gpus': [],
    }
    for index, spec in enumerate(source.get('gpus', [])):
        gpu = dict((key, value) for key, value in spec.items()
                   if key not in ('sysfs_numa_node', 'mig_mode', 'gpu_instances', 'compute_mode'))
        gpu['uuid'] = lab_uuid('GPU', hostname, 'gpu', index)
        gpu['numa_node'] = with_cpus[index % len(with_cpus)]
        described['gpus'].append(gpu)
    if source.get('nvswitches'):
        described['nvswitches'] = [dict(switch, numa_node=with_cpus[index % len(with_cpus)])
                                   for index, switch in enumerate(source['nvswitches'])]
    return described


def _text(described):
    return json.dumps(described, indent=1) + '\n'


def write(directory, pairs):
    """HOSTNAME=SOURCE pairs: write each DIRECTORY/HOSTNAME.json that changed; return (hostname, GPU count)s."""
    cpu, nodes = real_layout()
    counts = []
    for pair in pairs:
        hostname, _sep, source_path = pair.partition('=')
        with open(source_path) as handle:
            source = json.load(handle)
        target = os.path.join(directory, hostname + '.json')
        if source.get('driver') is None or not source.get('gpus'):
            if os.path.exists(target):
                os.remove(target)
            counts.append((hostname, 0))
            continue
        text = _text(describe(source, os.path.basename(source_path), hostname, cpu, nodes))
        if _read(target, '') + '\n' != text:
            with open(target + '.tmp', 'w') as handle:
                handle.write(text)
            os.rename(target + '.tmp', target)
        counts.append((hostname, len(source['gpus'])))
    return counts


def main(argv):
    if len(argv) >= 3 and argv[1] == '--write':
        for hostname, count in write(argv[2], argv[3:]):
            print(hostname, count)
        return
    if len(argv) not in (3, 4):
        sys.exit('\n'.join(__doc__.strip().splitlines()[2:4]))
    with open(argv[1]) as handle:
        source = json.load(handle)
    cpu, nodes = real_layout(argv[3] if len(argv) == 4 else '/sys')
    sys.stdout.write(_text(describe(source, os.path.basename(argv[1]), argv[2], cpu, nodes)))


if __name__ == '__main__':
    main(sys.argv)
