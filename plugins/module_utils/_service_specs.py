# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.core contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The one reader of a host's gpu_services_services that needs no host: each spec with its defaults applied, and
the problems of every rule that needs no host (names, uniqueness, keys, users, commands, containers, GPU requests,
MPS limits with units, CPUs, memory policies, switches, the NUMA node).

The keys, the name rule, the memory policies and the role keys' rules are _plan's; this applies them to the list
as a whole. Validate (the gpu_services role's checker) and the monitoring model read it; the planner checks the
same specs against the host (_placement_spec). Pure code; a private module: its API may change without notice.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

from ansible_collections.gpufleet.core.plugins.module_utils._mps import MpsPlanError, size_mb
from ansible_collections.gpufleet.core.plugins.module_utils._plan import (
    DEFAULT_CPUS, DEFAULT_GPUS, DEFAULT_MEMORY_POLICY, DEFAULT_USER_PREFIX, MEMORY_POLICIES, PLANNER_KEYS, ROLE_KEYS,
    SERVICE_NAME_PATTERN, _role_problems, is_service_name)
from ansible_collections.gpufleet.core.plugins.module_utils._values import describe, is_device_uuid, is_integer

VARIABLE = 'gpu_services_services'
# Each key's default where the spec leaves it out (exclusive is false for an MPS share; user is the prefix and name).
DEFAULTS = {'gpus': DEFAULT_GPUS, 'cpus': DEFAULT_CPUS, 'memory_policy': DEFAULT_MEMORY_POLICY, 'exclusive': True,
            'node': None, 'allow_cross_numa': False, 'allow_cpu_overlap': False, 'mode': 'native', 'command': '',
            'image': '', 'container_args': [], 'environment': {}, 'description': '', 'read_write_paths': [],
            'state': 'started'}
_INTEGER = re.compile(r'-?[0-9]+')
_DECIMAL = re.compile(r'[0-9]+(?:\.[0-9]+)?')
_MPS_KEYS = ('device', 'active_thread_percentage', 'pinned_mem_limit')


def _number(value):
    """A whole number given as a string (as -e passes every value) as that number; anything else as it is."""
    if isinstance(value, str) and _INTEGER.fullmatch(value):
        return int(value)
    return value


def _gpus_problems(where, value):
    """(the request normalised, its problems): a count, a list of GPU references, a MIG or an MPS request."""
    value = _number(value)
    key = '%s: gpus is %s' % (where, describe(value))
    if value is None:
        return DEFAULT_GPUS, []
    if is_integer(value):
        return value, ([] if value >= 0 else ['%s; give 0 (CPU-only) or more GPUs' % key])
    if isinstance(value, list):
        problems = []
        if not value:
            problems.append('%s; give gpus: 0 for a CPU-only service, or list GPU-/MIG- UUIDs' % key)
        bad = [ref for ref in value if not (isinstance(ref, str) and ref.strip() or is_integer(ref) and ref >= 0)]
        if bad:
            problems.append('%s; each entry is a GPU-/MIG- UUID or a GPU index, not %s'
                            % (key, ', '.join(describe(ref) for ref in bad)))
        twice = sorted(set(str(ref) for ref in value if value.count(ref) > 1))
        if twice:
            problems.append('%s; %s listed twice: list each device once' % (key, ', '.join(twice)))
        return list(value), problems
    if isinstance(value, dict) and 'mig_profile' in value:
        request = {'mig_profile': value.get('mig_profile'), 'count': _number(value.get('count', 1))}
        problems = []
        if not isinstance(request['mig_profile'], str) or not request['mig_profile'].strip():
            problems.append('%s; give mig_profile a profile name, such as {mig_profile: 1g.10gb, count: 1}' % key)
        if not is_integer(request['count']) or request['count'] < 1:
            problems.append('%s; the count of MIG devices is a number, 1 or more' % key)
        extra = sorted(str(k) for k in set(value) - set(('mig_profile', 'count')))
        if extra:
            problems.append('%s; a MIG request takes mig_profile and count, not %s' % (key, ', '.join(extra)))
        return request, problems
    if isinstance(value, dict) and list(value) == ['mps'] and isinstance(value['mps'], dict):
        return {'mps': dict(value['mps'])}, _mps_problems(where, value['mps'])
    return value, ['%s; give a count (0 for CPU-only), a list of GPU-/MIG- UUIDs, {mig_profile: 1g.10gb, count: 1} '
                   'or {mps: {device: GPU-..., pinned_mem_limit: 20G}}' % key]


def _mps_problems(where, share):
    problems = []
    extra = sorted(str(k) for k in set(share) - set(_MPS_KEYS))
    if extra:
        problems.append('%s: gpus.mps has %s; an MPS share takes device, active_thread_percentage and '
                        'pinned_mem_limit' % (where, ', '.join(extra)))
    device = share.get('device')
    if device is not None and not is_device_uuid(device):
        problems.append('%s: gpus.mps.device is %s; give the GPU-... or MIG-... UUID of an MPS daemon\'s device'
                        % (where, describe(device)))
    pct = share.get('active_thread_percentage')
    if pct is not None:
        number = float(pct) if isinstance(pct, str) and _DECIMAL.fullmatch(pct) else pct
        if isinstance(number, bool) or not isinstance(number, (int, float)) or not 1 <= number <= 100:
            problems.append('%s: gpus.mps.active_thread_percentage is %s; give a number from 1 to 100 (it limits '
                            'SMs, not memory)' % (where, describe(pct)))
    if share.get('pinned_mem_limit') is not None:
        try:
            size_mb(share['pinned_mem_limit'], '%s: gpus.mps.pinned_mem_limit' % where)
        except MpsPlanError as exc:
            problems.append('%s (%s)' % (exc, describe(share['pinned_mem_limit'])))
    return problems


def _planner_problems(where, spec, raw):
    """The planner's keys other than gpus, normalised into SPEC; their problems."""
    problems = []
    cpus = _number(raw.get('cpus'))
    spec['cpus'] = DEFAULT_CPUS if cpus is None else cpus
    if not (cpus is None or cpus == 'all' or is_integer(cpus) and cpus >= 1):
        problems.append("%s: cpus is %s; give a number of logical CPUs (1 or more) or 'all'" % (where, describe(cpus)))
    policy = raw.get('memory_policy')
    spec['memory_policy'] = policy or DEFAULT_MEMORY_POLICY
    if policy and policy not in MEMORY_POLICIES:
        problems.append('%s: memory_policy is %s; give one of %s'
                        % (where, describe(policy), ', '.join(MEMORY_POLICIES)))
    shared = isinstance(spec['gpus'], dict) and 'mps' in spec['gpus']
    for flag, default in (('exclusive', not shared), ('allow_cross_numa', False), ('allow_cpu_overlap', False)):
        value = raw.get(flag)
        spec[flag] = default if value is None else value
        if value is not None and not isinstance(value, bool):
            problems.append('%s: %s is %s; give true or false' % (where, flag, describe(value)))
    if shared and raw.get('exclusive') is True:
        problems.append('%s: exclusive is true, but an MPS share is always shared with the daemon\'s other clients; '
                        'drop exclusive or give the service a device of its own' % where)
    node = _number(raw.get('node'))
    spec['node'] = node
    if node is not None and not (is_integer(node) and node >= 0):
        problems.append('%s: node is %s; give the number of a NUMA node, such as 0' % (where, describe(node)))
    return problems


def _command_problems(where, spec):
    """A native service's program is an absolute path: systemd runs it through numactl, without a shell."""
    command = spec['command']
    if spec['mode'] != 'native' or not isinstance(command, str) or '\n' in command or not command.strip():
        return []
    program = command.split()[0]
    if program.startswith('/') and '..' not in program.split('/'):
        return []
    return ['%s: command is %s; a native service\'s program is an absolute path, such as /opt/llm/bin/serve '
            '--port 8000' % (where, describe(command))]


def _name_problems(position, name, names):
    where = '%s entry %d' % (VARIABLE, position)
    if not is_service_name(name):
        return ['%s: name is %s; give a name of lower-case letters, digits, _ and - (up to 63, starting with a letter '
                'or digit: %s), which names its unit, user and files' % (where, describe(name), SERVICE_NAME_PATTERN)]
    if names.count(name) > 1:
        return ['%s: name is %s, which entries %s share; give each service a name of its own'
                % (where, describe(name), ' and '.join(str(i) for i, other in enumerate(names, 1) if other == name))]
    return []


def service_specs(services, user_prefix=DEFAULT_USER_PREFIX):
    """(the specs normalised, every problem that needs no host): each spec a dict with every key of _plan's
    PLANNER_KEYS and ROLE_KEYS, the defaults applied (gpus 1, cpus 4, ...; user the prefix and name, or None for an
    MPS share: its daemon's, which needs the host), in input order; an entry that is not a mapping is left out. Each
    problem names the entry, the key, the value and the fix.
    """
    if not isinstance(services, list):
        return [], ['%s is %s; give a list of services, such as [{name: llm, gpus: 2}]'
                    % (VARIABLE, describe(services))]
    prefix = user_prefix if isinstance(user_prefix, str) else DEFAULT_USER_PREFIX
    names = [raw.get('name') if isinstance(raw, dict) else None for raw in services]
    specs, problems = [], []
    known = PLANNER_KEYS + ROLE_KEYS
    for position, raw in enumerate(services, 1):
        if not isinstance(raw, dict):
            problems.append('%s entry %d is %s; give a mapping with at least a name, such as {name: llm, gpus: 2}'
                            % (VARIABLE, position, describe(raw)))
            continue
        found = _name_problems(position, raw.get('name'), names)
        problems.extend(found)
        where = '%s entry %d' % (VARIABLE, position) if found else '%s: service %s' % (VARIABLE, raw['name'])
        unknown = sorted(str(key) for key in raw if key not in known)
        if unknown:
            problems.append('%s: has %s; a service takes only %s' % (where, ', '.join(unknown), ', '.join(known)))
        spec = dict((key, raw[key] if raw.get(key) is not None else value) for key, value in DEFAULTS.items())
        spec['name'] = raw.get('name')
        spec['gpus'], found = _gpus_problems(where, raw.get('gpus'))
        problems.extend(found)
        problems.extend(_planner_problems(where, spec, raw))
        shared = isinstance(spec['gpus'], dict) and 'mps' in spec['gpus']
        spec['user'] = raw['user'] if 'user' in raw else None if shared else '%s%s' % (prefix, spec['name'])
        if isinstance(spec['name'], str):
            problems.extend('%s: %s' % (where, problem) for problem in _role_problems(raw, prefix))
        problems.extend(_command_problems(where, spec))
        specs.append(spec)
    return specs, problems


def takes_gpus(spec):
    """Whether a normalised spec asks for a GPU, a MIG device or an MPS share."""
    gpus = spec.get('gpus')
    return not (gpus in (0, [], {}) or isinstance(gpus, bool) or is_integer(gpus) and gpus < 0)
