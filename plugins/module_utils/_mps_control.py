# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.core contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Talks to one MPS control daemon in nvidia-cuda-mps-control's command language, and converges its settings.

This is a private module: its API may change without notice.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.gpufleet.core.plugins.module_utils._errors import GpufleetError
import re

from ansible_collections.gpufleet.core.plugins.module_utils._mps import MpsPlanError, mps_size, percentage, size_mb
from ansible_collections.gpufleet.core.plugins.module_utils._values import is_device_uuid

NO_DAEMON = 'Cannot find MPS control daemon process'
# How the daemon names a device: its ordinal after CUDA_VISIBLE_DEVICES, or a GPU-/MIG- UUID (is_device_uuid).
_ORDINAL = re.compile(r'[0-9]+')
# A set_* command succeeds silently or echoes the value it set; any other answer is the daemon's refusal.
_ECHO = re.compile(r'\d+(?:\.\d+)?')


class MpsControlError(GpufleetError):
    """The daemon is absent or refused a command; the message says what to do.

    ``applied``, ``failed`` and ``not_run`` are the commands sent, the one refused and those not tried."""

    def __init__(self, message, applied=(), failed=(), not_run=()):
        super(MpsControlError, self).__init__(message)
        self.applied = list(applied)
        self.failed = list(failed)
        self.not_run = list(not_run)


class MpsControl:
    """The one door to nvidia-cuda-mps-control. run_command is AnsibleModule.run_command or a test double."""

    def __init__(self, run_command, binary, pipe_directory):
        self.run_command = run_command
        self.binary = binary
        self.pipe_directory = pipe_directory

    def send(self, command):
        rc, out, err = self.run_command([self.binary], data=command,
                                        environ_update={'CUDA_MPS_PIPE_DIRECTORY': self.pipe_directory})
        text = (out or '').strip()
        if NO_DAEMON in text or NO_DAEMON in (err or ''):
            raise MpsControlError('no MPS control daemon answers on %s; start it first (the gpufleet.core.mps role '
                                  'runs it as gpufleet-mps@<device>.service)' % self.pipe_directory)
        if rc != 0:
            raise MpsControlError('nvidia-cuda-mps-control refused "%s" (rc=%d): %s'
                                  % (command, rc, (err or text).strip()))
        return text

    def running(self):
        try:
            self.send('get_server_list')
        except MpsControlError as exc:
            if 'no MPS control daemon answers' in str(exc):
                return False
            raise
        return True


def _pids(text):
    return [int(word) for word in text.split() if word.isdigit()]


def read_state(control, devices):
    """Servers with their clients, and the default settings for the given devices."""
    servers = [{'pid': pid, 'clients': _pids(control.send('get_client_list %d' % pid))}
               for pid in _pids(control.send('get_server_list'))]
    shown = control.send('get_default_active_thread_percentage')
    if shown and not _ECHO.fullmatch(shown):
        raise MpsControlError('the MPS control daemon on %s answered "get_default_active_thread_percentage" with: %s'
                              % (control.pipe_directory, shown))
    # An answer that is not a size (the text for "no limit" is not documented) reads as no limit.
    limits = dict((device, control.send('get_default_device_pinned_mem_limit %s' % device) or None)
                  for device in devices)
    return {'servers': servers, 'default_active_thread_percentage': float(shown) if shown else None,
            'default_pinned_mem_limits': limits}


def same_limit(readback, wanted_mb):
    """The daemon shows limits of 1G and more in whole gigabytes, so 1044M reads back as 1G."""
    if not readback:
        return False
    try:
        shown = size_mb(readback, 'readback')
    except MpsPlanError:
        return False
    return shown == wanted_mb or (readback.upper().endswith('G') and shown == wanted_mb // 1024 * 1024)


def validate(wanted_percentage, limits):
    """Check the requested settings before talking to anything; returns (percentage or None, limits in MiB).

    ``limits`` is one size (for device 0, as the daemon sees it) or a mapping of device to size."""
    if wanted_percentage is not None:
        try:
            wanted_percentage = float(percentage(wanted_percentage, 'default_active_thread_percentage'))
        except MpsPlanError as exc:
            if 'expected a number' in str(exc):
                raise MpsControlError(str(exc))
            raise MpsControlError('default_active_thread_percentage must lie in 1..100, got %s; it limits the SMs a '
                                  'client may use, not its memory (use default_pinned_mem_limit for memory)'
                                  % float(wanted_percentage))
    if limits in (None, ''):
        limits = {}
    elif not isinstance(limits, dict):
        limits = {'0': limits}
    bad_devices = sorted(str(device) for device in limits if not (_ORDINAL.fullmatch(str(device)) or is_device_uuid(device)))
    if bad_devices:
        raise MpsControlError('default_pinned_mem_limit: %s %s not a device as the daemon names it (an ordinal such '
                              'as "0", or a GPU-/MIG- UUID)'
                              % (', '.join(map(repr, bad_devices)), 'is' if len(bad_devices) == 1 else 'are'))
    limits_mb = {}
    problems = []
    for device, value in sorted(limits.items(), key=lambda item: str(item[0])):
        try:
            limits_mb[str(device)] = size_mb(value, 'default_pinned_mem_limit[%s]' % device)
        except MpsPlanError as exc:
            problems.append(str(exc))
    if problems:
        raise MpsControlError(' | '.join(problems))
    return wanted_percentage, limits_mb


def _refusal(answer):
    """The daemon's answer when it refused a set_* command, else None."""
    answer = answer.strip()
    return answer if answer and not _ECHO.fullmatch(answer) else None


def converge(control, wanted_percentage, limits_mb, check_mode):
    """Bring the defaults to the wanted values; returns (commands sent or planned, state before, state after).

    Stops at the first command the daemon refuses, or a value that does not read back, with an MpsControlError
    that separates the commands applied, the one that failed and those not run."""
    before = read_state(control, sorted(limits_mb))
    commands = []
    if wanted_percentage is not None and before['default_active_thread_percentage'] != float(wanted_percentage):
        commands.append('set_default_active_thread_percentage %s' % ('%g' % wanted_percentage))
    for device, wanted in sorted(limits_mb.items()):
        if not same_limit(before['default_pinned_mem_limits'].get(device), wanted):
            commands.append('set_default_device_pinned_mem_limit %s %s' % (device, mps_size(wanted)))
    if check_mode or not commands:
        return commands, before, before
    applied = []
    for position, command in enumerate(commands):
        refused = _refusal(control.send(command))
        if refused:
            raise MpsControlError('the MPS control daemon on %s refused "%s": %s%s' % (
                control.pipe_directory, command, refused,
                '; already applied: %s' % ', '.join(applied) if applied else ''),
                applied, [command], commands[position + 1:])
        applied.append(command)
    after = read_state(control, sorted(limits_mb))
    # A daemon that answers nothing yet keeps its old value would otherwise be "changed" on every run.
    unset = []
    if wanted_percentage is not None and after['default_active_thread_percentage'] != float(wanted_percentage):
        unset.append('default_active_thread_percentage reads back %s, not %g'
                     % (after['default_active_thread_percentage'], wanted_percentage))
    for device, wanted in sorted(limits_mb.items()):
        if not same_limit(after['default_pinned_mem_limits'].get(device), wanted):
            unset.append('the pinned memory limit of device %s reads back %r, not %s'
                         % (device, after['default_pinned_mem_limits'].get(device) or '', mps_size(wanted)))
    if unset:
        raise MpsControlError('the MPS control daemon on %s accepted %s but %s' % (
            control.pipe_directory, ', '.join(applied), '; '.join(unset)), applied)
    return commands, before, after
