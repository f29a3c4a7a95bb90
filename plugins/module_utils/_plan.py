# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.core contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The plan contract: what a GPU service spec may say, and the placement plan document.

One place for: the service spec's keys (the planner's and the gpu_services role's), the service name rule, the
memory policies and the memory nodes each one binds, a placement entry as place_services returns it, the services'
units as the role writes them, and the plan document the role writes to ``/etc/gpufleet/placement.json``, with
its one reader (``read_plan``: a Plan of Entry objects) for numa_audit, the watchdog and the report, and the
planner's ``previous``:

    {"version": 1, "services": [<placement entry> + {"unit": ..., "container": ..., "container_runtime": ...}]}

Pure code. This is a private module: its API may change without notice.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import re

from ansible_collections.gpufleet.core.plugins.module_utils._cpulist import format_cpulist, format_sorted
from ansible_collections.gpufleet.core.plugins.module_utils._errors import GpufleetError
from ansible_collections.gpufleet.core.plugins.module_utils._values import is_path

# -- the service spec ----------------------------------------------------------------------------------------

# A service's name names its unit, user and files.
SERVICE_NAME_PATTERN = r'[a-z0-9][a-z0-9_-]{0,62}'
_SERVICE_NAME = re.compile(SERVICE_NAME_PATTERN)
MEMORY_POLICIES = ('bind', 'preferred', 'interleave')
DEFAULT_MEMORY_POLICY = 'bind'
DEFAULT_CPUS = 4
DEFAULT_GPUS = 1  # a spec that leaves gpus out gets one whole GPU
# The keys the planner reads; the rest of a spec is the role's.
PLANNER_KEYS = ('name', 'gpus', 'cpus', 'memory_policy', 'exclusive', 'node', 'allow_cross_numa', 'allow_cpu_overlap')
ROLE_KEYS = ('mode', 'command', 'image', 'container_args', 'user', 'environment', 'description', 'read_write_paths',
             'state')
MODES = ('native', 'container')
STATES = ('started', 'stopped')
CONTAINER_RUNTIMES = ('podman', 'docker')  # the first is the default
DEFAULT_USER_PREFIX = 'gpufleet-'  # a service's user is the prefix and its name
# The environment the planner sets from the devices it picks: a service cannot override it.
PLANNER_ENVIRONMENT = ('CUDA_VISIBLE_DEVICES', 'CUDA_DEVICE_ORDER', 'CUDA_MPS_PIPE_DIRECTORY',
                       'CUDA_MPS_ACTIVE_THREAD_PERCENTAGE', 'CUDA_MPS_PINNED_DEVICE_MEM_LIMIT')

_USER = r'[a-z_][a-z0-9_.-]*\$?'
_ENV_NAME = r'[A-Za-z_][A-Za-z0-9_]*'
# Longer user names break useradd and ps.
_MAX_USER_NAME = 32

# -- the plan document ---------------------------------------------------------------------------------------

PLAN_VERSION = 1
# The roles' defaults (gpu_services_plan_file, gpu_services_unit_prefix, gpu_services_mps_unit_prefix, the
# gpu_watchdog role's fallbacks, the mps role's mps_unit_template) and playbooks/report.yml repeat these, because YAML
# cannot import Python; tests/unit/roles/test_plan_contract.py keeps them equal.
PLAN_FILE = '/etc/gpufleet/placement.json'
UNIT_PREFIX = 'gpufleet-svc-'
# The MPS daemons' units (the mps role's template unit): an entry's MPS device completes the name. A service's unit
# requires its daemon's, and the watchdog stops it around a GPU reset.
MPS_UNIT_PREFIX = 'gpufleet-mps@'
# What place_services returns per service, in this order.
ENTRY_KEYS = ('name', 'gpus', 'gpu_uuids', 'numa_node', 'cpus', 'cpulist', 'mems', 'memlist', 'memory_policy',
              'exclusive', 'mps', 'environment', 'explanation')
# What an entry must have to be reused as a previous placement.
PREVIOUS_KEYS = ('name', 'gpus', 'gpu_uuids', 'numa_node', 'cpus', 'mems', 'memory_policy', 'exclusive', 'mps')
# What the gpu_services role adds to each entry of the document: where the service runs.
WHERE_KEYS = ('unit', 'container', 'container_runtime')


