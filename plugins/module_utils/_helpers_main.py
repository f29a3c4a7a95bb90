# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.core contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The one entry point of the helper bundle that runs on the hosts: ``gpufleet-helpers COMMAND ARGS...``.

The gpufleet.core.helper_bundle action builds a zipapp from this module and what it imports, found by
following the imports; a new helper is one more import and one more entry in COMMANDS. Helpers are
imported here, not by name at run time, so that the bundle builder sees them.
This is a private module: its API may change without notice.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import sys

from ansible_collections.gpufleet.core.plugins.module_utils import (
    _helper_compute_mode, _helper_device_env, _helper_devices, _helper_drift, _helper_mig_apply, _helper_watchdog)

PROGRAM = 'gpufleet-helpers'
COMMANDS = {
    'compute-mode': _helper_compute_mode,
    'device-env': _helper_device_env,
    'devices': _helper_devices,
    'drift': _helper_drift,
    'mig-apply': _helper_mig_apply,
    'watchdog': _helper_watchdog,
}


def usage():
    lines = ['usage: %s COMMAND [ARGUMENTS...] | --version' % PROGRAM, 'commands:']
    lines.extend('  %-14s %s' % (name, COMMANDS[name].SUMMARY) for name in sorted(COMMANDS))
    return '\n'.join(lines) + '\n'


def main(argv, version=None):
    """argv as sys.argv; version is the collection's, written into the bundle; returns the exit code."""
    if len(argv) == 2 and argv[1] == '--version':
        sys.stdout.write('%s %s\n' % (PROGRAM, version or 'unknown'))
        return 0
    if len(argv) == 2 and argv[1] in ('-h', '--help'):
        sys.stdout.write(usage())
        return 0
    if len(argv) < 2 or argv[1] not in COMMANDS:
        if len(argv) >= 2:
            sys.stderr.write('%s: unknown command %r\n' % (PROGRAM, argv[1]))
        sys.stderr.write(usage())
        return 2
    return COMMANDS[argv[1]].main(argv[1:])
