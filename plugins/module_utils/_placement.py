# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.core contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""NUMA-aware placement of GPU services: which GPUs, CPUs and memory nodes each service gets.

Pure code on a gpufleet_topology fact, shared by the place_services filter (through plugin_utils).

The rules, in the order they are applied:

1. Every spec is validated first; every problem is reported at once.
2. Services whose previous placement (``previous``) still fits their spec and the host keep it exactly,
   claimed in input order. That is what makes plans stable: adding or removing a service moves no other.
3. GPUs and MIG devices named explicitly are claimed, then count-based requests (whole GPUs, MIG profiles,
   MPS shares without a device) choose in input order: the pinned node first, then unshared devices before
   shared ones, then the node with the most free cores (lowest id on a tie), then the least shared device, then
   the lowest PCI bus id (UUID where none): never the index, which can change between boots.
4. CPUs are whole cores (SMT siblings together) packed from the low end of the node's free cores; services
   with a CPU count go before services that take ``all``. Reserved CPUs are never used, and a core with a
   reserved CPU is not used at all.

This is a private module: its API may change without notice.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

from ._cpulist import CpuListError, format_cpulist, parse_cpulist
from ._mps import MpsPlanError, client_environment, size_mb
from ._mps import plan as mps_plan

DEFAULT_CPUS = 4
POLICIES = ('bind', 'preferred', 'interleave')
PLANNER_KEYS = ('name', 'gpus', 'cpus', 'memory_policy', 'exclusive', 'node', 'allow_cross_numa', 'allow_cpu_overlap')
_NAME = re.compile(r'^[a-z0-9][a-z0-9_-]{0,62}$')
_ENTRY_KEYS = ('name', 'gpus', 'gpu_uuids', 'numa_node', 'cpus', 'mems', 'memory_policy', 'exclusive', 'mps')


class PlacementError(ValueError):
    """A placement that cannot work; the message names every problem, the short resource and the fix."""


class _Unplaceable(Exception):
    """One service cannot be placed; collected, so that one error lists them all."""


def _is_int(value):
    return isinstance(value, int) and not isinstance(value, bool)


class _Host:
    """The topology, indexed: nodes, whole cores per node, devices by UUID, reserved cores."""

    def __init__(self, topology, reserved):
        if not isinstance(topology, dict) or not isinstance(topology.get('numa_nodes'), list) \
                or not isinstance(topology.get('gpus', []), list):
            raise PlacementError("the topology must be ansible_facts['gpufleet_topology'] from "
                                 "gpufleet.core.topology_facts (a dict with numa_nodes and gpus)")
        self.node_cpus = {}
        for node in topology['numa_nodes']:
            if not isinstance(node, dict) or not _is_int(node.get('id')) or not isinstance(node.get('cpus'), list):
                raise PlacementError('the topology has a NUMA node without an integer id and a cpus list (%r); '
                                     'gather it again with gpufleet.core.topology_facts' % (node,))
            self.node_cpus[node['id']] = sorted(set(node['cpus']))
        self.nodes = sorted(self.node_cpus)
        siblings = {}
        for text in (topology.get('cpu') or {}).get('smt_siblings') or []:
            group = tuple(parse_cpulist(text))
            for cpu in group:
                siblings[cpu] = group
        # A core is its siblings within one node; a CPU the sibling lists omit is a core of its own.
        self.cores = {}
        self.core_of = {}
        for node_id in self.nodes:
            cpus = set(self.node_cpus[node_id])
            found = set()
            for cpu in self.node_cpus[node_id]:
                found.add(tuple(c for c in siblings.get(cpu, (cpu,)) if c in cpus) or (cpu,))
            self.cores[node_id] = sorted(found)
            for core in found:
                for cpu in core:
                    self.core_of[cpu] = (node_id, core)
        self.reserved = set(reserved)
        self.reserved_cores = set(self.core_of[cpu] for cpu in self.reserved if cpu in self.core_of)
        self.devices = {}
        self.by_index = {}
        for gpu in topology.get('gpus') or []:
            if not isinstance(gpu, dict) or not isinstance(gpu.get('uuid'), str):
                raise PlacementError('the topology has a GPU without a uuid (%r); gather it again with '
                                     'gpufleet.core.topology_facts' % (gpu,))
            node = gpu.get('numa_node')
            bus = str(gpu.get('pci_bus_id') or '').upper()
            mig = gpu.get('mig') or {}
            self.devices[gpu['uuid']] = {
                'uuid': gpu['uuid'], 'mig': False, 'parent': gpu['uuid'], 'node': node, 'bus': bus,
                'mig_mode': mig.get('mode_current') == 'enabled', 'profile': None, 'index': gpu.get('index'),
                'sort': (bus, gpu['uuid'], -1, -1, ''),
            }
            if _is_int(gpu.get('index')):
                self.by_index[gpu['index']] = gpu['uuid']
            for gi in mig.get('gpu_instances') or []:
                start = (gi.get('placement') or {}).get('start', -1)
                for ci in gi.get('compute_instances') or []:
                    if ci.get('uuid'):
                        self.devices[ci['uuid']] = {
                            'uuid': ci['uuid'], 'mig': True, 'parent': gpu['uuid'], 'node': node, 'bus': bus,
                            'mig_mode': True, 'profile': gi.get('profile'), 'index': None,
                            'sort': (bus, gpu['uuid'], start, ci.get('id', -1), ci['uuid']),
                        }

    def has_cpus(self, node_id):
        return bool(self.node_cpus.get(node_id))

    def cpu_nodes(self):
        return [n for n in self.nodes if self.has_cpus(n)]

    def describe(self, uuid):
        device = self.devices[uuid]
        if device['mig']:
            return '%s (%s on %s)' % (uuid, device['profile'], device['parent'])
        return '%s (bus %s)' % (uuid, device['bus'] or 'unknown')


