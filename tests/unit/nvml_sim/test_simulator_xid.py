# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""The simulator's Xid events (NVML's event API), its kernel log (the journalctl stand-in), lost GPUs and each
process's GPU memory: what the GPU watchdog reads, as real NVML and journald give it."""

from __future__ import absolute_import, division, print_function

import json
import os
import subprocess
import sys
import threading
import time

import pytest

import pynvml
import simctl

from ..support.sim import SIM_DIR
from . import test_conformance

real = test_conformance.real  # the real nvidia-ml-py, a fixture

JOURNALCTL = os.path.join(SIM_DIR, 'journalctl')
GPU0 = 'GPU-00000000-0000-4000-8000-000000000000'
GPU1 = 'GPU-00000000-0000-4000-8000-000000000001'


@pytest.fixture
def host(sim_hosts):
    served = sim_hosts.with_gpus('A100-80GB-PCIe', 2)
    pynvml.nvmlInit()
    yield served
    pynvml.nvmlShutdown()


def test_event_names_and_data_structure_are_the_real_ones(real):
    names = [name for name in vars(pynvml) if name.startswith('nvmlEventType')]
    assert 'nvmlEventTypeXidCriticalError' in names
    assert dict((name, getattr(pynvml, name)) for name in names) == dict((name, getattr(real, name)) for name in names)
    assert [name for name, _kind in pynvml.c_nvmlEventData_t._fields_] == [
        name for name, _kind in real.c_nvmlEventData_t._fields_]


def test_an_xid_after_registration_is_delivered_with_its_gpu_and_number(host):
    handle = pynvml.nvmlDeviceGetHandleByIndex(1)
    simctl.inject_xid(host['host_file'], host['state_file'], GPU1, 13)  # before registration: not this set's
    events = pynvml.nvmlEventSetCreate()
    pynvml.nvmlDeviceRegisterEvents(handle, pynvml.nvmlEventTypeXidCriticalError, events)
    later = threading.Timer(0.2, simctl.inject_xid, (host['host_file'], host['state_file'], GPU1, 43, 1, 0))
    later.start()
    started = time.monotonic()
    data = pynvml.nvmlEventSetWait_v2(events, 3000)
    assert 0.1 < time.monotonic() - started < 2.5
    assert pynvml.nvmlDeviceGetUUID(data.device) == GPU1
    assert (data.eventType, data.eventData) == (pynvml.nvmlEventTypeXidCriticalError, 43)
    assert (data.gpuInstanceId, data.computeInstanceId) == (1, 0)
    with pytest.raises(pynvml.NVMLError_Timeout):
        pynvml.nvmlEventSetWait(events, 100)
    pynvml.nvmlEventSetFree(events)
    with pytest.raises(pynvml.NVMLError_InvalidArgument):
        pynvml.nvmlEventSetWait(events, 0)


def test_a_gpu_not_registered_gets_no_events_and_unsupported_types_are_refused(host):
    events = pynvml.nvmlEventSetCreate()
    pynvml.nvmlDeviceRegisterEvents(pynvml.nvmlDeviceGetHandleByIndex(0), pynvml.nvmlEventTypeXidCriticalError, events)
    simctl.inject_xid(host['host_file'], host['state_file'], GPU1, 13)
    with pytest.raises(pynvml.NVMLError_Timeout):
        pynvml.nvmlEventSetWait_v2(events, 50)
    data = None
    try:
        data = pynvml.nvmlEventSetWait_v2(events, 0)
    except pynvml.NVMLError_Timeout:
        pass
    assert data is None
    event = pynvml.nvmlEventSetCreate()
    with pytest.raises(pynvml.NVMLError_NotSupported):
        pynvml.nvmlDeviceRegisterEvents(pynvml.nvmlDeviceGetHandleByIndex(0), 0x10000000, event)
    assert pynvml.nvmlDeviceGetSupportedEventTypes(pynvml.nvmlDeviceGetHandleByIndex(0)) & \
        pynvml.nvmlEventTypeXidCriticalError


def test_a_lost_gpu_answers_gpu_is_lost_until_a_reboot(sim_hosts):
    served = sim_hosts.with_gpus('A100-80GB-PCIe', 2)
    record = simctl.lose_gpu(served['host_file'], served['state_file'], GPU1)  # before any NVML session
    assert record['xid'] == 79 and record['message'] == 'NVRM: Xid (PCI:0000:18:00): 79, GPU has fallen off the bus.'
    pynvml.nvmlInit()
    try:
        assert pynvml.nvmlDeviceGetCount() == 2
        assert pynvml.nvmlDeviceGetUUID(pynvml.nvmlDeviceGetHandleByIndex(0)) == GPU0
        with pytest.raises(pynvml.NVMLError_GpuIsLost):
            pynvml.nvmlDeviceGetHandleByIndex(1)
    finally:
        pynvml.nvmlShutdown()
    simctl.reboot(served['host_file'], served['state_file'])
    pynvml.nvmlInit()
    try:
        assert pynvml.nvmlDeviceGetUUID(pynvml.nvmlDeviceGetHandleByIndex(1)) == GPU1
    finally:
        pynvml.nvmlShutdown()


