# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""gpufleet.core.mig with mig-parted's format, with mig-parted's meaning (docs/dev/mig_parted_semantics.md, section
numbers below), against the NVML simulator."""

from __future__ import absolute_import, division, print_function

import re

import pytest

import simctl
from ansible_collections.gpufleet.core.plugins.modules import mig

from ...support.sim import gpu_uuid, load_host, make_gpus
from .test_mig import apply, layout_of, refuse


@pytest.fixture
def host(sim_hosts):
    """A host of `count` GPUs of one model on a base host's CPUs, as test_mig's; returns host_file and state_file."""
    def make(model='A100-80GB-PCIe', count=1, mig_mode=0, base='reference-a100', **gpu_extra):
        return sim_hosts.with_gpus(model, count, base=base, mig_mode=mig_mode, **gpu_extra)
    return make


def parted(*entries):
    return {'mig_parted_config': {'version': 'v1', 'mig-configs': {'chosen': list(entries)}},
            'mig_parted_name': 'chosen'}


def test_mig_parted_enabled_with_empty_mig_devices_means_mig_on_and_no_instances(run_module, host):
    """§3: `mig-enabled: true` with `mig-devices: {}` is valid (mig-parted's all-enabled example): MIG on, no
    GPU or compute instances; the module destroys the idle ones there are and keeps the mode."""
    host(mig_mode=0)
    apply(run_module, {'layouts': [{'gpus': 0, 'layout': ['3g.40gb']}]})
    result = apply(run_module, parted({'devices': 'all', 'mig-enabled': True, 'mig-devices': {}}))
    assert result['gpus'][0]['mig_mode'] == 'enabled' and layout_of(result) == []
    assert apply(run_module, parted({'devices': 'all', 'mig-enabled': True, 'mig-devices': {}}))['changed'] is False


def test_mig_parted_disabled_with_empty_or_null_mig_devices_is_accepted(run_module, host):
    """§2: mig-parted refuses mig-devices with `mig-enabled: false` only when the map is non-empty."""
    host(mig_mode=1)
    for empty in ({}, None):
        result = apply(run_module, parted({'devices': [0], 'mig-enabled': False, 'mig-devices': empty}))
        assert layout_of(result) == 'disabled'


def test_mig_parted_devices_all_skips_gpus_that_cannot_do_mig(run_module, sim_hosts):
    """§4: ApplyMigMode/ApplyMigConfig skip a non-MIG-capable GPU when the entry says `devices: all`; an explicit
    index of such a GPU with mig-enabled true is an error ("cannot set MIG mode/config on non MIG-capable GPU")."""
    gpus = make_gpus('A100-80GB-PCIe') + [dict(make_gpus('L40S', first_uuid=1)[0], pci_bus_id='00000000:18:00.0')]
    paths = sim_hosts.described(dict(load_host('reference-a100'), gpus=gpus))
    result = apply(run_module, parted({'devices': 'all', 'mig-enabled': True, 'mig-devices': {'3g.40gb': 2}}))
    assert [gpu['index'] for gpu in result['gpus']] == [0]
    assert layout_of(result) == ['3g.40gb@0', '3g.40gb@4']
    mutations = simctl.mutations(paths['state_file'])
    msg = refuse(run_module, parted({'devices': [1], 'mig-enabled': True, 'mig-devices': {'1g.10gb': 1}}))
    assert 'GPU 1 (%s, NVIDIA L40S): NVIDIA L40S does not support MIG' % gpu_uuid(1) in msg
    assert simctl.mutations(paths['state_file']) == mutations


def test_mig_parted_indices_the_host_lacks_select_nothing(run_module, host):
    """§4: only existing indices are tested (spec test "valid-format-non-existent-devices"), so `devices: [0, 7]`
    on a two-GPU host configures GPU 0 and leaves GPU 1 alone, and `devices: []` matches nothing."""
    host(count=2, mig_mode=1)
    result = apply(run_module, parted({'devices': [0, 7, -1], 'mig-enabled': True, 'mig-devices': {'7g.80gb': 1}}))
    assert [gpu['index'] for gpu in result['gpus']] == [0] and layout_of(result) == ['7g.80gb@0']
    assert apply(run_module, parted({'devices': [], 'mig-enabled': False}))['gpus'] == []


@pytest.mark.parametrize('mig_devices, layout', [
    # §6: 2c then 1c of one GPU-instance profile share the GPU instance made last.
    ({'2c.3g.40gb': 1, '1c.3g.40gb': 1}, ['3g.40gb [2c+1c]']),
    # §6: a whole-GI compute instance cannot share, so 3g.40gb: 2 is two GPU instances.
    ({'3g.40gb': 2}, ['3g.40gb', '3g.40gb']),
    # §6: compute instances pack into one GPU instance while it has room.
    ({'1c.3g.40gb': 3}, ['3g.40gb [1c+1c+1c]']),
    # §6: sorted by compute slices descending: the 3c GI first, then the 1c's share a second one.
    ({'1c.3g.40gb': 3, '3g.40gb': 1}, ['3g.40gb', '3g.40gb [1c+1c+1c]']),
    # §6: key order in the file does not matter (a Go map): 1c before 2c in YAML still groups 2c+1c.
    ({'1c.4g.40gb': 2, '2c.4g.40gb': 1}, ['4g.40gb [2c+1c+1c]']),
])
def test_mig_parted_compute_instances_group_as_mig_parted_groups_them(run_module, host, mig_devices, layout):
    """§6: MigConfig.Flatten sorts (G desc, C desc, attributes desc); SetMigConfig puts a CI into the last GI when
    the GI profile is the same and it fits, else makes a new GI."""
    host(mig_mode=1)
    result = apply(run_module, parted({'devices': 'all', 'mig-enabled': True, 'mig-devices': mig_devices}))
    # Where each GPU instance sits is the module's placement; which compute instances share one is mig-parted's.
    assert sorted(re.sub(r'@\d+', '', entry) for entry in layout_of(result)) == layout


def test_mig_parted_zero_counts_create_nothing_and_converge(run_module, host):
    """§7: a count of 0 is valid next to a positive one and Flatten creates nothing for it. mig-parted then never
    sees the GPU as equal (len(current) != len(desired)) and rebuilds it every run; the module deliberately
    converges instead (docs/mig.md)."""
    paths = host(mig_mode=1)
    args = parted({'devices': 'all', 'mig-enabled': True, 'mig-devices': {'1g.10gb': 0, '7g.80gb': 1}})
    assert layout_of(apply(run_module, args)) == ['7g.80gb@0']
    mutations = simctl.mutations(paths['state_file'])
    assert apply(run_module, args)['changed'] is False
    assert simctl.mutations(paths['state_file']) == mutations


def test_mig_parted_device_filter_with_a_subsystem_id(run_module, host, tmp_path):
    """§8: since v0.15.0 a filter may add `:0x<subdevice><subvendor>`; then all four ids must match, read from the
    GPU's PCI config in sysfs. Without the suffix, device and vendor decide."""
    host(count=2, mig_mode=1)
    for index, subsystem in ((0, ('0x1533', '0x10de')), (1, ('0x1463', '0x10de'))):
        device = tmp_path / 'sys' / 'bus' / 'pci' / 'devices' / ('0000:%02x:00.0' % (0x17 + index))
        device.mkdir(parents=True)
        (device / 'subsystem_device').write_text(subsystem[0] + '\n')
        (device / 'subsystem_vendor').write_text(subsystem[1] + '\n')
    args = parted({'devices': 'all', 'device-filter': ['0x20B510DE:0x146310DE'], 'mig-enabled': True,
                   'mig-devices': {'7g.80gb': 1}})
    result = run_module(mig, dict(args, sysfs_root=str(tmp_path / 'sys'), procfs_root='/proc'))
    assert [gpu['index'] for gpu in result['gpus']] == [1]
    args = parted({'devices': 'all', 'device-filter': '0x20b510de', 'mig-enabled': False})
    result = run_module(mig, dict(args, sysfs_root=str(tmp_path / 'sys'), procfs_root='/proc'))
    assert [gpu['index'] for gpu in result['gpus']] == [0, 1]


def test_mig_parted_yaml_booleans_are_yaml_1_1(run_module, host, tmp_path):
    """§1: mig-parted decodes YAML 1.1, so bare `on`/`yes` are true (as PyYAML reads them); a quoted "true" is
    a string and refused."""
    host(mig_mode=1)
    config = tmp_path / 'config.yaml'
    config.write_text('version: v1\nmig-configs:\n  c:\n    - devices: all\n      mig-enabled: on\n'
                      '      mig-devices: {"7g.80gb": 1}\n')
    result = apply(run_module, {'mig_parted_file': str(config), 'mig_parted_name': 'c'})
    assert layout_of(result) == ['7g.80gb@0']
