# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""topology_facts on this machine's real /sys and /proc, checked against lscpu."""

from __future__ import absolute_import, division, print_function

import subprocess

from ansible_collections.gpufleet.core.plugins.module_utils._cpulist import parse_cpulist
from ansible_collections.gpufleet.core.plugins.modules import topology_facts


def lscpu_rows():
    """(cpu, core, socket, node) for every online CPU, as util-linux sees them."""
    text = subprocess.check_output(['lscpu', '-p=CPU,CORE,SOCKET,NODE'], universal_newlines=True)
    rows = []
    for line in text.splitlines():
        if line.startswith('#'):
            continue
        cpu, core, socket, node = (int(field) if field else 0 for field in line.split(','))
        rows.append((cpu, core, socket, node))
    return rows


def test_live_host_matches_lscpu(run_module, sim_hosts):
    sim_hosts.none()
    result = run_module(topology_facts, {})
    topo = result['ansible_facts']['gpufleet_topology']
    rows = lscpu_rows()
    assert parse_cpulist(topo['cpu']['online_cpulist']) == sorted(cpu for cpu, _core, _socket, _node in rows)
    assert topo['cpu']['sockets'] == len(set(socket for _cpu, _core, socket, _node in rows))
    assert topo['cpu']['threads_per_core'] * topo['cpu']['cores_per_socket'] * topo['cpu']['sockets'] == len(rows)
    by_node = {}
    for cpu, _core, _socket, node in rows:
        by_node.setdefault(node, []).append(cpu)
    cpu_nodes = dict((node['id'], parse_cpulist(node['cpulist'])) for node in topo['numa_nodes'] if node['has_cpus'])
    assert cpu_nodes == dict((node, sorted(cpus)) for node, cpus in by_node.items())
    # Sandboxes can show a different /proc/meminfo from the nodes' meminfo, so only sanity-check memory.
    for node in topo['numa_nodes']:
        assert 0 < node['memory_free_mb'] <= node['memory_total_mb']
    # No NVIDIA driver here: GPU facts are empty and say why.
    assert topo['gpus'] == [] and topo['nvml']['reason']