class _Spec:
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
        self.policy = 'bind'
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


def _resolve_ref(host, ref, where, problems):
    if _is_int(ref) or (isinstance(ref, str) and ref.isdigit()):
        uuid = host.by_index.get(int(ref))
        if uuid is None:
            problems.append('%s: there is no GPU index %s on this host (indices: %s); name GPUs by UUID'
                            % (where, ref, ', '.join(str(i) for i in sorted(host.by_index)) or 'none'))
        return uuid
    if isinstance(ref, str) and ref in host.devices:
        return ref
    problems.append('%s: no GPU or MIG device %r on this host (GPUs: %s); name devices by their GPU-... or '
                    'MIG-... UUID from gpufleet_topology' % (where, ref, ', '.join(
                        uuid for uuid in sorted(host.devices) if not host.devices[uuid]['mig']) or 'none'))
    return None


def _parse_gpus(host, daemons, spec, value, where, problems):
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
            uuid = _resolve_ref(host, ref, where, problems)
            if uuid is None:
                continue
            if uuid in spec.refs:
                problems.append('%s: %s is listed twice in gpus' % (where, uuid))
                continue
            spec.refs.append(uuid)
            device = host.devices[uuid]
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
        elif not any(d['profile'] == spec.profile for d in host.devices.values()):
            problems.append('%s: there is no MIG device of profile %s on this host (profiles present: %s); '
                            'create them with the mig role first' % (where, spec.profile, ', '.join(sorted(set(
                                d['profile'] for d in host.devices.values() if d['mig']))) or 'none'))
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


def _parse_spec(host, daemons, raw, position, seen, problems):
    spec = _Spec(position)
    where = 'service %d' % position
    if not isinstance(raw, dict):
        problems.append('%s: a service must be a dict with at least a name, got %r' % (where, raw))
        return None
    name = raw.get('name')
    if not isinstance(name, str) or not _NAME.match(name):
        problems.append('%s: name %r must match ^[a-z0-9][a-z0-9_-]{0,62}$ (it names units and files)'
                        % (where, name))
    else:
        where = 'service %s' % name
        if name in seen:
            problems.append('%s: the name is used by services %d and %d; names must be unique'
                            % (where, seen[name], position))
        seen[name] = position
        spec.name = name
    _parse_gpus(host, daemons, spec, raw.get('gpus'), where, problems)
    cpus = raw.get('cpus', DEFAULT_CPUS)
    if cpus is None:
        cpus = DEFAULT_CPUS
    if not (cpus == 'all' or (_is_int(cpus) and cpus >= 1)):
        problems.append("%s: cpus must be a number of logical CPUs (1 or more) or 'all', got %r" % (where, cpus))
        cpus = DEFAULT_CPUS
    spec.cpus = cpus
    policy = raw.get('memory_policy') or 'bind'
    if policy not in POLICIES:
        problems.append('%s: memory_policy must be one of %s, got %r' % (where, ', '.join(POLICIES), policy))
        policy = 'bind'
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
        if not _is_int(node) or node not in host.node_cpus:
            problems.append('%s: node %r is not a NUMA node of this host (nodes: %s)'
                            % (where, node, ', '.join(str(n) for n in host.nodes)))
        elif not host.has_cpus(node):
            problems.append('%s: node %d has no CPUs (a memory-only node) and cannot run CPU work; pin to one of %s'
                            % (where, node, ', '.join(str(n) for n in host.cpu_nodes()) or 'none'))
        else:
            spec.node = node
    return spec


