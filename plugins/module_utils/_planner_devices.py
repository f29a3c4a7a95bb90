# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.core contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The planner's devices: the pools it chooses GPUs and MIG devices from, the MPS daemons it chooses shares of, and
what each device's users claim.

``DeviceClaims`` is the device half of ``_planner.Planner``, which adds the CPU half: the choices here read the
Planner's ``node_rank``, ``unclaimed`` cores, ``cpu_nodes`` and ``has_cpus``. Its state is incremental: each kind of
device pool is built once per plan and ``claim_devices`` keeps every device's rank in it up to date.

This is a private module: its API may change without notice.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from operator import itemgetter

from ansible_collections.gpufleet.core.plugins.module_utils._errors import GpufleetError


class Unplaceable(GpufleetError):
    """One service cannot be placed; collected, so that one error lists them all."""


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


class DeviceClaims:
    """The devices claimed so far, and the rules that choose devices and MPS daemons against them."""

    def __init__(self, topology, daemons):
        self.topology = topology
        self.daemons = daemons  # device UUID -> its MpsDaemon (_mps.py)
        self.gpu_users = {}   # device UUID -> [(service, exclusive)]
        self.held_exclusively = set()  # the device UUIDs with an exclusive user
        self.use_count = dict.fromkeys(topology.devices, 0)  # device UUID -> len(gpu_users[UUID])
        self.mps_users = {}   # MPS device -> [service]
        # A count's pool (profile None) and each MIG profile's, built on first use; only these kinds choose devices.
        self.pools = {}  # profile -> DevicePool
        self.rank_slot = {}  # device UUID -> (its node's ranks in its DevicePool, its index there), once built

    # -- what is free ----------------------------------------------------------------------------------------

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
        return [d for d, daemon in self.daemons.items() if name in daemon.client_names()]

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
