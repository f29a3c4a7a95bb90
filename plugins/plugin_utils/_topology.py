# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.core contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Controller-side access to the topology model: turns its errors into AnsibleFilterError.

This is a private module: its API may change without notice.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible.errors import AnsibleFilterError

from ansible_collections.gpufleet.core.plugins.module_utils._cpulist import format_cpulist, parse_cpulist
from ansible_collections.gpufleet.core.plugins.module_utils._errors import GpufleetError


def _guarded(name, call, *args):
    try:
        return call(*args)
    except GpufleetError as exc:  # CpuListError, TopologyModelError: messages that name the fix
        raise AnsibleFilterError('gpufleet.core.%s: %s' % (name, exc))


def cpulist_expand(text):
    return _guarded('cpulist_expand', parse_cpulist, text)


def cpulist_compact(cpus):
    if isinstance(cpus, (str, bytes)) or not hasattr(cpus, '__iter__'):
        raise AnsibleFilterError('gpufleet.core.cpulist_compact: expected a list of CPU numbers, got %r' % (cpus,))
    return _guarded('cpulist_compact', format_cpulist, cpus)


def gpu_numa_cpulist(topology, gpu):
    if not isinstance(topology, dict) or 'gpus' not in topology:
        raise AnsibleFilterError('gpufleet.core.gpu_numa_cpulist: the input must be '
                                 "ansible_facts['gpufleet_topology'] from gpufleet.core.topology_facts")
    # The topology model is imported only by the filter that needs it: the CPU-list filters are used far more.
    from ansible_collections.gpufleet.core.plugins.module_utils._topology import gpu_node_cpus
    return format_cpulist(_guarded('gpu_numa_cpulist', gpu_node_cpus, topology, gpu))


def topology_after_mig(topology, mig_gpus):
    """The fact as Topology.after_mig projects it: the planner and the service_plan action take a fact."""
    from ansible_collections.gpufleet.core.plugins.module_utils._topology import Topology
    return _guarded('topology_after_mig', lambda: Topology(topology).after_mig(mig_gpus).fact)


def topology_summary(topology):
    """What the roles format from the fact (Topology.summary), read through the model."""
    from ansible_collections.gpufleet.core.plugins.module_utils._topology import Topology
    return _guarded('topology_summary', lambda: Topology(topology).summary())
