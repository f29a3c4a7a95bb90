# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""The monitoring role's model (module_utils/_monitoring_targets.py) on plain data: each fleet host's target entry,
the problems that stop the role, a host's hardware class and the report of Prometheus's targets. The role's preflight
on whole inventories is tests/unit/bad_input/test_fleet_roles_bad_input.py; the filters' reading of hostvars is
tests/unit/plugins/filter/test_monitoring_filters.py."""

from __future__ import absolute_import, division, print_function

import pytest

from ansible_collections.gpufleet.core.plugins.module_utils import _fleet_inventory as fleet
from ansible_collections.gpufleet.core.plugins.module_utils import _monitoring_targets as monitoring

GOOD = {
    'gpufleet_management_address': '10.20.0.5',
    'gpufleet_management_cidrs': ['10.20.0.0/24'],
    'gpufleet_dc': 'hk1',
    'gpufleet_rack': 'r07',
    'gpufleet_expected_gpus': {'count': 8, 'model': 'NVIDIA H100 80GB HBM3'},
    'gpu_services_services': [{'name': 'llm', 'gpus': 2}, {'name': 'imagegen', 'gpus': 1}, {'name': 'web'}],
}
GROUPS = {'all': ['g1', 'g2', 'c1'], 'gpu_hosts': ['g1', 'g2'], 'h100_sxm_8x': ['g1', 'g2'], 'cpu_only': ['c1'],
          'fleet': ['g1', 'g2', 'c1']}
KEYS = ['host', 'known', 'address', 'given_address', 'cidrs', 'inside', 'target_address', 'dc', 'rack', 'classes',
        'gpu_class', 'expected_gpus', 'gpu', 'dcgm_port', 'node_port', 'memory_budget_percent']


def one(changes=None, settings=None, host='g1', groups=None):
    """The entry and the problems of one host with GOOD's values changed."""
    values = dict(GOOD, **(changes or {}))
    values = dict((name, value) for name, value in values.items() if value is not KeyError)
    hosts = {host: values}
    entry = monitoring.targets([host], hosts, groups or GROUPS, settings or {})[0]
    return entry, monitoring.problems([host], hosts, groups or GROUPS, settings or {})


def test_an_entry_has_the_fields_the_templates_format_and_nothing_else():
    entry, problems = one()
    assert sorted(entry) == sorted(KEYS) and problems == []
    assert entry == {
        'host': 'g1', 'known': True, 'address': '10.20.0.5', 'given_address': '10.20.0.5',
        'cidrs': ['10.20.0.0/24'], 'inside': ['10.20.0.0/24'], 'target_address': '10.20.0.5', 'dc': 'hk1',
        'rack': 'r07', 'classes': [], 'gpu_class': 'NVIDIA H100 80GB HBM3', 'expected_gpus': 8, 'gpu': True,
        'dcgm_port': 9400, 'node_port': 9100, 'memory_budget_percent': 85.0}


# The address: gpufleet_management_address, else ansible_host, else the inventory name; one address alone.
@pytest.mark.parametrize('changes, settings, address, target, inside', [
    ({}, {}, '10.20.0.5', '10.20.0.5', ['10.20.0.0/24']),
    ({'gpufleet_management_address': 'fd00::5', 'gpufleet_management_cidrs': ['fd00::/64']}, {},
     'fd00::5', '[fd00::5]', ['fd00::/64']),
    ({'gpufleet_management_address': 'FD00:0::5', 'gpufleet_management_cidrs': ['FD00::/64']}, {},
     'fd00::5', '[fd00::5]', ['FD00::/64']),
    ({'gpufleet_management_address': 'fd00::5'}, {'monitoring_management_cidrs': ['FD00::/64']},
     'fd00::5', '[fd00::5]', ['FD00::/64']),
    ({'gpufleet_management_address': '', 'ansible_host': '10.20.0.9'}, {}, '10.20.0.9', '10.20.0.9', ['10.20.0.0/24']),
    ({'gpufleet_management_address': KeyError}, {}, '', '', []),
    ({'gpufleet_management_address': '[fd00::5]'}, {}, '', '', []),
    ({'gpufleet_management_address': '10.20.0.5/24'}, {}, '', '', []),
    ({'gpufleet_management_cidrs': ['10.99.0.0/16', '10.20.0.0/24']}, {}, '10.20.0.5', '10.20.0.5', ['10.20.0.0/24']),
    ({}, {'monitoring_management_cidrs': ['10.99.0.0/16']}, '10.20.0.5', '10.20.0.5', []),
])
def test_the_target_address_and_the_networks_it_is_in(changes, settings, address, target, inside):
    entry, _problems = one(changes, settings)
    assert (entry['address'], entry['target_address'], entry['inside']) == (address, target, inside)


