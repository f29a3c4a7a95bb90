# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.core contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Service specs for the placement planner: validated against the host, every problem collected.

The keys, the name rule and the memory policies are _plan's; this reads a spec's planner keys into a Spec, resolving
GPU references with the topology model's one rule. The role's keys are ignored here (see _plan.check_services).
This is a private module: its API may change without notice.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.gpufleet.core.plugins.module_utils._cpulist import parse_cpulist
from ansible_collections.gpufleet.core.plugins.module_utils._errors import GpufleetError
from ansible_collections.gpufleet.core.plugins.module_utils._mps import MpsPlanError, size_mb
from ansible_collections.gpufleet.core.plugins.module_utils._plan import (
    DEFAULT_CPUS,
    DEFAULT_MEMORY_POLICY,
    MEMORY_POLICIES,
    SERVICE_NAME_PATTERN,
    is_service_name,
)
from ansible_collections.gpufleet.core.plugins.module_utils._topology import gpu_ref_index


class PlacementError(GpufleetError, ValueError):
    """A placement that cannot work; the message names every problem, the short resource and the fix."""


def _is_int(value):
    return isinstance(value, int) and not isinstance(value, bool)


class Spec:
    """A validated service spec; only the planner's keys."""

    def __init__(self, position):
        self.position = position
        self.name = None
        self.mode = 'count'
        self.count = 1
        self.refs = []
        self.profile = None
        self.mps = None
        self.cpus = DEFAULT_CPUS
        self.policy = DEFAULT_MEMORY_POLICY
        self.exclusive = True
        self.node = None
        self.cross = False
        self.overlap = False


def _bool(spec, key, default, where, problems):
    value = spec.get(key, default)
    if value is None:
        return default
    if not isinstance(value, bool):
        problems.append('%s: %s must be true or false, got %r' % (where, key, value))
        return default
    return value


def _resolve_ref(topology, ref, where, problems):
    found = topology.resolve(ref)
    if found:
        return found[0]['uuid']
    if gpu_ref_index(ref) is not None:
        problems.append('%s: there is no GPU index %s on this host (indices: %s); name GPUs by UUID'
                        % (where, ref, ', '.join(str(i) for i in sorted(topology.by_index)) or 'none'))
    else:
        problems.append('%s: no GPU or MIG device %r on this host (GPUs: %s); name devices by their GPU-... or '
                        'MIG-... UUID from gpufleet_topology' % (where, ref, ', '.join(
                            uuid for uuid in sorted(topology.devices) if not topology.devices[uuid]['mig']) or 'none'))
    return None


def _parse_gpus(topology, daemons, spec, value, where, problems):
    if value is None or _is_int(value):
        count = 1 if value is None else value
        if count < 0:
            problems.append('%s: gpus must be 0 (CPU-only) or more, got %d' % (where, count))
        spec.mode, spec.count = 'count', max(count, 0)
    elif isinstance(value, list):
        spec.mode = 'list'
        if not value:
            problems.append('%s: gpus is an empty list; use gpus: 0 for a CPU-only service' % where)
        for ref in value:
            uuid = _resolve_ref(topology, ref, where, problems)
            if uuid is None:
                continue
            if uuid in spec.refs:
                problems.append('%s: %s is listed twice in gpus' % (where, uuid))
                continue
            spec.refs.append(uuid)
            device = topology.devices[uuid]
            if not device['mig'] and device['mig_mode']:
                problems.append('%s: %s is in MIG mode, so CUDA cannot use it whole; name its MIG devices '
                                '(MIG-...) or ask for gpus: {mig_profile: ..., count: N}' % (where, uuid))
            if uuid in daemons:
                problems.append('%s: %s is served by an MPS daemon, which only MPS clients can use; ask for '
                                'gpus: {mps: {device: %s}}' % (where, uuid, uuid))
    elif isinstance(value, dict) and 'mig_profile' in value:
        spec.mode, spec.profile = 'mig', value.get('mig_profile')
        count = value.get('count', 1)
        if not isinstance(spec.profile, str) or not spec.profile:
            problems.append('%s: mig_profile must be a profile name such as 1g.10gb' % where)
        elif not any(d['profile'] == spec.profile for d in topology.devices.values()):
            problems.append('%s: there is no MIG device of profile %s on this host (profiles present: %s); '
                            'create them with the mig role first' % (where, spec.profile, ', '.join(sorted(set(
                                d['profile'] for d in topology.devices.values() if d['mig']))) or 'none'))
        if not _is_int(count) or count < 1:
            problems.append('%s: the count of MIG devices must be 1 or more, got %r' % (where, count))
            count = 1
        spec.count = count
        extra = sorted(set(value) - set(('mig_profile', 'count')))
        if extra:
            problems.append('%s: gpus takes mig_profile and count, not %s' % (where, ', '.join(extra)))
    elif isinstance(value, dict) and isinstance(value.get('mps'), dict) and len(value) == 1:
        spec.mode, spec.mps = 'mps', dict(value['mps'])
        extra = sorted(set(spec.mps) - set(('device', 'active_thread_percentage', 'pinned_mem_limit')))
        if extra:
            problems.append('%s: an MPS share takes device, active_thread_percentage and pinned_mem_limit, not %s'
                            % (where, ', '.join(extra)))
        pct = spec.mps.get('active_thread_percentage')
        if pct is not None and (isinstance(pct, bool) or not isinstance(pct, (int, float)) or not 1 <= pct <= 100):
            problems.append('%s: active_thread_percentage must lie in 1..100, got %r (it limits SMs, not memory)'
                            % (where, pct))
        if spec.mps.get('pinned_mem_limit') is not None:
            try:
                size_mb(spec.mps['pinned_mem_limit'], where)
            except MpsPlanError as exc:
                problems.append(str(exc))
        device = spec.mps.get('device')
        if device is not None and device not in daemons:
            problems.append('%s: no MPS daemon serves %s (daemons: %s); add it to mps_daemons or name one of those'
                            % (where, device, ', '.join(sorted(daemons)) or 'none'))
        elif device is None and not daemons:
            problems.append('%s: asks for an MPS share but mps_daemons is empty; pass the mps role\'s mps_daemons'
                            % where)
        listed = sorted(d for d, daemon in daemons.items() if spec.name in [c['name'] for c in daemon['clients']])
        if device is None and len(listed) > 1:
            problems.append('%s: is a client of several MPS daemons (%s); choose one with gpus: {mps: {device: ...}}'
                            % (where, ', '.join(listed)))
        elif device is not None and listed and device not in listed:
            problems.append('%s: mps_daemons lists it as a client of %s, not of %s; make them agree'
                            % (where, listed[0], device))
    else:
        problems.append('%s: gpus must be a count, a list of GPU-/MIG- UUIDs or indices, {mig_profile: 1g.10gb, '
                        'count: 1} or {mps: {...}}; got %r' % (where, value))


