# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.core contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The one model of a gpufleet_topology fact: an index over it, the one rule for naming a GPU, and the host as it
will be after a MIG plan (``Topology.after_mig``).

Placement, MPS plans, MIG layouts, the fleet report and the filters read the fact through ``Topology`` rather than
walking the dict: devices by UUID (MIG compute instances included, each mapped to its parent GPU, profile and GPU
instance), each GPU instance's place on its GPU's memory and compute slices, NUMA nodes by id, and each node's CPUs
grouped into whole cores, parsed once. Pure code with no system access, shared by modules on
targets and filter plugins on the controller (through plugin_utils).
This is a private module: its API may change without notice.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from uuid import UUID, uuid5

from ansible_collections.gpufleet.core.plugins.module_utils._cpulist import CpuListError, parse_cpulist, parse_cpulists
from ansible_collections.gpufleet.core.plugins.module_utils._errors import GpufleetError
from ansible_collections.gpufleet.core.plugins.module_utils._fact_layout import FACT_VERSION, READABLE_FACT_VERSIONS
from ansible_collections.gpufleet.core.plugins.module_utils._mig_catalog import geometry
from ansible_collections.gpufleet.core.plugins.module_utils._values import is_integer as _is_int


class TopologyModelError(GpufleetError, ValueError):
    """A question the topology cannot answer; the message says why."""


def fact_version(fact):
    """The fact's layout version; a fact from a release this one cannot read is refused, naming the fix.

    A fact without a version was cached by a release before the field existed, and has version 1's layout.
    """
    version = fact.get('version', fact.get('schema_version', 1))
    if version not in READABLE_FACT_VERSIONS:
        raise TopologyModelError('the gpufleet_topology fact has layout version %r, but this release of gpufleet.core '
                                 'reads versions %s and writes %d; gather it again with gpufleet.core.topology_facts (a '
                                 'fact cached by another release is stale)'
                                 % (version, ' and '.join(str(v) for v in READABLE_FACT_VERSIONS), FACT_VERSION))
    return version


def _node_cpus(node, version):
    """A node's CPUs, sorted: its cpulist (version 2) or its cpus list (version 1); None when malformed."""
    if version == 1:
        cpus = node.get('cpus')
        if not isinstance(cpus, list) or not all(_is_int(cpu) and cpu >= 0 for cpu in cpus):
            return None
        return sorted(set(cpus))
    try:
        return parse_cpulist(node.get('cpulist'))
    except CpuListError:
        return None


# Indexing a host's cores is a fifth of planning it, and the hosts of one model have the same CPU lists: the index
# (nodes, node_cpus, cores, core_of, core_size) is kept by the content of the lists it is built from, for the Topology
# of every such host to share. Bounded, so that a fleet of many models cannot grow it without end.
_CPU_INDEX_LIMIT = 64
_CPU_INDEXES = {}


def _cpu_index_key(fact, version):
    """What a fact's CPU index is built from, as a key: each node's id and CPU list, and the SMT sibling lists.

    None, for the index to be built (and the fact checked) afresh, where a value is not of the kind the fact's
    layout gives: a key is only as strict as ``==``, for which True is 1, and a cached index must not answer for a
    fact that building it would refuse. Version 1's integer lists are not kept.
    """
    if version == 1:
        return None
    nodes = []
    for node in fact['numa_nodes']:
        if not isinstance(node, dict) or not _is_int(node.get('id')) or not isinstance(node.get('cpulist'), str):
            return None
        nodes.append((node['id'], node['cpulist']))
    cpu = fact.get('cpu') or {}
    siblings = (cpu.get('smt_siblings') or []) if isinstance(cpu, dict) else None
    if not isinstance(siblings, list):
        return None
    # The sibling lists as one string, which costs a fraction of hashing and comparing a tuple of some 200 short ones.
    # With their number, it tells lists apart unless one holds the separator (the kernel writes none): not kept.
    try:
        joined = '\n'.join(siblings)
    except TypeError:
        return None  # not all strings
    if joined.count('\n') != max(len(siblings) - 1, 0):
        return None
    return version, tuple(nodes), len(siblings), joined


def gpu_ref_index(ref):
    """The GPU index a reference means (an int, or a string of digits), or None for a UUID or a name."""
    if _is_int(ref):
        return ref
    if isinstance(ref, str) and ref.isdigit():
        return int(ref)
    return None


