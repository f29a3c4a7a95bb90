# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""Render a host description into sysfs and procfs trees, as the kernel would write them.

usage: render_tree.py HOST.json DEST   (writes DEST/sys and DEST/proc)

The trees hold only what the collection reads: CPU and NUMA topology, the GPUs'
PCI locality, transparent hugepages, numa_balancing, cpuinfo, meminfo and the
MPS daemon's process entries.
"""

from __future__ import absolute_import, division, print_function

import json
import os
import sys


def expand(cpulist):
    cpus = []
    for part in [p.strip() for p in str(cpulist).split(',') if p.strip()]:
        low, _sep, high = part.partition('-')
        cpus.extend(range(int(low), int(high or low) + 1))
    return sorted(set(cpus))


def compact(cpus):
    cpus = sorted(set(cpus))
    out = []
    i = 0
    while i < len(cpus):
        j = i
        while j + 1 < len(cpus) and cpus[j + 1] == cpus[j] + 1:
            j += 1
        out.append(str(cpus[i]) if i == j else '%d-%d' % (cpus[i], cpus[j]))
        i = j + 1
    return ','.join(out)


def mask(cpus, width):
    """Kernel cpumap: 32-bit hex groups, highest first, comma-separated."""
    value = 0
    for cpu in cpus:
        value |= 1 << cpu
    groups = max(1, (width + 31) // 32)
    return ','.join('%08x' % ((value >> (32 * g)) & 0xffffffff) for g in reversed(range(groups)))


def write(root, relpath, text):
    path = os.path.join(root, relpath)
    if not os.path.isdir(os.path.dirname(path)):
        os.makedirs(os.path.dirname(path))
    with open(path, 'w') as handle:
        handle.write(text)


def cores_of(host):
    """(socket id, core id, hardware threads) for every core, from the socket CPU lists."""
    threads = int(host['cpu'].get('threads_per_core', 1))
    adjacent = host['cpu'].get('smt_numbering', 'split') == 'adjacent'
    cores = []
    for socket in host['cpu']['sockets']:
        cpus = expand(socket['cpus'])
        per_thread = len(cpus) // threads
        for core in range(per_thread):
            if adjacent:
                siblings = cpus[core * threads:(core + 1) * threads]
            else:
                # Linux's usual numbering: all first threads of a socket, then all second threads.
                siblings = [cpus[core + t * per_thread] for t in range(threads)]
            cores.append((socket['id'], core, siblings))
    return cores


def render(host, dest):
    sys_root = os.path.join(dest, 'sys')
    proc_root = os.path.join(dest, 'proc')
    cores = cores_of(host)
    all_cpus = sorted(cpu for _s, _c, siblings in cores for cpu in siblings)
    offline = set(expand(host['cpu'].get('offline', '')))
    online = [cpu for cpu in all_cpus if cpu not in offline]
    width = max(all_cpus) + 1

    cpu_dir = 'devices/system/cpu'
    write(sys_root, cpu_dir + '/online', compact(online) + '\n')
    write(sys_root, cpu_dir + '/offline', compact(offline) + '\n')
    write(sys_root, cpu_dir + '/possible', compact(all_cpus) + '\n')
    write(sys_root, cpu_dir + '/present', compact(all_cpus) + '\n')
    package_cpus = {}
    for socket_id, _core_id, siblings in cores:
        package_cpus.setdefault(socket_id, []).extend(c for c in siblings if c not in offline)
    for socket_id, core_id, siblings in cores:
        live_siblings = [c for c in siblings if c not in offline]
        for cpu in siblings:
            if cpu != 0:
                write(sys_root, '%s/cpu%d/online' % (cpu_dir, cpu), '0\n' if cpu in offline else '1\n')
            if cpu in offline:
                continue  # the kernel hides an offline CPU's topology directory
            topo = '%s/cpu%d/topology/' % (cpu_dir, cpu)
            write(sys_root, topo + 'physical_package_id', '%d\n' % socket_id)
            write(sys_root, topo + 'core_id', '%d\n' % core_id)
            write(sys_root, topo + 'thread_siblings_list', compact(live_siblings) + '\n')
            write(sys_root, topo + 'core_cpus_list', compact(live_siblings) + '\n')
            write(sys_root, topo + 'package_cpus_list', compact(package_cpus[socket_id]) + '\n')
            write(sys_root, topo + 'core_siblings_list', compact(package_cpus[socket_id]) + '\n')

    node_dir = 'devices/system/node'
    nodes = host['numa_nodes']
    node_ids = [node['id'] for node in nodes]
    write(sys_root, node_dir + '/online', compact(node_ids) + '\n')
    write(sys_root, node_dir + '/possible', compact(node_ids) + '\n')
    write(sys_root, node_dir + '/has_cpu',
          compact([n['id'] for n in nodes if set(expand(n['cpus'])) - offline]) + '\n')
    write(sys_root, node_dir + '/has_memory', compact([n['id'] for n in nodes if n['memory_mb']]) + '\n')
    total_kb = free_kb = 0
    for node in nodes:
        cpus = [c for c in expand(node['cpus']) if c not in offline]
        base = '%s/node%d/' % (node_dir, node['id'])
        write(sys_root, base + 'cpulist', compact(cpus) + '\n')
        write(sys_root, base + 'cpumap', mask(cpus, width) + '\n')
        write(sys_root, base + 'distance', ' '.join(str(d) for d in node['distances']) + '\n')
        mem_kb = node['memory_mb'] * 1024
        node_free_kb = node.get('free_mb', node['memory_mb'] * 9 // 10) * 1024
        total_kb += mem_kb
        free_kb += node_free_kb
        write(sys_root, base + 'meminfo',
              'Node %d MemTotal:       %d kB\nNode %d MemFree:        %d kB\nNode %d MemUsed:        %d kB\n'
              % (node['id'], mem_kb, node['id'], node_free_kb, node['id'], mem_kb - node_free_kb))

    node_cpus = dict((n['id'], [c for c in expand(n['cpus']) if c not in offline]) for n in nodes)
    for gpu in host.get('gpus', []):
        domain, rest = gpu['pci_bus_id'].lower().split(':', 1)
        address = '%04x:%s' % (int(domain, 16), rest)
        base = 'bus/pci/devices/%s/' % address
        node = gpu.get('sysfs_numa_node', gpu.get('numa_node'))
        node = -1 if node is None else node
        local = node_cpus.get(node, online)
        write(sys_root, base + 'numa_node', '%d\n' % node)
        write(sys_root, base + 'local_cpulist', compact(local) + '\n')
        write(sys_root, base + 'local_cpus', mask(local, width) + '\n')
        write(sys_root, base + 'vendor', '0x10de\n')
        write(sys_root, base + 'class', '0x030200\n')

    # NVSwitches are PCI bridges to the kernel; NVML sees them only through the GPUs' NVLinks.
    for switch in host.get('nvswitches', []):
        base = 'bus/pci/devices/%s/' % switch['pci_address']
        write(sys_root, base + 'numa_node', '%d\n' % switch.get('numa_node', -1))
        write(sys_root, base + 'vendor', '0x10de\n')
        write(sys_root, base + 'device', '%s\n' % switch.get('device_id', '0x22a3'))
        write(sys_root, base + 'class', '0x068000\n')

    kernel = host.get('kernel', {})
    thp = kernel.get('transparent_hugepage', {'enabled': 'madvise', 'defrag': 'madvise'})
    choices = {'enabled': ['always', 'madvise', 'never'],
               'defrag': ['always', 'defer', 'defer+madvise', 'madvise', 'never']}
    for knob, options in choices.items():
        write(sys_root, 'kernel/mm/transparent_hugepage/' + knob,
              ' '.join('[%s]' % o if o == thp[knob] else o for o in options) + '\n')
    if kernel.get('numa_balancing') is not None:
        write(proc_root, 'sys/kernel/numa_balancing', '%d\n' % kernel['numa_balancing'])

    model = host['cpu'].get('model', 'Unknown CPU')
    write(proc_root, 'cpuinfo', ''.join('processor\t: %d\nmodel name\t: %s\n\n' % (cpu, model) for cpu in online))
    write(proc_root, 'meminfo', 'MemTotal:       %d kB\nMemFree:        %d kB\n' % (total_kb, free_kb))
    for pid, argv0 in host.get('proc_processes', {}).items():
        write(proc_root, '%s/comm' % pid, os.path.basename(argv0)[:15] + '\n')
        write(proc_root, '%s/cmdline' % pid, argv0 + '\0')


def main(argv):
    if len(argv) != 3:
        sys.exit(__doc__.strip().splitlines()[2])
    with open(argv[1]) as handle:
        render(json.load(handle), argv[2])


if __name__ == '__main__':
    main(sys.argv)
