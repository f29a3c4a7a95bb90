# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.core contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Compute mode of whole GPUs, by UUID, through NVML.

This is a private module: its API may change without notice.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.gpufleet.core.plugins.module_utils._errors import GpufleetError
from ansible_collections.gpufleet.core.plugins.module_utils._nvml import COMPUTE_MODES, Nvml, NvmlError

MODE_VALUES = dict((name, value) for value, name in COMPUTE_MODES.items() if name != 'exclusive_thread')


class ComputeModeError(GpufleetError):
    """A compute-mode request that cannot be met; the message names the fix."""


def ensure(library, uuids, mode, check_mode):
    """Set the compute mode of the GPUs named by UUID; returns (changed, {uuid: (before, after)})."""
    if mode not in MODE_VALUES:
        raise ComputeModeError('compute mode %r is not one of %s' % (mode, ', '.join(sorted(MODE_VALUES))))
    try:
        with Nvml(library) as nvml:
            by_uuid = {}
            for handle in nvml.device_handles():
                by_uuid[nvml.identity(handle)['uuid']] = handle
            missing = [uuid for uuid in uuids if uuid not in by_uuid]
            if missing:
                hint = ' MIG devices have no compute mode of their own.' if any(
                    uuid.startswith('MIG-') for uuid in missing) else ''
                raise ComputeModeError('no GPU %s on this host (GPUs: %s).%s' % (
                    ', '.join(missing), ', '.join(sorted(by_uuid)) or 'none', hint))
            changes = {}
            for uuid in uuids:
                modes = nvml.modes(by_uuid[uuid])
                if mode == 'exclusive_process' and modes['mig_mode_current'] == 'enabled':
                    raise ComputeModeError('%s is in MIG mode, where exclusive-process compute mode does not exist; '
                                           'run one MPS control daemon per MIG device instead' % uuid)
                changes[uuid] = (modes['compute_mode'], mode)
            for uuid, (before, after) in changes.items():
                if before != after and not check_mode:
                    nvml.set_compute_mode(by_uuid[uuid], MODE_VALUES[after])
    except NvmlError as exc:
        raise ComputeModeError(str(exc))
    return any(before != after for before, after in changes.values()), changes
