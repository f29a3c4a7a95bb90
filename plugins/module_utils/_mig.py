# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.core contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Applies declared MIG layouts: read everything, validate everything, then change the minimum.

``MigRun`` is one run: it reads every GPU, resolves and checks the wanted layouts, refuses what is unsafe, then makes
the NVML steps and reports. Each GPU's state and steps are a ``_mig_gpu.MigGpu``.

This is a private module: its API may change without notice.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.gpufleet.core.plugins.module_utils._diff import make_diff
from ansible_collections.gpufleet.core.plugins.module_utils._errors import GpufleetError
from ansible_collections.gpufleet.core.plugins.module_utils._mig_gpu import (
    MigGpu,
    by_reason,
    describe_operation,
    describe_step,
    per_gpu,
    pids_text,
)
from ansible_collections.gpufleet.core.plugins.module_utils._mig_layout import from_mig_parted, resolve, select_gpus
from ansible_collections.gpufleet.core.plugins.module_utils._mig_plan import GpuShape, LayoutError, validate
from ansible_collections.gpufleet.core.plugins.module_utils._nvml import Nvml, NvmlError
from ansible_collections.gpufleet.core.plugins.module_utils._sysfs_topology import find_processes

# What keeps a GPU reset from working, by the name an operator knows it by.
_RESET_BLOCKING_PROGRAMS = {
    'nvidia-persistenced': 'nvidia-persistenced (stop it during the reset)',
    'nv-fabricmanager': 'nvidia-fabricmanager (stop it during the reset)',
    'nv-hostengine': 'DCGM nv-hostengine (stop nvidia-dcgm during the reset)',
    'nvidia-cuda-mps-control': 'the MPS control daemon (stop it during the reset)',
}


# The PCI device ids of the GA100 chip (A100, A30, A800), the only Ampere GPUs with MIG: 0x20xx in the high half of
# NVML's pciDeviceId (device << 16 | vendor). On them a new MIG mode takes effect only at a GPU reset, which the driver
# attempts when the mode is set and which the reset_blockers keep from working; Hopper and later switch at once.
_GA100_DEVICE_IDS = range(0x2000, 0x2100)


def mode_change_needs_reset(info):
    """Does this GPU (nvml.identity()) take a new MIG mode only at a GPU reset? True for Ampere (GA100)."""
    try:
        return int(info.get('pci_device_id') or '', 16) >> 16 in _GA100_DEVICE_IDS
    except ValueError:
        return False


class MigError(GpufleetError):
    """A MIG request refused before any change; the message says why and what to do."""


class MigApplyError(GpufleetError):
    """An NVML failure part-way through; the message says what was applied, what failed and what did not run."""


def reset_blockers(files, busy_gpus=()):
    """Things known to block a GPU reset, by name; busy_gpus: (name, pids) of GPUs running compute processes."""
    blockers = []
    if files.read_sys('module', 'nvidia_drm', 'initstate') is not None or files.list_sys('module', 'nvidia_drm'):
        blockers.append('the nvidia_drm kernel module (unload it, or reboot instead)')
    running = find_processes(files, sorted(_RESET_BLOCKING_PROGRAMS))
    blockers.extend(_RESET_BLOCKING_PROGRAMS[program] for program, pids in sorted(running.items()) if pids)
    # The driver refuses to reset a GPU that runs compute processes.
    blockers.extend('compute processes %s on %s (stop them during the reset)' % (pids_text(pids), name)
                    for name, pids in busy_gpus if pids)
    return blockers


def raw_layouts(gpus, layouts=None, mig_parted=None, mig_parted_name=None):
    """Raw layout per GPU index, from the module's `layouts` or a mig-parted config."""
    if mig_parted is not None:
        return from_mig_parted(mig_parted, mig_parted_name, gpus)
    chosen = {}
    for position, entry in enumerate(layouts or [], 1):
        where = 'layouts entry %d' % position
        for gpu in select_gpus(entry['gpus'], gpus, where):
            if gpu['index'] in chosen:
                raise LayoutError('%s: GPU %d (%s) is already given a layout by entry %d; give each GPU one layout'
                                  % (where, gpu['index'], gpu['uuid'], chosen[gpu['index']][0]))
            chosen[gpu['index']] = (position, entry['layout'])
    return dict((index, layout) for index, (_position, layout) in chosen.items())