class PlanError(GpufleetError, ValueError):
    """A service spec or plan document that cannot be used; the message names every problem and the fix."""


# Names found good, for the check to be a set lookup: the same names recur on every host of a fleet. Only plain
# strings are kept (a subclass may compare differently), and at most _GOOD_NAMES_LIMIT of them.
_GOOD_NAMES = set()
_GOOD_NAMES_LIMIT = 4096


def is_service_name(name):
    if name.__class__ is str and name in _GOOD_NAMES:
        return True
    if not isinstance(name, str) or _SERVICE_NAME.fullmatch(name) is None:
        return False
    if name.__class__ is str and len(_GOOD_NAMES) < _GOOD_NAMES_LIMIT:
        _GOOD_NAMES.add(name)
    return True


def memory_nodes(policy, cpu_nodes, numa_node, gpu_nodes):
    """The memory nodes a policy binds: bind the CPUs' nodes, preferred one node, interleave the CPUs' and GPUs'."""
    if policy == 'bind':
        return sorted(cpu_nodes)
    if policy == 'preferred':
        return [numa_node if numa_node is not None else min(cpu_nodes)]
    return sorted(set(cpu_nodes) | set(n for n in gpu_nodes if n is not None))


def _one_line(value):
    return isinstance(value, str) and '\n' not in value


def _role_problems(spec, user_prefix):
    """What is wrong with the role's keys of one spec (the planner checks its own)."""
    problems = []
    mode = spec.get('mode', 'native')
    if mode not in MODES:
        problems.append("mode is native or container (got '%s')" % (mode,))
    if spec.get('state', 'started') not in STATES:
        problems.append("state is started or stopped (got '%s')" % (spec.get('state'),))
    command = spec.get('command', '')
    if not _one_line(command):
        problems.append('command is one line: the program and its arguments')
    elif mode == 'native' and not command:
        problems.append('native mode needs command (the program and its arguments, one line)')
    image = spec.get('image', '')
    if not isinstance(image, str) or re.fullmatch(r'\S*', image) is None:
        problems.append('image is one word, without spaces')
    elif mode == 'container' and not image:
        problems.append('container mode needs image')
    args = spec.get('container_args', [])
    if not isinstance(args, list) or any('\n' in str(arg) for arg in args):
        problems.append('container_args is a list of one-line strings')
    if 'user' in spec:
        user = spec['user']
        if user in ('root', '0'):
            problems.append("a GPU service never runs as root (got user '%s'): remove user to get the dedicated "
                            "user %s%s" % (user, user_prefix, spec['name']))
        elif not isinstance(user, str) or re.fullmatch(_USER, user) is None:
            problems.append("user is a user name (got '%s')" % (user,))
    elif len(user_prefix + spec['name']) > _MAX_USER_NAME:
        problems.append("the dedicated user '%s%s' is longer than %d characters: set user"
                        % (user_prefix, spec['name'], _MAX_USER_NAME))
    environment = spec.get('environment', {})
    if not isinstance(environment, dict):
        problems.append('environment maps variable names to one-line values')
    else:
        if not all(isinstance(key, str) and re.fullmatch(_ENV_NAME, key) for key in environment) \
                or any('\n' in str(value) for value in environment.values()):
            problems.append('environment maps variable names to one-line values')
        owned = [key for key in PLANNER_ENVIRONMENT if key in environment]
        if owned:
            problems.append('environment may not set %s (the planner sets them from the GPUs it picks: give the GPUs '
                            'in gpus instead)' % ', '.join(owned))
    paths = spec.get('read_write_paths', [])
    if not isinstance(paths, list):
        problems.append('read_write_paths are absolute paths: expected a list, got %r' % (paths,))
    else:
        bad = [p for p in paths if not is_path(p, trailing_slash=True)]
        if bad:
            problems.append('read_write_paths are absolute paths without .. (got %s)' % ', '.join(repr(p) for p in bad))
    if not _one_line(spec.get('description', '')):
        problems.append('description is one line')
    return problems


