# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.core contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""CUDA MPS: daemon plans validated against the topology, the client contract, and sizes.

Pure code, shared by the mps module (on targets) and filters (on the controller).
This is a private module: its API may change without notice.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

from ansible_collections.gpufleet.core.plugins.module_utils._errors import GpufleetError
from ansible_collections.gpufleet.core.plugins.module_utils._cpulist import CpuListError
from ansible_collections.gpufleet.core.plugins.module_utils._topology import Topology, TopologyModelError

_SIZE = re.compile(r'^\s*(\d+(?:\.\d+)?)\s*([KMGT]?)I?B?\s*$', re.IGNORECASE)
_UNIT_MB = {'': 1, 'K': 1.0 / 1024, 'M': 1, 'G': 1024, 'T': 1024 * 1024}


class MpsPlanError(GpufleetError, ValueError):
    """An MPS plan that cannot work; the message names every problem and its fix."""


def size_mb(value, where):
    """'20G', '512M', '20480' (MiB), 20480 -> MiB. MPS reads M and G as binary units."""
    if isinstance(value, bool):
        raise MpsPlanError('%s: %r is not a memory size like 20G or 512M' % (where, value))
    if isinstance(value, (int, float)):
        return int(value)
    match = _SIZE.match(str(value))
    if not match:
        raise MpsPlanError('%s: %r is not a memory size like 20G or 512M' % (where, value))
    return int(float(match.group(1)) * _UNIT_MB[match.group(2).upper()])