def _parse_spec(topology, daemons, raw, position, seen, problems):
    spec = Spec(position)
    where = 'service %d' % position
    if not isinstance(raw, dict):
        problems.append('%s: a service must be a dict with at least a name, got %r' % (where, raw))
        return None
    name = raw.get('name')
    if not is_service_name(name):
        problems.append('%s: name %r must match ^%s$ (it names units and files)' % (where, name, SERVICE_NAME_PATTERN))
    else:
        where = 'service %s' % name
        if name in seen:
            problems.append('%s: the name is used by services %d and %d; names must be unique'
                            % (where, seen[name], position))
        seen[name] = position
        spec.name = name
    _parse_gpus(topology, daemons, spec, raw.get('gpus'), where, problems)
    cpus = raw.get('cpus', DEFAULT_CPUS)
    if cpus is None:
        cpus = DEFAULT_CPUS
    if not (cpus == 'all' or (_is_int(cpus) and cpus >= 1)):
        problems.append("%s: cpus must be a number of logical CPUs (1 or more) or 'all', got %r" % (where, cpus))
        cpus = DEFAULT_CPUS
    spec.cpus = cpus
    policy = raw.get('memory_policy') or DEFAULT_MEMORY_POLICY
    if policy not in MEMORY_POLICIES:
        problems.append('%s: memory_policy must be one of %s, got %r' % (where, ', '.join(MEMORY_POLICIES), policy))
        policy = DEFAULT_MEMORY_POLICY
    spec.policy = policy
    if spec.mode == 'mps':
        # An MPS share is shared by design: default false, and true cannot be honoured.
        spec.exclusive = _bool(raw, 'exclusive', False, where, problems)
        if spec.exclusive:
            problems.append('%s: an MPS share is always shared with the daemon\'s other clients; drop exclusive '
                            'or give the service a device of its own' % where)
            spec.exclusive = False
    else:
        spec.exclusive = _bool(raw, 'exclusive', True, where, problems)
    spec.cross = _bool(raw, 'allow_cross_numa', False, where, problems)
    spec.overlap = _bool(raw, 'allow_cpu_overlap', False, where, problems)
    node = raw.get('node')
    if node is not None:
        if not _is_int(node) or node not in topology.node_cpus:
            problems.append('%s: node %r is not a NUMA node of this host (nodes: %s)'
                            % (where, node, ', '.join(str(n) for n in topology.nodes)))
        elif not topology.has_cpus(node):
            problems.append('%s: node %d has no CPUs (a memory-only node) and cannot run CPU work; pin to one of %s'
                            % (where, node, ', '.join(str(n) for n in topology.cpu_nodes()) or 'none'))
        else:
            spec.node = node
    return spec


def reserved_cpus(value):
    """reserved_cpus as a sorted list of CPU numbers."""
    if value is None:
        return []
    if isinstance(value, str):
        return parse_cpulist(value)
    if _is_int(value):
        return [value]
    if isinstance(value, (list, tuple)) and all(_is_int(cpu) and cpu >= 0 for cpu in value):
        return sorted(set(value))
    raise PlacementError('reserved_cpus must be a CPU list such as "0,48" or a list of CPU numbers, got %r' % (value,))


def parse_specs(topology, daemons, services):
    """A Spec per service, in input order; PlacementError listing every problem of every spec."""
    if not isinstance(services, list):
        raise PlacementError('services must be a list of service specs (dicts with at least a name), got %r'
                             % (services,))
    problems = []
    seen = {}
    specs = [_parse_spec(topology, daemons, raw, position, seen, problems) for position, raw in enumerate(services, 1)]
    if problems:
        raise PlacementError('The services cannot be placed: ' + ' | '.join(problems))
    return specs