def match_gpu_ref(ref, devices, names=False):
    """The devices a GPU reference names: the one rule every caller resolves references by.

    ``devices`` are dicts with ``uuid``, ``index`` and ``name`` (a MIG device has ``mig`` true and no index). An index
    (``gpu_ref_index``) names the whole GPU with that index; otherwise a ``GPU-...`` or ``MIG-...`` UUID names that
    device; where ``names`` is true, anything else names every whole GPU of that product name. Returns a list in the
    order of ``devices``, empty when nothing matches: each caller words its own refusal.
    """
    index = gpu_ref_index(ref)
    if index is not None:
        return [device for device in devices if not device.get('mig') and device.get('index') == index]
    found = [device for device in devices if device.get('uuid') == ref]
    if found or not names:
        return found
    return [device for device in devices if not device.get('mig') and device.get('name') == ref]


class Topology:
    """A gpufleet_topology fact, indexed.

    - ``nodes``: NUMA node ids, sorted; ``node_cpus``: node id -> its CPUs, sorted; ``node(id)``: the fact's node.
    - ``cores``: node id -> its whole cores (tuples of SMT siblings within the node), sorted; ``core_of``: CPU ->
      (node id, core). A CPU the sibling lists omit is a core of its own. ``core_size``: node id -> its cores' CPU
      count where every core of the node has that many (SMT on or off throughout), else None.
      These five are shared by every Topology of a host with the same CPU lists: read them, never change them.
    - ``gpus``: the fact's GPU dicts; ``devices``: UUID -> device for every GPU and MIG compute instance, in fact
      order, each a dict: ``uuid``, ``mig`` (a MIG device?), ``parent`` (its GPU's UUID), ``gpu`` (that GPU's fact
      dict), ``node``, ``bus`` (upper-case PCI bus id, '' when unknown), ``mig_mode`` (its GPU is in MIG mode),
      ``profile`` (MIG profile name, None for a GPU), ``index`` (None for a MIG device), ``name`` (product name),
      ``memory_mb`` (None when unknown), ``sort`` (a stable order: bus, GPU UUID, placement, compute instance) and
      ``instance`` (its GPU instance in ``mig_instances``; None for a GPU).
    - ``by_index``: GPU index -> UUID.
    - ``mig_instances``: GPU UUID -> its GPU instances in fact order, each a dict: ``profile``, ``placement`` (the
      fact's), ``uuids`` (its MIG devices), and where it lies on the GPU's slices (``_mig_catalog.MigGeometry.span``,
      from the model's profile table): ``start``, ``memory_slices``, ``compute_start``, ``compute_slices``, all None
      where the placement does not lie on them.

    ``after_mig(mig_gpus)`` is the Topology the host will have once a MIG plan is applied.
    """

    def __init__(self, fact):
        if not isinstance(fact, dict) or not isinstance(fact.get('numa_nodes'), list) \
                or not isinstance(fact.get('gpus', []), list):
            raise TopologyModelError("the topology must be ansible_facts['gpufleet_topology'] from "
                                     "gpufleet.core.topology_facts (a dict with numa_nodes and gpus)")
        self.fact = fact
        self.version = fact_version(fact)
        key = _cpu_index_key(fact, self.version)
        index = _CPU_INDEXES.get(key) if key is not None else None
        if index is None:
            index = self._index_cpus()
            if key is not None:
                if len(_CPU_INDEXES) >= _CPU_INDEX_LIMIT:
                    del _CPU_INDEXES[next(iter(_CPU_INDEXES))]  # the oldest: dicts keep insertion order
                _CPU_INDEXES[key] = index
        self.nodes, self.node_cpus, self.cores, self.core_of, self.core_size = index
        # The fact's own node dicts (node() returns them), never shared; the key held every id to be an int.
        self._nodes = dict((node['id'], node) for node in fact['numa_nodes'])
        self.gpus = fact.get('gpus') or []
        self.devices = {}
        self.by_index = {}
        self.mig_instances = {}
        self._geometries = {}
        profiles = fact.get('mig_profiles') or {}
        for gpu in self.gpus:
            self._index_gpu(gpu, profiles)
        self._device_list = list(self.devices.values())

    def _index_cpus(self):
        """(nodes, node_cpus, cores, core_of, core_size) of the fact, checking every node; the class docstring says what
        each is."""
        node_cpus = {}
        for node in self.fact['numa_nodes']:
            cpus = _node_cpus(node, self.version) if isinstance(node, dict) and _is_int(node.get('id')) else None
            if cpus is None:
                raise TopologyModelError('the topology has a NUMA node without an integer id and a %s (%r); '
                                         'gather it again with gpufleet.core.topology_facts'
                                         % ('cpus list' if self.version == 1 else 'CPU list (cpulist)', node))
            node_cpus[node['id']] = cpus
        nodes = sorted(node_cpus)
        siblings = {}
        for group in parse_cpulists((self.fact.get('cpu') or {}).get('smt_siblings') or []):
            for cpu in group:
                siblings[cpu] = group
        cores_by_node = {}
        core_of = {}
        core_size = {}
        for node_id in nodes:
            ordered = node_cpus[node_id]
            cpus = set(ordered)
            placed = set()
            cores = []
            for cpu in ordered:
                if cpu in placed:
                    continue  # in a core found through a lower sibling
                group = siblings.get(cpu, (cpu,))
                # A core is its siblings within the node; a sibling on another node is a core of its own there.
                core = group if cpus.issuperset(group) else tuple(c for c in group if c in cpus)
                placed.update(core)
                key = (node_id, core)
                for member in core:
                    core_of[member] = key
                cores.append(core)
            cores.sort()
            cores_by_node[node_id] = cores
            sizes = set(map(len, cores))
            core_size[node_id] = sizes.pop() if len(sizes) == 1 else None
        return nodes, node_cpus, cores_by_node, core_of, core_size

    def _index_gpu(self, gpu, profiles):
        if not isinstance(gpu, dict) or not isinstance(gpu.get('uuid'), str):
            raise TopologyModelError('the topology has a GPU without a uuid (%r); gather it again with '
                                     'gpufleet.core.topology_facts' % (gpu,))
        uuid = gpu['uuid']
        node = gpu.get('numa_node')
        bus = str(gpu.get('pci_bus_id') or '').upper()
        mig = gpu.get('mig') or {}
        self.devices[uuid] = {
            'uuid': uuid, 'mig': False, 'parent': uuid, 'gpu': gpu, 'node': node, 'bus': bus,
            'mig_mode': mig.get('mode_current') == 'enabled', 'profile': None, 'index': gpu.get('index'),
            'name': gpu.get('name'), 'memory_mb': gpu.get('memory_total_mb'), 'sort': (bus, uuid, -1, -1, ''),
            'instance': None,
        }
        if _is_int(gpu.get('index')):
            self.by_index[gpu['index']] = uuid
        instances = mig.get('gpu_instances')
        if not instances:
            return
        memory = dict([(p.get('name'), p.get('memory_mb')) for p in profiles.get(gpu.get('name')) or []])
        shape = self.mig_geometry(gpu.get('name'))
        self.mig_instances[uuid] = []
        for gi in instances:
            placement = gi.get('placement') or {}
            start = placement.get('start', -1)
            cis = gi.get('compute_instances') or []
            instance = {'profile': gi.get('profile'), 'placement': placement,
                        'uuids': [ci['uuid'] for ci in cis if ci.get('uuid')]}
            # The fact's size and compute slices count only for a profile the table lacks.
            compute = sum(ci['slice_count'] for ci in cis if _is_int(ci.get('slice_count')))
            instance.update(shape.span(gi.get('profile'), start, placement.get('size'), compute) or dict.fromkeys(
                ('start', 'memory_slices', 'compute_start', 'compute_slices')))
            self.mig_instances[uuid].append(instance)
            for ci in cis:
                if ci.get('uuid'):
                    self.devices[ci['uuid']] = {
                        'uuid': ci['uuid'], 'mig': True, 'parent': uuid, 'gpu': gpu, 'node': node, 'bus': bus,
                        'mig_mode': True, 'profile': gi.get('profile'), 'index': None, 'name': gpu.get('name'),
                        'memory_mb': memory.get(gi.get('profile')), 'instance': instance,
                        'sort': (bus, uuid, start, ci.get('id', -1), ci['uuid']),
                    }

    def mig_geometry(self, model):
        """How MIG divides a GPU of this model (``_mig_catalog.geometry``): the fact's profile table, where it says
        where instances lie, else NVIDIA's."""
        if model not in self._geometries:
            self._geometries[model] = geometry(model, (self.fact.get('mig_profiles') or {}).get(model))
        return self._geometries[model]

    # -- after a MIG change ----------------------------------------------------------------------------------

    def after_mig(self, mig_gpus):
        """The Topology this host will have once a MIG plan is applied, so that services can be placed before it is.

        ``mig_gpus`` is the ``gpus`` list of a gpufleet.core.mig result (check mode gives the plan), each with its
        ``uuid`` and ``mig_wanted``. GPUs it does not list keep their MIG state; a listed GPU gets MIG mode on or off
        and exactly the wanted GPU instances, each with its compute instances. MIG devices that do not exist yet get
        placeholder UUIDs (``placeholder_mig_uuid``): they are placed on, never used. This topology's fact is not
        changed; the new one's fact is a new dict that shares what the plan leaves as it is.
        """
        wanted = _mig_plan_by_gpu(mig_gpus)
        unknown = sorted(set(wanted) - set(gpu['uuid'] for gpu in self.gpus))
        if unknown:
            raise TopologyModelError('the MIG plan names GPUs the topology does not have (%s): gather the topology '
                                     'and plan the MIG change on the same host' % ', '.join(unknown))
        gpus = [_gpu_after_mig(gpu, wanted[gpu['uuid']], self.mig_geometry(gpu.get('name')))
                if gpu['uuid'] in wanted else gpu for gpu in self.gpus]
        return Topology(dict(self.fact, gpus=gpus))

    # -- nodes and CPUs --------------------------------------------------------------------------------------

    def node(self, node_id):
        """The fact's NUMA node dict."""
        if node_id not in self._nodes:
            raise TopologyModelError('no NUMA node %s on this host' % node_id)
        return self._nodes[node_id]

    def has_cpus(self, node_id):
        return bool(self.node_cpus.get(node_id))

    def cpu_nodes(self):
        """The nodes that can run CPU work (memory-only nodes left out)."""
        return [n for n in self.nodes if self.has_cpus(n)]

    def offline_cpus(self):
        """The CPUs the fact says are offline (cpu.offline_cpulist, or layout 1's cpu.offline); [] when it does not say."""
        cpu = self.fact.get('cpu')
        offline = cpu.get('offline_cpulist', cpu.get('offline')) if isinstance(cpu, dict) else None
        if isinstance(offline, list):
            return sorted(set(n for n in offline if _is_int(n) and n >= 0))
        try:
            return parse_cpulist(offline) if isinstance(offline, str) else []
        except CpuListError:
            return []

    # -- what the roles format -------------------------------------------------------------------------------

    def gpu_names(self):
        """(product name of each GPU, why NVML could not be read or None): NVML's GPUs, else those on the PCI bus."""
        nvml = self.fact.get('nvml') or {}
        if nvml.get('available', True):
            return [gpu.get('name', 'unknown') for gpu in self.gpus], None
        # Without NVML only the bus says there are GPUs, not which model: each is named by its PCI address.
        pci = self.fact.get('pci') or {}
        return (['unknown model at %s' % address for address in pci.get('gpus') or []],
                nvml.get('reason') or 'not available')

    def has_nvswitch(self):
        """Whether the GPUs hang off NVSwitches (NVML's answer, or one seen on the PCI bus): fabric manager's case."""
        return bool(self.fact.get('nvswitch')) or bool((self.fact.get('pci') or {}).get('nvswitches'))

    def gpu_device_nodes(self):
        """The character devices of the host's GPUs (/dev/nvidia0 ...), one per GPU."""
        return ['/dev/nvidia%d' % number for number in range(len(self.gpus))]

    def summary(self):
        """What the roles format from the fact, read through the model (the topology_summary filter)."""
        names, nvml_reason = self.gpu_names()
        return {'gpu_names': names, 'nvml_reason': nvml_reason, 'nvswitch': self.has_nvswitch(),
                'gpu_device_nodes': self.gpu_device_nodes()}

    # -- devices ---------------------------------------------------------------------------------------------

    def resolve(self, ref, names=False):
        """The devices a GPU reference names, by ``match_gpu_ref``'s rule; empty when none does."""
        return match_gpu_ref(ref, self._device_list, names)

    def gpu(self, ref):
        """The GPU (the fact's dict) named by index, GPU-... UUID, or one of its MIG-... UUIDs."""
        found = self.resolve(ref)
        if not found:
            raise TopologyModelError('no GPU %s on this host (GPUs: %s); name GPUs by UUID from gpufleet_topology'
                                     % (ref, ', '.join(gpu['uuid'] for gpu in self.gpus) or 'none'))
        return found[0]['gpu']

    def describe(self, uuid):
        """A device for messages: its UUID with its bus, or with its profile and parent GPU for a MIG device."""
        device = self.devices[uuid]
        if device['mig']:
            return '%s (%s on %s)' % (uuid, device['profile'], device['parent'])
        return '%s (bus %s)' % (uuid, device['bus'] or 'unknown')

    def gpu_node_cpus(self, ref):
        """The online CPUs of the NUMA node a GPU hangs off."""
        gpu = self.gpu(ref)
        if gpu.get('numa_node') is None:
            raise TopologyModelError('the NUMA node of %s is unknown (neither sysfs nor NVML report it); '
                                     'pin the service to a node explicitly' % gpu['uuid'])
        node_id = self.node(gpu['numa_node'])['id']
        if not self.node_cpus[node_id]:
            raise TopologyModelError('NUMA node %d of %s has no CPUs; it cannot run CPU work'
                                     % (node_id, gpu['uuid']))
        return list(self.node_cpus[node_id])


