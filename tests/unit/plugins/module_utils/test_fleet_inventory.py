# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""The fleet model (module_utils/_fleet_inventory.py) on plain data: the run's settings, a host's values, the fleet's
rules, the rollout's batches and the watchdog's fleet cap; and what each host's failure says (_fleet_messages.py).
The validate stage on whole inventories is tests/unit/playbooks/test_validate_inventory.py."""

from __future__ import absolute_import, division, print_function

import pytest

from ansible_collections.gpufleet.core.plugins.module_utils import _fleet_inventory as fleet
from ansible_collections.gpufleet.core.plugins.module_utils import _fleet_messages as messages
from ansible_collections.gpufleet.core.plugins.module_utils import _fleet_rollout as rollout
from ansible_collections.gpufleet.core.plugins.module_utils._values import Unrendered

GROUPS = {'all': ['g1', 'g2', 'g3', 'g4', 'c1', 'c2'], 'gpu_hosts': ['g1', 'g2', 'g3', 'g4'],
          'a100': ['g1', 'g2', 'g3', 'g4'], 'cpu_only': ['c1', 'c2'], 'monitoring': ['c1'], 'monitoring6': ['c2'],
          'dc_hk1': ['g1', 'g2'], 'dc_hk2': ['g3', 'g4', 'c1', 'c2'], 'hk1_rack_a': ['g1', 'g2'],
          'hk2_rack_b': ['g3', 'g4', 'c1', 'c2']}
DEFAULTS = {
    'gpufleet_gpu_group': 'gpu_hosts', 'gpufleet_required_groups': ['gpu_hosts'], 'gpufleet_serial': '20%',
    'gpufleet_batch_by': '', 'gpufleet_max_fail_percentage': 0, 'gpufleet_preflight_policy': 'all_or_nothing',
    'gpufleet_drivers_roles': ['nvidia_driver', 'container_toolkit', 'cuda'],
    'gpufleet_watchdog_max_quarantined': '10%', 'gpufleet_watchdog_prometheus_url': '',
    'gpufleet_monitoring_group': 'monitoring', 'gpufleet_class_groups': [], 'gpufleet_dc_groups': [],
    'gpufleet_rack_groups': [], 'gpufleet_verify_max_remote_fraction': 0.02, 'gpufleet_gpu_memory_budget_percent': 85,
    'gpufleet_gpu_memory_budgets': {}, 'gpufleet_canary': 1, 'gpufleet_health_gate_soak': 60,
    'gpufleet_health_gate_required': False,
}
DEFAULTS.update(dict((name, True) for name in fleet.STAGE_SWITCHES), gpufleet_full_run=False)


def settings(**changes):
    values = dict(DEFAULTS, **changes)
    found, problems = fleet.check_settings(values, GROUPS)
    assert problems == [], problems
    return found


# The watchdog's cap: a count, or a share of the 4 GPU hosts rounded up; the Prometheus: the setting, else the
# monitoring host's address on port 9090 (IPv6 in brackets), else none.
@pytest.mark.parametrize('cap, hosts', [('10%', 1), ('50%', 2), ('100%', 4), (3, 3), ('0%', 0), (0, 0), ('3', 3)])
def test_the_watchdog_cap_is_a_count_or_a_share_of_the_gpu_hosts_rounded_up(cap, hosts):
    assert rollout.watchdog_cap(settings(gpufleet_watchdog_max_quarantined=cap), 4) == hosts


@pytest.mark.parametrize('url, host, address, expected', [
    ('', 'c1', '10.30.3.41', 'http://10.30.3.41:9090'),
    ('', 'c2', 'fd00:30::41', 'http://[fd00:30::41]:9090'),
    ('https://prom.hk1:9443', 'c1', '10.30.3.41', 'https://prom.hk1:9443'),
    ('', '', '', ''),
    ('', 'c1', 'prom.hk1.example.net', 'http://prom.hk1.example.net:9090'),
])
def test_the_watchdog_prometheus_is_the_setting_else_the_monitoring_hosts(url, host, address, expected):
    assert rollout.watchdog_prometheus_url(settings(gpufleet_watchdog_prometheus_url=url), host, address) == expected


def test_a_preflight_failure_is_the_recorded_reason_or_that_the_host_went_away():
    assert rollout.preflight_failures(['a', 'b', 'c', 'd'], ['a', 'b', 'd'], ['', 'no GPU', '', None]) == {
        'b': 'no GPU', 'c': 'unreachable, or failed before preflight could record why'}


def test_batches_by_failure_domain_are_the_domains_in_name_order():
    plan = rollout.rollout_plan(['g3', 'g1', 'c1', 'g2', 'g4'], {'g4': 'lost'},
                                {'g1': 'hk1-a', 'g2': 'hk1-a', 'g3': 'hk2-b', 'c1': 'hk2-b', 'g4': 'hk2-b'},
                                settings(gpufleet_batch_by='gpufleet_rack', gpufleet_canary=0))
    assert plan == {'hosts': ['g1', 'g2', 'g3', 'c1'], 'serial': [2, 2], 'batch_by': 'gpufleet_rack', 'canary': [],
                    'max_fail_percentage': 0}


def test_batches_by_serial_keep_the_run_order_and_the_normalised_serial():
    plan = rollout.rollout_plan(['g1', 'g2'], {}, {}, settings(gpufleet_serial=[1, '50%'], gpufleet_max_fail_percentage='25',
                                                               gpufleet_canary='0'))
    assert plan == {'hosts': ['g1', 'g2'], 'serial': [1, '50%'], 'batch_by': '', 'canary': [], 'max_fail_percentage': 25}


@pytest.mark.parametrize('changes, serial, canary', [
    ({}, [1, '20%'], ['g1']),
    ({'gpufleet_canary': 2, 'gpufleet_serial': [1, '50%']}, [2, 1, '50%'], ['g1', 'g2']),
    ({'gpufleet_canary': 9, 'gpufleet_serial': 2}, [4, 2], ['g1', 'g2', 'g3', 'g4']),
])
def test_the_canary_is_a_batch_of_its_own_before_the_serial_batches(changes, serial, canary):
    plan = rollout.rollout_plan(['g1', 'g2', 'g3', 'g4'], {}, {}, settings(**changes))
    assert (plan['hosts'], plan['serial'], plan['canary']) == (['g1', 'g2', 'g3', 'g4'], serial, canary)


def test_the_canary_is_the_first_gpu_hosts_of_the_order_others_only_when_there_are_too_few():
    plan = rollout.rollout_plan(['c1', 'g1', 'c2', 'g2'], {}, {}, settings(gpufleet_serial=2), gpu_hosts=['g1', 'g2'])
    assert (plan['hosts'], plan['serial'], plan['canary']) == (['g1', 'c1', 'c2', 'g2'], [1, 2], ['g1'])
    plan = rollout.rollout_plan(['c1', 'g1', 'c2'], {}, {}, settings(gpufleet_canary=2), gpu_hosts=['g1'])
    assert (plan['hosts'], plan['canary']) == (['g1', 'c1', 'c2'], ['g1', 'c1'])


def test_the_canary_comes_from_the_first_failure_domain_and_leaves_its_batch_smaller():
    plan = rollout.rollout_plan(['g3', 'g1', 'c1', 'g2'], {}, {'g1': 'hk1-a', 'g2': 'hk1-a', 'g3': 'hk2-b', 'c1': 'hk2-b'},
                                settings(gpufleet_batch_by='gpufleet_rack'))
    assert (plan['hosts'], plan['serial'], plan['canary']) == (['g1', 'g2', 'g3', 'c1'], [1, 1, 2], ['g1'])
    # A domain the canary took whole is no batch of its own.
    plan = rollout.rollout_plan(['g3', 'g1', 'c1', 'g2'], {}, {'g1': 'hk1-a', 'g2': 'hk1-a', 'g3': 'hk2-b', 'c1': 'hk2-b'},
                                settings(gpufleet_batch_by='gpufleet_rack', gpufleet_canary=2))
    assert (plan['serial'], plan['canary']) == ([2, 2], ['g1', 'g2'])


@pytest.mark.parametrize('name, value, words', [
    ('gpufleet_serial', 'one rack', 'the string "one rack"'),
    ('gpufleet_serial', '0%', '"0%"'),
    ('gpufleet_serial', 0, 'the integer 0'),
    ('gpufleet_max_fail_percentage', 120, 'the integer 120'),
    ('gpufleet_canary', -1, 'the integer -1'),
    ('gpufleet_canary', 'one', '"one"'),
    ('gpufleet_health_gate_soak', '5m', '"5m"'),
    ('gpufleet_health_gate_soak', 86401, 'the integer 86401'),
    ('gpufleet_health_gate_required', 'maybe', '"maybe"'),
    ('gpufleet_preflight_policy', 'skip-failed', '"skip-failed"'),
    ('gpufleet_watchdog_max_quarantined', '101%', '"101%"'),
    ('gpufleet_drivers_enabled', 'maybe', 'the string "maybe"'),
    ('gpufleet_rack_groups', ['rack_*'], 'rack_*'),
])
def test_a_wrong_setting_is_named_with_its_value(name, value, words):
    _found, problems = fleet.check_settings(dict(DEFAULTS, **{name: value}), GROUPS)
    assert len(problems) == 1 and name in problems[0] and words in problems[0], problems


# A switch is read by the playbook as validate normalised it (playbooks/fleet/rollout.yml, the gpufleet role's
# preflight): the words -e and INI inventories give switch as YAML's booleans do, anything else is refused.
@pytest.mark.parametrize('value, normalised', [(True, True), (False, False), ('no', False), ('false', False),
                                               ('False', False), ('off', False), ('0', False), ('yes', True),
                                               ('true', True), ('on', True), ('1', True)])
@pytest.mark.parametrize('name', fleet.SWITCHES)
def test_a_switch_is_normalised_to_a_boolean(name, value, normalised):
    assert settings(**{name: value})[name] is normalised


@pytest.mark.parametrize('value, words', [('sometimes', 'the string "sometimes"'), (2, 'the integer 2'),
                                          ('', 'the string ""'), (None, 'empty (null)'), (['no'], 'the list ["no"]'),
                                          ('n', 'the string "n"')])
@pytest.mark.parametrize('name', fleet.SWITCHES)
def test_a_switch_that_is_no_boolean_is_refused_with_its_value_and_the_fix(name, value, words):
    _found, problems = fleet.check_settings(dict(DEFAULTS, **{name: value}), GROUPS)
    assert problems == ['%s is %s; give true or false' % (name, words)]


def test_the_full_run_switch_is_a_setting_of_the_whole_run():
    assert 'gpufleet_full_run' in fleet.FLEET_SETTINGS
    differ = fleet.settings_that_differ({'g1': {'gpufleet_full_run': True}, 'g2': {'gpufleet_full_run': False}})
    assert differ == {'gpufleet_full_run': {'true': ['g1'], 'false': ['g2']}}


def test_a_setting_that_differs_between_hosts_is_named_with_every_host():
    differ = fleet.settings_that_differ({'g1': {'gpufleet_serial': 1}, 'g2': {'gpufleet_serial': '20%'},
                                         'g3': {'gpufleet_serial': 1}})
    assert differ == {'gpufleet_serial': {'1': ['g1', 'g3'], '"20%"': ['g2']}}


def _host(name='g1', **changes):
    values = {'gpufleet_management_address': '10.20.1.11', 'gpufleet_management_cidrs': ['10.20.0.0/16'],
              'gpufleet_dc': 'hk1', 'gpufleet_rack': 'hk1-a', 'gpufleet_expected_gpus': {'count': 4, 'model': 'A100'}}
    values.update(changes)
    groups_of = [group for group, hosts in GROUPS.items() if name in hosts]
    return fleet.check_host(name, values, groups_of, settings(gpufleet_dc_groups=['dc_*'],
                                                              gpufleet_rack_groups=['*_rack_*'],
                                                              gpufleet_class_groups=['a100', 'cpu_only']))


def test_a_good_host_has_its_model_and_no_problem():
    model, problems = _host()
    assert problems == []
    assert model['address'] == '10.20.1.11' and model['rack_group'] == 'hk1_rack_a' and model['dc_group'] == 'dc_hk1'
    assert model['hardware_class'] == 'a100' and model['gpu'] and model['expected_gpus'] == {'count': 4, 'model': 'A100'}


def test_an_ipv6_address_is_one_address_however_written():
    assert fleet.shared_addresses({'g1': 'fd00::5', 'g2': 'fd00:0:0::5', 'g3': 'fd00::6'}) == {'fd00::5': ['g1', 'g2']}


@pytest.mark.parametrize('changes, words', [
    ({'gpufleet_rack': 7}, 'gpufleet_rack is the integer 7'),
    ({'gpufleet_management_cidrs': '10.20.0.0/16'}, 'write ["10.20.0.0/16"]'),
    ({'gpufleet_management_address': '10.21.0.1'}, 'not inside gpufleet_management_cidrs'),
    ({'gpufleet_expected_gpus': {'count': 0}}, 'gpufleet_expected_gpus.count is 0'),
])
def test_a_wrong_host_value_is_named_with_the_host_and_the_value(changes, words):
    _model, problems = _host(**changes)
    assert len(problems) == 1 and problems[0].startswith('g1: ') and words in problems[0], problems


# A host listed without its ansible_host, under the example's gpufleet_management_address: "{{ ansible_host }}".
NO_ANSIBLE_HOST = Unrendered('{{ ansible_host }}', ['ansible_host'], "'ansible_host' is undefined")


def test_a_host_without_its_address_is_named_once_with_both_variables():
    model, problems = _host(gpufleet_management_address=NO_ANSIBLE_HOST)
    assert problems == [
        'g1: gpufleet_management_address is the template "{{ ansible_host }}", which needs ansible_host, not set for '
        'this host: set ansible_host for the host in the inventory, or gpufleet_management_address in its host_vars, '
        "to the host's management IP address, such as 10.20.1.11"]
    assert model['address'] == '' and model['given_address'] == '"{{ ansible_host }}"'


def test_a_value_the_host_cannot_render_is_named_unless_the_missing_address_names_it_already():
    values = {'dcgm_exporter_listen_address': Unrendered('{{ gpufleet_management_address }}', ['ansible_host']),
              'nvidia_driver_repo_url': Unrendered('{{ hk_mirorr }}/cuda', ['hk_mirorr']),
              'nvidia_driver_version': '570.133.20'}
    rendered, problems = fleet.renderable(values, NO_ANSIBLE_HOST)
    assert rendered == {'nvidia_driver_version': '570.133.20'}
    assert problems == ['nvidia_driver_repo_url is the template "{{ hk_mirorr }}/cuda", which needs hk_mirorr, not '
                        'set for this host; set hk_mirorr for the host, or give nvidia_driver_repo_url without it']
    # With an address, the listen address is named too.
    _rendered, problems = fleet.renderable(values, '10.20.1.11')
    assert len(problems) == 2 and problems[0].startswith(
        'dcgm_exporter_listen_address is the template "{{ gpufleet_management_address }}", which needs ansible_host')


def test_a_value_that_fails_to_render_for_another_reason_gives_the_engines_words():
    unrendered = Unrendered('{{ x | nosuchfilter }}', (), "no filter named 'nosuchfilter'")
    _rendered, problems = fleet.renderable({'cuda_toolkits': unrendered}, '10.20.1.11')
    assert problems == ['cuda_toolkits is the template "{{ x | nosuchfilter }}", which cannot be rendered (no filter '
                        "named 'nosuchfilter'); fix the template"]


def test_a_setting_the_host_cannot_render_is_named_with_what_it_needs():
    canary = Unrendered('{{ hk_canary }}', ['hk_canary'])
    _found, problems = fleet.check_settings(dict(DEFAULTS, gpufleet_canary=canary), GROUPS)
    assert len(problems) == 1 and problems[0].startswith(
        'gpufleet_canary is the template "{{ hk_canary }}", which needs hk_canary, not set for this host; give ')


def test_a_host_of_a_misspelt_class_group_outside_the_run_is_named():
    found = fleet.stranded_hosts({'g9': ['all', 'a10O', 'hk1_rack_a', 'dc_hk1'], 'g1': ['a100', 'hk1_rack_a']},
                                 set(['g1']), settings(gpufleet_dc_groups=['dc_*'], gpufleet_rack_groups=['*_rack_*'],
                                                       gpufleet_class_groups=['a100', 'cpu_only']))
    assert len(found) == 1 and found[0].startswith('g9 is in dc_hk1, hk1_rack_a but in no hardware-class group') \
        and 'a10O' in found[0]


def test_the_handed_down_values_are_the_normalised_knobs_a_whole_number_as_an_int():
    values = fleet.handed_down(settings(gpufleet_gpu_memory_budget_percent=85.0, gpufleet_verify_max_remote_fraction=0.02,
                                        gpufleet_gpu_memory_budgets={'imagegen': 80}))
    assert set(values) == set(fleet.HANDED_DOWN)
    assert values['gpu_watchdog_memory_budget_percent'] == 85 and isinstance(values['gpu_watchdog_memory_budget_percent'], int)
    assert values['monitoring_binding_max_remote_fraction'] == 0.02
    assert values['monitoring_gpu_memory_budgets'] == {'imagegen': 80}


# -- what each host's failure says: a problem several hosts share is named once -----------------------------------

MIRROR = ['gpufleet.core.nvidia_driver: nvidia_driver_repo_url is the string "mirror.hk/cuda", which has no scheme',
          'gpufleet.core.cuda: cuda_repo_url is the string "mirror.hk/cuda", which has no scheme']
SEVEN = ['h%d' % number for number in range(1, 8)]


def test_a_problem_many_hosts_share_is_named_once_with_every_host_and_its_role():
    found = messages.host_messages(dict((host, ['%s: %s' % (host, problem) for problem in MIRROR]) for host in SEVEN))
    assert found['h1'] == ('7 hosts (h1, h2, h3, h4, h5, h6 and h7) have the same 2 problems, named here once: '
                           + '; '.join(MIRROR))
    assert all(found[host] == "%s: the same 2 problems as 6 other hosts, named in full in h1's message" % host
               for host in SEVEN[1:])
    told = ' '.join(found.values())
    assert all(told.count(problem) == 1 for problem in MIRROR) and told.count('h7') == 2


def test_a_hosts_own_problems_are_named_with_it_beside_those_it_shares():
    problems = {'h1': ['h1: gpufleet_rack is the integer 2', 'h1: mps_daemons[0].device is the integer 0'],
                'h2': ['h2: gpufleet_rack is the integer 2'],
                'h3': ['h3: cuda_toolkits is the string "12.8"']}
    found = messages.host_messages(problems)
    assert found == {
        'h1': '2 hosts (h1 and h2) have the same problem, named here once: gpufleet_rack is the integer 2; '
              'h1: mps_daemons[0].device is the integer 0',
        'h2': "h2: the same problem as h1, named in full in h1's message",
        'h3': 'h3: cuda_toolkits is the string "12.8"'}


def test_problems_shared_by_different_hosts_are_named_once_per_set_of_hosts():
    problems = {'h1': ['h1: a', 'h1: b'], 'h2': ['h2: a', 'h2: b'], 'h3': ['h3: b']}
    found = messages.host_messages(problems)
    assert found['h1'] == ('2 hosts (h1 and h2) have the same problem, named here once: a; '
                           '3 hosts (h1, h2 and h3) have the same problem, named here once: b')
    assert found['h2'] == ("h2: the same problem as h1, named in full in h1's message; "
                           "h2: the same problem as 2 other hosts, named in full in h1's message")
    assert found['h3'] == "h3: the same problem as 2 other hosts, named in full in h1's message"


def test_a_shared_address_is_named_on_each_of_its_hosts_and_a_host_without_problems_has_no_message():
    clash = 'h1 and h2 have the same gpufleet_management_address 10.20.1.11; give each host its own address'
    found = messages.host_messages({'h1': [], 'h2': [], 'h3': []}, {'h1': ['h1: ' + clash], 'h2': ['h2: ' + clash]})
    assert found == {'h1': 'h1: ' + clash, 'h2': 'h2: ' + clash}


def test_a_shared_problem_names_its_first_hosts_and_counts_the_others():
    assert messages.hosts_named(['h%03d' % number for number in range(1, 41)]) == (
        '40 hosts (h001, h002, h003, h004, h005, h006, h007, h008, h009, h010 and 30 more)')
    assert messages.hosts_named(['a', 'b']) == '2 hosts (a and b)'