def check_services(services, user_prefix):
    """Every problem of the services' names and role keys, as one list of messages (empty when all is well).

    The planner's keys are the planner's to check (place_services); this covers what the role reads.
    """
    if not isinstance(services, list):
        return ['gpu_services_services must be a list of service entries']
    problems = []
    names = [spec.get('name') for spec in services if isinstance(spec, dict)]
    known = PLANNER_KEYS + ROLE_KEYS
    for spec in services:
        label = spec.get('name', spec) if isinstance(spec, dict) else spec
        unknown = sorted(set(spec) - set(known)) if isinstance(spec, dict) else []
        if not isinstance(spec, dict) or not is_service_name(spec.get('name')) or names.count(spec['name']) != 1 \
                or unknown:
            problems.append("gpu_services_services entry %s: give it a unique name of lower-case letters, digits, '_' "
                            "and '-' (up to 63, starting with a letter or digit), and only the keys %s (unknown here: "
                            "%s)" % (label, ', '.join(known), (', '.join(unknown) or 'none')
                                     if isinstance(spec, dict) else 'not a mapping'))
            continue
        problems.extend('Service %s: %s' % (spec['name'], problem) for problem in _role_problems(spec, user_prefix))
    return problems


# -- placement entries ---------------------------------------------------------------------------------------


def explain(topology, spec, entry, why, nodes, count):
    """One sentence: which devices, which node, why these CPUs and memory nodes; ``nodes`` are the nodes of the
    entry's cores (sorted, each once), ``count`` the number of its cores."""
    if spec.mode == 'mps':
        env = entry['mps']['environment']
        limits = []
        if 'CUDA_MPS_ACTIVE_THREAD_PERCENTAGE' in env:
            limits.append('%s%% of the SMs' % env['CUDA_MPS_ACTIVE_THREAD_PERCENTAGE'])
        if 'CUDA_MPS_PINNED_DEVICE_MEM_LIMIT' in env:
            limits.append('%s pinned memory' % env['CUDA_MPS_PINNED_DEVICE_MEM_LIMIT'].split('=', 1)[1])
        devices = 'MPS share%s of %s' % (' (%s)' % ', '.join(limits) if limits else '',
                                         topology.describe(entry['gpus'][0]))
    elif len(entry['gpus']) == 1:  # the usual case, without the list
        devices = topology.describe(entry['gpus'][0]) + (', exclusive' if spec.exclusive else ', shared')
    elif entry['gpus']:
        devices = '%s, %s' % (', '.join([topology.describe(u) for u in entry['gpus']]),
                              'exclusive' if spec.exclusive else 'shared')
    else:
        devices = 'CPU-only'
    # f-strings: one sentence per service, which % formatting makes a third dearer (the node ids are ints).
    node_text = f'node {nodes[0]}' if len(nodes) == 1 else 'nodes %s' % ', '.join(str(n) for n in nodes)
    return (f'{devices}, on NUMA {node_text}: CPUs {entry["cpulist"]} ({count} whole core{"" if count == 1 else "s"}) '
            f'from {node_text}, {why}, lowest free first; memory {spec.policy} to node{"" if len(entry["mems"]) == 1 else "s"} '
            f'{entry["memlist"]}.')


def entry(topology, spec, placement, share=None):
    """The placement entry of one service (ENTRY_KEYS), from the planner's placement.

    ``placement`` has ``devices`` (UUIDs, a list of its own), ``cores`` ((node, core) pairs), ``cpu_nodes``,
    ``numa_node`` and ``why``; ``share`` is (normalised MPS daemon, client environment) for an MPS share.
    """
    uuids = placement.devices
    cores = placement.cores
    cpu_nodes = placement.cpu_nodes
    if len(uuids) == 1:  # the usual case, without the loops
        device = topology.devices[uuids[0]]
        parents, gpu_nodes = [device['parent']], [device['node']]
    else:
        parents, gpu_nodes = [], []
        for device in [topology.devices[uuid] for uuid in uuids]:
            gpu_nodes.append(device['node'])
            if device['parent'] not in parents:
                parents.append(device['parent'])
    cpus = sorted([cpu for node, core in cores for cpu in core])
    mems = memory_nodes(spec.policy, cpu_nodes, placement.numa_node, gpu_nodes)
    environment = {'CUDA_VISIBLE_DEVICES': ','.join(uuids), 'CUDA_DEVICE_ORDER': 'PCI_BUS_ID'}
    mps = None
    if share is not None:
        daemon, client_env = share
        environment.update(client_env)
        mps = {'name': daemon['name'], 'device': daemon['device'], 'pipe_directory': daemon['pipe_directory'], 'user': daemon['user'],
               'environment': client_env}
    found = {
        'name': spec.name,
        'gpus': uuids,
        'gpu_uuids': parents,
        'numa_node': placement.numa_node,
        'cpus': cpus,
        'cpulist': format_sorted(cpus),  # the topology's CPU numbers: checked, and sorted here
        'mems': mems,
        'memlist': format_cpulist(mems),
        'memory_policy': spec.policy,
        'exclusive': spec.exclusive,
        'mps': mps,
        'environment': environment,
    }
    # With one CPU node, every core is on it (and a service has at least one core).
    nodes = cpu_nodes if len(cpu_nodes) == 1 else sorted(set([node for node, core in cores]))
    found['explanation'] = explain(topology, spec, found, placement.why, nodes, len(cores))
    return found