# Each problem: what the host's values are, and the words its message must hold.
@pytest.mark.parametrize('changes, settings, words', [
    ({'gpufleet_management_address': '[fd00::5]', 'gpufleet_management_cidrs': ['fd00::/64']}, {},
     ['g1: its target address "[fd00::5]"', 'not an IP address', 'without brackets, such as fd00::5']),
    ({'gpufleet_management_address': '10.20.0.5/24'}, {},
     ['"10.20.0.5/24"', 'not an IP address', 'a network (with a prefix length)', 'such as 10.20.0.5']),
    ({'gpufleet_management_address': 'gpu-a'}, {}, ['"gpu-a"', 'not an IP address']),
    ({'gpufleet_management_address': '', 'ansible_host': 'gpu-a.example.com'}, {},
     ['ansible_host is the string "gpu-a.example.com"', 'or set gpufleet_management_address']),
    ({'gpufleet_management_address': ''}, {}, ['its target address "g1"', 'gpufleet_management_address is not set']),
    ({'gpufleet_management_cidrs': []}, {}, ['no management networks', 'set gpufleet_management_cidrs']),
    ({'gpufleet_management_cidrs': ['mgmt']}, {}, ['gpufleet_management_cidrs has "mgmt"', 'not a network']),
    ({'gpufleet_management_cidrs': ['10.20.0.5/24']}, {},
     ['gpufleet_management_cidrs has "10.20.0.5/24"', 'host bits set: the network is 10.20.0.0/24']),
    ({'gpufleet_management_cidrs': '10.20.0.0/24'}, {}, ['gpufleet_management_cidrs is the string', 'write ["10.20.0.0/24"]']),
    ({'gpufleet_management_cidrs': ['10.99.0.0/16']}, {},
     ['10.20.0.5', 'is outside', '10.99.0.0/16 (gpufleet_management_cidrs)']),
    ({}, {'monitoring_management_cidrs': ['10.99.0.0/16']},
     ['10.20.0.5', 'is outside', '10.99.0.0/16 (monitoring_management_cidrs)', 'or monitoring_management_cidrs']),
    ({'gpufleet_management_address': '10.20.0.255'}, {},
     ['10.20.0.255', 'is outside', 'network or broadcast address of 10.20.0.0/24']),
    ({'gpufleet_management_address': 'fd00::5'}, {}, ['fd00::5', 'is outside', '10.20.0.0/24']),
    ({}, {'monitoring_management_cidrs': ['mgmt']},
     ['monitoring_management_cidrs must be a list of networks', 'not a network: "mgmt"']),
    ({}, {'monitoring_management_cidrs': ['10.20.0.5/24']},
     ['monitoring_management_cidrs', 'not a network: "10.20.0.5/24"', 'host bits set']),
    ({}, {'monitoring_management_cidrs': '10.20.0.0/24'},
     ['monitoring_management_cidrs must be a list of networks', 'got "10.20.0.0/24"']),
    ({'gpufleet_rack': 'r 07'}, {}, ['g1: gpufleet_rack is the string "r 07"', 'the rack label of its targets']),
    ({'gpufleet_dc': ''}, {}, ['g1: gpufleet_dc is not set', 'data centre']),
    ({'gpufleet_dc': 7}, {}, ['gpufleet_dc is the integer 7', 'give a string']),
    ({'gpufleet_expected_gpus': {'model': 'NVIDIA H100 80GB HBM3'}}, {},
     ['g1 is in gpu_hosts but gpufleet_expected_gpus.count is not set']),
    ({'gpufleet_expected_gpus': {'count': 0}}, {}, ['gpufleet_expected_gpus.count is 0']),
    ({'dcgm_exporter_listen_port': 94000}, {}, ['dcgm_exporter_listen_port is the integer 94000', '1-65535']),
    ({'dcgm_exporter_listen_port': 'http'}, {}, ['dcgm_exporter_listen_port is the string "http"', 'not a port']),
    ({}, {'monitoring_class_groups': ['h100_*', 'all']}, ['g1 is in 2 groups of monitoring_class_groups (all, h100_sxm_8x)']),
])
def test_each_problem_names_the_host_the_value_and_the_fix(changes, settings, words):
    _entry, problems = one(changes, settings)
    assert len(problems) == 1, problems
    for word in words:
        assert word in problems[0], (word, problems[0])


