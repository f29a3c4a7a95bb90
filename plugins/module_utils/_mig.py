# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.core contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Applies declared MIG layouts: read everything, validate everything, then change the minimum.

This is a private module: its API may change without notice.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.gpufleet.core.plugins.module_utils._diff import make_diff
from ansible_collections.gpufleet.core.plugins.module_utils._errors import GpufleetError
from ansible_collections.gpufleet.core.plugins.module_utils._mig_layout import from_mig_parted, resolve, select_gpus
from ansible_collections.gpufleet.core.plugins.module_utils._mig_plan import GpuShape, LayoutError, plan_instances, validate
from ansible_collections.gpufleet.core.plugins.module_utils._nvml import Nvml, NvmlError
from ansible_collections.gpufleet.core.plugins.module_utils._sysfs_topology import find_processes

# What keeps a GPU reset from working, by the name an operator knows it by.
_RESET_BLOCKING_PROGRAMS = {
    'nvidia-persistenced': 'nvidia-persistenced (stop it during the reset)',
    'nv-fabricmanager': 'nvidia-fabricmanager (stop it during the reset)',
    'nv-hostengine': 'DCGM nv-hostengine (stop nvidia-dcgm during the reset)',
    'nvidia-cuda-mps-control': 'the MPS control daemon (stop it during the reset)',
}


class MigError(GpufleetError):
    """A MIG request refused before any change; the message says why and what to do."""


class MigApplyError(GpufleetError):
    """An NVML failure part-way through; the message says what was already applied."""


def reset_blockers(files):
    """Things known to block a GPU reset, by name."""
    blockers = []
    if files.read_sys('module', 'nvidia_drm', 'initstate') is not None or files.list_sys('module', 'nvidia_drm'):
        blockers.append('the nvidia_drm kernel module (unload it, or reboot instead)')
    running = find_processes(files, sorted(_RESET_BLOCKING_PROGRAMS))
    blockers.extend(_RESET_BLOCKING_PROGRAMS[program] for program, pids in sorted(running.items()) if pids)
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


def _describe(layout):
    return ['%s@%d%s' % (gi['profile'], gi['start'],
                         '' if len(gi['compute_instances']) == 1 and gi['compute_instances'][0] == gi['slices']
                         else ' [%s]' % '+'.join('%dc' % size for size in gi['compute_instances']))
            for gi in sorted(layout, key=lambda item: item['start'])]


