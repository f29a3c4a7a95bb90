# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.core contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""CUDA MPS: daemon plans validated against the topology (MpsDaemon), the shares services take of them, the client
contract, and sizes.

Pure code, shared by the mps module (on targets) and filters (on the controller).
This is a private module: its API may change without notice.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import difflib
import math
import re

from ansible_collections.gpufleet.core.plugins.module_utils._errors import GpufleetError
from ansible_collections.gpufleet.core.plugins.module_utils._cpulist import CpuListError
from ansible_collections.gpufleet.core.plugins.module_utils._device_env import DeviceMapError, device_name
from ansible_collections.gpufleet.core.plugins.module_utils._mig_slots import MigSlotError, resolve, slot_form
from ansible_collections.gpufleet.core.plugins.module_utils._topology import Topology, TopologyModelError
from ansible_collections.gpufleet.core.plugins.module_utils._values import is_integer

# A size is a number and a unit; a bare number is refused, since nobody can tell bytes from MiB.
_SIZE = re.compile(r'\s*(\d+(?:\.\d+)?)\s*([KMGT])(?:I?B)?\s*', re.IGNORECASE)
_NUMBER = re.compile(r'\s*[-+]?\d+(?:\.\d+)?\s*')
_UNIT_MB = {'K': 1.0 / 1024, 'M': 1, 'G': 1024, 'T': 1024 * 1024}
SIZE_HINT = 'a memory size like 20G or 512M'
# Plain POSIX user and group names (what useradd takes): nothing a shell or a unit file would read twice.
_ACCOUNT = re.compile(r'[A-Za-z_][A-Za-z0-9_.-]{0,31}')
# A plain absolute path: no empty, "." or ".." parts, no characters a unit file or a shell would interpret.
_PATH_PART = re.compile(r'[A-Za-z0-9_@:+.-]+')

DAEMON_KEYS = ('device', 'user', 'group', 'default_active_thread_percentage', 'default_pinned_mem_limit',
               'pipe_directory', 'log_directory', 'clients')
CLIENT_KEYS = ('name', 'user', 'active_thread_percentage', 'pinned_mem_limit')
# The keys plan() adds to what it returns. plan() reads its own output as a declaration like any other: its limits in
# MiB under the explicit *_mb keys, the rest found again on the host.
_PLANNED_DAEMON_KEYS = ('name', 'gpu_uuid', 'mig_device', 'memory_mb', 'default_pinned_mem_limit_mb', 'control_commands')
_PLANNED_CLIENT_KEYS = ('pinned_mem_limit_mb',)


class MpsPlanError(GpufleetError, ValueError):
    """An MPS plan that cannot work; the message names every problem and its fix."""


def number(value, where):
    """An int or float, or a string that is plainly one ('50', '12.5': what -e gives); else MpsPlanError."""
    if isinstance(value, bool) or not isinstance(value, (int, float, str)) or (
            isinstance(value, str) and not _NUMBER.fullmatch(value)):
        raise MpsPlanError('%s: expected a number, got %r' % (where, value))
    found = float(value)
    if math.isnan(found) or math.isinf(found):
        raise MpsPlanError('%s: expected a number, got %r' % (where, value))
    return int(found) if found == int(found) else found


def size_mb(value, where, capacity_mb=None):
    """'20G', '512M', '1.5G', '20GiB' -> MiB (MPS reads M and G as binary units). Refused: no unit, negative,
    less than 1 MiB, and more than ``capacity_mb`` when given."""
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise MpsPlanError('%s: %r is not %s' % (where, value, SIZE_HINT))
    if not isinstance(value, str) or _NUMBER.fullmatch(value):
        if str(value).strip().startswith('-'):
            raise MpsPlanError('%s: %r is negative; give %s' % (where, value, SIZE_HINT))
        raise MpsPlanError('%s: %r has no unit; give %s' % (where, value, SIZE_HINT))
    match = _SIZE.fullmatch(value)
    if not match:
        if value.strip().startswith('-'):
            raise MpsPlanError('%s: %r is negative; give %s' % (where, value, SIZE_HINT))
        raise MpsPlanError('%s: %r is not %s' % (where, value, SIZE_HINT))
    mb = int(float(match.group(1)) * _UNIT_MB[match.group(2).upper()])
    if mb < 1:
        raise MpsPlanError('%s: %r rounds down to 0 MiB (MPS limits are whole MiB); give at least 1M, as %s'
                           % (where, value, SIZE_HINT))
    if capacity_mb is not None and mb > capacity_mb:
        raise MpsPlanError('%s: %r (%d MiB) is more than the device has (%d MiB)' % (where, value, mb, capacity_mb))
    return mb


