# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.core contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""One check of the GPU watchdog: read the host, decide, act, report.

usage: gpufleet-helpers watchdog CONFIG.json [--clear-quarantine] | watchdog --check-config CONFIG.json

gpufleet-watchdog.service runs this every gpu_watchdog_interval_sec (its timer). Every decision goes to stdout (the
journal) with its evidence; node_exporter's textfile collector gets the metrics; the state (rate-limit history,
quarantine, where the kernel log was read up to) lives in a JSON file under /var/lib. The check is
``_watchdog_check``'s, its decisions ``_watchdog``'s, and the system is reached through ``_watchdog_host``.
This is a private module: its API may change without notice.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import sys

from ansible_collections.gpufleet.core.plugins.module_utils._nvml import pynvml
from ansible_collections.gpufleet.core.plugins.module_utils._watchdog_check import PROGRAM, check, clear_quarantine
from ansible_collections.gpufleet.core.plugins.module_utils._watchdog_config import WatchdogError, check_config
from ansible_collections.gpufleet.core.plugins.module_utils._watchdog_host import WatchdogHost

SUMMARY = 'one check of the GPU watchdog (its timer unit)'


def load_config(host, path):
    """The checked configuration in the file at path, or WatchdogError naming the file and the fix."""
    document, problem = host.read_json(path)
    if document is None:
        raise WatchdogError('%s: %s' % (path, problem or 'no such file; apply the gpufleet.core.gpu_watchdog role'))
    return check_config(document)


def main(argv, host=None):
    """argv[0] is the command's name, as sys.argv; host replaces WatchdogHost in tests; returns the exit code."""
    args = argv[1:]
    if len(args) == 2 and args[0] == '--check-config':
        path, action = args[1], None
    elif len(args) == 1 and not args[0].startswith('-'):
        path, action = args[0], check
    elif len(args) == 2 and args[1] == '--clear-quarantine':
        path, action = args[0], clear_quarantine
    else:
        sys.stderr.write(__doc__.split('\n\n', 2)[1] + '\n')
        return 2
    host = host or WatchdogHost(pynvml)
    try:
        config = load_config(host, path)
    except WatchdogError as exc:
        sys.stderr.write('%s: %s\n' % (PROGRAM, exc))
        return 1
    if action is None:
        return 0
    return action(host, config)
