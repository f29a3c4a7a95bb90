# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.core contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""One GPU of a MIG run: what exists, what is wanted, the steps between them, and how layouts and steps are told.

A layout is told twice: in words for people (``3g.40gb@4 [1c+2c]``, the mig module's ``layout_*`` fields and its
diff) and as data for code (``layout_data``, the module's ``mig_wanted``, which ``Topology.after_mig`` reads). Code
never reads the words back. ``_mig.MigRun`` gathers, checks and applies; NVML is reached through ``_nvml.Nvml``.
This is a private module: its API may change without notice.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.gpufleet.core.plugins.module_utils._mig_plan import plan_instances


def pids_text(pids):
    return ', '.join(str(pid) for pid in pids)


def describe_layout(layout):
    """GPU instances in words, by placement: profile@start, with their compute instances in brackets where they do
    not span the whole GPU instance (3g.40gb@4 [1c+2c])."""
    return ['%s@%d%s' % (gi['profile'], gi['start'],
                         '' if len(gi['compute_instances']) == 1 and gi['compute_instances'][0] == gi['slices']
                         else ' [%s]' % '+'.join('%dc' % size for size in gi['compute_instances']))
            for gi in sorted(layout, key=lambda item: item['start'])]


def layout_data(layout):
    """GPU instances as data, by placement: profile, placement_start and compute_instances (each its slice_count)."""
    return [{'profile': gi['profile'], 'placement_start': gi['start'],
             'compute_instances': [{'slice_count': size} for size in gi['compute_instances']]}
            for gi in sorted(layout, key=lambda item: item['start'])]


class MigGpu:
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
        # Steps planned after a MIG mode change that waits for a GPU reset: they cannot run before it, so they are
        # not among the operations of this run, and the first run after the reset (or reboot) makes them.
        self.deferred = []
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
                'compute_instance_pids': [sorted(ci_pids) for ci_pids in pids],
                'busy': any(pids),
            })

    @property
    def name(self):
        return 'GPU %d (%s, %s)' % (self.index, self.info['uuid'], self.info['name'])

    def layout_now(self):
        return describe_layout(self.instances) if self.modes['mig_mode_current'] == 'enabled' else 'disabled'

    def plan(self):
        """Fill self.operations; record in self.blocked_by what running processes forbid."""
        current = self.modes['mig_mode_current']
        pending = self.modes['mig_mode_pending']
        if self.wanted is None:
            for gi in self.instances:
                self._destroy(gi)
            if pending != 'disabled':
                if current == 'enabled' and self.pids:
                    self.blocked_by.append('disabling MIG mode while PIDs %s run' % pids_text(self.pids))
                self.operations.append({'op': 'set_mig_mode', 'enabled': False})
            return
        if pending != 'enabled':
            if current != 'enabled' and self.pids:
                self.blocked_by.append('enabling MIG mode while PIDs %s run' % pids_text(self.pids))
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
                                           'run' % (gi['id'], gi['profile'], pids_text(gi['pids'])))
                for ci_id, ci_pids in zip(gi['compute_instance_ids'], gi['compute_instance_pids']):
                    self.operations.append({'op': 'destroy_compute_instance', 'gpu_instance': gi['id'],
                                            'compute_instance': ci_id, 'pids': ci_pids})
                for size in gi['wanted_compute_instances']:
                    self.operations.append({'op': 'create_compute_instance', 'gpu_instance': gi['id'], 'size': size,
                                            'profile': gi['profile']})
        for gi in create:
            profile = self.shape.profile(gi['profile'])
            self.operations.append({'op': 'create_gpu_instance', 'profile': gi['profile'], 'profile_id': profile['id'],
                                    'start': gi['start'], 'size': self.shape.memory_size(gi['profile']),
                                    'compute_instances': gi['compute_instances']})

    def defer_after_mode_change(self):
        """Move the steps after a MIG mode change into self.deferred: the mode waits for a GPU reset."""
        for position, op in enumerate(self.operations):
            if op['op'] == 'set_mig_mode':
                self.deferred = self.operations[position + 1:]
                del self.operations[position + 1:]
                return

    def refusable_first(self):
        """Put the steps NVML may refuse (destroying a compute instance a process holds) before every other step.

        With force, the first step on the GPU is then the one NVML refuses while processes run, so a refusal
        leaves the GPU as it was. The sort is stable: the remaining steps keep their order.
        """
        self.operations.sort(key=lambda op: not op.get('pids'))

    def _destroy(self, gi):
        if gi['busy']:
            self.blocked_by.append('destroying GPU instance %d (%s at %d) while PIDs %s run'
                                   % (gi['id'], gi['profile'], gi['start'], pids_text(gi['pids'])))
        for ci_id, ci_pids in zip(gi['compute_instance_ids'], gi['compute_instance_pids']):
            self.operations.append({'op': 'destroy_compute_instance', 'gpu_instance': gi['id'],
                                    'compute_instance': ci_id, 'pids': ci_pids})
        self.operations.append({'op': 'destroy_gpu_instance', 'gpu_instance': gi['id'], 'profile': gi['profile'],
                                'start': gi['start']})

    def instances_wanted(self):
        """The GPU instances the plan leads to, once its deferred steps have run too; None when MIG is to be off."""
        if self.wanted is None:
            return None
        kept = dict((gi['id'], gi) for gi in self.instances)
        planned = self.operations + self.deferred
        for op in planned:
            if op['op'] == 'destroy_gpu_instance':
                kept.pop(op['gpu_instance'], None)
        after = [dict(gi) for gi in kept.values()]
        for gi in after:
            wanted = [op['size'] for op in planned
                      if op['op'] == 'create_compute_instance' and op['gpu_instance'] == gi['id']]
            if wanted:
                gi['compute_instances'] = wanted
        after.extend({'profile': op['profile'], 'start': op['start'], 'compute_instances': op['compute_instances'],
                      'slices': self.shape.profile(op['profile'])['slice_count']}
                     for op in planned if op['op'] == 'create_gpu_instance')
        return after

    def layout_wanted(self):
        """instances_wanted in words, or 'disabled'."""
        after = self.instances_wanted()
        return 'disabled' if after is None else describe_layout(after)

    def mig_wanted(self):
        """instances_wanted as data: the MIG mode (enabled, disabled) and the GPU instances (layout_data)."""
        after = self.instances_wanted()
        if after is None:
            return {'mig_mode': 'disabled', 'gpu_instances': []}
        return {'mig_mode': 'enabled', 'gpu_instances': layout_data(after)}


