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

import re

from ansible_collections.gpufleet.core.plugins.module_utils._cpulist import format_sorted, parse_cpulist
from ansible_collections.gpufleet.core.plugins.module_utils._errors import GpufleetError
from ansible_collections.gpufleet.core.plugins.module_utils._mps import MpsPlanError, size_mb
from ansible_collections.gpufleet.core.plugins.module_utils._plan import (
    DEFAULT_CPUS,
    DEFAULT_GPUS,
    DEFAULT_MEMORY_POLICY,
    MEMORY_POLICIES,
    SERVICE_NAME_PATTERN,
    is_service_name,
)
from ansible_collections.gpufleet.core.plugins.module_utils._topology import gpu_ref_index
from ansible_collections.gpufleet.core.plugins.module_utils._values import is_integer as _is_int


class PlacementError(GpufleetError, ValueError):
    """A placement that cannot work; the message names every problem, the short resource and the fix."""


_INTEGER = re.compile(r'-?[0-9]+')
_DECIMAL = re.compile(r'[0-9]+\.[0-9]+')


def _from_string(value, decimals=False):
    """A number given as a string, as ``-e`` passes every value, as that number; any other VALUE as it is.

    Only an unambiguous decimal number converts ('4', '-1', and '12.5' where DECIMALS); '4 cpus' or '0x4' stay
    strings, for the caller to refuse with "expected a number".
    """
    if not isinstance(value, str):
        return value
    if _INTEGER.fullmatch(value):
        return int(value)
    if decimals and _DECIMAL.fullmatch(value):
        return float(value)
    return value


class Spec:
    """A validated service spec; only the planner's keys."""

    __slots__ = ('position', 'name', 'mode', 'count', 'refs', 'profile', 'mps', 'cpus', 'policy', 'exclusive', 'node',
                 'cross', 'overlap')

    def __init__(self, position):
        self.position = position
        self.name = None
        self.mode = 'count'
        self.count = DEFAULT_GPUS
        self.refs = ()  # a list of its own in list mode
        self.profile = None
        self.mps = None
        self.cpus = DEFAULT_CPUS
        self.policy = DEFAULT_MEMORY_POLICY
        self.exclusive = True
        self.node = None
        self.cross = False
        self.overlap = False


def _where(spec):
    """How a problem names the service: by its name once that is known good, else by its position."""
    return 'service %s' % (spec.name if spec.name is not None else spec.position)


def _bool(raw, key, default, spec, problems):
    value = raw.get(key, default)
    if value is None:
        return default
    if not isinstance(value, bool):
        problems.append('%s: %s must be true or false, got %r' % (_where(spec), key, value))
        return default
    return value


def _listed(items, one, many):
    """ONE for a single item, MANY (with 'and' before the last) for several: a refusal names each device once."""
    if len(items) == 1:
        return one % items[0]
    return many % ('%s and %s' % (', '.join(items[:-1]), items[-1]))


def _ref_problems(topology, where, refused):
    """One message per kind of refusal, listing every reference it applies to, in the order they were first met."""
    problems = []
    for kind, refs in refused.items():
        if kind == 'index':
            problems.append('%s: %s on this host (indices: %s); name GPUs by UUID' % (where, _listed(
                [str(ref) for ref in refs], 'there is no GPU index %s', 'there are no GPU indices %s'),
                ', '.join(str(i) for i in sorted(topology.by_index)) or 'none'))
        elif kind == 'unknown':
            problems.append('%s: %s on this host (GPUs: %s); name devices by their GPU-... or MIG-... UUID from '
                            'gpufleet_topology' % (where, _listed([repr(ref) for ref in refs], 'no GPU or MIG device %s',
                                                                  'no GPU or MIG devices %s'),
                                                   ', '.join(uuid for uuid in sorted(topology.devices)
                                                             if not topology.devices[uuid]['mig']) or 'none'))
        elif kind == 'twice':
            problems.append('%s: %s in gpus' % (where, _listed(refs, '%s is listed twice', '%s are listed twice')))
        elif kind == 'mig_mode':
            problems.append('%s: %s, so CUDA cannot use %s whole; name %s MIG devices (MIG-...) or ask for gpus: '
                            '{mig_profile: ..., count: N}' % (where, _listed(refs, '%s is in MIG mode',
                                                                             '%s are in MIG mode'),
                                                              'it' if len(refs) == 1 else 'them',
                                                              'its' if len(refs) == 1 else 'their'))
        else:
            problems.append('%s: %s, which only MPS clients can use; ask for %sgpus: {mps: {device: %s}}'
                            % (where, _listed(refs, '%s is served by an MPS daemon', '%s are served by MPS daemons'),
                               '' if len(refs) == 1 else 'a share of one of them: ', refs[0]))
    return problems


