# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""The simulator's MIG behaviour against NVIDIA's published rules.

Expected values come from NVIDIA's MIG user guide (profile tables, placements,
reset and reboot behaviour), written out here by hand. The profile table is written here once: it checks
tests/nvml_sim/gpu_models.json, from which every other test takes its tables (support/mig_tables.py).
"""

from __future__ import absolute_import, division, print_function

import ctypes
import os

import pytest

import pynvml
import simctl

from ..support import mig_tables
from ..support.sim import HOSTS_DIR, gpu_uuid

GPU = gpu_uuid(1)
# GPU model -> {profile name: (nvidia-smi profile id, max instances, memory slices)} per MIG user guide.
MIG_USER_GUIDE = {
    'A100-SXM4-40GB': {'1g.5gb': (19, 7, 1), '1g.5gb+me': (20, 1, 1), '1g.10gb': (15, 4, 2), '2g.10gb': (14, 3, 2),
                       '3g.20gb': (9, 2, 4), '4g.20gb': (5, 1, 4), '7g.40gb': (0, 1, 8)},
    'A100-80GB-PCIe': {'1g.10gb': (19, 7, 1), '1g.10gb+me': (20, 1, 1), '1g.20gb': (15, 4, 2),
                       '2g.20gb': (14, 3, 2), '3g.40gb': (9, 2, 4), '4g.40gb': (5, 1, 4), '7g.80gb': (0, 1, 8)},
    'H100-SXM5-80GB': {'1g.10gb': (19, 7, 1), '1g.10gb+me': (20, 1, 1), '1g.20gb': (15, 4, 2),
                       '2g.20gb': (14, 3, 2), '3g.40gb': (9, 2, 4), '4g.40gb': (5, 1, 4), '7g.80gb': (0, 1, 8)},
    'H200-SXM-141GB': {'1g.18gb': (19, 7, 1), '1g.18gb+me': (20, 1, 1), '1g.35gb': (15, 4, 2),
                       '2g.35gb': (14, 3, 2), '3g.71gb': (9, 2, 4), '4g.71gb': (5, 1, 4), '7g.141gb': (0, 1, 8)},
}


@pytest.fixture
def one_gpu_host(sim_hosts):
    """A host with one GPU of the given model, MIG mode on, and an NVML session open."""
    sessions = []

    def make(model, mig_mode=1):
        paths = sim_hosts.with_gpus(model, first_uuid=1, mig_mode=mig_mode)
        pynvml.nvmlInit()
        sessions.append(True)
        return pynvml.nvmlDeviceGetHandleByIndex(0), paths['host_file'], paths['state_file']
    yield make
    for _open_session in sessions:
        pynvml.nvmlShutdown()


def profiles_by_name(handle):
    found = {}
    for index in range(pynvml.NVML_GPU_INSTANCE_PROFILE_COUNT):
        try:
            info = pynvml.nvmlDeviceGetGpuInstanceProfileInfo(handle, index)
        except pynvml.NVMLError_NotSupported:
            continue
        found[info.name[len('MIG '):]] = info
    return found


def create(handle, profile_id, start=None, model=None):
    """Create a GPU instance; at START (in memory slices) if given, with the placement size MODEL has for it."""
    if start is None:
        return pynvml.nvmlDeviceCreateGpuInstance(handle, profile_id)
    placement = pynvml.c_nvmlGpuInstancePlacement_t(start, 0)
    placement.size = mig_tables.memory_slices_by_id(model)[profile_id]
    return pynvml.nvmlDeviceCreateGpuInstanceWithPlacement(handle, profile_id, ctypes.byref(placement))


def layout(handle):
    infos = [pynvml.nvmlGpuInstanceGetInfo(gi) for gi in _all_instances(handle)]
    return sorted(((info.profileId, info.placement.start) for info in infos), key=lambda item: item[1])


def test_gpu_models_json_holds_the_mig_user_guides_tables():
    assert mig_tables.mig_models() == sorted(MIG_USER_GUIDE)
    for model, table in MIG_USER_GUIDE.items():
        assert mig_tables.profile_table(model) == table, model


@pytest.mark.parametrize('model', mig_tables.mig_models())
def test_profile_tables(one_gpu_host, model):
    handle, _host, _state = one_gpu_host(model)
    profiles = profiles_by_name(handle)
    assert dict((name, (info.id, info.instanceCount)) for name, info in profiles.items()) == \
        dict((name, (pid, count)) for name, (pid, count, _slices) in mig_tables.profile_table(model).items())


@pytest.mark.parametrize('model', mig_tables.mig_models())
@pytest.mark.parametrize('name_index', range(7))
def test_each_profile_fills_to_its_maximum_and_no_further(one_gpu_host, model, name_index):
    handle, _host, _state = one_gpu_host(model)
    name = sorted(mig_tables.profile_table(model))[name_index]
    profile_id, maximum, _slices = mig_tables.profile_table(model)[name]
    assert pynvml.nvmlDeviceGetGpuInstanceRemainingCapacity(handle, profile_id) == maximum
    for _instance in range(maximum):
        pynvml.nvmlDeviceCreateGpuInstance(handle, profile_id)
    with pytest.raises(pynvml.NVMLError_InsufficientResources):
        pynvml.nvmlDeviceCreateGpuInstance(handle, profile_id)
    assert pynvml.nvmlDeviceGetGpuInstanceRemainingCapacity(handle, profile_id) == 0


def test_profile_19_on_a100_80gb_is_1g_10gb_and_four_3g_do_not_fit(one_gpu_host):
    handle, _host, _state = one_gpu_host('A100-80GB-PCIe')
    info = pynvml.nvmlDeviceGetGpuInstanceProfileInfo(handle, pynvml.NVML_GPU_INSTANCE_PROFILE_1_SLICE)
    assert (info.id, info.name) == (19, 'MIG 1g.10gb')
    assert info.memorySizeMB < 10 * 1024
    pynvml.nvmlDeviceCreateGpuInstance(handle, 9)
    pynvml.nvmlDeviceCreateGpuInstance(handle, 9)
    with pytest.raises(pynvml.NVMLError_InsufficientResources):
        pynvml.nvmlDeviceCreateGpuInstance(handle, 9)


def test_creation_order_matters_as_in_the_mig_user_guide(one_gpu_host):
    # The guide's known issue: -cgi 19,19,14,9 fails on the 3g; 9 first fits all four.
    handle, _host, _state = one_gpu_host('A100-SXM4-40GB')
    for profile_id in (19, 19, 14):
        pynvml.nvmlDeviceCreateGpuInstance(handle, profile_id)
    with pytest.raises(pynvml.NVMLError_InsufficientResources):
        pynvml.nvmlDeviceCreateGpuInstance(handle, 9)
    for gi in reversed(list(_all_instances(handle))):
        pynvml.nvmlGpuInstanceDestroy(gi)
    for profile_id in (9, 19, 19, 14):
        pynvml.nvmlDeviceCreateGpuInstance(handle, profile_id)
    assert layout(handle) == [(14, 0), (19, 2), (19, 3), (9, 4)]


def _all_instances(handle):
    found = []
    for profile_id in (0, 5, 9, 14, 15, 19, 20):
        slots = (pynvml.c_nvmlGpuInstance_t * 8)()
        count = ctypes.c_uint(0)
        pynvml.nvmlDeviceGetGpuInstances(handle, profile_id, slots, ctypes.byref(count))
        found.extend(slots[:count.value])
    return found


def test_explicit_placements(one_gpu_host):
    model = 'H100-SXM5-80GB'
    handle, _host, _state = one_gpu_host(model)
    create(handle, 5, 0, model)   # 4g.40gb at 0
    create(handle, 9, 4, model)   # 3g.40gb at 4: 4+3 = 7 compute slices, all 8 memory slices
    assert layout(handle) == [(5, 0), (9, 4)]
    with pytest.raises(pynvml.NVMLError_InsufficientResources):
        create(handle, 19, 6, model)
    with pytest.raises(pynvml.NVMLError_InvalidArgument):
        create(handle, 9, 2, model)  # 3g only starts at 0 or 4


def test_possible_placements_use_the_caller_allocated_array(one_gpu_host):
    handle, _host, _state = one_gpu_host('A100-80GB-PCIe')
    count = ctypes.c_uint(0)
    pynvml.nvmlDeviceGetGpuInstancePossiblePlacements(handle, 15, None, ctypes.byref(count))
    assert count.value == 4
    placements = (pynvml.c_nvmlGpuInstancePlacement_t * count.value)()
    pynvml.nvmlDeviceGetGpuInstancePossiblePlacements(handle, 15, placements, ctypes.byref(count))
    assert [(p.start, p.size) for p in placements] == [(0, 2), (2, 2), (4, 2), (6, 2)]


def test_instances_require_mig_mode(one_gpu_host):
    handle, _host, _state = one_gpu_host('A100-80GB-PCIe', mig_mode=0)
    with pytest.raises(pynvml.NVMLError_InvalidState):
        pynvml.nvmlDeviceCreateGpuInstance(handle, 19)


def test_compute_instances_and_mig_uuids(one_gpu_host):
    handle, _host, _state = one_gpu_host('A100-80GB-PCIe')
    gi = pynvml.nvmlDeviceCreateGpuInstance(handle, 9)
    info = pynvml.nvmlGpuInstanceGetComputeInstanceProfileInfo(gi, 0, 0)
    assert (info.sliceCount, info.instanceCount, info.name) == (1, 3, 'MIG 1c.3g.40gb')
    pynvml.nvmlGpuInstanceCreateComputeInstance(gi, 0)
    pynvml.nvmlGpuInstanceCreateComputeInstance(gi, 1)
    assert pynvml.nvmlGpuInstanceGetComputeInstanceRemainingCapacity(gi, 0) == 0
    uuids = [pynvml.nvmlDeviceGetUUID(pynvml.nvmlDeviceGetMigDeviceHandleByIndex(handle, i)) for i in range(2)]
    assert all(u.startswith('MIG-') for u in uuids) and len(set(uuids)) == 2
    with pytest.raises(pynvml.NVMLError_NotFound):
        pynvml.nvmlDeviceGetMigDeviceHandleByIndex(handle, 2)
    with pytest.raises(pynvml.NVMLError_InUse):
        pynvml.nvmlGpuInstanceDestroy(gi)  # compute instances first


def test_state_persists_across_sessions_and_reboot_clears_instances(one_gpu_host):
    handle, host, state = one_gpu_host('A100-80GB-PCIe')
    pynvml.nvmlDeviceCreateGpuInstance(handle, 9)
    pynvml.nvmlShutdown()
    pynvml.nvmlInit()
    handle = pynvml.nvmlDeviceGetHandleByIndex(0)
    assert layout(handle) == [(9, 4)]
    pynvml.nvmlShutdown()
    simctl.reboot(host, state)
    pynvml.nvmlInit()
    handle = pynvml.nvmlDeviceGetHandleByIndex(0)
    assert layout(handle) == []
    assert pynvml.nvmlDeviceGetMigMode(handle) == [1, 1]  # Ampere keeps MIG mode in the InfoROM


def test_hopper_loses_mig_mode_at_reboot(one_gpu_host):
    handle, host, state = one_gpu_host('H100-SXM5-80GB')
    assert pynvml.nvmlDeviceGetMigMode(handle) == [1, 1]
    pynvml.nvmlShutdown()
    simctl.reboot(host, state)
    pynvml.nvmlInit()
    assert pynvml.nvmlDeviceGetMigMode(pynvml.nvmlDeviceGetHandleByIndex(0)) == [0, 0]


def test_enabling_mig_on_ampere_waits_for_a_reset_while_busy(one_gpu_host):
    handle, _host, state = one_gpu_host('A100-80GB-PCIe', mig_mode=0)
    pynvml.nvmlShutdown()
    simctl.add_process(state, GPU, 999)
    pynvml.nvmlInit()
    handle = pynvml.nvmlDeviceGetHandleByIndex(0)
    assert pynvml.nvmlDeviceSetMigMode(handle, 1) == pynvml.NVML_ERROR_IN_USE
    assert pynvml.nvmlDeviceGetMigMode(handle) == [0, 1]
    pynvml.nvmlShutdown()
    simctl.remove_process(state, 999)
    simctl.reset_gpu(state, GPU)
    pynvml.nvmlInit()
    assert pynvml.nvmlDeviceGetMigMode(pynvml.nvmlDeviceGetHandleByIndex(0)) == [1, 1]


def test_enabling_mig_on_hopper_is_immediate(one_gpu_host):
    handle, _host, _state = one_gpu_host('H100-SXM5-80GB', mig_mode=0)
    assert pynvml.nvmlDeviceSetMigMode(handle, 1) == pynvml.NVML_SUCCESS
    assert pynvml.nvmlDeviceGetMigMode(handle) == [1, 1]


def test_injected_fault_fires_once_on_the_chosen_call(one_gpu_host):
    handle, _host, state = one_gpu_host('A100-80GB-PCIe')
    pynvml.nvmlShutdown()
    simctl.inject_fault(state, 'nvmlDeviceCreateGpuInstance', error=pynvml.NVML_ERROR_UNKNOWN, skip=1)
    pynvml.nvmlInit()
    handle = pynvml.nvmlDeviceGetHandleByIndex(0)
    pynvml.nvmlDeviceCreateGpuInstance(handle, 19)
    with pytest.raises(pynvml.NVMLError_Unknown):
        pynvml.nvmlDeviceCreateGpuInstance(handle, 19)
    pynvml.nvmlDeviceCreateGpuInstance(handle, 19)
    assert len(layout(handle)) == 2
    assert simctl.mutations(state) == 3


def test_calls_before_init_raise_uninitialized(monkeypatch):
    monkeypatch.setenv('GPUFLEET_NVML_SIM_HOST', os.path.join(HOSTS_DIR, 'reference-a100.json'))
    with pytest.raises(pynvml.NVMLError_Uninitialized):
        pynvml.nvmlDeviceGetCount()