# A fixed namespace, so that a planned MIG device's placeholder UUID is the same on every run.
_PLACEHOLDER_NAMESPACE = UUID('8d5b1c52-6f0e-4c38-9a7e-3b1d2f6a9e41')
_MIG_MODES = ('enabled', 'disabled')


def placeholder_mig_uuid(gpu_uuid, start, compute_index):
    """The stand-in UUID of a MIG device that a MIG plan creates: stable for its GPU, placement and index."""
    return 'MIG-%s' % uuid5(_PLACEHOLDER_NAMESPACE, '%s@%d/%d' % (gpu_uuid, start, compute_index))


def _is_count(value, least):
    return _is_int(value) and value >= least


def _mig_plan_by_gpu(mig_gpus):
    """GPU UUID -> its mig_wanted, from the gpus list of a gpufleet.core.mig result; refused, naming the value, where
    an entry is not as the module returns it."""
    if not isinstance(mig_gpus, list) or not all(isinstance(gpu, dict) and isinstance(gpu.get('uuid'), str)
                                                 for gpu in mig_gpus):
        raise TopologyModelError('the MIG plan must be the gpus list of a gpufleet.core.mig result (each with uuid '
                                 'and mig_wanted), got %r' % (mig_gpus,))
    wanted = {}
    for gpu in mig_gpus:
        plan = gpu.get('mig_wanted')
        instances = plan.get('gpu_instances') if isinstance(plan, dict) else None
        if not isinstance(plan, dict) or plan.get('mig_mode') not in _MIG_MODES or not isinstance(instances, list) \
                or (plan['mig_mode'] == 'disabled' and instances) or not all(map(_is_planned_instance, instances)):
            raise TopologyModelError('GPU %s: mig_wanted is %r, not the MIG plan as gpufleet.core.mig returns it '
                                     '({mig_mode: enabled or disabled, gpu_instances: [{profile, placement_start, '
                                     'compute_instances: [{slice_count}]}]}); plan the MIG change with this '
                                     'release\'s gpufleet.core.mig' % (gpu['uuid'], plan))
        wanted[gpu['uuid']] = plan
    return wanted