class MigRun:
    """One module run: gather, validate and plan every selected GPU, then apply."""

    def __init__(self, nvml_library, files, layouts=None, mig_parted=None, mig_parted_name=None,
                 force=False, allow_mode_change=True):
        self.library = nvml_library
        self.files = files
        self.layouts = layouts
        self.mig_parted = mig_parted
        self.mig_parted_name = mig_parted_name
        self.force = force
        self.allow_mode_change = allow_mode_change
        self.gpus = []
        # What ran, what NVML refused, and what was left: (gpu, step in words) each.
        self.done = []
        self.refused = []
        self.left = []

    @property
    def applied(self):
        return ['%s: %s' % (gpu.name, step) for gpu, step in self.done]

    @property
    def failed(self):
        return ['%s: %s' % (gpu.name, step) for gpu, step in self.refused]

    @property
    def not_run(self):
        return ['%s: %s' % (gpu.name, step) for gpu, step in self.left]

    @property
    def deferred(self):
        return [describe_operation(gpu, op) for gpu in self.gpus for op in gpu.deferred]

    def run(self, check_mode):
        try:
            with Nvml(self.library) as nvml:
                self._prepare(nvml)
                before = dict((gpu.index, gpu.layout_now()) for gpu in self.gpus)
                # The plan, in words and as data, before applying it changes what the GPUs hold.
                planned = dict((gpu.index, (gpu.layout_wanted(), gpu.mig_wanted())) for gpu in self.gpus)
                pending_reset = []
                if check_mode:
                    pending_reset = self._defer_where_a_reset_waits()
                    self.left = [(gpu, describe_step(op)) for gpu in self.gpus for op in gpu.operations + gpu.deferred]
                else:
                    pending_reset = self._apply(nvml)
                    # Read back only what changed: the rest is as read a moment ago.
                    self.gpus = [self._reread(nvml, gpu) if gpu.operations else gpu for gpu in self.gpus]
        except NvmlError as exc:
            raise MigError(str(exc))
        return self._result(before, planned, check_mode, pending_reset)

    # Validate and plan: nothing changes here ------------------------------------------

    def _prepare(self, nvml):
        handles = nvml.device_handles()
        every = [MigGpu(nvml, handle, index) for index, handle in enumerate(handles)]
        described = [dict(gpu.info, mig_capable=gpu.modes['mig_capable']) for gpu in every]
        if self.mig_parted is not None:
            for gpu in described:  # for mig-parted's device-filter only
                gpu['pci_subsystem_id'] = _pci_subsystem_id(self.files, gpu['pci_bus_id'])
        raw = raw_layouts(described, self.layouts, self.mig_parted, self.mig_parted_name)
        profiles_by_name = {}
        errors = []
        for gpu in every:
            if gpu.index not in raw:
                continue
            self.gpus.append(gpu)
            if not gpu.modes['mig_capable']:
                if raw[gpu.index] not in (None, 'disabled', False):
                    errors.append((gpu, '%s does not support MIG' % gpu.info['name']))
                continue
            profiles = profiles_by_name.get(gpu.info['name']) or nvml.mig_profiles(gpu.handle)
            profiles_by_name[gpu.info['name']] = profiles
            gpu.shape = GpuShape(gpu.info['name'], profiles)
            try:
                gpu.wanted = resolve(raw[gpu.index], gpu.shape, 'layout')
                if gpu.wanted is not None:
                    validate(gpu.shape, gpu.wanted, gpu.info['name'])
            except LayoutError as exc:
                errors.append((gpu, str(exc)))
                continue
            for gi in gpu.wanted or []:
                gi['slices'] = gpu.shape.profile(gi['profile'])['slice_count']
            gpu.read_state(nvml, profiles)
        if errors:
            raise MigError('No GPU was changed, because: ' + by_reason(errors))
        for gpu in self.gpus:
            if gpu.shape is not None:
                gpu.plan()
                gpu.refusable_first()
        self._check_safety()

    def _check_safety(self):
        problems = []
        for gpu in self.gpus:
            mode_ops = [op for op in gpu.operations if op['op'] == 'set_mig_mode']
            if mode_ops and not self.allow_mode_change:
                problems.append((gpu, 'MIG mode is %s and the layout needs it %s; allow the mode change '
                                      '(allow_mode_change: true) or change it first with nvidia-smi -i {indices} -mig %d'
                                 % (gpu.modes['mig_mode_current'], 'enabled' if mode_ops[0]['enabled'] else 'disabled',
                                    1 if mode_ops[0]['enabled'] else 0)))
            if gpu.blocked_by and not self.force:
                problems.append((gpu, 'refusing %s; stop those processes first, or set force: true'
                                 % '; '.join(gpu.blocked_by)))
        if problems:
            raise MigError('No GPU was changed, because: ' + by_reason(problems))

    def _defer_where_a_reset_waits(self):
        """Check mode: the GPUs whose MIG mode change would wait for a GPU reset, their later steps deferred.

        That is an Ampere GPU (mode_change_needs_reset) whose MIG mode must be enabled while something blocks the reset
        the driver attempts: reset_blockers, with the compute processes on the GPU. A real run learns it from NVML
        instead (_apply), whatever the forecast said.
        """
        waiting = []
        host_blockers = None
        for gpu in self.gpus:
            if gpu.modes['mig_mode_current'] == 'enabled' or not mode_change_needs_reset(gpu.info):
                continue  # the mode is on already, or turns on without a reset
            if not any(op['op'] == 'set_mig_mode' for op in gpu.operations[:-1]):
                continue  # no mode change, or nothing after it
            if host_blockers is None:
                host_blockers = reset_blockers(self.files)
            if host_blockers or gpu.pids:
                gpu.defer_after_mode_change()
                waiting.append(gpu.index)
        return waiting

    # Apply -------------------------------------------------------------------------

    def _apply(self, nvml):
        """Run every GPU's operations; returns the GPUs whose mode change waits for a reset."""
        pending_reset = []
        for position, gpu in enumerate(self.gpus):
            waiting = False
            gi_handles = {}
            for step, op in enumerate(gpu.operations):
                if waiting and op['op'] != 'set_mig_mode':
                    # Instances need the new mode to be active; they follow on a run after the reset.
                    self.left.append((gpu, describe_step(op)))
                    gpu.deferred.append(op)
                    continue
                try:
                    if step == 0:
                        self._still_in_use(nvml, gpu)
                    self._do(nvml, gpu, op, gi_handles)
                except (NvmlError, _InUse) as exc:
                    self._stop(gpu, op, exc, gpu.operations[step + 1:], self.gpus[position + 1:])
                if op['op'] == 'set_mig_mode' and not op.get('active'):
                    waiting = True
                    pending_reset.append(gpu.index)
            if gpu.deferred:
                gpu.operations = [op for op in gpu.operations if not any(op is other for other in gpu.deferred)]
        return pending_reset

    def _still_in_use(self, nvml, gpu):
        """Before the first change on a GPU, check again every compute instance a process held at planning.

        NVML refuses to destroy a compute instance that runs processes, force or not. Checking them all first
        means a refusal happens before anything on this GPU changed.
        """
        held = [op for op in gpu.operations if op.get('pids')]
        if not held:
            return
        devices = nvml.mig_devices(gpu.handle)
        for op in held:
            pids = devices.get((op['gpu_instance'], op['compute_instance']), {}).get('pids', [])
            if pids:
                raise _InUse('PIDs %s still run there, and NVML refuses to destroy a compute instance in use '
                             '(In use by another client), with force or without' % pids_text(pids), op)

    def _stop(self, gpu, op, exc, rest_of_gpu, later_gpus):
        failed_op = exc.op if isinstance(exc, _InUse) else op
        self.refused.append((gpu, '%s: %s' % (describe_step(failed_op), exc)))
        self.left.extend((gpu, describe_step(other)) for other in [op] + list(rest_of_gpu) if other is not failed_op)
        self.left.extend((other, describe_step(step)) for other in later_gpus for step in other.operations)
        untouched = not [done_gpu for done_gpu, _step in self.done if done_gpu is gpu]
        raise MigApplyError('NVML failed at "%s": %s. %sAlready applied: %s. Not run: %s. Nothing else was changed; '
                            're-run to converge.' % (
                                describe_operation(gpu, failed_op), exc,
                                '%s was not changed. ' % gpu.name if untouched else '',
                                per_gpu(self.done), per_gpu(self.left)))

    def _do(self, nvml, gpu, op, gi_handles):
        kind = op['op']
        if kind == 'set_mig_mode':
            op['active'] = nvml.set_mig_mode(gpu.handle, op['enabled'])
        elif kind == 'destroy_compute_instance':
            gi = gi_handles.get(op['gpu_instance']) or nvml.gpu_instance(gpu.handle, op['gpu_instance'])
            nvml.destroy_compute_instance(gi, op['compute_instance'])
        elif kind == 'destroy_gpu_instance':
            nvml.destroy_gpu_instance(nvml.gpu_instance(gpu.handle, op['gpu_instance']))
        elif kind == 'create_compute_instance':
            gi = gi_handles.get(op['gpu_instance']) or nvml.gpu_instance(gpu.handle, op['gpu_instance'])
            nvml.create_compute_instance(gi, op['size'])
        else:
            gi, gi_id = nvml.create_gpu_instance(gpu.handle, op['profile_id'], op['start'], op['size'])
            gi_handles[gi_id] = gi
            self.done.append((gpu, 'create %s at memory slice %d (GPU instance %d)' % (op['profile'], op['start'],
                                                                                       gi_id)))
            for size in op['compute_instances']:
                nvml.create_compute_instance(gi, size)
                self.done.append((gpu, 'create a %dc compute instance in GPU instance %d' % (size, gi_id)))
            return
        self.done.append((gpu, describe_step(op)))

    def _reread(self, nvml, gpu):
        fresh = MigGpu(nvml, gpu.handle, gpu.index)
        fresh.shape = gpu.shape
        fresh.wanted = gpu.wanted
        fresh.operations = gpu.operations
        fresh.deferred = gpu.deferred
        if fresh.shape is not None:
            fresh.read_state(nvml, [fresh.shape.profile(name) for name in fresh.shape.profiles])
        return fresh

    # Report ------------------------------------------------------------------------

    def _result(self, before, planned, check_mode, pending_reset):
        gpus = []
        for gpu in self.gpus:
            # What the run leads to: with the instances deferred, the layout stays as it is until the reset.
            layout_wanted, mig_wanted = planned[gpu.index]
            after = layout_wanted if check_mode and not gpu.deferred else gpu.layout_now()
            gpus.append({
                'index': gpu.index,
                'uuid': gpu.info['uuid'],
                'name': gpu.info['name'],
                'changed': bool(gpu.operations),
                'mig_mode': gpu.modes['mig_mode_current'],
                'mig_mode_pending': gpu.modes['mig_mode_pending'],
                'reset_required': gpu.index in pending_reset or (
                    gpu.modes['mig_mode_current'] != gpu.modes['mig_mode_pending']),
                'compute_pids': list(gpu.pids),
                'layout_before': before[gpu.index],
                'layout_after': after,
                'layout_wanted': layout_wanted,
                'mig_wanted': mig_wanted,
                'operations': [describe_operation(gpu, op) for op in gpu.operations],
                'deferred': [describe_operation(gpu, op) for op in gpu.deferred],
                'devices': [{'gpu_instance_id': gi['id'], 'compute_instance_id': ci_id, 'profile': gi['profile'],
                             'placement_start': gi['start'], 'uuid': uuid}
                            for gi in gpu.instances
                            for ci_id, uuid in zip(gi['compute_instance_ids'], gi['uuids'])],
            })
        reset_required = any(gpu['reset_required'] for gpu in gpus)
        busy = [(gpu.name, gpu.pids) for gpu, reported in zip(self.gpus, gpus) if reported['reset_required']]
        blockers = reset_blockers(self.files, busy) if reset_required else []
        return {
            'changed': any(gpu['changed'] for gpu in gpus),
            'gpus': gpus,
            'operations': [op for gpu in gpus for op in gpu['operations']],
            'applied': self.applied,
            # Not 'failed': Ansible owns that key of a result and would read the list as the task's status.
            'failed_on': self.failed,
            'not_run': self.not_run,
            'deferred': [op for gpu in gpus for op in gpu['deferred']],
            'reset_required': reset_required,
            'reset_blockers': blockers,
            'reboot_required': reset_required and bool(blockers),
            'diff': make_diff(['GPU %d %s: %s' % (g['index'], g['uuid'], _text(before[g['index']])) for g in gpus],
                              ['GPU %d %s: %s' % (g['index'], g['uuid'], _after_text(g)) for g in gpus]),
        }