def test_refused_role_networks_are_named_once_and_no_host_is_checked_against_them():
    _entry, problems = one(settings={'monitoring_management_cidrs': ['mgmt']})
    assert len(problems) == 1 and 'is outside' not in problems[0]


def test_a_host_not_in_the_inventory_is_named_and_has_an_entry():
    hosts = {'g1': GOOD}
    entries = monitoring.targets(['g1', 'gpu-missing-01'], hosts, GROUPS, {})
    assert [entry['known'] for entry in entries] == [True, False]
    assert monitoring.problems(['g1', 'gpu-missing-01'], hosts, GROUPS, {}) == [
        'gpu-missing-01 (in monitoring_fleet_hosts) is not a host of the inventory: add it there or remove it from '
        'the list.']


def test_no_host_to_scrape_names_the_group():
    assert monitoring.problems([], {}, GROUPS, {'monitoring_fleet_group': 'fleet'}) == [
        "No host to scrape: the group monitoring_fleet_group (fleet) is empty or missing; set monitoring_fleet_group "
        "to the fleet's group or list the hosts in monitoring_fleet_hosts."]


@pytest.mark.parametrize('addresses, sharing', [
    (['10.20.0.5', '10.20.0.6', '10.20.0.7'], []),
    (['10.20.0.5', '10.20.0.5', '10.20.0.7'], ['g1 and g2 have the same target address 10.20.0.5']),
    (['10.20.0.5', '10.20.0.5', '10.20.0.5'], ['c1, g1 and g2 have the same target address 10.20.0.5']),
    # IPv6 written two ways is one address.
    (['fd00::5', 'FD00:0:0::5', 'fd00::6'], ['g1 and g2 have the same target address fd00::5']),
])
def test_hosts_that_share_a_target_address_are_named_together(addresses, sharing):
    hosts = dict((host, dict(GOOD, gpufleet_management_address=ip, gpufleet_management_cidrs=['10.20.0.0/24',
                                                                                              'fd00::/64']))
                 for host, ip in zip(['g1', 'g2', 'c1'], addresses))
    hosts['c1']['gpufleet_expected_gpus'] = {'count': 0}
    found = monitoring.problems(['g1', 'g2', 'c1'], hosts, GROUPS, {})
    assert [problem.split(';')[0] for problem in found] == sharing


# The class: monitoring_class_groups, else the host's gpufleet_class_groups (names or shell patterns), else the model.
@pytest.mark.parametrize('changes, settings, classes, gpu_class', [
    ({}, {}, [], 'NVIDIA H100 80GB HBM3'),
    ({}, {'monitoring_class_groups': ['h100_sxm_8x', 'cpu_only']}, ['h100_sxm_8x'], 'h100_sxm_8x'),
    ({'gpufleet_class_groups': ['h100_*', 'cpu_only']}, {}, ['h100_sxm_8x'], 'h100_sxm_8x'),
    ({'gpufleet_class_groups': ['h100_*']}, {'monitoring_class_groups': ['cpu_only']}, [], 'NVIDIA H100 80GB HBM3'),
    ({'gpufleet_expected_gpus': {'count': 8, 'model': ''}}, {}, [], 'none'),
    ({'gpufleet_expected_gpus': {'count': 8, 'model': None}}, {}, [], 'none'),
])
def test_the_gpu_class_label(changes, settings, classes, gpu_class):
    entry, _problems = one(changes, settings)
    assert (entry['classes'], entry['gpu_class']) == (classes, gpu_class)


@pytest.mark.parametrize('groups, class_groups, model, found', [
    (['dc_hk1', 'h100_sxm_8x'], ['a100_pcie_4x', 'h100_sxm_8x'], 'NVIDIA H100', 'h100_sxm_8x'),
    (['dc_hk1', 'h100_sxm_8x'], ['h100_*'], '', 'h100_sxm_8x'),
    (['dc_hk1'], ['h100_*'], 'NVIDIA H100', 'NVIDIA H100'),
    (['dc_hk1'], [], '', ''),
    (['b_class', 'a_class'], ['*_class'], '', 'a_class'),
    (['h100_sxm_8x'], ['h100_sxm_8'], '', ''),  # a name matches the whole group name
    (['h100_sxm_8x'], ['h100_sxm_8x'], None, 'h100_sxm_8x'),
    ([], ['h100_sxm_8x'], None, ''),
])
def test_a_hosts_hardware_class(groups, class_groups, model, found):
    assert fleet.hardware_class(groups, class_groups, model) == found