def _parse_gpus(topology, daemons, spec, value, problems):
    value = _from_string(value)
    if value is None or _is_int(value):
        count = DEFAULT_GPUS if value is None else value
        if count < 0:
            problems.append('%s: gpus must be 0 (CPU-only) or more, got %d' % (_where(spec), count))
        spec.count = max(count, 0)  # the default mode, 'count'
        return
    where = _where(spec)
    if isinstance(value, list):
        spec.mode = 'list'
        spec.refs = []
        if not value:
            problems.append('%s: gpus is an empty list; use gpus: 0 for a CPU-only service' % where)
        refused = {}  # kind of refusal -> the references it applies to; dicts keep the order kinds were met
        for ref in value:
            found = topology.resolve(ref)
            if not found:
                refused.setdefault('index' if gpu_ref_index(ref) is not None else 'unknown', []).append(ref)
                continue
            uuid = found[0]['uuid']
            if uuid in spec.refs:
                refused.setdefault('twice', []).append(uuid)
                continue
            spec.refs.append(uuid)
            device = topology.devices[uuid]
            if not device['mig'] and device['mig_mode']:
                refused.setdefault('mig_mode', []).append(uuid)
            if uuid in daemons:
                refused.setdefault('mps', []).append(uuid)
        problems.extend(_ref_problems(topology, where, refused))
    elif isinstance(value, dict) and 'mig_profile' in value:
        spec.mode, spec.profile = 'mig', value.get('mig_profile')
        count = _from_string(value.get('count', 1))
        if not isinstance(spec.profile, str) or not spec.profile:
            problems.append('%s: mig_profile must be a profile name such as 1g.10gb' % where)
        elif not any(d['profile'] == spec.profile for d in topology.devices.values()):
            problems.append('%s: there is no MIG device of profile %s on this host (profiles present: %s); '
                            'create them with the mig role first' % (where, spec.profile, ', '.join(sorted(set(
                                d['profile'] for d in topology.devices.values() if d['mig']))) or 'none'))
        if isinstance(count, str):
            problems.append('%s: the count of MIG devices is %r; expected a number, 1 or more' % (where, count))
            count = 1
        elif not _is_int(count) or count < 1:
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
        pct = _from_string(spec.mps.get('active_thread_percentage'), True)
        if pct is not None:
            spec.mps['active_thread_percentage'] = pct
        if isinstance(pct, str):
            problems.append('%s: active_thread_percentage is %r; expected a number in 1..100' % (where, pct))
        elif pct is not None and (isinstance(pct, bool) or not isinstance(pct, (int, float)) or not 1 <= pct <= 100):
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
        listed = sorted(d for d, daemon in daemons.items() if spec.name in daemon.client_names())
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
    """A Spec of one service; its problems go to PROBLEMS. The usual values (plain numbers, true and false, a known
    policy) are taken inline; anything else goes through the general checks and their messages."""
    spec = Spec(position)
    if not isinstance(raw, dict):
        problems.append('%s: a service must be a dict with at least a name, got %r' % (_where(spec), raw))
        return None
    name = raw.get('name')
    if not is_service_name(name):
        problems.append('%s: name %r must match ^%s$ (it names units and files)'
                        % (_where(spec), name, SERVICE_NAME_PATTERN))
    else:
        spec.name = name
        if name in seen:
            problems.append('%s: the name is used by services %d and %d; names must be unique'
                            % (_where(spec), seen[name], position))
        seen[name] = position
    _parse_gpus(topology, daemons, spec, raw.get('gpus'), problems)
    cpus = raw.get('cpus', DEFAULT_CPUS)
    if cpus.__class__ is not int or cpus < 1:
        cpus = _parse_cpus(spec, cpus, problems)
    spec.cpus = cpus
    policy = raw.get('memory_policy') or DEFAULT_MEMORY_POLICY
    if policy not in MEMORY_POLICIES:
        problems.append('%s: memory_policy must be one of %s, got %r'
                        % (_where(spec), ', '.join(MEMORY_POLICIES), policy))
        policy = DEFAULT_MEMORY_POLICY
    spec.policy = policy
    if spec.mode == 'mps':
        # An MPS share is shared by design: default false, and true cannot be honoured.
        spec.exclusive = _bool(raw, 'exclusive', False, spec, problems)
        if spec.exclusive:
            problems.append('%s: an MPS share is always shared with the daemon\'s other clients; drop exclusive '
                            'or give the service a device of its own' % _where(spec))
            spec.exclusive = False
    else:
        flag = raw.get('exclusive', True)
        spec.exclusive = flag if flag is True or flag is False else _bool(raw, 'exclusive', True, spec, problems)
    flag = raw.get('allow_cross_numa', False)
    spec.cross = flag if flag is True or flag is False else _bool(raw, 'allow_cross_numa', False, spec, problems)
    flag = raw.get('allow_cpu_overlap', False)
    spec.overlap = flag if flag is True or flag is False else _bool(raw, 'allow_cpu_overlap', False, spec, problems)
    node = raw.get('node')
    if node is not None:
        _parse_node(topology, spec, node, problems)
    return spec


