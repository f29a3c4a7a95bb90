# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.core contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""CPU, NUMA, PCI-locality and kernel-setting facts read from sysfs and procfs.

This is a private module: its API may change without notice.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

from ansible_collections.gpufleet.core.plugins.module_utils._cpulist import (
    CpuListError,
    format_cpulist,
    parse_cpulist,
    parse_cpumask,
)
from ansible_collections.gpufleet.core.plugins.module_utils._errors import GpufleetError

_CPU_DIR = ('devices', 'system', 'cpu')
_NODE_DIR = ('devices', 'system', 'node')
_MEMINFO_LINE = re.compile(r'^(?:Node\s+\d+\s+)?(\w+):\s+(\d+)\s*kB', re.MULTILINE)
_NVIDIA_VENDOR = '0x10de'
_MPS_PROGRAMS = ('nvidia-cuda-mps-control', 'nvidia-cuda-mps-server')


class TopologyReadError(GpufleetError):
    """A sysfs or procfs value that cannot be understood."""


def _cpulist_attr(files, parts, what):
    text = files.read_sys(*parts)
    if text is None:
        return None
    try:
        return parse_cpulist(text)
    except CpuListError as exc:
        raise TopologyReadError('%s (%s/%s): %s' % (what, files.sysfs_root, '/'.join(parts), exc))


def _int_attr(files, parts):
    text = files.read_sys(*parts)
    try:
        return None if text is None else int(text)
    except ValueError:
        return None


def _cpu_model(files):
    cpuinfo = files.read_proc('cpuinfo') or ''
    for key in ('model name', 'Model', 'Hardware', 'cpu model'):
        match = re.search(r'^%s\s*:\s*(.+)$' % re.escape(key), cpuinfo, re.MULTILINE)
        if match:
            return match.group(1).strip()
    return None


