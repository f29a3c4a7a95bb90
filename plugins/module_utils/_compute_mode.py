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
    """A compute-mode request that cannot be met, or one that failed part-way; the message names the fix.

    ``applied``, ``failed`` and ``not_run`` are the GPUs changed, the one that failed and those not tried."""

    def __init__(self, message, applied=(), failed=(), not_run=()):
        super(ComputeModeError, self).__init__(message)
        self.applied = list(applied)
        self.failed = list(failed)
        self.not_run = list(not_run)


def _listed(uuids):
    return ', '.join(uuids) or 'none'


def ensure(library, uuids, mode, check_mode):
    """Set the compute mode of the GPUs named by UUID; returns (changed, {uuid: (before, after)}) in their order.

    Every GPU is checked before any is changed; a failure part-way raises ComputeModeError with what was applied."""
    if mode not in MODE_VALUES:
        raise ComputeModeError('compute mode %r is not one of %s' % (mode, ', '.join(sorted(MODE_VALUES))))
    if not isinstance(uuids, (list, tuple)) or not all(isinstance(uuid, str) for uuid in uuids):
        raise ComputeModeError('gpus must be a list of GPU UUIDs (GPU-...), got %r' % (uuids,))
    # A GPU named twice is set once, and named once in every message.
    uuids = [uuid for position, uuid in enumerate(uuids) if uuid not in uuids[:position]]
    applied = []
    pending = []
    try:
        with Nvml(library) as nvml:
            by_uuid = {}
            for handle in nvml.device_handles():
                by_uuid[nvml.identity(handle)['uuid']] = handle
            missing = [uuid for uuid in uuids if uuid not in by_uuid]
            if missing:
                hint = ' MIG devices have no compute mode of their own.' if any(
                    uuid.startswith('MIG-') for uuid in missing) else ''
                if any(uuid.isdigit() for uuid in missing):
                    hint += ' Name GPUs by UUID (GPU-...), not by index: indices change when a GPU is added or fails.'
                raise ComputeModeError('no GPU %s on this host (GPUs: %s).%s' % (
                    ', '.join(missing), ', '.join(sorted(by_uuid)) or 'none', hint))
            changes = {}
            in_mig_mode = []
            for uuid in uuids:
                modes = nvml.modes(by_uuid[uuid])
                if mode == 'exclusive_process' and modes['mig_mode_current'] == 'enabled':
                    in_mig_mode.append(uuid)
                changes[uuid] = (modes['compute_mode'], mode)
            if in_mig_mode:
                raise ComputeModeError('%s %s in MIG mode, where exclusive-process compute mode does not exist; run one '
                                       'MPS control daemon per MIG device instead' % (
                                           ', '.join(in_mig_mode), 'is' if len(in_mig_mode) == 1 else 'are'))
            pending = [uuid for uuid in uuids if changes[uuid][0] != changes[uuid][1]]
            for uuid in pending if not check_mode else []:
                nvml.set_compute_mode(by_uuid[uuid], MODE_VALUES[mode])
                applied.append(uuid)
    except NvmlError as exc:
        if len(applied) == len(pending):  # nothing was being set when NVML failed
            raise ComputeModeError(str(exc), applied)
        failed = pending[len(applied)]
        raise ComputeModeError('%s: setting compute mode %s failed: %s (already changed: %s; not tried: %s)' % (
            failed, mode, exc, _listed(applied), _listed(pending[len(applied) + 1:])),
            applied, [failed], pending[len(applied) + 1:])
    return bool(pending), changes