class _Gpu:
    """One selected GPU: what exists, what is wanted, and the plan between them."""

    def __init__(self, nvml, handle, index):
        self.handle = handle
        self.index = index
        self.info = nvml.identity(handle)
        self.info['index'] = index
        self.modes = nvml.modes(handle)
        self.shape = None
        self.wanted = None
        self.instances = []
        self.pids = []
        self.operations = []
        self.blocked_by = []

    def read_state(self, nvml, profiles):
        self.pids = nvml.compute_pids(self.handle)
        if not self.modes['mig_capable'] or self.modes['mig_mode_current'] != 'enabled':
            return
        devices = nvml.mig_devices(self.handle)
        for gi in nvml.gpu_instances(self.handle, profiles):
            cis = gi['compute_instances']
            pids = [devices.get((gi['id'], ci['id']), {}).get('pids', []) for ci in cis]
            self.instances.append({
                'id': gi['id'], 'profile': gi['profile'], 'profile_id': gi['profile_id'],
                'start': gi['placement']['start'], 'size': gi['placement']['size'],
                'slices': self.shape.profile(gi['profile'])['slice_count'] if self.shape else None,
                'compute_instances': [ci['slice_count'] for ci in cis],
                'compute_instance_ids': [ci['id'] for ci in cis],
                'uuids': [devices.get((gi['id'], ci['id']), {}).get('uuid') for ci in cis],
                'pids': sorted(set(pid for ci_pids in pids for pid in ci_pids)),
                'busy': any(pids),
            })

    @property
    def name(self):
        return 'GPU %d (%s, %s)' % (self.index, self.info['uuid'], self.info['name'])

    def layout_now(self):
        return _describe(self.instances) if self.modes['mig_mode_current'] == 'enabled' else 'disabled'

    def plan(self):
        """Fill self.operations; record in self.blocked_by what running processes forbid."""
        current = self.modes['mig_mode_current']
        pending = self.modes['mig_mode_pending']
        if self.wanted is None:
            for gi in self.instances:
                self._destroy(gi)
            if pending != 'disabled':
                if current == 'enabled' and self.pids:
                    self.blocked_by.append('disabling MIG mode while PIDs %s run' % _pids(self.pids))
                self.operations.append({'op': 'set_mig_mode', 'enabled': False})
            return
        if pending != 'enabled':
            if current != 'enabled' and self.pids:
                self.blocked_by.append('enabling MIG mode while PIDs %s run' % _pids(self.pids))
            self.operations.append({'op': 'set_mig_mode', 'enabled': True})
        elif current != 'enabled':
            return  # enabled, waiting for a GPU reset: instances can only follow it
        existing = self.instances if current == 'enabled' else []
        keep, destroy, create = plan_instances(self.shape, self.wanted, existing)
        for gi in destroy:
            self._destroy(gi)
        for gi in keep:
            if gi['recreate_compute_instances']:
                if gi['busy']:
                    self.blocked_by.append('replacing the compute instances of GPU instance %d (%s) while PIDs %s '
                                           'run' % (gi['id'], gi['profile'], _pids(gi['pids'])))
                for ci_id in gi['compute_instance_ids']:
                    self.operations.append({'op': 'destroy_compute_instance', 'gpu_instance': gi['id'],
                                            'compute_instance': ci_id})
                for size in gi['wanted_compute_instances']:
                    self.operations.append({'op': 'create_compute_instance', 'gpu_instance': gi['id'], 'size': size,
                                            'profile': gi['profile']})
        for gi in create:
            profile = self.shape.profile(gi['profile'])
            self.operations.append({'op': 'create_gpu_instance', 'profile': gi['profile'], 'profile_id': profile['id'],
                                    'start': gi['start'], 'size': self.shape.memory_size(gi['profile']),
                                    'compute_instances': gi['compute_instances']})

    def _destroy(self, gi):
        if gi['busy']:
            self.blocked_by.append('destroying GPU instance %d (%s at %d) while PIDs %s run'
                                   % (gi['id'], gi['profile'], gi['start'], _pids(gi['pids'])))
        for ci_id in gi['compute_instance_ids']:
            self.operations.append({'op': 'destroy_compute_instance', 'gpu_instance': gi['id'],
                                    'compute_instance': ci_id})
        self.operations.append({'op': 'destroy_gpu_instance', 'gpu_instance': gi['id'], 'profile': gi['profile'],
                                'start': gi['start']})

    def layout_wanted(self):
        if self.wanted is None:
            return 'disabled'
        kept = dict((gi['id'], gi) for gi in self.instances)
        for op in self.operations:
            if op['op'] == 'destroy_gpu_instance':
                kept.pop(op['gpu_instance'], None)
        after = [dict(gi) for gi in kept.values()]
        for gi in after:
            wanted = [op['size'] for op in self.operations
                      if op['op'] == 'create_compute_instance' and op['gpu_instance'] == gi['id']]
            if wanted:
                gi['compute_instances'] = wanted
        after.extend({'profile': op['profile'], 'start': op['start'], 'compute_instances': op['compute_instances'],
                      'slices': self.shape.profile(op['profile'])['slice_count']}
                     for op in self.operations if op['op'] == 'create_gpu_instance')
        return _describe(after)


def _pids(pids):
    return ', '.join(str(pid) for pid in pids)