def read_cpu(files):
    """Sockets, cores, threads, online/offline CPUs and SMT sibling groups.

    Reads one sibling list per core and one package list per socket, not every file of every CPU:
    on a 224-CPU host that is about 115 reads instead of 700.
    """
    online = _cpulist_attr(files, _CPU_DIR + ('online',), 'online CPUs')
    if online is None:
        online = sorted(int(name[3:]) for name in files.list_sys(*_CPU_DIR)
                        if re.fullmatch(r'cpu\d+', name))
    offline = _cpulist_attr(files, _CPU_DIR + ('offline',), 'offline CPUs') or []
    online_set = set(online)
    core_of = {}
    package_of = {}
    packages = []
    for cpu in online:
        topo = _CPU_DIR + ('cpu%d' % cpu, 'topology')
        if cpu not in core_of:
            siblings = _cpulist_attr(files, topo + ('thread_siblings_list',), 'SMT siblings of cpu%d' % cpu)
            # An offline sibling can still be listed on older kernels; keep only online ones.
            group = tuple(c for c in (siblings or [cpu]) if c in online_set) or (cpu,)
            for member in group:
                core_of[member] = group
        if cpu not in package_of:
            package = None
            for name in ('package_cpus_list', 'core_siblings_list'):  # the second on kernels before 5.0
                package = _cpulist_attr(files, topo + (name,), 'package CPUs of cpu%d' % cpu)
                if package is not None:
                    break
            members = [c for c in (package or online) if c in online_set]
            for member in members:
                package_of[member] = len(packages)
            packages.append(members)
    groups = sorted(set(core_of.values()))
    sockets = len(packages) or None
    return {
        'model': _cpu_model(files),
        'sockets': sockets,
        'cores_per_socket': (len(groups) // sockets) if sockets else None,
        'threads_per_core': max(len(group) for group in groups) if groups else None,
        'online': online,
        'online_cpulist': format_cpulist(online),
        'offline': offline,
        'smt_siblings': [format_cpulist(group) for group in groups],
    }


def _node_memory(files, node_id):
    text = files.read_sys(*(_NODE_DIR + ('node%d' % node_id, 'meminfo'))) or ''
    values = dict((key, int(kb)) for key, kb in _MEMINFO_LINE.findall(text))
    total = values.get('MemTotal')
    free = values.get('MemFree')
    return (None if total is None else total // 1024, None if free is None else free // 1024)


def read_numa_nodes(files, online_cpus):
    """One entry per NUMA node, in kernel id order; ids may be sparse.

    A kernel without NUMA support exposes no node directory: report one node 0
    holding every online CPU and the memory from /proc/meminfo.
    """
    online_set = set(online_cpus)
    node_ids = _cpulist_attr(files, _NODE_DIR + ('online',), 'online NUMA nodes')
    if node_ids is None:
        node_ids = sorted(int(name[4:]) for name in files.list_sys(*_NODE_DIR)
                          if re.fullmatch(r'node\d+', name))
    if not node_ids:
        values = dict((k, int(v)) for k, v in _MEMINFO_LINE.findall(files.read_proc('meminfo') or ''))
        return [{
            'id': 0, 'cpus': sorted(online_set), 'cpulist': format_cpulist(online_set),
            'has_cpus': bool(online_set), 'memory_total_mb': values.get('MemTotal', 0) // 1024,
            'memory_free_mb': values.get('MemFree', 0) // 1024, 'distances': [10],
        }]
    nodes = []
    for node_id in node_ids:
        base = _NODE_DIR + ('node%d' % node_id,)
        cpus = [c for c in (_cpulist_attr(files, base + ('cpulist',), 'CPUs of node%d' % node_id) or [])
                if c in online_set]
        total_mb, free_mb = _node_memory(files, node_id)
        distance_text = files.read_sys(*(base + ('distance',))) or ''
        try:
            distances = [int(value) for value in distance_text.split()]
        except ValueError:
            raise TopologyReadError('node%d distance (%s/%s) is %r; expected a list of numbers such as "10 21"'
                                    % (node_id, files.sysfs_root, '/'.join(base + ('distance',)), distance_text))
        nodes.append({
            'id': node_id,
            'cpus': cpus,
            'cpulist': format_cpulist(cpus),
            'has_cpus': bool(cpus),
            'memory_total_mb': total_mb,
            'memory_free_mb': free_mb,
            'distances': distances,
        })
    return nodes


def read_kernel_settings(files):
    """The kernel knobs that change NUMA placement behind a binding's back."""
    balancing = files.read_proc('sys', 'kernel', 'numa_balancing')
    thp = {}
    for knob in ('enabled', 'defrag'):
        text = files.read_sys('kernel', 'mm', 'transparent_hugepage', knob)
        match = re.search(r'\[(\w+)\]', text or '')
        thp[knob] = match.group(1) if match else (text or None)
    return {
        'numa_balancing': int(balancing) if balancing and balancing.strip().isdigit() else None,
        'transparent_hugepage': thp,
    }


def sysfs_pci_address(nvml_bus_id):
    """NVML writes an 8-digit PCI domain (00000000:17:00.0); sysfs uses 4 (0000:17:00.0)."""
    domain, _sep, rest = nvml_bus_id.strip().lower().partition(':')
    return '%04x:%s' % (int(domain, 16), rest)


def read_pci_locality(files, nvml_bus_id):
    """The NUMA node and local CPUs the kernel reports for a PCI device.

    Returns (numa_node or None, local CPUs or None); the kernel's -1 becomes None.
    """
    base = ('bus', 'pci', 'devices', sysfs_pci_address(nvml_bus_id))
    node = _int_attr(files, base + ('numa_node',))
    local = _cpulist_attr(files, base + ('local_cpulist',), 'local CPUs of %s' % base[-1])
    if local is None:
        mask = files.read_sys(*(base + ('local_cpus',)))
        try:
            local = parse_cpumask(mask) if mask else None
        except CpuListError as exc:
            raise TopologyReadError('local CPUs of %s (%s/%s): %s'
                                    % (base[-1], files.sysfs_root, '/'.join(base + ('local_cpus',)), exc))
    return (node if node is not None and node >= 0 else None), local


def read_nvidia_pci(files):
    """NVIDIA GPUs and NVSwitches on the PCI bus, from sysfs: known before any driver is installed.

    GPUs have class 0x0300 (VGA) or 0x0302 (3D controller); NVSwitches show up as bridges, class 0x0680.
    """
    found = {'gpus': [], 'nvswitches': []}
    for address in files.list_sys('bus', 'pci', 'devices'):
        base = ('bus', 'pci', 'devices', address)
        if (files.read_sys(*(base + ('vendor',))) or '').lower() != _NVIDIA_VENDOR:
            continue
        device_class = (files.read_sys(*(base + ('class',))) or '').lower()
        if device_class[:6] in ('0x0300', '0x0302'):
            found['gpus'].append(address)
        elif device_class[:6] == '0x0680':
            found['nvswitches'].append(address)
    return found


def find_processes(files, programs):
    """PIDs of running programs, by program name, from /proc (no subprocess)."""
    found = dict((program, []) for program in programs)
    prefixes = tuple(program[:15] for program in programs)
    for pid, name in files.process_names():
        # The name is cut at 15 characters, so it only narrows the search; cmdline decides.
        if not name.startswith(prefixes):
            continue
        argv0 = (files.read_proc(str(pid), 'cmdline') or '').split('\0')[0]
        program = argv0.rsplit('/', 1)[-1]
        if program in found:
            found[program].append(pid)
    return found


def find_mps_processes(files):
    """PIDs of running MPS control daemons and servers."""
    found = find_processes(files, _MPS_PROGRAMS)
    return {
        'control_daemon_running': bool(found['nvidia-cuda-mps-control']),
        'control_pids': found['nvidia-cuda-mps-control'],
        'server_pids': found['nvidia-cuda-mps-server'],
    }
