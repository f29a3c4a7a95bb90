# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""Outside-world events for the NVML simulator: reboots, GPU resets, processes, faults, Xid errors, lost GPUs.

These act on the simulator's state file, as the real events act on the GPUs,
while no NVML session is open. An Xid error is recorded once, as the driver
does: NVML delivers it to event sets registered for its GPU, and its kernel log
line ("NVRM: Xid (PCI:...): N, ...") is what the journalctl stand-in
(tests/nvml_sim/journalctl) shows for `journalctl -k`.
"""

from __future__ import absolute_import, division, print_function

import fcntl
import json
import os
import sys
import time

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
        if not gpu.get('broken'):
            gpu.pop('lost', None)  # a GPU that fell off the bus is found again at boot, unless it is broken
        if 'mig_pending' not in gpu:
            continue  # only simctl has written this GPU's state (lose_gpu): no NVML session has yet
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
    state['process_memory'] = {}
    # What DCGM reports starts again at boot: the Xid records before this time are the previous boot's.
    state['booted_at'] = time.time()
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
    state.get('process_memory', {}).pop(str(pid), None)  # what set_process_memory set went with the process
    _save(state_path, state)


def _locked_update(state_path, change):
    """Read, change and write the state under the simulator's lock: the lab's driver rewrites it every second."""
    with open(state_path + '.lock', 'a') as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        state = _load(state_path, {}) or {}
        change(state)
        _save(state_path, state)


def set_process_memory(state_path, pid, used_memory_mb):
    """What a process uses on its GPU from now on, in MiB, as NVML's usedGpuMemory reports it."""
    _locked_update(state_path, lambda state: state.setdefault('process_memory', {}).__setitem__(
        str(int(pid)), int(used_memory_mb)))


# The driver's text after "NVRM: Xid (PCI:...): N, " for the Xids the tests use (NVIDIA's Xid catalog).
XID_TEXT = {
    13: 'Graphics Exception: ESR 0x404600=0x80000002',
    31: 'Ch 00000008, intr 00000000. MMU Fault: ENGINE GRAPHICS GPCCLIENT_T1_0 faulted @ 0x7f12_34567000.',
    43: 'Ch 00000010',
    48: 'An uncorrectable double bit error (DBE) has been detected on GPU.',
    63: 'Row Remapper: New row marked for remapping, reset gpu to activate.',
    64: 'Row Remapper: Failed to remap row.',
    79: 'GPU has fallen off the bus.',
    94: 'Contained: SM (0x1). RST: No, D-RST: No',
    95: 'Uncontained: FBHUB. RST: Yes, D-RST: No',
}


def kernel_line(pci_bus_id, xid, pid=None, name=None):
    """The line the NVIDIA driver writes to the kernel log for an Xid, with the PCI address as the kernel gives it."""
    domain, bus, rest = pci_bus_id.split(':')
    where = 'PCI:%04x:%s:%s' % (int(domain, 16), bus.lower(), rest.split('.')[0].lower())
    who = ', pid=%d, name=%s' % (pid, name or 'python3') if pid is not None else ''
    return 'NVRM: Xid (%s): %d%s, %s' % (where, xid, who, XID_TEXT.get(xid, 'Xid error'))


def inject_xid(host_path, state_path, uuid, xid, gpu_instance_id=None, compute_instance_id=None, pid=None):
    """The driver reports Xid `xid` on GPU `uuid` (on one of its MIG devices when the instance ids are given)."""
    sys.path.insert(0, _HERE)
    from pynvml import xid_log_path  # the one rule for where the record lives

    gpus = dict((gpu['uuid'], gpu) for gpu in (_load(host_path) or {}).get('gpus', []))
    if uuid not in gpus:
        raise SystemExit('simctl: %s is not a GPU of %s' % (uuid, host_path))
    path = xid_log_path(state_path)
    with open(state_path + '.lock', 'a') as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        records = []
        if os.path.exists(path):
            with open(path) as handle:
                records = [json.loads(line) for line in handle if line.strip()]
        record = {'seq': (records[-1]['seq'] if records else 0) + 1, 'time': time.time(), 'gpu_uuid': uuid,
                  'xid': int(xid), 'message': kernel_line(gpus[uuid]['pci_bus_id'], int(xid), pid)}
        if gpu_instance_id is not None:
            record.update({'gpu_instance_id': int(gpu_instance_id), 'compute_instance_id': int(compute_instance_id)})
        with open(path, 'a') as handle:
            handle.write(json.dumps(record, sort_keys=True) + '\n')
    return record


def lose_gpu(host_path, state_path, uuid):
    """The GPU falls off the bus: the driver logs Xid 79, and NVML answers NVML_ERROR_GPU_IS_LOST for it."""
    record = inject_xid(host_path, state_path, uuid, 79)
    # Without a state yet (no NVML session), the simulator adds the host's GPUs and processes around this.
    _locked_update(state_path, lambda state: state.setdefault('gpus', {}).setdefault(uuid, {}).__setitem__(
        'lost', True))
    return record


def break_gpu(host_path, state_path, uuid):
    """The GPU falls off the bus for good: lost now, and still lost after every reboot, until repair-gpu."""
    record = lose_gpu(host_path, state_path, uuid)
    _locked_update(state_path, lambda state: state['gpus'][uuid].__setitem__('broken', True))
    return record


def repair_gpu(state_path, uuid):
    """The broken GPU is replaced: the next reboot finds it."""
    _locked_update(state_path, lambda state: state['gpus'][uuid].pop('broken', None))


def inject_fault(state_path, function, error=999, skip=0):
    """Make the (skip+1)-th later call of an NVML function raise NVML error `error`."""
    state = _load(state_path, {})
    state.setdefault('faults', []).append({'function': function, 'error': error, 'skip': skip})
    _save(state_path, state)


MIG_UUIDS = ('new', 'stable')


def mig_uuids(state_path, behaviour):
    """How MIG devices made from now on are named: `new` UUIDs at every creation (the default), or `stable` ones
    that a device made again in the same place keeps (the two behaviours real drivers may have)."""
    if behaviour not in MIG_UUIDS:
        raise SystemExit('simctl: mig-uuids takes %s, not %r' % (' or '.join(MIG_UUIDS), behaviour))

    def change(state):
        state['mig_uuids'] = behaviour
    _locked_update(state_path, change)


def mutations(state_path):
    """How many NVML calls have changed GPU state so far."""
    return (_load(state_path, {}) or {}).get('mutations', 0)


def main(argv):
    usage = ('usage: simctl.py reboot HOST STATE | reset-gpu STATE UUID | '
             'add-process STATE UUID PID [GI CI] | remove-process STATE PID | '
             'set-process-memory STATE PID MIB | inject-xid HOST STATE UUID XID [GI CI] | lose-gpu HOST STATE UUID | '
             'break-gpu HOST STATE UUID | repair-gpu STATE UUID | '
             'mig-uuids STATE new|stable')
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
    elif command == 'set-process-memory':
        set_process_memory(args[0], int(args[1]), int(args[2]))
    elif command == 'inject-xid':
        print(json.dumps(inject_xid(*args)))
    elif command == 'lose-gpu':
        print(json.dumps(lose_gpu(*args)))
    elif command == 'break-gpu':
        print(json.dumps(break_gpu(*args)))
    elif command == 'repair-gpu':
        repair_gpu(*args)
    elif command == 'mig-uuids':
        mig_uuids(*args)
    else:
        sys.exit(usage)


if __name__ == '__main__':
    main(sys.argv)
