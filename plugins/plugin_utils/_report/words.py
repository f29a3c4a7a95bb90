# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.core contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The fleet report's words for its data: a text of any value, memory in GiB, a service's placement and its audit.

The model, the diff, the drawing and the page all say these the same way, so a change shows as one.
This is a private module: its API may change without notice.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.gpufleet.core.plugins.module_utils._cpulist import format_cpulist


def text(value, default=''):
    """VALUE as a string; DEFAULT for None."""
    if value is None:
        return default
    return value if isinstance(value, str) else str(value)


def gib(mb):
    return '%.0f GiB' % (mb / 1024.0) if mb is not None else '? GiB'


def placement_words(service):
    """Where a service runs, in one line: its CPUs, memory nodes, devices and MPS share."""
    devices = ' '.join(device.get('label', '?') for device in service.get('devices') or []) or 'no GPU'
    share = ' (MPS %s%%)' % service['mps_percentage'] if service.get('mps_device') else ''
    return 'CPUs %s, memory %s, %s%s' % (service.get('cpulist') or 'none', format_cpulist(service.get('mems') or []) or '-',
                                         devices, share)


def audit_words(audit):
    """A service's audit in a few words, with its remote share when the audit measured one."""
    audit = audit or {}
    state = audit.get('state')
    fraction = audit.get('remote_fraction')
    remote = ' (%.1f%% remote)' % (fraction * 100) if isinstance(fraction, (int, float)) else ''
    return {'pass': 'passed', 'pass-remote': 'passed', 'fail': 'FAILED', 'missing': 'not covered'}.get(state, 'not audited') + remote
