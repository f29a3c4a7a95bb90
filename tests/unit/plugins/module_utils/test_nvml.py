# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""The Nvml session's readings for the watchdog, on the NVML simulator: GPUs one at a time (a lost one alone fails),
MIG devices with their ids, memory and processes, and Xid events while waiting."""

from __future__ import absolute_import, division, print_function

import time

import pytest

import pynvml
import simctl

from ansible_collections.gpufleet.core.plugins.module_utils._nvml import GpuLostError, Nvml, NvmlError

from ...support.sim import BARE_HOST, gpu_uuid, make_gpus

GPU0, GPU1, GPU2 = gpu_uuid(0), gpu_uuid(1), gpu_uuid(2)
MIG_A = 'MIG-00000000-0000-5000-8000-00000000000a'
MIG_B = 'MIG-00000000-0000-5000-8000-00000000000b'
MIB = 1024 ** 2
LOST = 'a GPU has fallen off the bus: check dmesg for Xid errors; the host needs a reboot (GPU is lost)'


class Recorded(object):
    """pynvml as Nvml is given it, recording the name of each nvml* call; `replaced` stands in for some of them."""

    def __init__(self, library, **replaced):
        self.library, self.replaced, self.calls = library, replaced, []

    def __getattr__(self, name):
        value = self.replaced.get(name) or getattr(self.library, name)
        if not (name.startswith('nvml') and callable(value)):
            return value

        def call(*args):
            self.calls.append(name)
            return value(*args)
        return call


def mig_gpus():
    """One A100 80GB in MIG mode with two 3g.40gb instances, one compute instance each: MIG_A (GI 1), MIG_B (GI 2)."""
    return make_gpus('A100-80GB-PCIe', mig_mode=1, gpu_instances=[
        {'id': 1, 'profile_id': 9, 'start': 4, 'size': 4, 'compute_instances': [
            {'id': 0, 'profile_id': 2, 'start': 0, 'size': 3, 'uuid': MIG_A}]},
        {'id': 2, 'profile_id': 9, 'start': 0, 'size': 4, 'compute_instances': [
            {'id': 0, 'profile_id': 2, 'start': 0, 'size': 3, 'uuid': MIG_B}]}])


def serve(sim_hosts, gpus):
    """A host with these GPUs, its state written (simctl acts on it) and no NVML session left open."""
    served = sim_hosts.described(dict(BARE_HOST, gpus=gpus))
    pynvml.nvmlInit()
    pynvml.nvmlShutdown()
    return served


@pytest.fixture
def mig_host(sim_hosts):
    """GPU 0 in MIG mode with two 3g.40gb instances (one process on each), GPU 1 whole (one process)."""
    mig_gpu = mig_gpus()
    served = serve(sim_hosts, mig_gpu + make_gpus('A100-80GB-PCIe', first_uuid=1)[:1])
    simctl.add_process(served['state_file'], GPU0, 501, 1, 0, used_memory_mb=1000)
    simctl.add_process(served['state_file'], GPU0, 502, 2, 0, used_memory_mb=3000)
    simctl.add_process(served['state_file'], GPU1, 503, used_memory_mb=2000)
    return served


def test_a_lost_gpu_fails_alone_and_the_others_still_read(sim_hosts):
    served = serve(sim_hosts, make_gpus('A100-80GB-PCIe', 3))
    simctl.lose_gpu(served['host_file'], served['state_file'], GPU1)
    read = []
    with Nvml(pynvml) as nvml:
        assert nvml.gpu_count() == 3
        for index in range(3):
            try:
                _handle, uuid, bus_id = nvml.gpu_at(index)
            except GpuLostError as exc:
                read.append(str(exc))
            else:
                read.append((uuid, bus_id))
    assert read == [(GPU0, '00000000:17:00.0'), LOST, (GPU2, '00000000:19:00.0')]


def test_a_gpu_lost_while_it_is_read_fails_as_lost_and_other_errors_are_nvml_errors_in_one_line(sim_hosts):
    served = serve(sim_hosts, make_gpus('A100-80GB-PCIe', 2))
    simctl.inject_fault(served['state_file'], 'nvmlDeviceGetMemoryInfo', pynvml.NVML_ERROR_GPU_IS_LOST)
    simctl.inject_fault(served['state_file'], 'nvmlDeviceGetUUID', pynvml.NVML_ERROR_UNKNOWN)
    with Nvml(pynvml) as nvml:
        handle = pynvml.nvmlDeviceGetHandleByIndex(0)
        with pytest.raises(GpuLostError, match=r'^a GPU has fallen off the bus'):
            nvml.memory_use(handle)
        with pytest.raises(NvmlError) as caught:
            nvml.gpu_at(1)
        assert not isinstance(caught.value, GpuLostError)
        assert str(caught.value) == 'NVML error: Unknown Error'
        assert nvml.gpu_at(1)[1] == GPU1  # the fault was one call's


def test_a_mig_gpus_devices_come_with_their_ids_memory_and_processes(mig_host):
    with Nvml(pynvml) as nvml:
        mig_gpu, whole_gpu = nvml.gpu_at(0)[0], nvml.gpu_at(1)[0]
        assert (nvml.mig_enabled(mig_gpu), nvml.mig_enabled(whole_gpu)) == (True, False)
        # Seven slots, two devices: the empty slots are skipped.
        devices = list(nvml.mig_device_handles(mig_gpu))
        assert [device[1:] for device in devices] == [(MIG_A, 1, 0), (MIG_B, 2, 0)]
        assert [nvml.memory_use(device[0]) for device in devices] == [
            (40192 * MIB, {501: 1000 * MIB}), (40192 * MIB, {502: 3000 * MIB})]
        assert nvml.memory_use(whole_gpu) == (81920 * MIB, {503: 2000 * MIB})


def test_a_gpu_without_mig_is_not_in_mig_mode(sim_hosts):
    serve(sim_hosts, make_gpus('L40S'))
    with Nvml(pynvml) as nvml:
        assert nvml.mig_enabled(nvml.gpu_at(0)[0]) is False


def test_xid_events_while_waiting_name_their_gpu_and_mig_device_and_other_events_are_skipped(mig_host):
    """The Xids come once the set waits: on a MIG device, on a whole GPU; an ECC event before them is not an Xid."""
    ecc = pynvml.c_nvmlEventData_t()
    ecc.eventType, ecc.eventData = pynvml.nvmlEventTypeSingleBitEccError, 1

    def wait(event_set, timeout_ms):
        if library.calls.count('nvmlEventSetWait_v2') == 1:
            simctl.inject_xid(mig_host['host_file'], mig_host['state_file'], GPU0, 43, 2, 0)
            simctl.inject_xid(mig_host['host_file'], mig_host['state_file'], GPU1, 13)
            return ecc
        return pynvml.nvmlEventSetWait_v2(event_set, timeout_ms)

    library = Recorded(pynvml, nvmlEventSetWait_v2=wait)
    with Nvml(library) as nvml:
        handles = [nvml.gpu_at(0)[0], nvml.gpu_at(1)[0]]
        started = time.monotonic()
        # Long enough for the two injections inside the first wait on a loaded machine: with 400 ms, CI's busiest
        # minutes once used the whole wait on them, and the events came after its end.
        events = nvml.xid_events(handles, 3000)
        waited = time.monotonic() - started
    assert events == [{'gpu': GPU0, 'gpu_instance_id': 2, 'compute_instance_id': 0, 'xid': 43},
                      {'gpu': GPU1, 'gpu_instance_id': None, 'compute_instance_id': None, 'xid': 13}]
    assert waited >= 2.95  # the wait goes on to its end: more may come
    assert library.calls.count('nvmlDeviceRegisterEvents') == 2 and library.calls.count('nvmlEventSetFree') == 1


def test_a_gpu_lost_while_waiting_ends_the_wait_with_what_came_before(mig_host):
    def wait(event_set, timeout_ms):
        if library.calls.count('nvmlEventSetWait_v2') == 1:
            simctl.lose_gpu(mig_host['host_file'], mig_host['state_file'], GPU1)  # its Xid 79 comes, then lost
        return pynvml.nvmlEventSetWait_v2(event_set, timeout_ms)

    library = Recorded(pynvml, nvmlEventSetWait_v2=wait)
    with Nvml(library) as nvml:
        handles = [nvml.gpu_at(0)[0], nvml.gpu_at(1)[0]]
        started = time.monotonic()
        events = nvml.xid_events(handles, 20000)
        assert time.monotonic() - started < 10
    assert events == [{'gpu': GPU1, 'gpu_instance_id': None, 'compute_instance_id': None, 'xid': 79}]
    assert library.calls.count('nvmlEventSetFree') == 1


def test_an_nvml_error_while_waiting_is_an_nvml_error_and_the_set_is_freed(mig_host):
    simctl.inject_fault(mig_host['state_file'], 'nvmlEventSetWait_v2', pynvml.NVML_ERROR_NO_PERMISSION)
    library = Recorded(pynvml)
    with Nvml(library) as nvml:
        with pytest.raises(NvmlError, match=r'^NVML refused the call for lack of permission: .*\(Insufficient '):
            nvml.xid_events([nvml.gpu_at(0)[0]], 1000)
    assert library.calls.count('nvmlEventSetFree') == 1


@pytest.mark.parametrize('wait_ms, gpus', [(0, 2), (-1, 2), (1000, 0)])
def test_no_wait_or_no_gpus_means_no_events_and_no_event_set(mig_host, wait_ms, gpus):
    library = Recorded(pynvml)
    with Nvml(library) as nvml:
        assert nvml.xid_events([nvml.gpu_at(index)[0] for index in range(gpus)], wait_ms) == []
    assert 'nvmlEventSetCreate' not in library.calls