def test_a_broken_gpu_stays_lost_after_a_reboot_until_it_is_repaired(sim_hosts):
    served = sim_hosts.with_gpus('A100-80GB-PCIe', 2)
    pynvml.nvmlInit()
    pynvml.nvmlShutdown()  # a session has written the state, as on a host that ran
    assert simctl.break_gpu(served['host_file'], served['state_file'], GPU1)['xid'] == 79

    def second_gpu():
        pynvml.nvmlInit()
        try:
            return pynvml.nvmlDeviceGetUUID(pynvml.nvmlDeviceGetHandleByIndex(1))
        finally:
            pynvml.nvmlShutdown()

    simctl.reboot(served['host_file'], served['state_file'])
    with pytest.raises(pynvml.NVMLError_GpuIsLost):
        second_gpu()
    simctl.repair_gpu(served['state_file'], GPU1)
    with pytest.raises(pynvml.NVMLError_GpuIsLost):
        second_gpu()  # until the next boot finds the new board
    simctl.reboot(served['host_file'], served['state_file'])
    assert second_gpu() == GPU1


def test_each_process_uses_the_memory_set_for_it(host):
    simctl.add_process(host['state_file'], GPU0, 4242, used_memory_mb=1024)
    simctl.add_process(host['state_file'], GPU0, 4343, used_memory_mb=2048)
    simctl.set_process_memory(host['state_file'], 4242, 70000)
    pynvml.nvmlShutdown()
    pynvml.nvmlInit()  # a new session reads the state, as a new process does
    handle = pynvml.nvmlDeviceGetHandleByIndex(0)
    used = dict((p.pid, p.usedGpuMemory) for p in pynvml.nvmlDeviceGetComputeRunningProcesses(handle))
    assert used == {4242: 70000 * 1024 ** 2, 4343: 2048 * 1024 ** 2}
    memory = pynvml.nvmlDeviceGetMemoryInfo(handle)
    assert memory.used == 72048 * 1024 ** 2 and memory.free == memory.total - memory.used


def test_a_mig_device_reports_its_own_memory(sim_hosts):
    sim_hosts.with_gpus('A100-80GB-PCIe', 1, mig_mode=1, gpu_instances=[
        {'id': 1, 'profile_id': 9, 'start': 4, 'size': 4, 'compute_instances': [
            {'id': 0, 'profile_id': 2, 'start': 0, 'size': 3, 'uuid': 'MIG-00000000-0000-5000-8000-000000000001'}]}])
    pynvml.nvmlInit()
    try:
        mig = pynvml.nvmlDeviceGetMigDeviceHandleByIndex(pynvml.nvmlDeviceGetHandleByIndex(0), 0)
        assert pynvml.nvmlDeviceGetMemoryInfo(mig).total == 40192 * 1024 ** 2
    finally:
        pynvml.nvmlShutdown()


def journalctl(*args):
    return subprocess.run([sys.executable, JOURNALCTL] + list(args), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          universal_newlines=True, check=False)


def test_the_journalctl_stand_in_shows_the_kernel_lines_after_a_cursor(sim_hosts):
    served = sim_hosts.with_gpus('A100-80GB-PCIe', 2)
    assert journalctl('-k', '-o', 'json', '-b').stdout == ''
    simctl.inject_xid(served['host_file'], served['state_file'], GPU0, 48)
    simctl.inject_xid(served['host_file'], served['state_file'], GPU1, 13, pid=77)
    entries = [json.loads(line) for line in journalctl('-k', '-o', 'json', '--no-pager', '-q', '-b').stdout.splitlines()]
    assert [e['MESSAGE'] for e in entries] == [
        'NVRM: Xid (PCI:0000:17:00): 48, An uncorrectable double bit error (DBE) has been detected on GPU.',
        'NVRM: Xid (PCI:0000:18:00): 13, pid=77, name=python3, Graphics Exception: ESR 0x404600=0x80000002']
    assert set(e['_TRANSPORT'] for e in entries) == {'kernel'}
    after = journalctl('-k', '-o', 'json', '--after-cursor=%s' % entries[0]['__CURSOR']).stdout.splitlines()
    assert [json.loads(line)['__CURSOR'] for line in after] == [entries[1]['__CURSOR']]
    refused = journalctl('-k', '-o', 'json', '--after-cursor=s=0123;i=9')
    assert refused.returncode == 1 and 'Failed to seek to cursor' in refused.stderr


def test_the_kernel_log_and_its_xid_lines_are_the_current_boots(sim_hosts):
    served = sim_hosts.with_gpus('A100-80GB-PCIe', 2)
    pynvml.nvmlInit()
    pynvml.nvmlShutdown()  # a session has written the state, as on a host that ran
    simctl.inject_xid(served['host_file'], served['state_file'], GPU0, 79)
    assert len(journalctl('-k', '-o', 'json', '-b').stdout.splitlines()) == 1
    simctl.reboot(served['host_file'], served['state_file'])
    assert journalctl('-k', '-o', 'json', '-b').stdout == ''
    simctl.inject_xid(served['host_file'], served['state_file'], GPU1, 13)
    assert [json.loads(line)['MESSAGE'].split('): ')[1][:2] for line in journalctl('-k', '-o', 'json').stdout.splitlines()] \
        == ['13']
