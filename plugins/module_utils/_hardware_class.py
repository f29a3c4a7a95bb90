# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.core contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""A hardware class as a contract: what every host of the class promises, checked twice.

``gpufleet_expected_gpus`` ({count, model}) and ``gpufleet_expected_numa`` ({nodes, cpus_per_node, gpus_per_node})
are set in the class group's variables. Validate checks the class's services and MIG layouts against the promise
(no host is read): the MIG profiles exist for the model and fit (NVIDIA's tables, _mig_catalog, through the mig
module's own layout rules), the services' whole GPUs, MIG devices and CPUs are there. Preflight checks each host
against the promise (host_differences): a node count that Sub-NUMA Clustering or NPS changed, a GPU on another node,
a node with other CPUs. Pure code; a private module: its API may change without notice.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.gpufleet.core.plugins.module_utils._mig_catalog import profiles as catalog_profiles
from ansible_collections.gpufleet.core.plugins.module_utils._mig_layout import resolve
from ansible_collections.gpufleet.core.plugins.module_utils._mig_plan import GpuShape, LayoutError, validate
from ansible_collections.gpufleet.core.plugins.module_utils._service_specs import service_specs
from ansible_collections.gpufleet.core.plugins.module_utils._values import boolean, describe, whole_number

_NUMA_KEYS = ('nodes', 'cpus_per_node', 'gpus_per_node')


def _node_counts(value, where):
    """{node id: GPUs} from a mapping such as {0: 2, 1: 2} (YAML may give the ids as strings)."""
    if not isinstance(value, dict):
        return None, '%s is %s; give GPUs per NUMA node as a mapping, such as {0: 2, 1: 2}' % (where, describe(value))
    found = {}
    for node, count in value.items():
        node_id, number = whole_number(node), whole_number(count)
        if node_id is None or number is None or number < 0:
            return None, '%s has %s: %s; give node ids and GPU counts as whole numbers, such as {0: 2, 1: 2}' % (
                where, describe(node), describe(count))
        found[node_id] = number
    return found, None


def contract(expected_gpus, expected_numa):
    """The class's promise as {'count', 'model', 'nodes', 'cpus_per_node', 'gpus_per_node'} (None: not promised),
    and the problems of the two variables."""
    problems = []
    promise = {'count': 0, 'model': '', 'nodes': None, 'cpus_per_node': None, 'gpus_per_node': None}
    if not isinstance(expected_gpus, dict):
        problems.append("gpufleet_expected_gpus is %s; give a mapping such as {count: 4, model: NVIDIA A100 80GB PCIe} "
                        "in the hardware-class group's variables" % describe(expected_gpus))
    else:
        unknown = sorted(set(expected_gpus) - set(['count', 'model']))
        count = whole_number(expected_gpus.get('count', 0))
        model = expected_gpus.get('model', '')
        if unknown:
            problems.append('gpufleet_expected_gpus has %s; it takes count and model' % ', '.join(map(str, unknown)))
        if count is None or count < 0:
            problems.append('gpufleet_expected_gpus.count is %s; give the number of GPUs as a whole number, such as 4'
                            % describe(expected_gpus.get('count')))
        else:
            promise['count'] = count
        if model is not None and not isinstance(model, str):
            problems.append('gpufleet_expected_gpus.model is %s; give the product name as NVML reports it, as a '
                            'string, such as "NVIDIA A100 80GB PCIe"' % describe(model))
        else:
            promise['model'] = model or ''
    if expected_numa in (None, {}):
        return promise, problems
    if not isinstance(expected_numa, dict):
        problems.append('gpufleet_expected_numa is %s; give a mapping such as {nodes: 2, cpus_per_node: 64, '
                        'gpus_per_node: {0: 2, 1: 2}}, or {} to promise nothing' % describe(expected_numa))
        return promise, problems
    unknown = sorted(set(expected_numa) - set(_NUMA_KEYS))
    if unknown:
        problems.append('gpufleet_expected_numa has %s; it takes %s' % (', '.join(map(str, unknown)),
                                                                        ', '.join(_NUMA_KEYS)))
    for key in ('nodes', 'cpus_per_node'):
        if key in expected_numa:
            number = whole_number(expected_numa[key])
            if number is None or number < 1:
                problems.append('gpufleet_expected_numa.%s is %s; give a whole number of at least 1'
                                % (key, describe(expected_numa[key])))
            else:
                promise[key] = number
    if 'gpus_per_node' in expected_numa:
        counts, problem = _node_counts(expected_numa['gpus_per_node'], 'gpufleet_expected_numa.gpus_per_node')
        if problem:
            problems.append(problem)
        elif sum(counts.values()) != promise['count']:
            problems.append('gpufleet_expected_numa.gpus_per_node %s adds up to %d GPUs, but gpufleet_expected_gpus.count '
                            'is %d; make them agree' % (_counts_text(counts), sum(counts.values()), promise['count']))
        elif promise['nodes'] is not None and any(node >= promise['nodes'] for node in counts):
            nodes = int(promise['nodes'])
            problems.append('gpufleet_expected_numa.gpus_per_node %s names a node past the %d nodes the class promises '
                            '(0-%d)' % (_counts_text(counts), nodes, nodes - 1))
        else:
            promise['gpus_per_node'] = counts
    return promise, problems


def _counts_text(counts):
    return '{%s}' % ', '.join('%d: %d' % item for item in sorted(counts.items()))


# -- validate: the class's layouts and services ---------------------------------------------------------------------


def _selected(selector, promise, where, problems):
    """The GPU slots (indices) a layout entry selects on a host of the class; None for a host-specific selector
    (a GPU-... UUID), which only preflight can check."""
    items = selector if isinstance(selector, list) else [selector]
    chosen = []
    for item in items:
        text = str(item).strip()
        index = whole_number(item)
        if text == 'all' or text == promise['model']:
            chosen.extend(range(promise['count']))
        elif text.startswith('GPU-'):
            return None
        elif index is not None and 0 <= index < promise['count']:
            chosen.append(index)
        elif index is not None:
            problems.append('%s selects GPU %d, but the class promises %d GPU(s) (0-%d)'
                            % (where, index, promise['count'], promise['count'] - 1))
        else:
            problems.append('%s selects %s, which is neither all, a GPU index, a GPU-... UUID nor the class\'s model '
                            '%s' % (where, describe(item), promise['model'] or '(none given)'))
    return sorted(set(chosen))


def mig_devices(promise, mig_layouts, problems):
    """The MIG devices a host of the class will have, {profile: count} (None when a layout names GPUs by UUID or the
    model has no table here: only the host knows them), and the GPU slots in MIG mode; the problems of the layouts
    (profiles the model lacks, layouts that do not fit) are added to ``problems``."""
    devices, mig_gpus = {}, set()
    if not mig_layouts:
        return devices, mig_gpus
    if not isinstance(mig_layouts, list):
        problems.append('mig_layouts is %s; give a list of {gpus, layout} entries' % describe(mig_layouts))
        return None, mig_gpus
    table = catalog_profiles(promise['model'])
    if table is None:
        devices = None
    shape = GpuShape(promise['model'], table) if table else None
    given = {}
    for position, entry in enumerate(mig_layouts, 1):
        where = 'mig_layouts entry %d' % position
        if not isinstance(entry, dict) or 'gpus' not in entry or 'layout' not in entry:
            problems.append('%s is %s; give {gpus: ..., layout: [...]}' % (where, describe(entry)))
            continue
        slots = _selected(entry['gpus'], promise, where, problems)
        if slots is None:
            devices = None
            continue
        for slot in slots:
            if slot in given:
                problems.append('%s: GPU %d is already given a layout by entry %d; give each GPU one layout'
                                % (where, slot, given[slot]))
            given[slot] = position
        if shape is None:
            continue  # a model without NVIDIA's table here: the mig module checks it on the host
        try:
            wanted = resolve(entry['layout'], shape, where)
            if wanted is not None:
                validate(shape, wanted, '%s (%s)' % (where, promise['model']))
        except LayoutError as exc:
            problems.append(str(exc))
            devices = None  # what the services may use is unknown until the layout is fixed
            continue
        for slot in slots if wanted is not None else ():
            mig_gpus.add(slot)
            for instance in wanted if devices is not None else ():
                devices[instance['profile']] = devices.get(instance['profile'], 0) + len(instance['compute_instances'])
    return devices, mig_gpus


def plan_problems(promise, services, mig_layouts, check_mig=True):
    """What the class's services and MIG layouts ask for that a host keeping the promise cannot give."""
    problems = []
    devices, mig_gpus = mig_devices(promise, mig_layouts, problems) if check_mig else ({}, set())
    if not isinstance(services, list):
        return problems  # the gpu_services role's own checker names it
    whole, wanted = [], {}
    largest_node = max(promise['gpus_per_node'].values()) if promise['gpus_per_node'] else None
    for spec in service_specs(services)[0]:
        name = spec['name'] if isinstance(spec['name'], str) else '?'
        cross = boolean(spec['allow_cross_numa']) is True
        gpus = spec['gpus']
        count = whole_number(gpus)
        if count is not None and count > 0:
            if boolean(spec['exclusive']) is not False:
                whole.append((name, count))
            if largest_node is not None and count > largest_node and not cross:
                problems.append('service %s asks for %d whole GPUs on one NUMA node, but no node of the class has more '
                                'than %d (gpufleet_expected_numa.gpus_per_node %s); ask for fewer, or set '
                                'allow_cross_numa: true' % (name, count, largest_node,
                                                            _counts_text(promise['gpus_per_node'])))
        elif isinstance(gpus, dict) and isinstance(gpus.get('mig_profile'), str):
            number = whole_number(gpus.get('count', 1))
            wanted.setdefault(gpus['mig_profile'], []).append((name, number if number is not None else 1))
        cpus = whole_number(spec['cpus'])
        if cpus is not None and promise['cpus_per_node'] is not None and cpus > promise['cpus_per_node'] and not cross:
            problems.append('service %s asks for %d CPUs on one NUMA node, but the class promises %d CPUs per node '
                            '(gpufleet_expected_numa.cpus_per_node); ask for fewer, or set allow_cross_numa: true'
                            % (name, cpus, promise['cpus_per_node']))
    free = promise['count'] - len(mig_gpus)
    if sum(count for _name, count in whole) > free:
        problems.append('the services ask for %d whole GPUs (%s), but the class has %d GPU(s)%s' % (
            sum(count for _name, count in whole), ', '.join('%s %d' % item for item in whole), promise['count'],
            ', %d of them in MIG mode (mig_layouts)' % len(mig_gpus) if mig_gpus else ''))
    if check_mig and devices is not None:
        for profile, askers in sorted(wanted.items()):
            asked = sum(number for _name, number in askers)
            if asked > devices.get(profile, 0):
                problems.append('the services ask for %d MIG device(s) of profile %s (%s), but the class\'s mig_layouts '
                                'create %s' % (asked, profile, ', '.join('%s %d' % item for item in askers), (
                                    '%d' % devices[profile]) if profile in devices else 'none (they create %s)' % (
                                    ', '.join('%s x%d' % item for item in sorted(devices.items())) or 'no MIG device')))
    return problems


# -- preflight: a host against its class ------------------------------------------------------------------------------


def gpu_differences(promise, topology):
    """How a host's GPUs (its _topology.Topology) differ from the count and model its class promises: [] or one
    sentence with the fix."""
    names, nvml_reason = topology.gpu_names()
    if len(names) == promise['count'] and not (promise['model'] and any(name != promise['model'] for name in names)):
        return []
    return ['gpufleet_expected_gpus promises %d x %s, but the host has %d%s%s: move the host to the hardware-class '
            'group that matches it, or find the missing GPU (nvidia-smi, dmesg)' % (
                promise['count'], promise['model'] or 'any model', len(names),
                ' (%s)' % ', '.join(names) if names else '',
                ' on the PCI bus (NVML: %s)' % nvml_reason if nvml_reason else '')]


def class_differences(promise, topology):
    """How a host (its _topology.Topology) differs from the GPUs and the NUMA shape its class promises, one sentence
    each, with the fix; [] when it keeps the promise."""
    found = gpu_differences(promise, topology)
    shape = host_differences(promise, topology)
    if shape:
        found.append("%s: fix the host's BIOS or cabling, or move it to the hardware-class group that matches it "
                     "(gpufleet_expected_numa)" % '; '.join(shape))
    return found


def host_differences(promise, topology):
    """How a host (its _topology.Topology) differs from the NUMA shape its class promises, one sentence each."""
    found = []
    nodes = [node for node in topology.nodes if topology.node_cpus.get(node)]
    if promise['nodes'] is not None and len(nodes) != promise['nodes']:
        found.append('the class promises %d NUMA node(s) with CPUs and the host has %d (%s)%s' % (
            promise['nodes'], len(nodes), ', '.join(map(str, nodes)),
            ': is Sub-NUMA Clustering or NPS switched on in its BIOS?' if len(nodes) > promise['nodes'] else ''))
    if promise['cpus_per_node'] is not None:
        other = ['node %d has %d' % (node, len(topology.node_cpus[node])) for node in nodes
                 if len(topology.node_cpus[node]) != promise['cpus_per_node']]
        if other:
            found.append('the class promises %d CPUs per NUMA node, and %s' % (promise['cpus_per_node'], ', '.join(other)))
    if promise['gpus_per_node'] is not None:
        counts = {}
        for gpu in topology.gpus:
            counts[gpu.get('numa_node')] = counts.get(gpu.get('numa_node'), 0) + 1
        if counts != promise['gpus_per_node']:
            found.append('the class promises GPUs per NUMA node %s and the host has %s (%s)' % (
                _counts_text(promise['gpus_per_node']),
                '{%s}' % ', '.join('%s: %d' % (node, count) for node, count in sorted(counts.items(), key=str)),
                ', '.join('%s on node %s' % (gpu.get('uuid'), gpu.get('numa_node')) for gpu in topology.gpus)))
    return found