def mps_size(mb):
    """MiB -> the form nvidia-cuda-mps-control takes (whole G where exact, else M)."""
    return '%dG' % (mb // 1024) if mb % 1024 == 0 else '%dM' % mb


def percentage(value, where):
    """An active thread percentage, 1..100 (a number or a string that is plainly one); else MpsPlanError."""
    found = number(value, where)
    if not 1 <= found <= 100:
        raise MpsPlanError('%s: an active thread percentage must lie in 1..100, got %r (it limits SMs, not memory)'
                           % (where, value))
    return found


def check_account(value, where):
    """A plain POSIX user or group name; else MpsPlanError."""
    if not isinstance(value, str) or not _ACCOUNT.fullmatch(value):
        raise MpsPlanError('%s: %r is not a plain user or group name (letters, digits, _ . -, at most 32, not '
                           'starting with - or a digit)' % (where, value))
    return value


def check_directory(value, where):
    """A plain absolute directory: no empty, '.' or '..' parts; else MpsPlanError."""
    parts = value.split('/') if isinstance(value, str) else None
    if not parts or parts[0] != '' or len(parts) < 2 or not all(
            _PATH_PART.fullmatch(part) and part not in ('.', '..') for part in parts[1:]):
        raise MpsPlanError('%s: %r is not a plain absolute directory (like /run/gpufleet-mps: no "..", ".", "//", '
                           'trailing "/" or special characters)' % (where, value))
    return value


def _percentage(value, where, problems):
    if value is None:
        return None
    try:
        return percentage(value, where)
    except MpsPlanError as exc:
        problems.append(str(exc))
        return None


def _unknown_keys(item, known, where, problems):
    """A misspelt key (default_pinned_mem_limits) would be ignored silently: refuse it with the likely one."""
    for key in sorted(set(item) - set(known), key=str):
        near = difflib.get_close_matches(str(key), [k for k in known if not k.endswith('_mb')], 1)
        problems.append('%s: unknown key %s%s (known: %s)' % (
            where, key, '; did you mean %s?' % near[0] if near else '',
            ', '.join(k for k in known if not k.endswith('_mb') and k not in _PLANNED_DAEMON_KEYS)))


def _limit_mb(item, key, unset, where, problems, capacity_mb):
    """A memory limit in MiB: ``key`` as a size ('20G'), else ``key``_mb in MiB as plan() returns it; ``unset`` when
    neither is given. A bad one is recorded as a problem and gives None."""
    value = item.get(key)
    if value in (None, ''):
        value = item.get(key + '_mb')
        if value in (None, '', 0):
            return unset
        if is_integer(value) and value > 0:
            if capacity_mb is not None and value > capacity_mb:
                problems.append('%s: %s (%d MiB) is more than the device has (%d MiB)' % (
                    where, mps_size(value), value, capacity_mb))
                return None
            return value
    try:
        return size_mb(value, '%s: %s' % (where, key), capacity_mb)
    except MpsPlanError as exc:
        problems.append(str(exc))
        return None


class MpsDaemon:
    """One MPS control daemon as planned: the device it serves, its account, directories, defaults and clients.

    ``name`` is what survives a reboot, and what its unit, files and directories are named by: a whole GPU's UUID, or
    a MIG device's slot (``_mig_slots``), whose UUID a re-made instance need not keep. ``device`` is the UUID now.

    ``clients`` are dicts: ``name``, ``active_thread_percentage`` and ``pinned_mem_limit_mb`` (the client's own, else
    the daemon's default, else None). ``as_dict()`` is the form plan() and the mps_plan filter return.
    """

    __slots__ = ('name', 'device', 'gpu_uuid', 'mig_device', 'user', 'group', 'pipe_directory', 'log_directory',
                 'default_active_thread_percentage', 'default_pinned_mem_limit_mb', 'memory_mb', 'clients',
                 'control_commands')

    def __init__(self, **fields):
        for name in self.__slots__:
            setattr(self, name, fields[name])

    def as_dict(self):
        return dict((name, getattr(self, name)) for name in self.__slots__)

    def with_clients(self, clients):
        return MpsDaemon(**dict(self.as_dict(), clients=clients))

    def client_names(self):
        return [client['name'] for client in self.clients]

    def client_environment(self, client_name):
        return client_environment(self.as_dict(), client_name)


def control_commands(default_percentage, default_pinned_mb):
    """What the daemon's unit tells nvidia-cuda-mps-control at every start (it forgets its defaults when it quits): the
    SM share, and the pinned-memory cap in the form the daemon takes (device 0 is the only one it sees)."""
    found = []
    if default_percentage is not None:
        found.append('set_default_active_thread_percentage %g' % default_percentage)
    if default_pinned_mb:
        found.append('set_default_device_pinned_mem_limit 0 %s' % mps_size(default_pinned_mb))
    return found


def plan(topology, daemons, pipe_root='/run/gpufleet-mps', log_root='/var/log/gpufleet-mps', time_slicing=()):
    """plan_daemons, each daemon as a dict (``MpsDaemon.as_dict``): what the mps_plan filter and the mps role hold."""
    return [daemon.as_dict() for daemon in plan_daemons(topology, daemons, pipe_root, log_root, time_slicing)]


def plan_daemons(topology, daemons, pipe_root='/run/gpufleet-mps', log_root='/var/log/gpufleet-mps', time_slicing=()):
    """Validate MPS daemons against the host and return them as MpsDaemons; raise MpsPlanError listing every problem.

    Each daemon: {'device': a GPU's UUID, a MIG device's slot (GPU-UUID:PROFILE:START:ORDINAL) or its MIG- UUID,
    'user', 'group', 'default_active_thread_percentage', 'default_pinned_mem_limit', 'pipe_directory',
    'log_directory', 'clients': [{'name', 'user', 'active_thread_percentage', 'pinned_mem_limit'}]}, as the mps role
    declares them. plan()'s own output is such a daemon too, with its limits in MiB under the ``*_mb`` keys:
    plan(plan(x)) == plan(x), so a plan can be handed on. Each daemon is named by its device's GPU UUID or MIG slot.
    A client can only lower its daemon's defaults (MPS obeys the lower of the two), so a higher value is refused.
    ``topology`` is the gpufleet_topology fact or a Topology over it.
    """
    try:
        topology = topology if isinstance(topology, Topology) else Topology(topology)
    except (CpuListError, TopologyModelError) as exc:
        raise MpsPlanError('The MPS plan cannot work: %s' % exc)
    problems = []
    for name, root in (('pipe_root', pipe_root), ('log_root', log_root)):
        try:
            check_directory(root, name)
        except MpsPlanError as exc:
            problems.append(str(exc))
    if daemons is None:
        daemons = []
    if not isinstance(daemons, list):
        raise MpsPlanError('The MPS plan cannot work: daemons must be a list of daemons (dicts), got %r' % (daemons,))
    planned = []
    # What the daemons before each one use (by position), and the GPUs time-slicing has.
    taken = {'devices': {}, 'pipes': {}, 'sliced': set(time_slicing or ())}
    for position, daemon in enumerate(daemons, 1):
        if not isinstance(daemon, dict):
            problems.append('MPS daemon %d: expected a dict with device, user and clients, got %r' % (position, daemon))
            continue
        found = _plan_daemon(topology, position, daemon, (pipe_root, log_root), taken, problems)
        if found is not None:
            planned.append(found)
    if problems:
        raise MpsPlanError('The MPS plan cannot work: ' + ' | '.join(problems))
    return planned


def _plan_daemon(topology, position, daemon, roots, taken, problems):
    """One daemon as an MpsDaemon, its problems added to PROBLEMS; None when its device is not on the host.

    ``roots``: (pipe root, log root); ``taken``: the devices and pipe directories of the daemons before it, by
    position, and the time-sliced GPUs (sliced), which this daemon's are added to."""
    given = daemon.get('device')
    where = 'MPS daemon %d (%s)' % (position, given)
    _unknown_keys(daemon, DAEMON_KEYS + _PLANNED_DAEMON_KEYS, where, problems)
    device, name = _device_now(topology, given, where, problems)
    if device is None:
        return None
    info = topology.devices[device]
    gpu = info['gpu']
    if not info['mig'] and info['mig_mode']:
        problems.append('%s: %s is in MIG mode; MPS on MIG needs one daemon per MIG device: name the MIG-... '
                        'UUIDs instead' % (where, device))
    if device in taken['devices']:
        problems.append('%s: daemon %d already serves this device; one control daemon per device'
                        % (where, taken['devices'][device]))
    taken['devices'][device] = position
    if device in taken['sliced'] or gpu['uuid'] in taken['sliced']:
        problems.append('%s: this GPU is also configured for time-slicing; use MPS or time-slicing on a GPU, '
                        'never both' % where)
    pipe = daemon.get('pipe_directory') or '%s/%s' % (roots[0], name)
    log_dir = daemon.get('log_directory') or '%s/%s' % (roots[1], name)
    for key, directory in (('pipe_directory', pipe), ('log_directory', log_dir)):
        try:
            check_directory(directory, '%s: %s' % (where, key))
        except MpsPlanError as exc:
            problems.append(str(exc))
    if pipe in taken['pipes']:
        problems.append('%s: pipe directory %s is already used by daemon %d; each daemon needs its own'
                        % (where, pipe, taken['pipes'][pipe]))
    taken['pipes'][pipe] = position
    user = daemon.get('user')
    if not user:
        problems.append('%s: set user, the account its server and clients run as' % where)
    else:
        try:
            check_account(user, '%s: user' % where)
        except MpsPlanError as exc:
            problems.append(str(exc))
            user = None
    if daemon.get('group') not in (None, ''):
        try:
            check_account(daemon['group'], '%s: group' % where)
        except MpsPlanError as exc:
            problems.append(str(exc))
    capacity = info['memory_mb']
    default_pct = _percentage(daemon.get('default_active_thread_percentage'),
                              '%s: default_active_thread_percentage' % where, problems)
    default_mb = _limit_mb(daemon, 'default_pinned_mem_limit', None, where, problems, capacity)
    given_clients = daemon.get('clients') or []
    if not isinstance(given_clients, list):
        problems.append('%s: clients must be a list of clients (dicts with name), got %r' % (where, given_clients))
        given_clients = []
    clients = _plan_clients(where, given_clients, user, default_pct, default_mb, capacity, problems)
    return MpsDaemon(name=name, device=device, gpu_uuid=gpu['uuid'], mig_device=info['mig'], user=user,
                     group=daemon.get('group') or '', pipe_directory=pipe, log_directory=log_dir,
                     default_active_thread_percentage=default_pct, default_pinned_mem_limit_mb=default_mb,
                     memory_mb=capacity, clients=clients, control_commands=control_commands(default_pct, default_mb))


def _device_now(topology, given, where, problems):
    """(the UUID of the device GIVEN names now, the daemon's name), or (None, None) with the problem added."""
    slot = slot_form(given)
    if slot is not None:
        try:
            return resolve(topology, [slot])[str(slot)], str(slot)
        except MigSlotError as exc:
            problems.append('%s: %s' % (where, exc))
            return None, None
    info = topology.devices.get(given) if isinstance(given, str) else None
    if info is None:
        problems.append('%s: no GPU or MIG device with that UUID on this host; name it by its GPU-... or MIG-... '
                        'UUID from gpufleet_topology' % where)
        return None, None
    # A MIG device named by UUID is named by its slot from here on: its UUID need not survive a reboot. One whose
    # driver gives no placement has no slot; its UUID is all there is to name it by.
    try:
        return given, device_name(topology, given)
    except DeviceMapError:
        return given, given


def _plan_clients(where, given_clients, user, default_pct, default_mb, capacity, problems):
    """A daemon's clients, each limit filled in from the daemon's defaults; their problems go to PROBLEMS, with the
    pinned memory they are promised together where it exceeds the device's."""
    clients = []
    promised = 0
    for client in given_clients:
        if not isinstance(client, dict):
            problems.append('%s: a client must be a dict with name, got %r' % (where, client))
            continue
        spot = '%s, client %s' % (where, client.get('name'))
        _unknown_keys(client, CLIENT_KEYS + _PLANNED_CLIENT_KEYS, spot, problems)
        if client.get('user') and user and client['user'] != user:
            problems.append('%s: runs as %s, but an MPS server serves one user id at a time and this daemon '
                            'serves %s; give the client the daemon\'s user or its own daemon'
                            % (spot, client['user'], user))
        pct = _percentage(client.get('active_thread_percentage'), '%s: active_thread_percentage' % spot, problems)
        if pct is not None and default_pct is not None and pct > default_pct:
            problems.append('%s: active_thread_percentage %s is above the daemon\'s default %s; a client can only '
                            'lower its daemon\'s limit (MPS would use %s)' % (spot, pct, default_pct, default_pct))
        limit_mb = _limit_mb(client, 'pinned_mem_limit', default_mb, spot, problems, capacity)
        if limit_mb is not None and default_mb is not None and limit_mb > default_mb:
            problems.append('%s: pinned_mem_limit %s is above the daemon\'s default_pinned_mem_limit %s; a client '
                            'can only lower its daemon\'s limit (MPS would use %s)' % (
                                spot, mps_size(limit_mb), mps_size(default_mb), mps_size(default_mb)))
        promised += limit_mb or 0
        clients.append({'name': client.get('name'), 'active_thread_percentage': pct or default_pct,
                        'pinned_mem_limit_mb': limit_mb})
    if capacity is not None and promised > capacity:
        problems.append('%s: its clients are promised %d MiB of pinned device memory (%s) but the device has %d '
                        'MiB; lower the limits or move a client' % (
                            where, promised, ' + '.join('%s %s' % (c['name'], mps_size(c['pinned_mem_limit_mb']))
                                                        for c in clients if c['pinned_mem_limit_mb']), capacity))
    return clients


def share_environments(daemons, shares):
    """Each MPS share's (daemon as plan() returns it, client environment), by service name.

    ``daemons``: the planned MpsDaemons, in plan order. ``shares``: (service name, device, active_thread_percentage,
    pinned_mem_limit) in service order, the limits as the service asks them (a number, a size such as '20G') or None
    for what its daemon lists for it, else the daemon's default. Each share becomes a client of its daemon and is
    checked with the daemon's other clients by plan()'s rules; MpsPlanError lists every problem.
    """
    names = set(share[0] for share in shares)
    problems = []
    by_device = {}
    for position, daemon in enumerate(daemons, 1):
        listed = dict((client['name'], client) for client in daemon.clients)
        clients = [client for client in daemon.clients if client['name'] not in names]
        for name, device, percentage_asked, limit_asked in shares:
            if device != daemon.device:
                continue
            mine = listed.get(name) or {}
            client = {'name': name, 'active_thread_percentage': mine.get('active_thread_percentage')
                      if percentage_asked is None else percentage_asked}
            if limit_asked is None:
                client['pinned_mem_limit_mb'] = mine.get('pinned_mem_limit_mb')
            else:
                client['pinned_mem_limit'] = limit_asked
            clients.append(client)
        checked = _plan_clients('MPS daemon %d (%s)' % (position, daemon.device), clients, daemon.user,
                                daemon.default_active_thread_percentage, daemon.default_pinned_mem_limit_mb,
                                daemon.memory_mb, problems)
        by_device[daemon.device] = daemon.with_clients(checked)
    if problems:
        raise MpsPlanError('The MPS plan cannot work: ' + ' | '.join(problems))
    return dict((name, (by_device[device].as_dict(), by_device[device].client_environment(name)))
                for name, device, _percentage_asked, _limit_asked in shares)


def client_environment(daemon, client_name):
    """The environment a service sharing a device through MPS runs with (the contract with the services role).

    ``daemon`` is one daemon as plan() returns it."""
    for client in daemon['clients']:
        if isinstance(client, dict) and client.get('name') == client_name:
            break
    else:
        raise MpsPlanError('MPS daemon for %s has no client %s (clients: %s)' % (
            daemon['device'], client_name,
            ', '.join(str(c.get('name')) for c in daemon['clients'] if isinstance(c, dict)) or 'none'))
    if 'pinned_mem_limit_mb' not in client:
        raise MpsPlanError('MPS daemon for %s: client %s is not in the form mps_plan returns; pass the daemons through '
                           'gpufleet.core.mps_plan first' % (daemon['device'], client_name))
    env = {
        'CUDA_MPS_PIPE_DIRECTORY': daemon['pipe_directory'],
        # The server remaps CUDA_VISIBLE_DEVICES, so name the device by UUID: it is device 0 to the client.
        'CUDA_VISIBLE_DEVICES': daemon['device'],
    }
    if client.get('active_thread_percentage') is not None:
        env['CUDA_MPS_ACTIVE_THREAD_PERCENTAGE'] = str(client['active_thread_percentage'])
    if client['pinned_mem_limit_mb']:
        env['CUDA_MPS_PINNED_DEVICE_MEM_LIMIT'] = '0=%s' % mps_size(client['pinned_mem_limit_mb'])
    return env
