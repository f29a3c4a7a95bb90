# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.core contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The GPU watchdog's Xid events: a kernel log line read, and NVML's and the kernel's events of a check made one.

Pure code. ``_watchdog_host`` reads the events; ``_watchdog.decide`` acts on the merged ones, each with its bucket
in the collection's Xid table (``_xid_catalog``).
This is a private module: its API may change without notice.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

from ansible_collections.gpufleet.core.plugins.module_utils._xid_catalog import bucket as xid_bucket

# "NVRM: Xid (PCI:0000:3b:00): 79, pid=1234, name=python3, GPU has fallen off the bus."
_KERNEL_XID = re.compile(r'NVRM: Xid \(PCI:([0-9A-Fa-f]{4,8}):([0-9A-Fa-f]{2}):([0-9A-Fa-f]{2})(?:\.[0-7])?\): '
                         r'(\d+)(?:, pid=(\d+))?')
_BUS_ID = re.compile(r'([0-9A-Fa-f]{4,8}):([0-9A-Fa-f]{2}):([0-9A-Fa-f]{2})(?:\.[0-7])?')


def normalise_bus_id(text):
    """(domain, bus, device) of a PCI address in NVML's (00000000:3B:00.0) or the kernel's (0000:3b:00) form."""
    match = _BUS_ID.fullmatch(text or '')
    if not match:
        return None
    return tuple(int(part, 16) for part in match.groups())


def parse_kernel_xid(message):
    """{'pci_bus_id', 'xid', 'pid'} of an "NVRM: Xid" kernel line, or None for any other line."""
    match = _KERNEL_XID.search(message or '')
    if not match:
        return None
    domain, bus, device, xid, pid = match.groups()
    return {'pci_bus_id': '%s:%s:%s' % (domain, bus, device), 'xid': int(xid), 'pid': int(pid) if pid else None}


def _gpu_of_bus(gpus, bus_id):
    wanted = normalise_bus_id(bus_id)
    for gpu in gpus:
        if wanted is not None and normalise_bus_id(gpu.get('pci_bus_id')) == wanted:
            return gpu
    return None


def merge_xids(gpus, events):
    """One event per (GPU, device, Xid) of a check: NVML and the kernel log report the same error, and NVML's names
    the MIG device. Kernel events are matched to GPUs by PCI address."""
    merged = []
    seen = {}
    for event in sorted(events, key=lambda item: item.get('source') != 'nvml'):
        gpu = event.get('gpu')
        if gpu is None and event.get('pci_bus_id'):
            found = _gpu_of_bus(gpus, event['pci_bus_id'])
            gpu = found['uuid'] if found else None
        key = (gpu, event['xid'])
        if gpu is not None and key in seen:
            seen[key]['sources'] = sorted(set(seen[key]['sources'] + [event.get('source', 'kernel')]))
            continue
        item = {'gpu': gpu, 'device': event.get('device'), 'xid': event['xid'], 'bucket': xid_bucket(event['xid']),
                'pid': event.get('pid'), 'pci_bus_id': event.get('pci_bus_id'),
                'sources': [event.get('source', 'kernel')], 'message': event.get('message')}
        seen[key] = item
        merged.append(item)
    return merged
