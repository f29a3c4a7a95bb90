# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.core contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import pytest

from ansible_collections.gpufleet.core.plugins.module_utils._values import is_device_uuid


@pytest.mark.parametrize('name', [
    'GPU-5c6f7a2e-1b3d-4e8f-9a0b-1c2d3e4f5a60',  # as NVML reports a GPU
    'MIG-0c8d7b3e-7f1a-5a2b-9c4d-3e2f1a0b9c8d',  # and a MIG device, since R470
    'GPU-lost', 'MIG-5-1',  # the simulator's short names
])
def test_a_device_uuid(name):
    assert is_device_uuid(name)


@pytest.mark.parametrize('name', [
    0, '0', None, ['GPU-1'], '', 'GPU-', 'MIG-', 'gpu-1', 'GPU_1', 'GPU--1', 'NVIDIA A100-SXM4-80GB',
    'GPU-1\n', 'GPU-1 ', ' GPU-1', 'GPU-1/0', 'MIG-GPU-5c6f7a2e-1b3d-4e8f-9a0b-1c2d3e4f5a60/1/0', '/dev/nvidia0',
])
def test_not_a_device_uuid(name):
    assert not is_device_uuid(name)


def test_addresses_in_keeps_the_usable_addresses_inside_the_networks_once_in_order():
    from ansible_collections.gpufleet.core.plugins.module_utils._values import addresses_in
    assert addresses_in(['fd00:20::11', '10.20.1.11', '10.20.255.255', 'FD00:20:0::11', '172.17.0.1', 'bogus', 11],
                        ['10.20.0.0/16', 'fd00:20::/64', '10.30.0.5/16', 'word']) == ['fd00:20::11', '10.20.1.11']
    assert addresses_in(['10.20.1.11'], []) == []