class _InUse(GpufleetError):
    """A compute instance to destroy still runs processes: NVML would refuse, so nothing on its GPU is touched."""

    def __init__(self, message, op):
        super(_InUse, self).__init__(message)
        self.op = op


def _pci_subsystem_id(files, bus_id):
    """0x<subsystem device><subsystem vendor> from sysfs, as mig-parted reads it for device-filter; None if absent."""
    domain, _sep, rest = bus_id.lower().partition(':')
    address = '%s:%s' % (domain[-4:], rest)
    try:
        device = files.read_sys('bus', 'pci', 'devices', address, 'subsystem_device')
        vendor = files.read_sys('bus', 'pci', 'devices', address, 'subsystem_vendor')
        return '0x%04X%04X' % (int(device, 16), int(vendor, 16))
    except (GpufleetError, TypeError, ValueError):
        return None  # unreadable: a filter with a subsystem part then matches nothing, as in mig-parted


def _text(layout):
    return layout if isinstance(layout, str) else (', '.join(layout) or '(MIG on, no instances)')


def _after_text(gpu):
    """A GPU's layout after the run, for the diff; instances that wait for a GPU reset are named as waiting."""
    if not gpu['deferred']:
        return _text(gpu['layout_wanted'])
    return '%s; MIG mode enabled at the next GPU reset or reboot, then %s by the first run after it (deferred)' % (
        _text(gpu['layout_after']), _text(gpu['layout_wanted']))
