# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.core contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""What the binding audit (_numa_audit.py) reads about a service's processes: where their memory is, from
/proc/<pid>/numa_maps text (pages per node, the memory policies of the mappings, the nodes those policies let pages
come from), and which processes hold each GPU, through the NVML adapter.

This is a private module: its API may change without notice.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

from ansible_collections.gpufleet.core.plugins.module_utils._cpulist import parse_cpulist
from ansible_collections.gpufleet.core.plugins.module_utils._nvml import Nvml, NvmlError

_NODE_PAGES = re.compile(r'N(\d+)=(\d+)')
# The memory policy numa_maps shows for each mapping: mode[=flags][:nodes]; two modes have a space in their name.
_POLICY = re.compile(r'^\S+\s+((weighted interleave|prefer \(many\)|[a-z]+)(?:=[a-z|]+)?(?::([\d,-]+))?)')
# Modes whose nodes are the only ones pages may come from; the others only prefer them.
_STRICT_POLICIES = ('bind', 'interleave', 'weighted interleave')


def parse_numa_maps(text, base_page_kb):
    """Pages per node from numa_maps N<node>=<pages>, in base pages (a hugetlb page counts as many)."""
    pages = {}
    for line in (text or '').splitlines():
        words = line.split()
        scale = 1
        for word in words:
            if word.startswith('kernelpagesize_kB='):
                try:
                    scale = max(int(word.split('=', 1)[1]) // base_page_kb, 1)
                except ValueError:
                    scale = 1
        for word in words:
            match = _NODE_PAGES.fullmatch(word)
            if match:
                node = int(match.group(1))
                pages[node] = pages.get(node, 0) + int(match.group(2)) * scale
    return pages


def parse_policies(text):
    """{policy string: strict nodes or None} of the mappings in numa_maps (the task policy shows on every
    mapping without its own)."""
    policies = {}
    for line in (text or '').splitlines():
        match = _POLICY.match(line)
        if not match:
            continue
        strict = None
        if match.group(2) in _STRICT_POLICIES and match.group(3):
            strict = frozenset(parse_cpulist(match.group(3)))
        policies[match.group(1)] = strict
    return policies


def memory_nodes(mems_allowed, policies):
    """Where a process's pages may come from: the cpuset's nodes, narrowed by a bind or interleave policy."""
    if not policies or any(strict is None for strict in policies.values()):
        return tuple(mems_allowed)
    reachable = set()
    for strict in policies.values():
        reachable.update(strict)
    return tuple(node for node in mems_allowed if node in reachable)


# GPUs ----------------------------------------------------------------------------------------------------


def gpu_holders(nvml_library):
    """{uuid: set(pids)} of every GPU and MIG device, or (None, reason) when NVML cannot say.

    On a MIG GPU a process is listed under its MIG device; the parent GPU only keeps the ones NVML
    puts on no MIG device.
    """
    if nvml_library is None:
        return None, ('the Python package nvidia-ml-py (module pynvml) is not installed on the target; '
                      'install it to see which GPUs the services hold')
    holders = {}
    try:
        with Nvml(nvml_library) as nvml:
            for handle in nvml.device_handles():
                uuid = nvml.identity(handle)['uuid']
                pids = set(nvml.compute_pids(handle))
                if nvml.modes(handle)['mig_mode_current'] == 'enabled':
                    for device in nvml.mig_devices(handle).values():
                        holders[device['uuid']] = set(device['pids'])
                        pids -= set(device['pids'])
                holders[uuid] = pids
    except NvmlError as exc:
        return None, str(exc)
    return holders, None
