# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.core contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The placement planner: which devices, nodes and whole cores each validated spec gets.

The rules are listed in _placement's docstring. Allocation and the reuse of a previous placement (``keep``) share
one set of checks: ``device_fits``, ``nodes_for``, ``_plan.memory_nodes``, ``usable_cores`` and ``pack``, so a new
rule is written once. MPS daemons are held in one form, the one ``_mps.plan`` returns.

The planner is incremental: what a choice reads is kept up to date by ``claim_devices`` and ``claim_cores`` (each
node's unclaimed cores, in order, so a node's free core count is their number; each device's rank in its pool, so a
node's best devices are its lowest ranks) or built once per plan (the device pool of each kind), never rescanned or
sorted per service.

This is a private module: its API may change without notice.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from operator import itemgetter

from ansible_collections.gpufleet.core.plugins.module_utils._cpulist import format_cpulist
from ansible_collections.gpufleet.core.plugins.module_utils._errors import GpufleetError
from ansible_collections.gpufleet.core.plugins.module_utils._mps import MpsPlanError, client_environment
from ansible_collections.gpufleet.core.plugins.module_utils._mps import plan as mps_plan
from ansible_collections.gpufleet.core.plugins.module_utils._placement_spec import PlacementError
from ansible_collections.gpufleet.core.plugins.module_utils._plan import memory_nodes


class Unplaceable(GpufleetError):
    """One service cannot be placed; collected, so that one error lists them all."""


class Placement:
    """Where one service goes: its devices (UUIDs), cores ((node, core) pairs), CPU nodes, numa_node, and why."""

    __slots__ = ('devices', 'cores', 'cpu_nodes', 'numa_node', 'why')

    def __init__(self, devices, cores, cpu_nodes, numa_node, why):
        self.devices = devices
        self.cores = cores
        self.cpu_nodes = cpu_nodes
        self.numa_node = numa_node
        self.why = why


# A device's rank in its pool: its users times SHARED plus its place in ``sort`` order, plus HELD while it has an
# exclusive user. The lowest rank on a node is then its least shared device, first in ``sort`` order (the documented
# preference), a shareable request may take the devices ranked below HELD and an exclusive one those below SHARED
# (no users yet); ranks are plain ints, which min() and sorted() compare without a key function.
SHARED = 1 << 16  # above any host's count of devices
HELD = 1 << 48  # above any count of users times SHARED


class DevicePool:
    """The devices of one kind (whole GPUs, or MIG devices of one profile) usable without MPS, ranked as claimed.

    ``uuids``: in ``sort`` order; ``by_node``: node -> its UUIDs in ``sort`` order; ``ranks``: node -> its devices'
    ranks (see SHARED), which Planner.claim_devices keeps up to date through ``slot``; a rank less its multiples of
    SHARED is the device's place in ``uuids``.
    """

    __slots__ = ('uuids', 'by_node', 'ranks', 'slot')

    def __init__(self, devices, use_count, held):
        self.uuids = [device['uuid'] for device in devices]
        self.by_node = {}
        self.ranks = {}
        self.slot = {}  # UUID -> (its node's ranks, its index there)
        for place, device in enumerate(devices):
            uuid, node = device['uuid'], device['node']
            if node in self.by_node:
                uuids, ranks = self.by_node[node], self.ranks[node]
            else:
                uuids, ranks = self.by_node[node], self.ranks[node] = [], []
            self.slot[uuid] = (ranks, len(ranks))
            uuids.append(uuid)
            ranks.append(use_count[uuid] * SHARED + place + (HELD if uuid in held else 0))


def _is_int(value):
    return isinstance(value, int) and not isinstance(value, bool)


def normalise_daemons(topology, mps_daemons):
    """The mps role's mps_daemons (or mps_plan's output), normalised by _mps.plan, by device."""
    if not mps_daemons:
        return {}
    if not isinstance(mps_daemons, list) or not all(isinstance(d, dict) for d in mps_daemons):
        raise PlacementError('mps_daemons must be the mps role\'s mps_daemons list (or mps_plan\'s output)')
    try:
        normalised = mps_plan(topology, mps_daemons)
    except MpsPlanError as exc:
        raise PlacementError('mps_daemons: %s' % exc)
    return dict((d['device'], d) for d in normalised)


class Planner:
    """What is claimed so far, and the rules that choose devices, nodes and cores against it."""

    def __init__(self, topology, reserved, daemons):
        self.topology = topology
        # A core with a reserved CPU is not used at all.
        self.reserved_cores = {topology.core_of[cpu] for cpu in reserved if cpu in topology.core_of}
        self.daemons = daemons
        self.gpu_users = {}   # device UUID -> [(service, exclusive)]
        self.held_exclusively = set()  # the device UUIDs with an exclusive user
        self.use_count = dict.fromkeys(topology.devices, 0)  # device UUID -> len(gpu_users[UUID])
        self.core_users = {}  # (node, core) -> [(service, allows overlap)]
        self.mps_users = {}   # MPS device -> [service]
        self.cpu_nodes = topology.cpu_nodes()
        self.has_cpus = frozenset(self.cpu_nodes).__contains__  # Topology.has_cpus, without a call per service
        # node -> its cores neither reserved nor claimed, in order; claim_cores() takes cores out.
        self.unclaimed = {node: list(cores) for node, cores in topology.cores.items()}
        for node, core in self.reserved_cores:
            self.unclaimed[node].remove(core)
        # A count's pool (profile None) and each MIG profile's, built on first use; only these kinds choose devices.
        self.pools = {}  # profile -> DevicePool
        self.rank_slot = {}  # device UUID -> (its node's ranks in its DevicePool, its index there), once built

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

    def unavailable(self, exclusive):
        """The devices a request may not take: any used one for an exclusive request, one with an exclusive user
        for a shareable one (a container of UUIDs)."""
        return self.gpu_users if exclusive else self.held_exclusively

    def device_free(self, uuid, exclusive):
        return uuid not in self.unavailable(exclusive)

    def direct_use(self, uuid):
        """May a service use this device without MPS? Not a whole GPU in MIG mode, not one MPS serves."""
        device = self.topology.devices[uuid]
        return uuid not in self.daemons and (device['mig'] or not device['mig_mode'])

    @staticmethod
    def device_kind_fits(spec, device):
        """Is the device of the kind the spec asks for? Whole GPUs out of MIG mode for a count, MIG devices of the
        profile for a MIG request; a list names its devices itself."""
        if spec.mode == 'count':
            return not device['mig'] and not device['mig_mode']
        if spec.mode == 'mig':
            return device['mig'] and device['profile'] == spec.profile
        return True

    def device_fits(self, spec, uuid):
        """May the spec be given this device now: its kind, usable without MPS, and free for its exclusivity."""
        return self.device_kind_fits(spec, self.topology.devices[uuid]) and self.direct_use(uuid) \
            and self.device_free(uuid, spec.exclusive)

    def node_rank(self, spec, node_id):
        """Lower is better: the pinned node, then the most free cores (neither reserved nor claimed), then the lowest
        node id."""
        if node_id is None:
            return (2, 0, 0)
        return (0 if node_id == spec.node else 1, -len(self.unclaimed.get(node_id, ())), node_id)

    def pool(self, spec):
        """The DevicePool of the spec's kind: built once per kind and plan (which devices it holds depends only on
        the host and the daemons), then kept up to date by claim_devices."""
        key = spec.profile
        if key not in self.pools:
            daemons = self.daemons
            # device_kind_fits and direct_use, which for these kinds come down to: not served by MPS.
            if spec.mode == 'count':
                devices = [d for d in self.topology.devices.values()
                           if not d['mig'] and not d['mig_mode'] and d['uuid'] not in daemons]
            else:
                devices = [d for d in self.topology.devices.values()
                           if d['mig'] and d['profile'] == spec.profile and d['uuid'] not in daemons]
            devices.sort(key=itemgetter('sort'))
            pool = self.pools[key] = DevicePool(devices, self.use_count, self.held_exclusively)
            self.rank_slot.update(pool.slot)
        return self.pools[key]

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

    # -- devices ---------------------------------------------------------------------------------------------

    def free_by_node(self, pool, taken):
        """node -> its free devices of a pool, the least shared first, then in ``sort`` order (a stable sort)."""
        users = self.use_count.__getitem__
        by_node = {}
        for node, uuids in pool.by_node.items():
            free = [uuid for uuid in uuids if uuid not in taken] if taken else list(uuids)
            if free:
                free.sort(key=users)
                by_node[node] = free
        return by_node

    def choose_devices(self, spec):
        """Devices for a count or MIG-profile request, by the documented preference."""
        pool = self.pools.get(spec.profile) or self.pool(spec)
        count = spec.count
        if spec.cross:
            by_node = self.free_by_node(pool, self.unavailable(spec.exclusive))
            users = self.use_count.__getitem__

            def rank(node):
                # Unshared devices before shared ones, so shareable services spread over the GPUs first.
                pinned, free, node_id = self.node_rank(spec, node)
                return (pinned, sum(map(users, by_node[node][:count])), free, node_id)

            nodes = sorted(by_node, key=rank)
            whole = [n for n in nodes if n is not None and len(by_node[n]) >= count]
            if whole:
                return by_node[whole[0]][:count]
            chosen = [uuid for n in nodes for uuid in by_node[n]]
            if len(chosen) >= count:
                return chosen[:count]
            raise Unplaceable(self._short_of_devices(spec, pool.uuids, by_node))
        # One node: the pinned one, else the best of the nodes with CPUs by node_rank, the devices' sharing first
        # (every candidate has the same pin). A node's COUNT lowest-ranked devices are its best; they are free for
        # this request when ranked below the limit.
        limit = SHARED if spec.exclusive else HELD
        unclaimed = self.unclaimed
        best = best_rank = None
        for node in ((spec.node,) if spec.node is not None else self.cpu_nodes):
            ranks = pool.ranks.get(node)
            if not ranks or len(ranks) < count:
                continue
            chosen = (min(ranks),) if count == 1 else sorted(ranks)[:count]
            if chosen[-1] >= limit:
                continue
            # Unshared devices first, so that shareable services spread over the GPUs first, then the most free
            # cores, then the lowest node id (a node with CPUs, so one with a list of unclaimed cores).
            shared = chosen[0] // SHARED if count == 1 else sum([rank // SHARED for rank in chosen])
            rank = (shared, -len(unclaimed[node]), node)
            if best_rank is None or rank < best_rank:
                best, best_rank = chosen, rank
        if best is None:
            raise Unplaceable(self._short_of_devices(spec, pool.uuids, self.free_by_node(
                pool, self.unavailable(spec.exclusive))))
        return [pool.uuids[rank % SHARED] for rank in best]

    def _short_of_devices(self, spec, pool, by_node):
        if spec.mode == 'count':
            what = 'whole GPU%s' % ('s' if spec.count > 1 else '')
        else:
            what = 'MIG device%s of profile %s' % ('s' if spec.count > 1 else '', spec.profile)
        kind = 'exclusive' if spec.exclusive else 'shareable'
        where = 'on node %d' % spec.node if spec.node is not None else (
            'on any nodes' if spec.cross else 'on one NUMA node with CPUs')
        node_of = dict((uuid, self.topology.devices[uuid]['node']) for uuid in pool)
        per_node = []
        for node in sorted(set(node_of.values()), key=lambda n: (n is None, n)):
            taken = ['%s taken by %s' % (uuid, ', '.join(
                '%s%s' % (name, ' (exclusive)' if excl else '') for name, excl in self.gpu_users[uuid]))
                for uuid in pool if node_of[uuid] == node and uuid not in by_node.get(node, [])]
            per_node.append('node %s: %d free%s' % ('unknown' if node is None else node, len(by_node.get(node, [])),
                                                    ' (%s)' % '; '.join(taken) if taken else ''))
        fixes = ['lower gpus']
        if not spec.cross:
            fixes.append('set allow_cross_numa: true')
        if spec.exclusive:
            fixes.append('share GPUs (exclusive: false on this and the other services)')
        fixes.append('or remove a service')
        if not spec.cross and None in node_of.values():
            fixes.insert(1, 'name a GPU whose NUMA node is unknown in gpus with node: N')
        return 'needs %d %s (%s) %s, but %s; %s' % (
            spec.count, what, kind, where, ', '.join(per_node) or 'there are none',
            ', '.join(fixes))

    def daemons_listing(self, name):
        """The devices whose MPS daemon lists the service as a client."""
        return [d for d, daemon in self.daemons.items() if name in [c['name'] for c in daemon['clients']]]

    def choose_daemon(self, spec):
        if spec.mps.get('device'):
            return spec.mps['device']
        listed = self.daemons_listing(spec.name)
        candidates = listed or sorted(self.daemons)
        usable = []
        for device in candidates:
            node = self.topology.devices[device]['node']
            if not spec.cross and (node is None or (spec.node is not None and node != spec.node)
                                   or not self.has_cpus(node)):
                continue
            usable.append(device)
        if not usable:
            raise Unplaceable('needs an MPS share %s, but the MPS daemons (%s) serve devices on other or unknown nodes; '
                              'name the device with gpus: {mps: {device: ...}} and set allow_cross_numa: true, or add '
                              'a daemon there' % ('on node %d' % spec.node if spec.node is not None else
                                                  'on a NUMA node with CPUs', ', '.join(candidates)))

        def rank(device):
            pinned, free, node_id = self.node_rank(spec, self.topology.devices[device]['node'])
            return (pinned, len(self.mps_users.get(device, [])), free, node_id, self.topology.devices[device]['sort'])

        usable.sort(key=rank)
        return usable[0]

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

    def claim_devices(self, spec, uuids):
        """Claim devices for the spec: an MPS share's daemon device, or devices it uses directly."""
        if spec.mode == 'mps':
            for uuid in uuids:
                self.mps_users.setdefault(uuid, []).append(spec.name)
            return
        device_user = (spec.name, spec.exclusive)
        for uuid in uuids:
            self.gpu_users.setdefault(uuid, []).append(device_user)
            self.use_count[uuid] = self.use_count.get(uuid, 0) + 1
            now_held = spec.exclusive and uuid not in self.held_exclusively
            if now_held:
                self.held_exclusively.add(uuid)
            slot = self.rank_slot.get(uuid)
            if slot is not None:  # its pool is built: one more user (see SHARED)
                slot[0][slot[1]] += SHARED + HELD if now_held else SHARED

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

    ``daemons`` are normalise_daemons' output; ``previous`` maps service names to their previous entries.
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


def mps_shares(topology, specs, placed, daemons):
    """Each MPS share's (daemon, client environment), by service name: _mps.plan over the daemons with the shares
    added as their clients (a share's own limits first, else what its daemon lists for it)."""
    if not daemons:
        return {}  # without daemons, parse_specs refuses every MPS share
    shares = dict((spec.name, spec) for spec in specs if spec.mode == 'mps')
    if not shares:
        return {}
    with_shares = []
    for daemon in daemons.values():
        listed = dict((c.get('name'), c) for c in daemon['clients'])
        clients = [c for c in daemon['clients'] if c.get('name') not in shares]
        for spec in specs:
            if spec.mode == 'mps' and placed[spec.position].devices[0] == daemon['device']:
                mine = listed.get(spec.name) or {}
                pct, limit = spec.mps.get('active_thread_percentage'), spec.mps.get('pinned_mem_limit')
                # A number as pinned_mem_limit is MiB, which is what the normalised daemon holds.
                clients.append({'name': spec.name,
                                'active_thread_percentage': mine.get('active_thread_percentage') if pct is None else pct,
                                'pinned_mem_limit': mine.get('pinned_mem_limit_mb') if limit is None else limit})
        with_shares.append(dict(daemon, clients=clients))
    try:
        normalised = dict((d['device'], d) for d in mps_plan(topology, with_shares))
    except MpsPlanError as exc:
        raise PlacementError('The MPS shares cannot work: %s' % exc)
    found = {}
    for name, spec in shares.items():
        daemon = normalised[placed[spec.position].devices[0]]
        found[name] = (daemon, client_environment(daemon, name))
    return found