def mps_size(mb):
    """MiB -> the form nvidia-cuda-mps-control takes (whole G where exact, else M)."""
    return '%dG' % (mb // 1024) if mb % 1024 == 0 else '%dM' % mb


def _percentage(value, where, problems):
    if value is None:
        return None
    try:
        number = float(value)
    except (TypeError, ValueError):
        number = -1
    if not 1 <= number <= 100:
        problems.append('%s: an active thread percentage must lie in 1..100, got %r (it limits SMs, not memory)'
                        % (where, value))
        return None
    return int(number) if number == int(number) else number


def _given(item, key):
    """A setting in mps_daemons form (key), or in plan()'s normalised form (key_mb): plan() reads its own output."""
    value = item.get(key)
    return item.get(key + '_mb') if value is None else value


def _limit_mb(value, unset, where, problems):
    """A memory limit in MiB, `unset` when not given; a bad size is recorded as a problem."""
    if value in (None, ''):
        return unset
    try:
        return size_mb(value, where)
    except MpsPlanError as exc:
        problems.append(str(exc))
        return None


def plan(topology, daemons, pipe_root='/run/gpufleet-mps', log_root='/var/log/gpufleet-mps', time_slicing=()):
    """Validate MPS daemons against the host and return them normalised; raise MpsPlanError listing every problem.

    Each daemon: {'device': GPU-/MIG- UUID, 'user', 'default_active_thread_percentage',
    'default_pinned_mem_limit', 'pipe_directory', 'log_directory', 'clients': [{'name', 'user',
    'active_thread_percentage', 'pinned_mem_limit'}]}, or a daemon this function returned (its limits in
    ``*_mb`` keys): plan(plan(x)) == plan(x), so callers hold daemons in the normalised form only.
    ``topology`` is the gpufleet_topology fact or a Topology over it.
    """
    try:
        devices = (topology if isinstance(topology, Topology) else Topology(topology)).devices
    except (CpuListError, TopologyModelError) as exc:
        raise MpsPlanError('The MPS plan cannot work: %s' % exc)
    problems = []
    normalised = []
    seen_devices = {}
    seen_pipes = {}
    sliced = set(time_slicing or ())
    for position, daemon in enumerate(daemons or [], 1):
        where = 'MPS daemon %d (%s)' % (position, daemon.get('device'))
        device = daemon.get('device')
        info = devices.get(device)
        if info is None:
            problems.append('%s: no GPU or MIG device with that UUID on this host; name it by its GPU-... or MIG-... '
                            'UUID from gpufleet_topology' % where)
            continue
        gpu = info['gpu']
        if not info['mig'] and info['mig_mode']:
            problems.append('%s: %s is in MIG mode; MPS on MIG needs one daemon per MIG device: name the MIG-... '
                            'UUIDs instead' % (where, device))
        if device in seen_devices:
            problems.append('%s: daemon %d already serves this device; one control daemon per device'
                            % (where, seen_devices[device]))
        seen_devices[device] = position
        if device in sliced or gpu['uuid'] in sliced:
            problems.append('%s: this GPU is also configured for time-slicing; use MPS or time-slicing on a GPU, '
                            'never both' % where)
        pipe = daemon.get('pipe_directory') or '%s/%s' % (pipe_root, device)
        if pipe in seen_pipes:
            problems.append('%s: pipe directory %s is already used by daemon %d; each daemon needs its own'
                            % (where, pipe, seen_pipes[pipe]))
        seen_pipes[pipe] = position
        user = daemon.get('user')
        if not user:
            problems.append('%s: set user, the account its server and clients run as' % where)
        default_pct = _percentage(daemon.get('default_active_thread_percentage'), where, problems)
        default_mb = _limit_mb(_given(daemon, 'default_pinned_mem_limit'), None, where, problems)
        clients = []
        promised = 0
        for client in daemon.get('clients') or []:
            spot = '%s, client %s' % (where, client.get('name'))
            if client.get('user') and user and client['user'] != user:
                problems.append('%s: runs as %s, but an MPS server serves one user id at a time and this daemon '
                                'serves %s; give the client the daemon\'s user or its own daemon'
                                % (spot, client['user'], user))
            pct = _percentage(client.get('active_thread_percentage'), spot, problems)
            limit_mb = _limit_mb(_given(client, 'pinned_mem_limit'), default_mb, spot, problems)
            promised += limit_mb or 0
            clients.append({'name': client.get('name'), 'active_thread_percentage': pct or default_pct,
                            'pinned_mem_limit_mb': limit_mb})
        capacity = info['memory_mb']
        if capacity is not None and promised > capacity:
            problems.append('%s: its clients are promised %d MiB of pinned device memory (%s) but the device has %d '
                            'MiB; lower the limits or move a client' % (
                                where, promised, ' + '.join('%s %s' % (c['name'], mps_size(c['pinned_mem_limit_mb']))
                                                            for c in clients if c['pinned_mem_limit_mb']), capacity))
        normalised.append({
            'device': device,
            'gpu_uuid': gpu['uuid'],
            'mig_device': info['mig'],
            'user': user,
            'pipe_directory': pipe,
            'log_directory': daemon.get('log_directory') or '%s/%s' % (log_root, device),
            'default_active_thread_percentage': default_pct,
            'default_pinned_mem_limit_mb': default_mb,
            'memory_mb': capacity,
            'clients': clients,
        })
    if problems:
        raise MpsPlanError('The MPS plan cannot work: ' + ' | '.join(problems))
    return normalised


def client_environment(daemon, client_name):
    """The environment a service sharing a device through MPS runs with (the contract with the services role)."""
    for client in daemon['clients']:
        if client['name'] == client_name:
            break
    else:
        raise MpsPlanError('MPS daemon for %s has no client %s (clients: %s)' % (
            daemon['device'], client_name, ', '.join(c['name'] for c in daemon['clients']) or 'none'))
    env = {
        'CUDA_MPS_PIPE_DIRECTORY': daemon['pipe_directory'],
        # The server remaps CUDA_VISIBLE_DEVICES, so name the device by UUID: it is device 0 to the client.
        'CUDA_VISIBLE_DEVICES': daemon['device'],
    }
    if client['active_thread_percentage'] is not None:
        env['CUDA_MPS_ACTIVE_THREAD_PERCENTAGE'] = str(client['active_thread_percentage'])
    if client['pinned_mem_limit_mb']:
        env['CUDA_MPS_PINNED_DEVICE_MEM_LIMIT'] = '0=%s' % mps_size(client['pinned_mem_limit_mb'])
    return env