def _reserved(value):
    if value is None:
        return []
    if isinstance(value, str):
        return parse_cpulist(value)
    if _is_int(value):
        return [value]
    if isinstance(value, (list, tuple)) and all(_is_int(cpu) and cpu >= 0 for cpu in value):
        return sorted(set(value))
    raise PlacementError('reserved_cpus must be a CPU list such as "0,48" or a list of CPU numbers, got %r' % (value,))


def _daemons(topology, mps_daemons):
    """The mps role's mps_daemons (or mps_plan's output), normalised by _mps.plan, by device."""
    if not mps_daemons:
        return {}, []
    if not isinstance(mps_daemons, list) or not all(isinstance(d, dict) for d in mps_daemons):
        raise PlacementError('mps_daemons must be the mps role\'s mps_daemons list (or mps_plan\'s output)')
    raw = [_raw_daemon(daemon) for daemon in mps_daemons]
    try:
        normalised = mps_plan(topology, raw)
    except MpsPlanError as exc:
        raise PlacementError('mps_daemons: %s' % exc)
    return dict((d['device'], d) for d in normalised), raw


def _raw_daemon(daemon):
    """mps_plan's output back into mps_daemons form, so that both can be passed."""
    if 'mig_device' not in daemon:
        return dict(daemon, clients=[dict(c) for c in daemon.get('clients') or []])
    return {
        'device': daemon['device'], 'user': daemon.get('user'), 'pipe_directory': daemon.get('pipe_directory'),
        'log_directory': daemon.get('log_directory'),
        'default_active_thread_percentage': daemon.get('default_active_thread_percentage'),
        'default_pinned_mem_limit': daemon.get('default_pinned_mem_limit_mb'),
        'clients': [{'name': c.get('name'), 'active_thread_percentage': c.get('active_thread_percentage'),
                     'pinned_mem_limit': c.get('pinned_mem_limit_mb')} for c in daemon.get('clients') or []],
    }


