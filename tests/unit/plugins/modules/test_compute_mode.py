# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import absolute_import, division, print_function

import pytest

from ansible_collections.gpufleet.core.plugins.modules import compute_mode

from ...conftest import ModuleFail
from ...support.sim import gpu_uuid

import pynvml  # noqa: E402  (the simulator: support.sim puts it first on sys.path)
import simctl  # noqa: E402

GPU0 = 'GPU-5c6f7a2e-1b3d-4e8f-9a0b-1c2d3e4f5a60'
H200 = 'GPU-0d2f4b6a-8c0e-4a1c-b3d5-e7f9a1b3c5d7'


def test_exclusive_process_then_default_again(run_module, sim_host):
    sim_host('reference-a100')
    checked = run_module(compute_mode, {'gpus': [GPU0], 'mode': 'exclusive_process', '_ansible_check_mode': True})
    assert checked['changed'] is True
    assert run_module(compute_mode, {'gpus': [GPU0], 'mode': 'exclusive_process'})['modes'] == {
        GPU0: {'before': 'default', 'after': 'exclusive_process'}}
    assert run_module(compute_mode, {'gpus': [GPU0], 'mode': 'exclusive_process'})['changed'] is False
    assert run_module(compute_mode, {'gpus': [GPU0], 'mode': 'default'})['modes'][GPU0]['before'] == \
        'exclusive_process'


@pytest.mark.parametrize('host, gpus, words', [
    ('single-h200', [H200], 'is in MIG mode, where exclusive-process compute mode does not exist'),
    ('reference-a100', ['MIG-1a2b3c4d-5e6f-5a7b-8c9d-0e1f2a3b4c01'], 'MIG devices have no compute mode of their own'),
    ('reference-a100', ['GPU-nope'], 'no GPU GPU-nope on this host'),
])
def test_refusals(run_module, sim_host, host, gpus, words):
    sim_host(host)
    with pytest.raises(ModuleFail) as failed:
        run_module(compute_mode, {'gpus': gpus, 'mode': 'exclusive_process'})
    assert words in failed.value.result['msg']


def test_gpus_that_share_a_refusal_are_named_once_in_one_message(run_module, sim_hosts):
    sim_hosts.with_gpus('A100-80GB-PCIe', count=3, mig_mode=1)
    gpus = [gpu_uuid(0), gpu_uuid(1), gpu_uuid(2), gpu_uuid(0)]
    with pytest.raises(ModuleFail) as failed:
        run_module(compute_mode, {'gpus': gpus, 'mode': 'exclusive_process'})
    msg = failed.value.result['msg']
    assert msg.startswith('%s, %s, %s are in MIG mode, where exclusive-process compute mode does not exist'
                          % (gpu_uuid(0), gpu_uuid(1), gpu_uuid(2)))
    assert msg.count(gpu_uuid(0)) == 1 and failed.value.result['changed'] is False


def test_a_failure_part_way_reports_what_changed_what_failed_and_what_was_not_tried(run_module, sim_hosts):
    served = sim_hosts.with_gpus('A100-80GB-PCIe', count=3)
    # NVML refuses the second change, as it would a GPU that fell off the bus.
    simctl.inject_fault(served['state_file'], 'nvmlDeviceSetComputeMode', error=pynvml.NVML_ERROR_NO_PERMISSION,
                        skip=1)
    gpus = [gpu_uuid(0), gpu_uuid(1), gpu_uuid(2)]
    with pytest.raises(ModuleFail) as failed:
        run_module(compute_mode, {'gpus': gpus, 'mode': 'prohibited'})
    result = failed.value.result
    assert result['changed'] is True
    assert (result['applied'], result['failed_on'], result['not_run']) == ([gpu_uuid(0)], [gpu_uuid(1)], [gpu_uuid(2)])
    assert result['msg'].startswith('%s: setting compute mode prohibited failed: ' % gpu_uuid(1))
    assert 'already changed: %s; not tried: %s' % (gpu_uuid(0), gpu_uuid(2)) in result['msg']
    # The next run finishes the job and changes only what is left.
    done = run_module(compute_mode, {'gpus': gpus, 'mode': 'prohibited'})
    assert (done['applied'], done['failed_on'], done['not_run']) == ([gpu_uuid(1), gpu_uuid(2)], [], [])


def test_check_mode_lists_the_gpus_it_would_change_as_not_run(run_module, sim_host):
    sim_host('reference-a100')
    result = run_module(compute_mode, {'gpus': [GPU0], 'mode': 'prohibited', '_ansible_check_mode': True})
    assert (result['applied'], result['failed_on'], result['not_run']) == ([], [], [GPU0])
