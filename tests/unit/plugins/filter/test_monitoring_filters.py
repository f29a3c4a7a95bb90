# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""The monitoring filters (plugins/filter/monitoring.py): they read each fleet host's variables from hostvars, only
the ones the targets are made of, and refuse arguments of the wrong shape by name. The rules themselves are
tests/unit/plugins/module_utils/test_monitoring_targets.py's."""

from __future__ import absolute_import, division, print_function

import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.gpufleet.core.plugins.filter.monitoring import FilterModule

FILTERS = FilterModule().filters()


class HostVars(dict):
    """hostvars as a filter gets it: a mapping of host to its variables, which counts the variables read."""

    read = []

    def __getitem__(self, host):
        return Variables(dict.__getitem__(self, host))


class Variables(dict):
    def __getitem__(self, name):
        HostVars.read.append(name)
        return dict.__getitem__(self, name)


HOSTVARS = HostVars({
    'g1': {'gpufleet_management_address': 'fd00::5', 'gpufleet_management_cidrs': ['fd00::/64'], 'gpufleet_dc': 'hk1',
           'gpufleet_rack': 'r07', 'gpufleet_expected_gpus': {'count': 4, 'model': 'NVIDIA A100 80GB PCIe'},
           'gpufleet_class_groups': ['a100_*'], 'ansible_facts': {'not': 'read'}, 'secret_token': 'not read'},
})
GROUPS = {'all': ['g1'], 'gpu_hosts': ['g1'], 'a100_pcie_4x': ['g1']}


def test_the_targets_read_only_the_hosts_inventory_values():
    HostVars.read[:] = []
    entries = FILTERS['monitoring_targets'](['g1', 'gpu-missing-01'], HOSTVARS, GROUPS, {})
    assert [(entry['host'], entry['known'], entry['target_address'], entry['gpu_class']) for entry in entries] == [
        ('g1', True, '[fd00::5]', 'a100_pcie_4x'), ('gpu-missing-01', False, '', 'none')]
    assert 'ansible_facts' not in HostVars.read and 'secret_token' not in HostVars.read


def test_the_problems_name_a_host_missing_from_the_inventory():
    assert FILTERS['monitoring_problems'](['g1', 'gpu-missing-01'], HOSTVARS, GROUPS, {}) == [
        'gpu-missing-01 (in monitoring_fleet_hosts) is not a host of the inventory: add it there or remove it from '
        'the list.']


@pytest.mark.parametrize('name', ['monitoring_targets', 'monitoring_problems', 'monitoring_counter_problems'])
@pytest.mark.parametrize('hosts, hostvars, groups, settings', [
    ('g1', HOSTVARS, GROUPS, {}),
    (['g1'], HOSTVARS, ['g1'], {}),
    (['g1'], HOSTVARS, GROUPS, ['monitoring_gpu_group']),
])
def test_arguments_of_the_wrong_shape_are_refused_by_name(name, hosts, hostvars, groups, settings):
    with pytest.raises(AnsibleFilterError, match='gpufleet.core.%s: give the fleet hosts' % name):
        FILTERS[name](hosts, hostvars, groups, settings)


def test_the_hardware_class_filter():
    assert FILTERS['hardware_class'](['dc_hk1', 'a100_pcie_4x'], ['a100_*'], 'NVIDIA A100') == 'a100_pcie_4x'
    assert FILTERS['hardware_class'](['dc_hk1'], ['a100_*'], 'NVIDIA A100') == 'NVIDIA A100'
    with pytest.raises(AnsibleFilterError, match='gpufleet.core.hardware_class'):
        FILTERS['hardware_class'](['dc_hk1'], 'a100_*')


def test_the_report_filter():
    found = FILTERS['monitoring_report']({'status': 200, 'json': {'data': {'activeTargets': []}}},
                                         'http://127.0.0.1:9090', '', 'fd00::41')
    assert found['line'] == 'Prometheus at http://[fd00::41]:9090/: 0 of 0 targets up ()'