def previous_entries(previous):
    """The entries of a previous plan, by service name: place_services' list, or the plan document.

    A document of another version, or without one, is not reused: every service is placed afresh.
    """
    if previous is None:
        return {}
    if isinstance(previous, dict) and ('services' in previous or 'version' in previous):
        if previous.get('version') != PLAN_VERSION:
            return {}
        previous = previous.get('services') or []
    if not isinstance(previous, list):
        raise PlanError('previous must be the list place_services returned (for example read back from '
                        '%s), got %r' % (PLAN_FILE, type(previous).__name__))
    found = {}
    for position, item in enumerate(previous, 1):
        if not isinstance(item, dict) or not isinstance(item.get('name'), str) \
                or not all(key in item for key in PREVIOUS_KEYS):
            raise PlanError('previous entry %d is not a placement (it needs %s); pass the list place_services '
                            'returned, or drop the entry to place that service again'
                            % (position, ', '.join(PREVIOUS_KEYS)))
        found[item['name']] = item
    return found


# -- the services' units and the plan document ---------------------------------------------------------------


def service_units(plan, services, unit_prefix, user_prefix, container_runtime):
    """Join each placement with its service's settings; return the units and the plan document to write.

    ``plan`` is place_services' list for ``services`` (same order). Each unit: name, stem, unit, mode, state, user,
    dedicated_user, mps_user, placed_name, spec and plan (its entry). The document's entries are the placements with
    where each service runs: its unit, and its container and runtime in container mode (numa_audit reads them).
    """
    problems = check_services(services, user_prefix)
    if not problems and (not isinstance(plan, list) or len(plan) != len(services)):
        problems.append('the plan must be place_services\' list for these services, one entry each, in order')
    elif not problems:
        problems.extend('plan entry %d is %r, not a placement from place_services' % (position, placed)
                        for position, placed in enumerate(plan, 1) if not isinstance(placed, dict))
    units = []
    for spec, placed in zip(services, plan) if not problems else ():
        mps_user = placed['mps']['user'] if placed.get('mps') else None
        if placed.get('name') != spec['name']:
            problems.append('Service %s: the planner returned %s in its place (plans keep input order)'
                            % (spec['name'], placed.get('name')))
        elif mps_user and spec.get('user') and spec['user'] != mps_user:
            problems.append('Service %s: it shares %s through MPS, whose server serves one user id: run it as the '
                            "daemon's user %s (got %s), or give it its own daemon"
                            % (spec['name'], placed['mps']['device'], mps_user, spec['user']))
        stem = unit_prefix + spec['name']
        units.append({
            'name': spec['name'],
            'stem': stem,
            'unit': stem + '.service',
            'mode': spec.get('mode', 'native'),
            'state': spec.get('state', 'started'),
            'user': spec.get('user') or mps_user or (user_prefix + spec['name']),
            'dedicated_user': 'user' not in spec and not mps_user,
            'mps_user': mps_user,
            'placed_name': placed.get('name'),
            'spec': spec,
            'plan': placed,
        })
    if problems:
        raise PlanError('The services cannot be written: ' + ' | '.join(problems))
    entries = []
    for unit in units:
        where = {'unit': unit['unit']}
        if unit['mode'] == 'container':
            where.update({'container': unit['stem'], 'container_runtime': container_runtime})
        entries.append(dict(unit['plan'], **where))
    return {'units': units, 'plan': plan_document(entries)}


def plan_document(entries):
    """The document written to the plan file."""
    return {'version': PLAN_VERSION, 'services': list(entries)}