@pytest.mark.parametrize('services, budgets, default, expected', [
    ([], {}, 85, 85.0),
    ([{'name': 'llm', 'gpus': 2}], {'llm': 70}, 85, 70.0),
    ([{'name': 'llm', 'gpus': 2}, {'name': 'imagegen', 'gpus': 1}], {'imagegen': 80}, 90, 80.0),
    # Services without GPUs have no GPU memory budget.
    ([{'name': 'web', 'gpus': 0}, {'name': 'cpu', 'gpus': '0'}, {'name': 'none', 'gpus': []}],
     {'web': 10, 'cpu': 10, 'none': 10}, 85, 85.0),
    # A service that leaves gpus out has one GPU (the planner's default), and so its budget.
    ([{'name': 'web', 'gpus': 0}, {'name': 'api'}], {'web': 10, 'api': 10}, 85, 10.0),
    ([{'name': 'api', 'gpus': None}], {'api': 40}, 85, 40.0),
    ([{'name': 'share', 'gpus': {'mps': {'device': 'GPU-1'}}}], {'share': 30}, 85, 30.0),
    ([{'name': 'mig', 'gpus': {'mig_profile': '1g.10gb'}}], {'mig': 60}, 85, 60.0),
    ('not a list', {}, 85, 85.0),
])
def test_the_memory_budget_is_the_strictest_of_the_services_with_gpus(services, budgets, default, expected):
    entry, _problems = one({'gpu_services_services': services},
                           {'monitoring_gpu_memory_budgets': budgets, 'monitoring_gpu_memory_budget_percent': default})
    assert entry['memory_budget_percent'] == expected


def test_ports_come_from_the_host_else_the_role():
    entry, _problems = one({'dcgm_exporter_listen_port': '9500'}, {'monitoring_node_exporter_port': 9101})
    assert (entry['dcgm_port'], entry['node_port']) == (9500, 9101)
    entry, _problems = one({}, {'monitoring_dcgm_exporter_port': 9401})
    assert entry['dcgm_port'] == 9401


@pytest.mark.parametrize('report_url, address, url', [
    ('', '10.20.3.41', 'http://10.20.3.41:9090/'),
    ('', 'fd00::41', 'http://[fd00::41]:9090/'),
    ('', 'prom.example.com', 'http://prom.example.com:9090/'),
    ('https://prometheus.hk1.example.com', '10.20.3.41', 'https://prometheus.hk1.example.com'),
])
def test_where_prometheus_is_said_to_be(report_url, address, url):
    assert monitoring.prometheus_url(report_url, address) == url


def _target(job, instance, health, error=''):
    return {'labels': {'job': job, 'instance': instance}, 'health': health, 'lastError': error}


def test_the_report_counts_targets_by_job_and_names_those_down():
    answer = {'status': 200, 'json': {'data': {'activeTargets': [
        _target('gpufleet_dcgm_exporter', '10.20.0.5:9400', 'up'),
        _target('gpufleet_dcgm_exporter', '10.20.0.6:9400', 'down', 'connection refused'),
        _target('gpufleet_node_exporter', '10.20.0.5:9100', 'up')]}}}
    found = monitoring.report(answer, 'http://10.20.3.41:9090/', 'http://127.0.0.1:9090')
    assert found == {
        'url': 'http://10.20.3.41:9090/', 'answered': True, 'targets': 3, 'up': 2,
        'down': ['gpufleet_dcgm_exporter 10.20.0.6:9400: connection refused'],
        'line': 'Prometheus at http://10.20.3.41:9090/: 2 of 3 targets up (gpufleet_dcgm_exporter 1/2, '
                'gpufleet_node_exporter 1/1); down: gpufleet_dcgm_exporter 10.20.0.6:9400: connection refused'}


@pytest.mark.parametrize('answer, reason', [
    ({'status': -1, 'msg': 'Status code was -1: connection refused'}, 'Status code was -1: connection refused'),
    ({'skipped': True}, 'not asked'),
    (None, 'not asked'),
])
def test_the_report_of_a_prometheus_that_does_not_answer(answer, reason):
    found = monitoring.report(answer, 'http://10.20.3.41:9090/', 'http://127.0.0.1:9090')
    assert (found['answered'], found['targets'], found['up'], found['down']) == (False, 0, 0, [])
    assert found['line'] == 'Prometheus at http://10.20.3.41:9090/: its API (http://127.0.0.1:9090) does not answer: %s' \
        % reason
