# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.core contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The placement planner: which devices, nodes and whole cores each validated spec gets.

The rules are listed in _placement's docstring. Allocation and the reuse of a previous placement (``keep``) share
one set of checks: ``device_fits``, ``nodes_for``, ``_plan.memory_nodes``, ``usable_cores`` and ``pack``, so a new
rule is written once. Choosing and claiming devices and MPS daemons is ``_planner_devices.DeviceClaims``'s, which the
``Planner`` extends with nodes and cores; MPS daemons are ``_mps.MpsDaemon``s, by device.

The planner is incremental: what a choice reads is kept up to date by ``claim_devices`` and ``claim_cores`` (each
node's unclaimed cores, in order, so a node's free core count is their number; each device's rank in its pool, so a
node's best devices are its lowest ranks) or built once per plan (the device pool of each kind), never rescanned or
sorted per service.

This is a private module: its API may change without notice.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.gpufleet.core.plugins.module_utils._cpulist import format_cpulist
from ansible_collections.gpufleet.core.plugins.module_utils._placement_spec import PlacementError
from ansible_collections.gpufleet.core.plugins.module_utils._plan import memory_nodes
from ansible_collections.gpufleet.core.plugins.module_utils._planner_devices import DeviceClaims, Unplaceable
from ansible_collections.gpufleet.core.plugins.module_utils._values import is_integer as _is_int

__all__ = ['Placement', 'Planner', 'Unplaceable', 'plan']


class Placement:
    """Where one service goes: its devices (UUIDs), cores ((node, core) pairs), CPU nodes, numa_node, and why."""

    __slots__ = ('devices', 'cores', 'cpu_nodes', 'numa_node', 'why')

    def __init__(self, devices, cores, cpu_nodes, numa_node, why):
        self.devices = devices
        self.cores = cores
        self.cpu_nodes = cpu_nodes
        self.numa_node = numa_node
        self.why = why


class Planner(DeviceClaims):
    """What is claimed so far, and the rules that choose devices (DeviceClaims), nodes and cores against it."""

    def __init__(self, topology, reserved, daemons):
        DeviceClaims.__init__(self, topology, daemons)
        # A core with a reserved CPU is not used at all.
        self.reserved_cores = {topology.core_of[cpu] for cpu in reserved if cpu in topology.core_of}
        self.core_users = {}  # (node, core) -> [(service, allows overlap)]
        self.cpu_nodes = topology.cpu_nodes()
        self.has_cpus = frozenset(self.cpu_nodes).__contains__  # Topology.has_cpus, without a call per service
        # node -> its cores neither reserved nor claimed, in order; claim_cores() takes cores out.
        self.unclaimed = {node: list(cores) for node, cores in topology.cores.items()}
        for node, core in self.reserved_cores:
            self.unclaimed[node].remove(core)

    # -- what is free ----------------------------------------------------------------------------------------

    def usable_cores(self, node_id, overlap):
        """The node's cores a service may take, in order: the unclaimed ones, and with overlap the ones whose
        users all allow it too."""
        if not overlap:
            return list(self.unclaimed.get(node_id, ()))
        found = []
        for core in self.topology.cores.get(node_id, ()):
            key = (node_id, core)
            users = self.core_users.get(key, [])
            if key in self.reserved_cores:
                continue
            if not users or (overlap and all(user[1] for user in users)):
                found.append(core)
        return found

    def node_rank(self, spec, node_id):
        """Lower is better: the pinned node, then the most free cores (neither reserved nor claimed), then the lowest
        node id."""
        if node_id is None:
            return (2, 0, 0)
        return (0 if node_id == spec.node else 1, -len(self.unclaimed.get(node_id, ())), node_id)

    # -- nodes -----------------------------------------------------------------------------------------------

    def nodes_for(self, spec, uuids, hint=None):
        """(CPU nodes, numa_node, why) for a service using these devices; Unplaceable when it may not."""
        host = self.topology
        if len(uuids) == 1 and not spec.cross:
            # The usual case, one device on a known node with CPUs, as the general rules below would decide it.
            node = host.devices[uuids[0]]['node']
            if node is not None and (spec.node is None or spec.node == node) and self.has_cpus(node):
                return [node], node, 'its GPU\'s node'
        gpu_nodes = []
        for uuid in uuids:
            node = host.devices[uuid]['node']
            if node not in gpu_nodes:
                gpu_nodes.append(node)
        known = sorted([n for n in gpu_nodes if n is not None])
        unknown = [u for u in uuids if host.devices[u]['node'] is None]
        if not uuids:
            node = spec.node if spec.node is not None else (hint if hint in self.cpu_nodes else None)
            if node is None:
                choices = sorted(self.cpu_nodes, key=lambda n: self.node_rank(spec, n))
                if not choices:
                    raise Unplaceable('this host has no NUMA node with CPUs')
                node = choices[0]
            why = 'the pinned node' if spec.node is not None else 'the node with the most free cores when first placed'
            return [node], node, why
        if not spec.cross:
            if unknown and spec.node is None:
                raise Unplaceable('the NUMA node of %s is unknown (neither sysfs nor NVML report it); pin the service '
                                  'to a node (node: N) or set allow_cross_numa: true' % ', '.join(unknown))
            if len(known) > 1:
                raise Unplaceable('its GPUs hang off NUMA nodes %s; give it GPUs of one node or set allow_cross_numa: '
                                  'true' % ', '.join(str(n) for n in known))
            if known and spec.node is not None and known[0] != spec.node:
                raise Unplaceable('it is pinned to node %d but its GPUs hang off node %d; pin it to node %d or set '
                                  'allow_cross_numa: true' % (spec.node, known[0], known[0]))
            node = known[0] if known else spec.node
            if not self.has_cpus(node):
                raise Unplaceable('its GPUs hang off NUMA node %s, which has no CPUs; pin the service to a node with '
                                  'CPUs (node: N, one of %s) and set allow_cross_numa: true'
                                  % (node, ', '.join(str(n) for n in host.cpu_nodes()) or 'none'))
            if unknown:
                return [node], node, 'the pinned node (its GPU\'s node is unknown)'
            return [node], node, 'its GPUs\' node' if len(uuids) > 1 else 'its GPU\'s node'
        if spec.node is not None:
            return [spec.node], spec.node, 'the pinned node (cross-NUMA allowed)'
        nodes = [n for n in known if self.has_cpus(n)]
        if not nodes:
            node = hint if hint is not None and self.has_cpus(hint) else None
            if node is None:
                choices = sorted(self.cpu_nodes, key=lambda n: self.node_rank(spec, n))
                if not choices:
                    raise Unplaceable('this host has no NUMA node with CPUs')
                node = choices[0]
            return [node], node, 'chosen for its free cores (cross-NUMA allowed; its GPUs\' nodes have no CPUs or are unknown)'
        if len(nodes) == 1:
            return nodes, nodes[0], 'its GPUs\' node with CPUs (cross-NUMA allowed)'
        return nodes, None, 'its GPUs\' nodes (cross-NUMA allowed)'

    @staticmethod
    def shares(cpus, nodes):
        """Each node's share of a CPU request: a count split as evenly as possible (the first nodes taking the
        remainder), or 'all' on every node."""
        if cpus == 'all':
            return [(node, 'all') for node in nodes]
        if len(nodes) == 1:
            return [(nodes[0], cpus)]  # the usual case, which needs no arithmetic
        base, extra = divmod(cpus, len(nodes))
        return [(node, base + (1 if i < extra else 0)) for i, node in enumerate(nodes)]

    # -- CPUs ------------------------------------------------------------------------------------------------

    @staticmethod
    def pack(share, cores):
        """The packing rule: whole cores, in the order given, until they hold the share ('all' takes every one).

        None when the cores cannot hold it.
        """
        taken = []
        cpus = 0
        for core in cores:
            if share != 'all' and cpus >= share:
                break
            taken.append(core)
            cpus += len(core)
        if not taken or (share != 'all' and cpus < share):
            return None
        return taken

    def usable_in_order(self, node, overlap):
        """A node's usable cores in the order packing takes them: the low end first; with overlap, unshared ones
        before shared ones."""
        usable = self.usable_cores(node, overlap)
        if overlap:
            # Shared cores only when the unshared ones run out.
            usable.sort(key=lambda core: (len(self.core_users.get((node, core), [])), core[0]))
        return usable

    def choose_cpus(self, spec, cpu_nodes):
        """The (node, core) pairs of the spec's CPUs on these nodes, by the packing rule; Unplaceable when short."""
        picked = []
        # One node (the usual case) takes the whole request, without shares().
        for node, share in self.shares(spec.cpus, cpu_nodes) if len(cpu_nodes) > 1 else ((cpu_nodes[0], spec.cpus),):
            if share == 0:
                continue
            if spec.overlap:
                usable = self.usable_in_order(node, True)
                taken = self.pack(share, usable)
            else:
                # The usable cores are the unclaimed ones, in order: read, not copied. Where every core of the node
                # has the same size, packing takes the fewest that hold the share, from the front.
                usable = self.unclaimed.get(node, ())
                size = self.topology.core_size.get(node)
                if size and share != 'all':
                    wanted = -(-share // size)
                    taken = usable[:wanted] if len(usable) >= wanted else None
                else:
                    taken = self.pack(share, usable)
            if taken is None:
                raise Unplaceable(self._short_of_cpus(spec, node, share, sum(len(c) for c in usable)))
            picked.extend([(node, core) for core in taken])
        return picked

    def _short_of_cpus(self, spec, node, share, got):
        host = self.topology
        cores = host.cores[node]
        threads = max(len(c) for c in cores) if cores else 1
        reserved = sorted(cpu for core in cores if (node, core) in self.reserved_cores for cpu in core)
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

    def claim_cores(self, spec, cores):
        """Claim (node, core) pairs; they are usable ones (choose_cpus' or keep's), so never reserved."""
        core_user = (spec.name, spec.overlap)
        for key in cores:
            users = self.core_users.get(key)
            if users is None:
                self.core_users[key] = [core_user]
                self.unclaimed[key[0]].remove(key[1])
            else:
                users.append(core_user)

    # -- the previous plan -----------------------------------------------------------------------------------

    def keep(self, spec, entry):
        """A Placement of the previous entry's devices, nodes and cores when they still fit the spec and the host
        by the rules allocation uses (device_fits, nodes_for, memory_nodes, usable cores and pack), else None."""
        host = self.topology
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
            listed = self.daemons_listing(spec.name)
            if (spec.mps.get('device') or (listed[0] if listed else uuids[0])) != uuids[0]:
                return None
        else:
            if mps:
                return None
            if spec.mode == 'list' and uuids != spec.refs:
                return None
            if spec.mode in ('count', 'mig') and len(uuids) != spec.count:
                return None
            if not all(self.device_fits(spec, u) for u in uuids):
                return None
        try:
            cpu_nodes, numa_node, why = self.nodes_for(spec, uuids, hint=entry.get('numa_node'))
        except Unplaceable:
            return None
        if entry.get('numa_node') != numa_node:
            return None
        gpu_nodes = [host.devices[u]['node'] for u in uuids]
        if list(entry.get('mems') or []) != memory_nodes(spec.policy, cpu_nodes, numa_node, gpu_nodes):
            return None
        cores = []
        seen = set()
        for cpu in cpus:
            key = host.core_of.get(cpu) if _is_int(cpu) else None
            if key is None:
                return None
            if key not in seen:
                seen.add(key)
                cores.append(key)
        if sorted(cpu for key in cores for cpu in key[1]) != cpus:
            return None  # not whole cores any more
        if any(key[0] not in cpu_nodes for key in cores):
            return None
        for node, share in self.shares(spec.cpus, cpu_nodes):
            mine = [core for n, core in cores if n == node]
            usable = set(self.usable_cores(node, spec.overlap))
            if not all(core in usable for core in mine):
                return None
            if share == 0:
                if mine:
                    return None
                continue
            # Packing stops at the core that reaches the share: with the largest core last, packing these cores
            # must take them all.
            mine.sort(key=len)
            if self.pack(share, mine) != mine:
                return None
        return Placement(uuids, cores, cpu_nodes, numa_node, why)


def plan(topology, specs, reserved, daemons, previous):
    """A Placement per spec position, or PlacementError listing every service that cannot be placed.

    ``daemons`` map device UUIDs to their planned MpsDaemons (_mps.plan_daemons); ``previous`` maps service names to their previous entries.
    """
    planner = Planner(topology, reserved, daemons)
    problems = []
    placed = {}
    # 1. Previous placements that still fit, in input order.
    for spec in specs if previous else ():
        entry = previous.get(spec.name)
        kept = planner.keep(spec, entry) if entry is not None else None
        if kept is not None:
            planner.claim_devices(spec, kept.devices)
            planner.claim_cores(spec, kept.cores)
            placed[spec.position] = kept
    fresh = [spec for spec in specs if spec.position not in placed] if placed else specs
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
            planner.claim_devices(spec, spec.refs)
            devices[spec.position] = list(spec.refs)
        elif spec.mode == 'mps' and spec.mps.get('device'):
            planner.claim_devices(spec, [spec.mps['device']])
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
                planner.claim_devices(spec, uuids)
                devices[spec.position] = uuids
            if spec.cpus == 'all':
                later.append(spec)
                continue
            placed[spec.position] = _place_cpus(planner, spec, devices[spec.position])
        except Unplaceable as exc:
            problems.append('service %s: %s' % (spec.name, exc))
    for spec in later:
        try:
            placed[spec.position] = _place_cpus(planner, spec, devices[spec.position])
        except Unplaceable as exc:
            problems.append('service %s: %s' % (spec.name, exc))
    if problems:
        raise PlacementError('The services cannot be placed: ' + ' | '.join(problems))
    return placed


def _place_cpus(planner, spec, uuids):
    cpu_nodes, numa_node, why = planner.nodes_for(spec, uuids)
    cores = planner.choose_cpus(spec, cpu_nodes)
    planner.claim_cores(spec, cores)
    return Placement(uuids, cores, cpu_nodes, numa_node, why)
