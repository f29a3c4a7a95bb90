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
from ansible_collections.gpufleet.core.plugins.module_utils._mps import MpsPlanError, mps_size, size_mb

NO_DAEMON = 'Cannot find MPS control daemon process'


class MpsControlError(GpufleetError):
    """The daemon is absent or refused a command; the message says what to do."""


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
    percentage = control.send('get_default_active_thread_percentage')
    limits = dict((device, control.send('get_default_device_pinned_mem_limit %s' % device) or None)
                  for device in devices)
    return {'servers': servers, 'default_active_thread_percentage': float(percentage) if percentage else None,
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


def validate(percentage, limits):
    """Check the requested settings before talking to anything; returns limits in MiB."""
    if percentage is not None and not 1 <= percentage <= 100:
        raise MpsControlError('default_active_thread_percentage must lie in 1..100, got %s; it limits the SMs a '
                              'client may use, not its memory (use default_pinned_mem_limits for memory)'
                              % percentage)
    try:
        return dict((str(device), size_mb(value, 'default_pinned_mem_limits[%s]' % device))
                    for device, value in (limits or {}).items())
    except MpsPlanError as exc:
        raise MpsControlError(str(exc))


def converge(control, percentage, limits_mb, check_mode):
    """Bring the defaults to the wanted values; returns (commands sent or planned, state before, state after)."""
    before = read_state(control, sorted(limits_mb))
    commands = []
    if percentage is not None and before['default_active_thread_percentage'] != float(percentage):
        commands.append('set_default_active_thread_percentage %s' % ('%g' % percentage))
    for device, wanted in sorted(limits_mb.items()):
        if not same_limit(before['default_pinned_mem_limits'].get(device), wanted):
            commands.append('set_default_device_pinned_mem_limit %s %s' % (device, mps_size(wanted)))
    if check_mode or not commands:
        return commands, before, before
    for command in commands:
        control.send(command)
    return commands, before, read_state(control, sorted(limits_mb))