def _is_planned_instance(instance):
    """Is this one GPU instance of a mig_wanted: a profile name, a placement start, one or more compute instances?"""
    return isinstance(instance, dict) and isinstance(instance.get('profile'), str) \
        and _is_count(instance.get('placement_start'), 0) and isinstance(instance.get('compute_instances'), list) \
        and len(instance['compute_instances']) > 0 and all(
            isinstance(ci, dict) and _is_count(ci.get('slice_count'), 1) for ci in instance['compute_instances'])


def _gpu_after_mig(gpu, wanted, shape):
    """A new fact dict of the GPU with the MIG mode and instances of its mig_wanted, numbered in placement order; each
    placement as NVML reports it (its start and size in memory slices), from the model's profile table (``shape``)."""
    mig = dict(gpu.get('mig') or {})
    mig['mode_current'] = mig['mode_pending'] = wanted['mig_mode']
    instances = []
    for number, instance in enumerate(wanted['gpu_instances'], 1):
        start = instance['placement_start']
        placement = shape.placement(instance['profile'], start)
        if placement is None:
            raise TopologyModelError('the MIG plan places %s at memory slice %d of GPU %s, which the profile table of '
                                     'its model (%s) does not offer; gather the topology and plan the MIG change on '
                                     'the same host' % (instance['profile'], start, gpu['uuid'], gpu.get('name')))
        instances.append({
            'id': number, 'profile': instance['profile'], 'profile_id': shape.profile(instance['profile']).get('id'),
            'placement': placement,
            'compute_instances': [{'id': index, 'slice_count': ci['slice_count'],
                                   'uuid': placeholder_mig_uuid(gpu['uuid'], start, index)}
                                  for index, ci in enumerate(instance['compute_instances'])],
        })
    mig['gpu_instances'] = instances
    return dict(gpu, mig=mig)


def find_gpu(topology, ref):
    """The GPU named by UUID (GPU-...), by one of its MIG UUIDs (MIG-...), or by index."""
    return Topology(topology).gpu(ref)


def gpu_node_cpus(topology, ref):
    """The online CPUs of the NUMA node a GPU hangs off."""
    return Topology(topology).gpu_node_cpus(ref)