def plan_json(document):
    """The plan document as JSON text, byte for byte what ansible's to_nice_json(indent=2) gives (non-ASCII escaped,
    as that filter does). The plan file is this text and a newline."""
    return json.dumps(document, indent=2, sort_keys=True, separators=(',', ': '))


def unit_name(service, unit_prefix=UNIT_PREFIX):
    """The unit a service runs as: <unit_prefix><name>.service."""
    return '%s%s.service' % (unit_prefix, service)


class Entry:
    """One service of the plan document, as the audit, the watchdog and the report read it.

    ``fields`` is the entry as written (ENTRY_KEYS and WHERE_KEYS); the attributes are what the readers use.
    """

    __slots__ = ('fields', 'name', 'unit', 'container', 'container_runtime', 'devices', 'gpus', 'mps', 'mps_device')

    def __init__(self, fields):
        self.fields = fields
        self.name = fields['name']
        # A document without units is one written before the role recorded them: the unit is then the default one.
        self.unit = fields.get('unit') or unit_name(self.name)
        self.container = fields.get('container') or None
        self.container_runtime = (fields.get('container_runtime') or None) if self.container else None
        self.devices = list(fields.get('gpus') or [])
        self.gpus = list(fields.get('gpu_uuids') or [])
        mps = fields.get('mps')
        self.mps = mps if isinstance(mps, dict) else None
        self.mps_device = self.mps.get('device') if self.mps else None

    def expectations(self):
        """What the binding audit holds the service to: its CPUs, memory nodes, devices and memory policy."""
        return {'cpus': self.fields.get('cpulist'), 'mems': self.fields.get('memlist'),
                'gpus': None if self.fields.get('gpus') is None else list(self.devices),
                'memory_policy': self.fields.get('memory_policy')}

    def uses(self, gpu, device=None):
        """Whether the service uses this GPU (or, when device is given, that MIG or MPS device)."""
        if device is not None and device != gpu:
            return device in self.devices or device == self.mps_device
        return gpu in self.gpus or gpu in self.devices


class Plan:
    """A plan document read and checked: ``document`` as written, ``entries`` one Entry per service, in order."""

    __slots__ = ('document', 'entries')

    def __init__(self, document, entries):
        self.document = document
        self.entries = entries

    def names(self):
        return [entry.name for entry in self.entries]


def read_plan(document, where='the plan'):
    """The one reader of a plan document: a Plan, or PlanError naming ``where`` and the fix.

    Version PLAN_VERSION (a document without one is taken as it), a services list of named entries.
    """
    if not isinstance(document, dict):
        raise PlanError('%s is not a placement plan (a JSON object with version and services); it should be the '
                        'plan written by the gpufleet.core.gpu_services role' % where)
    version = document.get('version', PLAN_VERSION)
    if version != PLAN_VERSION:
        raise PlanError('%s has version %r, but this release of gpufleet.core reads version %d; apply the '
                        'gpufleet.core.gpu_services role of this release to write it again'
                        % (where, version, PLAN_VERSION))
    entries = document.get('services')
    if not isinstance(entries, list):
        raise PlanError('%s has no "services" list; it should be the placement plan written by the '
                        'gpufleet.core.gpu_services role' % where)
    for index, item in enumerate(entries):
        if not isinstance(item, dict) or not item.get('name') or not isinstance(item['name'], str):
            raise PlanError('%s: services[%d] has no name' % (where, index))
    return Plan(document, [Entry(item) for item in entries])


def parse_plan(text, where='the plan'):
    """A plan from its JSON text (the plan file's content), through read_plan."""
    try:
        document = json.loads(text)
    except ValueError as exc:
        raise PlanError('%s is not JSON (%s); it should be the placement plan written by the '
                        'gpufleet.core.gpu_services role' % (where, exc))
    return read_plan(document, where)


def load_plan(path, instead=None):
    """The plan in a file, through read_plan; ``instead`` is the caller's other way, for a missing file."""
    try:
        with open(path, 'r') as handle:
            text = handle.read()
    except (IOError, OSError) as exc:
        raise PlanError('plan_file %s cannot be read (%s); apply the gpufleet.core.gpu_services role first%s'
                        % (path, exc.strerror or exc, ', or %s' % instead if instead else ''))
    return parse_plan(text, 'plan_file %s' % path)