def describe_operation(gpu, op):
    kind = op['op']
    if kind == 'set_mig_mode':
        return '%s: %s MIG mode' % (gpu.name, 'enable' if op['enabled'] else 'disable')
    if kind == 'destroy_compute_instance':
        return '%s: destroy compute instance %d of GPU instance %d' % (
            gpu.name, op['compute_instance'], op['gpu_instance'])
    if kind == 'destroy_gpu_instance':
        return '%s: destroy GPU instance %d (%s at %d)' % (gpu.name, op['gpu_instance'], op['profile'], op['start'])
    if kind == 'create_compute_instance':
        return '%s: create a %dc compute instance in GPU instance %d (%s)' % (
            gpu.name, op['size'], op['gpu_instance'], op['profile'])
    return '%s: create %s at memory slice %d with compute instances %s' % (
        gpu.name, op['profile'], op['start'], '+'.join('%dc' % size for size in op['compute_instances']))


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
        self.applied = []

    def run(self, check_mode):
        try:
            with Nvml(self.library) as nvml:
                self._prepare(nvml)
                before = dict((gpu.index, gpu.layout_now()) for gpu in self.gpus)
                planned = dict((gpu.index, gpu.layout_wanted()) for gpu in self.gpus)
                pending_reset = []
                if not check_mode:
                    pending_reset = self._apply(nvml)
                    # Read back only what changed: the rest is as read a moment ago.
                    self.gpus = [self._reread(nvml, gpu) if gpu.operations else gpu for gpu in self.gpus]
        except NvmlError as exc:
            raise MigError(str(exc))
        return self._result(before, planned, check_mode, pending_reset)

    # Validate and plan: nothing changes here ------------------------------------------

    def _prepare(self, nvml):
        handles = nvml.device_handles()
        every = [_Gpu(nvml, handle, index) for index, handle in enumerate(handles)]
        raw = raw_layouts([gpu.info for gpu in every], self.layouts, self.mig_parted, self.mig_parted_name)
        profiles_by_name = {}
        errors = []
        for gpu in every:
            if gpu.index not in raw:
                continue
            self.gpus.append(gpu)
            where = 'GPU %d (%s)' % (gpu.index, gpu.info['uuid'])
            if not gpu.modes['mig_capable']:
                if raw[gpu.index] not in (None, 'disabled', False):
                    errors.append('%s: %s does not support MIG' % (where, gpu.info['name']))
                continue
            profiles = profiles_by_name.get(gpu.info['name']) or nvml.mig_profiles(gpu.handle)
            profiles_by_name[gpu.info['name']] = profiles
            gpu.shape = GpuShape(gpu.info['name'], profiles)
            try:
                gpu.wanted = resolve(raw[gpu.index], gpu.shape, where)
                if gpu.wanted is not None:
                    validate(gpu.shape, gpu.wanted, '%s %s' % (where, gpu.info['name']))
            except LayoutError as exc:
                errors.append(str(exc))
                continue
            for gi in gpu.wanted or []:
                gi['slices'] = gpu.shape.profile(gi['profile'])['slice_count']
            gpu.read_state(nvml, profiles)
        if errors:
            raise MigError('No GPU was changed, because: ' + ' | '.join(errors))
        for gpu in self.gpus:
            if gpu.shape is not None:
                gpu.plan()
        self._check_safety()

    def _check_safety(self):
        problems = []
        for gpu in self.gpus:
            mode_ops = [op for op in gpu.operations if op['op'] == 'set_mig_mode']
            if mode_ops and not self.allow_mode_change:
                problems.append('%s: MIG mode is %s and the layout needs it %s; allow the mode change '
                                '(allow_mode_change: true) or change it first with nvidia-smi -i %d -mig %d'
                                % (gpu.name, gpu.modes['mig_mode_current'],
                                   'enabled' if mode_ops[0]['enabled'] else 'disabled', gpu.index,
                                   1 if mode_ops[0]['enabled'] else 0))
            if gpu.blocked_by and not self.force:
                problems.append('%s: refusing %s; stop those processes first, or set force: true'
                                % (gpu.name, '; '.join(gpu.blocked_by)))
        if problems:
            raise MigError('No GPU was changed, because: ' + ' | '.join(problems))

    # Apply -------------------------------------------------------------------------

    def _apply(self, nvml):
        """Run every GPU's operations; returns the GPUs whose mode change waits for a reset."""
        pending_reset = []
        for gpu in self.gpus:
            waiting = False
            gi_handles = {}
            for op in gpu.operations:
                if waiting and op['op'] != 'set_mig_mode':
                    continue  # instances need the new mode to be active; they follow after the reset
                self._do(nvml, gpu, op, gi_handles)
                if op['op'] == 'set_mig_mode' and not op.get('active'):
                    waiting = True
                    pending_reset.append(gpu.index)
        return pending_reset

    def _do(self, nvml, gpu, op, gi_handles):
        try:
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
                self.applied.append(describe_operation(gpu, op))
                for size in op['compute_instances']:
                    nvml.create_compute_instance(gi, size)
                    self.applied.append('%s: create a %dc compute instance in GPU instance %d'
                                        % (gpu.name, size, gi_id))
                return
        except NvmlError as exc:
            raise MigApplyError('NVML failed at "%s": %s. Already applied: %s. Nothing else was changed; re-run '
                                'to converge.' % (describe_operation(gpu, op), exc,
                                                  '; '.join(self.applied) or 'nothing'))
        self.applied.append(describe_operation(gpu, op))

    def _reread(self, nvml, gpu):
        fresh = _Gpu(nvml, gpu.handle, gpu.index)
        fresh.shape = gpu.shape
        fresh.wanted = gpu.wanted
        fresh.operations = gpu.operations
        if fresh.shape is not None:
            fresh.read_state(nvml, [fresh.shape.profile(name) for name in fresh.shape.profiles])
        return fresh

    # Report ------------------------------------------------------------------------

    def _result(self, before, planned, check_mode, pending_reset):
        gpus = []
        for gpu in self.gpus:
            after = planned[gpu.index] if check_mode else gpu.layout_now()
            gpus.append({
                'index': gpu.index,
                'uuid': gpu.info['uuid'],
                'name': gpu.info['name'],
                'changed': bool(gpu.operations),
                'mig_mode': gpu.modes['mig_mode_current'],
                'mig_mode_pending': gpu.modes['mig_mode_pending'],
                'reset_required': gpu.index in pending_reset or (
                    gpu.modes['mig_mode_current'] != gpu.modes['mig_mode_pending']),
                'layout_before': before[gpu.index],
                'layout_after': after,
                'layout_wanted': planned[gpu.index],
                'operations': [describe_operation(gpu, op) for op in gpu.operations],
                'devices': [{'gpu_instance_id': gi['id'], 'compute_instance_id': ci_id, 'profile': gi['profile'],
                             'placement_start': gi['start'], 'uuid': uuid}
                            for gi in gpu.instances
                            for ci_id, uuid in zip(gi['compute_instance_ids'], gi['uuids'])],
            })
        reset_required = any(gpu['reset_required'] for gpu in gpus)
        blockers = reset_blockers(self.files) if reset_required else []
        return {
            'changed': any(gpu['changed'] for gpu in gpus),
            'gpus': gpus,
            'operations': [op for gpu in gpus for op in gpu['operations']],
            'reset_required': reset_required,
            'reset_blockers': blockers,
            'reboot_required': reset_required and bool(blockers),
            'diff': make_diff(['GPU %d %s: %s' % (g['index'], g['uuid'], _text(before[g['index']])) for g in gpus],
                              ['GPU %d %s: %s' % (g['index'], g['uuid'], _text(planned[g['index']])) for g in gpus]),
        }


def _text(layout):
    return layout if isinstance(layout, str) else (', '.join(layout) or '(MIG on, no instances)')