class _Planner:
    def __init__(self, host, daemons):
        self.host = host
        self.daemons = daemons
        self.gpu_users = {}   # device UUID -> [(service, exclusive)]
        self.core_users = {}  # (node, core) -> [(service, allows overlap)]
        self.mps_users = {}   # MPS device -> [service]

    # -- what is free ----------------------------------------------------------------------------------------

    def free_cores(self, node_id):
        return sum(1 for core in self.host.cores.get(node_id, ())
                   if (node_id, core) not in self.host.reserved_cores and not self.core_users.get((node_id, core)))

    def usable_cores(self, node_id, overlap):
        found = []
        for core in self.host.cores.get(node_id, ()):
            key = (node_id, core)
            users = self.core_users.get(key, [])
            if key in self.host.reserved_cores:
                continue
            if not users or (overlap and all(user[1] for user in users)):
                found.append(core)
        return found

    def device_free(self, uuid, exclusive):
        users = self.gpu_users.get(uuid, [])
        return not users if exclusive else not any(user[1] for user in users)

    def direct_use(self, uuid):
        """May a service use this device without MPS? Not a whole GPU in MIG mode, not one MPS serves."""
        device = self.host.devices[uuid]
        return uuid not in self.daemons and (device['mig'] or not device['mig_mode'])

    def node_rank(self, spec, node_id):
        """Lower is better: the pinned node, then the most free cores, then the lowest node id."""
        if node_id is None:
            return (2, 0, 0)
        return (0 if node_id == spec.node else 1, -self.free_cores(node_id), node_id)

    # -- nodes -----------------------------------------------------------------------------------------------

    def nodes_for(self, spec, uuids, hint=None):
        """(CPU nodes, numa_node, why) for a service using these devices; _Unplaceable when it may not."""
        host = self.host
        gpu_nodes = []
        for uuid in uuids:
            node = host.devices[uuid]['node']
            if node not in gpu_nodes:
                gpu_nodes.append(node)
        known = sorted(n for n in gpu_nodes if n is not None)
        unknown = [u for u in uuids if host.devices[u]['node'] is None]
        if not uuids:
            node = spec.node if spec.node is not None else (hint if hint in host.cpu_nodes() else None)
            if node is None:
                choices = sorted(host.cpu_nodes(), key=lambda n: self.node_rank(spec, n))
                if not choices:
                    raise _Unplaceable('this host has no NUMA node with CPUs')
                node = choices[0]
            why = 'the pinned node' if spec.node is not None else 'the node with the most free cores when first placed'
            return [node], node, why
        if not spec.cross:
            if unknown and spec.node is None:
                raise _Unplaceable('the NUMA node of %s is unknown (neither sysfs nor NVML report it); pin the service '
                                   'to a node (node: N) or set allow_cross_numa: true' % ', '.join(unknown))
            if len(known) > 1:
                raise _Unplaceable('its GPUs hang off NUMA nodes %s; give it GPUs of one node or set allow_cross_numa: '
                                   'true' % ', '.join(str(n) for n in known))
            if known and spec.node is not None and known[0] != spec.node:
                raise _Unplaceable('it is pinned to node %d but its GPUs hang off node %d; pin it to node %d or set '
                                   'allow_cross_numa: true' % (spec.node, known[0], known[0]))
            node = known[0] if known else spec.node
            if not host.has_cpus(node):
                raise _Unplaceable('its GPUs hang off NUMA node %s, which has no CPUs; pin the service to a node with '
                                   'CPUs (node: N, one of %s) and set allow_cross_numa: true'
                                   % (node, ', '.join(str(n) for n in host.cpu_nodes()) or 'none'))
            if unknown:
                return [node], node, 'the pinned node (its GPU\'s node is unknown)'
            return [node], node, 'its GPUs\' node' if len(uuids) > 1 else 'its GPU\'s node'
        if spec.node is not None:
            return [spec.node], spec.node, 'the pinned node (cross-NUMA allowed)'
        nodes = [n for n in known if host.has_cpus(n)]
        if not nodes:
            node = hint if hint is not None and host.has_cpus(hint) else None
            if node is None:
                choices = sorted(host.cpu_nodes(), key=lambda n: self.node_rank(spec, n))
                if not choices:
                    raise _Unplaceable('this host has no NUMA node with CPUs')
                node = choices[0]
            return [node], node, 'chosen for its free cores (cross-NUMA allowed; its GPUs\' nodes have no CPUs or are unknown)'
        if len(nodes) == 1:
            return nodes, nodes[0], 'its GPUs\' node with CPUs (cross-NUMA allowed)'
        return nodes, None, 'its GPUs\' nodes (cross-NUMA allowed)'

    @staticmethod
    def mems_for(spec, cpu_nodes, numa_node, gpu_nodes):
        if spec.policy == 'bind':
            return sorted(cpu_nodes)
        if spec.policy == 'preferred':
            return [numa_node if numa_node is not None else min(cpu_nodes)]
        return sorted(set(cpu_nodes) | set(n for n in gpu_nodes if n is not None))

    @staticmethod
    def shares(count, nodes):
        """Split a CPU count across nodes as evenly as possible, the first nodes taking the remainder."""
        base, extra = divmod(count, len(nodes))
        return [(node, base + (1 if i < extra else 0)) for i, node in enumerate(nodes)]

    # -- devices ---------------------------------------------------------------------------------------------

    def choose_devices(self, spec):
        """Devices for a count or MIG-profile request, by the documented preference."""
        host = self.host
        if spec.mode == 'count':
            pool = [d for d in host.devices.values() if not d['mig'] and not d['mig_mode'] and self.direct_use(d['uuid'])]
            what = 'whole GPU%s' % ('s' if spec.count > 1 else '')
        else:
            pool = [d for d in host.devices.values() if d['mig'] and d['profile'] == spec.profile
                    and self.direct_use(d['uuid'])]
            what = 'MIG device%s of profile %s' % ('s' if spec.count > 1 else '', spec.profile)
        free = [d for d in pool if self.device_free(d['uuid'], spec.exclusive)]

        def order(device):
            return (len(self.gpu_users.get(device['uuid'], [])), device['sort'])

        by_node = {}
        for device in free:
            by_node.setdefault(device['node'], []).append(device)
        for devices in by_node.values():
            devices.sort(key=order)

        def rank(node):
            # Unshared devices before shared ones, so shareable services spread over the GPUs first.
            shared = sum(len(self.gpu_users.get(d['uuid'], [])) for d in by_node[node][:spec.count])
            pinned, free, node_id = self.node_rank(spec, node)
            return (pinned, shared, free, node_id)

        if spec.cross:
            nodes = sorted(by_node, key=rank)
            whole = [n for n in nodes if n is not None and len(by_node[n]) >= spec.count]
            if whole:
                return [d['uuid'] for d in by_node[whole[0]][:spec.count]]
            chosen = [d for n in nodes for d in by_node[n]]
            if len(chosen) >= spec.count:
                return [d['uuid'] for d in chosen[:spec.count]]
        else:
            allowed = [spec.node] if spec.node is not None else host.cpu_nodes()
            nodes = sorted((n for n in allowed if len(by_node.get(n, ())) >= spec.count), key=rank)
            if nodes:
                return [d['uuid'] for d in by_node[nodes[0]][:spec.count]]
        raise _Unplaceable(self._short_of_devices(spec, what, pool, by_node))

    def _short_of_devices(self, spec, what, pool, by_node):
        kind = 'exclusive' if spec.exclusive else 'shareable'
        where = 'on node %d' % spec.node if spec.node is not None else (
            'on any nodes' if spec.cross else 'on one NUMA node with CPUs')
        per_node = []
        for node in sorted(set(d['node'] for d in pool), key=lambda n: (n is None, n)):
            taken = ['%s taken by %s' % (d['uuid'], ', '.join(
                '%s%s' % (name, ' (exclusive)' if excl else '') for name, excl in self.gpu_users[d['uuid']]))
                for d in sorted(pool, key=lambda d: d['sort']) if d['node'] == node and d not in by_node.get(node, [])]
            per_node.append('node %s: %d free%s' % ('unknown' if node is None else node, len(by_node.get(node, [])),
                                                    ' (%s)' % '; '.join(taken) if taken else ''))
        fixes = ['lower gpus']
        if not spec.cross:
            fixes.append('set allow_cross_numa: true')
        if spec.exclusive:
            fixes.append('share GPUs (exclusive: false on this and the other services)')
        fixes.append('or remove a service')
        if not spec.cross and any(d['node'] is None for d in pool):
            fixes.insert(1, 'name a GPU whose NUMA node is unknown in gpus with node: N')
        return 'needs %d %s (%s) %s, but %s; %s' % (
            spec.count, what, kind, where, ', '.join(per_node) or 'there are none',
            ', '.join(fixes))

    def choose_daemon(self, spec):
        if spec.mps.get('device'):
            return spec.mps['device']
        listed = [d for d, daemon in self.daemons.items() if spec.name in [c['name'] for c in daemon['clients']]]
        candidates = listed or sorted(self.daemons)
        usable = []
        for device in candidates:
            node = self.host.devices[device]['node']
            if not spec.cross and (node is None or (spec.node is not None and node != spec.node)
                                   or not self.host.has_cpus(node)):
                continue
            usable.append(device)
        if not usable:
            raise _Unplaceable('needs an MPS share %s, but the MPS daemons (%s) serve devices on other or unknown nodes; '
                               'name the device with gpus: {mps: {device: ...}} and set allow_cross_numa: true, or add '
                               'a daemon there' % ('on node %d' % spec.node if spec.node is not None else
                                                   'on a NUMA node with CPUs', ', '.join(candidates)))

        def rank(device):
            pinned, free, node_id = self.node_rank(spec, self.host.devices[device]['node'])
            return (pinned, len(self.mps_users.get(device, [])), free, node_id, self.host.devices[device]['sort'])

        usable.sort(key=rank)
        return usable[0]

    # -- CPUs ------------------------------------------------------------------------------------------------

    def choose_cpus(self, spec, cpu_nodes):
        picked = []
        for node, share in (self.shares(spec.cpus, cpu_nodes) if spec.cpus != 'all' else [(n, 'all') for n in cpu_nodes]):
            if share == 0:
                continue
            usable = self.usable_cores(node, spec.overlap)
            if spec.overlap:
                # Shared cores only when the unshared ones run out.
                usable.sort(key=lambda core: (len(self.core_users.get((node, core), [])), core[0]))
            taken = []
            for core in usable:
                if share != 'all' and sum(len(c) for c in taken) >= share:
                    break
                taken.append(core)
            got = sum(len(c) for c in taken)
            if not taken or (share != 'all' and got < share):
                raise _Unplaceable(self._short_of_cpus(spec, node, share, got))
            picked.extend((node, core) for core in taken)
        return picked

    def _short_of_cpus(self, spec, node, share, got):
        host = self.host
        cores = host.cores[node]
        threads = max(len(c) for c in cores) if cores else 1
        reserved = sorted(cpu for core in cores if (node, core) in host.reserved_cores for cpu in core)
        by_user = {}
        for core in cores:
            for name, dummy in self.core_users.get((node, core), []):
                by_user.setdefault(name, []).extend(core)
        taken = ', '.join('%s (%s)' % (name, format_cpulist(cpus)) for name, cpus in sorted(by_user.items()))
        need = 'every free CPU' if share == 'all' else '%d CPUs (%d whole cores)' % (share, -(-share // threads))
        fixes = ['lower cpus', 'move a service to another node']
        if not spec.overlap:
            fixes.append('set allow_cpu_overlap: true on the services that may share')
        fixes.append('or free reserved CPUs')
        return ('needs %s on NUMA node %d, but node %d has %d usable CPUs of %d (%s reserved; taken by %s); %s'
                % (need, node, node, got, len(host.node_cpus[node]), format_cpulist(reserved) or 'none',
                   taken or 'nobody', ', '.join(fixes)))

    # -- claims ----------------------------------------------------------------------------------------------

    def claim(self, spec, uuids, cores):
        for uuid in uuids:
            if spec.mode == 'mps':
                self.mps_users.setdefault(uuid, []).append(spec.name)
            else:
                self.gpu_users.setdefault(uuid, []).append((spec.name, spec.exclusive))
        for key in cores:
            self.core_users.setdefault(key, []).append((spec.name, spec.overlap))

    # -- the previous plan -----------------------------------------------------------------------------------

    def keep(self, spec, entry):
        """The previous entry's devices, nodes and cores when they still fit the spec and the host, else None."""
        host = self.host
        try:
            uuids = list(entry['gpus'])
            cpus = sorted(entry['cpus'])
            mps = entry.get('mps')
        except (KeyError, TypeError):
            return None
        if entry.get('memory_policy') != spec.policy or entry.get('exclusive') is not spec.exclusive:
            return None
        if not all(isinstance(u, str) and u in host.devices for u in uuids):
            return None
        if spec.mode == 'mps':
            if not mps or len(uuids) != 1 or uuids[0] not in self.daemons:
                return None
            listed = [d for d, daemon in self.daemons.items() if spec.name in [c['name'] for c in daemon['clients']]]
            if (spec.mps.get('device') or (listed[0] if listed else uuids[0])) != uuids[0]:
                return None
        else:
            if mps:
                return None
            if spec.mode == 'list' and uuids != spec.refs:
                return None
            if spec.mode == 'count' and (len(uuids) != spec.count or any(host.devices[u]['mig'] for u in uuids)):
                return None
            if spec.mode == 'mig' and (len(uuids) != spec.count
                                       or any(host.devices[u]['profile'] != spec.profile for u in uuids)):
                return None
            if not all(self.direct_use(u) and self.device_free(u, spec.exclusive) for u in uuids):
                return None
        try:
            cpu_nodes, numa_node, why = self.nodes_for(spec, uuids, hint=entry.get('numa_node'))
        except _Unplaceable:
            return None
        if entry.get('numa_node') != numa_node:
            return None
        gpu_nodes = [host.devices[u]['node'] for u in uuids]
        if list(entry.get('mems') or []) != self.mems_for(spec, cpu_nodes, numa_node, gpu_nodes):
            return None
        cores = []
        for cpu in cpus:
            key = host.core_of.get(cpu) if _is_int(cpu) else None
            if key is None or key in cores:
                if key is None:
                    return None
                continue
            cores.append(key)
        if sorted(cpu for key in cores for cpu in key[1]) != cpus:
            return None  # not whole cores any more
        if any(key[0] not in cpu_nodes for key in cores):
            return None
        shares = self.shares(spec.cpus, cpu_nodes) if spec.cpus != 'all' else [(n, 'all') for n in cpu_nodes]
        for node, share in shares:
            mine = [core for n, core in cores if n == node]
            usable = set(self.usable_cores(node, spec.overlap))
            if not all(core in usable for core in mine):
                return None
            size = sum(len(core) for core in mine)
            if share == 'all':
                if not mine:
                    return None
            # At least the share, and no more than the packing takes: it stops at the core that reaches it.
            elif size < share or (mine and size - max(len(core) for core in mine) >= share):
                return None
        return uuids, cores, cpu_nodes, numa_node, why


def _explain(host, spec, entry, why):
    """One sentence: which devices, which node, why these CPUs and memory nodes."""
    if spec.mode == 'mps':
        env = entry['mps']['environment']
        limits = []
        if 'CUDA_MPS_ACTIVE_THREAD_PERCENTAGE' in env:
            limits.append('%s%% of the SMs' % env['CUDA_MPS_ACTIVE_THREAD_PERCENTAGE'])
        if 'CUDA_MPS_PINNED_DEVICE_MEM_LIMIT' in env:
            limits.append('%s pinned memory' % env['CUDA_MPS_PINNED_DEVICE_MEM_LIMIT'].split('=', 1)[1])
        devices = 'MPS share%s of %s' % (' (%s)' % ', '.join(limits) if limits else '', host.describe(entry['gpus'][0]))
    elif entry['gpus']:
        devices = '%s, %s' % (', '.join(host.describe(u) for u in entry['gpus']),
                              'exclusive' if spec.exclusive else 'shared')
    else:
        devices = 'CPU-only'
    nodes = sorted(set(host.core_of[cpu][0] for cpu in entry['cpus']))
    node_text = 'node %d' % nodes[0] if len(nodes) == 1 else 'nodes %s' % ', '.join(str(n) for n in nodes)
    cores = len(set(host.core_of[cpu] for cpu in entry['cpus']))
    return '%s, on NUMA %s: CPUs %s (%d whole core%s) from %s, %s, lowest free first; memory %s to node%s %s.' % (
        devices, node_text, entry['cpulist'], cores, '' if cores == 1 else 's', node_text, why, spec.policy,
        '' if len(entry['mems']) == 1 else 's', entry['memlist'])


def place(topology, services, reserved_cpus=None, previous=None, mps_daemons=None):
    """Place services on a host; return one entry per service, in input order, or raise PlacementError."""
    try:
        reserved = _reserved(reserved_cpus)
        host = _Host(topology, reserved)
    except CpuListError as exc:
        raise PlacementError('%s; fix reserved_cpus or gather the topology again' % exc)
    daemons, raw_daemons = _daemons(topology, mps_daemons)
    if not isinstance(services, list):
        raise PlacementError('services must be a list of service specs (dicts with at least a name), got %r'
                             % (services,))
    previous = _previous(previous)
    problems = []
    seen = {}
    specs = [_parse_spec(host, daemons, raw, position, seen, problems) for position, raw in enumerate(services, 1)]
    if problems:
        raise PlacementError('The services cannot be placed: ' + ' | '.join(problems))

    planner = _Planner(host, daemons)
    placed = {}  # position -> (uuids, cores, cpu nodes, numa node, why)
    # 1. Previous placements that still fit, in input order.
    for spec in specs:
        entry = previous.get(spec.name)
        kept = planner.keep(spec, entry) if entry is not None else None
        if kept is not None:
            planner.claim(spec, kept[0], kept[1])
            placed[spec.position] = kept
    fresh = [spec for spec in specs if spec.position not in placed]
    # 2. Devices named explicitly, so that count-based requests do not take them first.
    devices = {}
    for spec in fresh:
        if spec.mode == 'list':
            clash = []
            for uuid in spec.refs:
                users = planner.gpu_users.get(uuid, [])
                if not planner.device_free(uuid, spec.exclusive):
                    clash.append('%s is already given to %s' % (uuid, ', '.join(
                        '%s (%s)' % (name, 'exclusive' if excl else 'shareable') for name, excl in users)))
            if clash:
                problems.append('service %s: %s; give it other GPUs, or make both shareable (exclusive: false)%s'
                                % (spec.name, '; '.join(clash), '' if spec.name not in previous else
                                   ' (services kept from previous keep their GPUs)'))
                continue
            planner.claim(spec, spec.refs, [])
            devices[spec.position] = list(spec.refs)
        elif spec.mode == 'mps' and spec.mps.get('device'):
            planner.claim(spec, [spec.mps['device']], [])
            devices[spec.position] = [spec.mps['device']]
    # 3. Counted devices and CPUs with a count, in input order; then the services that take all CPUs.
    later = []
    for spec in fresh:
        if spec.mode == 'list' and spec.position not in devices:
            continue
        try:
            if spec.position not in devices:
                if spec.mode == 'mps':
                    uuids = [planner.choose_daemon(spec)]
                elif spec.count == 0:
                    uuids = []
                else:
                    uuids = planner.choose_devices(spec)
                planner.claim(spec, uuids, [])
                devices[spec.position] = uuids
            if spec.cpus == 'all':
                later.append(spec)
                continue
            _place_cpus(planner, spec, devices[spec.position], placed)
        except _Unplaceable as exc:
            problems.append('service %s: %s' % (spec.name, exc))
    for spec in later:
        try:
            _place_cpus(planner, spec, devices[spec.position], placed)
        except _Unplaceable as exc:
            problems.append('service %s: %s' % (spec.name, exc))
    if problems:
        raise PlacementError('The services cannot be placed: ' + ' | '.join(problems))
    environments = _mps_environments(topology, specs, placed, raw_daemons)
    return [_entry(host, spec, placed[spec.position], environments.get(spec.name)) for spec in specs]


def _place_cpus(planner, spec, uuids, placed):
    cpu_nodes, numa_node, why = planner.nodes_for(spec, uuids)
    cores = planner.choose_cpus(spec, cpu_nodes)
    planner.claim(spec, [], cores)
    placed[spec.position] = (uuids, cores, cpu_nodes, numa_node, why)


def _previous(previous):
    if previous is None:
        return {}
    if not isinstance(previous, list):
        raise PlacementError('previous must be the list place_services returned (for example read back from '
                             '/etc/gpufleet/placement.json), got %r' % (type(previous).__name__,))
    found = {}
    for position, entry in enumerate(previous, 1):
        if not isinstance(entry, dict) or not isinstance(entry.get('name'), str) \
                or not all(key in entry for key in _ENTRY_KEYS):
            raise PlacementError('previous entry %d is not a placement (it needs %s); pass the list place_services '
                                 'returned, or drop the entry to place that service again'
                                 % (position, ', '.join(_ENTRY_KEYS)))
        found[entry['name']] = entry
    return found


def _mps_environments(topology, specs, placed, raw_daemons):
    """Each MPS share's client environment, by _mps.plan with the shares added as the daemons' clients."""
    shares = dict((spec.name, spec) for spec in specs if spec.mode == 'mps')
    if not shares:
        return {}
    daemons = []
    for raw in raw_daemons:
        clients = [c for c in raw.get('clients') or [] if c.get('name') not in shares]
        for spec in specs:
            if spec.mode == 'mps' and placed[spec.position][0][0] == raw['device']:
                mine = dict((c.get('name'), c) for c in raw.get('clients') or []).get(spec.name) or {}
                clients.append(dict(((key, mine.get(key) if spec.mps.get(key) is None else spec.mps[key])
                                     for key in ('active_thread_percentage', 'pinned_mem_limit')), name=spec.name))
        daemons.append(dict(raw, clients=clients))
    try:
        normalised = dict((d['device'], d) for d in mps_plan(topology, daemons))
    except MpsPlanError as exc:
        raise PlacementError('The MPS shares cannot work: %s' % exc)
    found = {}
    for name, spec in shares.items():
        daemon = normalised[placed[spec.position][0][0]]
        found[name] = (daemon, client_environment(daemon, name))
    return found


def _entry(host, spec, placement, mps):
    uuids, cores, cpu_nodes, numa_node, why = placement
    cpus = sorted(cpu for key in cores for cpu in key[1])
    gpu_nodes = [host.devices[u]['node'] for u in uuids]
    mems = _Planner.mems_for(spec, cpu_nodes, numa_node, gpu_nodes)
    parents = []
    for uuid in uuids:
        if host.devices[uuid]['parent'] not in parents:
            parents.append(host.devices[uuid]['parent'])
    environment = {'CUDA_VISIBLE_DEVICES': ','.join(uuids), 'CUDA_DEVICE_ORDER': 'PCI_BUS_ID'}
    share = None
    if mps is not None:
        daemon, client_env = mps
        environment.update(client_env)
        share = {'device': daemon['device'], 'pipe_directory': daemon['pipe_directory'], 'user': daemon['user'],
                 'environment': client_env}
    entry = {
        'name': spec.name,
        'gpus': list(uuids),
        'gpu_uuids': parents,
        'numa_node': numa_node,
        'cpus': cpus,
        'cpulist': format_cpulist(cpus),
        'mems': mems,
        'memlist': format_cpulist(mems),
        'memory_policy': spec.policy,
        'exclusive': spec.exclusive,
        'mps': share,
        'environment': environment,
    }
    entry['explanation'] = _explain(host, spec, entry, why)
    return entry
