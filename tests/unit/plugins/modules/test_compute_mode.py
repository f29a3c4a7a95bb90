# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import absolute_import, division, print_function

import pytest

from ansible_collections.gpufleet.core.plugins.modules import compute_mode

from ...conftest import ModuleFail

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