def describe_step(op):
    """One operation in words, without the GPU (messages name it once per GPU)."""
    kind = op['op']
    if kind == 'set_mig_mode':
        return '%s MIG mode' % ('enable' if op['enabled'] else 'disable')
    if kind == 'destroy_compute_instance':
        return 'destroy compute instance %d of GPU instance %d' % (op['compute_instance'], op['gpu_instance'])
    if kind == 'destroy_gpu_instance':
        return 'destroy GPU instance %d (%s at %d)' % (op['gpu_instance'], op['profile'], op['start'])
    if kind == 'create_compute_instance':
        return 'create a %dc compute instance in GPU instance %d (%s)' % (op['size'], op['gpu_instance'], op['profile'])
    return 'create %s at memory slice %d with compute instances %s' % (
        op['profile'], op['start'], '+'.join('%dc' % size for size in op['compute_instances']))


def describe_operation(gpu, op):
    return '%s: %s' % (gpu.name, describe_step(op))


def per_gpu(steps):
    """[(gpu, step)] in words, naming each GPU once: 'GPU 0 (...): a, b; GPU 1 (...): c'."""
    groups = []
    for gpu, step in steps:
        if groups and groups[-1][0] is gpu:
            groups[-1][1].append(step)
        else:
            groups.append((gpu, [step]))
    return '; '.join('%s: %s' % (gpu.name, ', '.join(gpu_steps)) for gpu, gpu_steps in groups) or 'nothing'


def by_reason(problems):
    """[(gpu, reason)] as one line per reason that names every GPU it holds for once.

    A reason may contain {indices}: the comma-separated indices of its GPUs (for nvidia-smi -i).
    """
    order = []
    gpus = {}
    for gpu, reason in problems:
        if reason not in gpus:
            order.append(reason)
            gpus[reason] = []
        gpus[reason].append(gpu)
    lines = []
    for reason in order:
        named = gpus[reason]
        who = named[0].name if len(named) == 1 else 'GPUs %s (%s)' % (
            ', '.join(str(gpu.index) for gpu in named), ', '.join(gpu.info['uuid'] for gpu in named))
        lines.append('%s: %s' % (who, reason.replace('{indices}', ','.join(str(gpu.index) for gpu in named))))
    return ' | '.join(lines)