def _parse_cpus(spec, cpus, problems):
    """cpus other than a plain number of 1 or more: 'all', a number as a string, or a problem (and the default)."""
    if cpus is None:
        cpus = DEFAULT_CPUS
    cpus = _from_string(cpus)
    if isinstance(cpus, str) and cpus != 'all':
        problems.append("%s: cpus is %r; expected a number of logical CPUs (1 or more) or 'all'" % (_where(spec), cpus))
        cpus = DEFAULT_CPUS
    elif not (cpus == 'all' or (_is_int(cpus) and cpus >= 1)):
        problems.append("%s: cpus must be a number of logical CPUs (1 or more) or 'all', got %r" % (_where(spec), cpus))
        cpus = DEFAULT_CPUS
    return cpus


def _parse_node(topology, spec, node, problems):
    node = _from_string(node)
    where = _where(spec)
    if isinstance(node, str):
        problems.append('%s: node is %r; expected a number, a NUMA node of this host (nodes: %s)'
                        % (where, node, ', '.join(str(n) for n in topology.nodes)))
    elif not _is_int(node) or node not in topology.node_cpus:
        problems.append('%s: node %r is not a NUMA node of this host (nodes: %s)'
                        % (where, node, ', '.join(str(n) for n in topology.nodes)))
    elif not topology.has_cpus(node):
        problems.append('%s: node %d has no CPUs (a memory-only node) and cannot run CPU work; pin to one of %s'
                        % (where, node, ', '.join(str(n) for n in topology.cpu_nodes()) or 'none'))
    else:
        spec.node = node


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


def _cpus(cpus):
    """'CPU 5' or 'CPUs 5-6,9': sorted CPU numbers in the kernel's list form."""
    return '%s %s' % ('CPU' if len(cpus) == 1 else 'CPUs', format_sorted(cpus))


def check_reserved(topology, reserved):
    """Refuse reserved CPUs that the host does not have, or has offline: a typo there reserves nothing.

    The host's CPUs are its NUMA nodes' CPUs, which topology_facts lists online only.
    """
    absent = [cpu for cpu in reserved if cpu not in topology.core_of]
    if not absent:
        return
    offline = set(topology.offline_cpus()).intersection(absent)
    missing = [cpu for cpu in absent if cpu not in offline]
    named = []
    if missing:
        named.append('%s, which this host does not have' % _cpus(missing))
    if offline:
        named.append('%s, which %s offline' % (_cpus(sorted(offline)), 'is' if len(offline) == 1 else 'are'))
    online = format_sorted(sorted(topology.core_of)) or 'none'
    raise PlacementError('reserved_cpus names %s (the host\'s online CPUs: %s); fix reserved_cpus '
                         '(gpu_services_reserved_cpus) to list only CPUs of this host%s'
                         % (', and '.join(named), online,
                            ', or bring the offline ones online and gather the topology again' if offline else ''))


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
