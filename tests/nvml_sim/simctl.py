# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""Outside-world events for the NVML simulator: reboots, GPU resets, processes, faults.

These act on the simulator's state file, as the real events act on the GPUs,
while no NVML session is open.
"""

from __future__ import absolute_import, division, print_function

import json
import os
import sys

_HERE = os.path.dirname(os.path.abspath(__file__))


def _load(path, default=None):
    if not os.path.exists(path):
        return default
    with open(path) as handle:
        return json.load(handle)


def _save(path, state):
    tmp = path + '.tmp'
    with open(tmp, 'w') as handle:
        json.dump(state, handle, indent=1, sort_keys=True)
    os.rename(tmp, path)


def _architectures(host_path):
    models = _load(os.path.join(_HERE, 'gpu_models.json'))['models']
    host = _load(host_path)
    return dict((gpu['uuid'], models[gpu['model']]['architecture']) for gpu in host.get('gpus', [])), host


def reboot(host_path, state_path):
    """What a reboot clears: every MIG instance and process, Hopper's MIG mode, compute modes."""
    architectures, host = _architectures(host_path)
    state = _load(state_path)
    if not state:
        return
    specs = dict((gpu['uuid'], gpu) for gpu in host.get('gpus', []))
    for uuid, gpu in state['gpus'].items():
        gpu['gpu_instances'] = []
        gpu['compute_mode'] = 0
        gpu['persistence_mode'] = int(specs[uuid].get('persistence_mode', 1))
        if architectures[uuid] == 'hopper':
            # Hopper keeps MIG mode only while the driver is loaded.
            gpu['mig_current'] = gpu['mig_pending'] = 0
        else:
            # Ampere keeps MIG mode in the InfoROM; a pending change takes effect now.
            gpu['mig_current'] = gpu['mig_pending']
    state['processes'] = []
    _save(state_path, state)


def reset_gpu(state_path, uuid):
    """nvidia-smi --gpu-reset: a pending MIG mode takes effect; instances are gone."""
    state = _load(state_path)
    gpu = state['gpus'][uuid]
    gpu['gpu_instances'] = []
    gpu['mig_current'] = gpu['mig_pending']
    _save(state_path, state)


def add_process(state_path, uuid, pid, gpu_instance_id=None, compute_instance_id=None, used_memory_mb=512):
    state = _load(state_path)
    proc = {'gpu_uuid': uuid, 'pid': pid, 'used_memory_mb': used_memory_mb}
    if gpu_instance_id is not None:
        proc.update({'gpu_instance_id': gpu_instance_id, 'compute_instance_id': compute_instance_id})
    state['processes'].append(proc)
    _save(state_path, state)


def remove_process(state_path, pid):
    state = _load(state_path)
    state['processes'] = [proc for proc in state['processes'] if proc['pid'] != pid]
    _save(state_path, state)


def inject_fault(state_path, function, error=999, skip=0):
    """Make the (skip+1)-th later call of an NVML function raise NVML error `error`."""
    state = _load(state_path, {})
    state.setdefault('faults', []).append({'function': function, 'error': error, 'skip': skip})
    _save(state_path, state)


def mutations(state_path):
    """How many NVML calls have changed GPU state so far."""
    return (_load(state_path, {}) or {}).get('mutations', 0)


def main(argv):
    usage = ('usage: simctl.py reboot HOST STATE | reset-gpu STATE UUID | '
             'add-process STATE UUID PID [GI CI] | remove-process STATE PID')
    if len(argv) < 2:
        sys.exit(usage)
    command, args = argv[1], argv[2:]
    if command == 'reboot':
        reboot(*args)
    elif command == 'reset-gpu':
        reset_gpu(*args)
    elif command == 'add-process':
        ids = [int(a) for a in args[3:]]
        add_process(args[0], args[1], int(args[2]), *ids)
    elif command == 'remove-process':
        remove_process(args[0], int(args[1]))
    else:
        sys.exit(usage)


if __name__ == '__main__':
    main(sys.argv)
