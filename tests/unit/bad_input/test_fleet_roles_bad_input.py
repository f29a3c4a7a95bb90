# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""Bad input for the fleet-wide roles' preflights: monitoring and gpu_watchdog.

One table per role, a list of plain tuples (id, the case's variables, names the message must hold); every case of a
role runs in ONE check-mode ansible-playbook run (roles.run_role_cases), and each is asserted with
support.bad_input.assert_refused. Each role also has a short table of inputs that must be accepted (the common
variables alone, an IPv6 address written without brackets...), so that a refusal is the case's and not the
table's. To add a case, add a row.

monitoring: every case host scrapes itself (monitoring_fleet_hosts is the case's own inventory name), so its
inventory variables (address, networks, dc, rack, GPU count, services) are the case's. gpu_watchdog: the plan is a
file the fixture writes.
"""

from __future__ import absolute_import, division, print_function

import json
import os
import sys

import pytest
import yaml

from ..support.bad_input import assert_refused, snapshot
from .roles import REPO, run_role_cases

# What the roles would change first on this machine: units, Prometheus's files, the watchdog's configuration and
# state, the helper bundle.
WATCHED = ('/etc/systemd/system', '/etc/prometheus', '/etc/gpufleet', '/var/lib/gpufleet-watchdog',
           '/var/lib/prometheus/node-exporter', '/usr/local/lib/gpufleet')

with open(os.path.join(REPO, 'roles', 'dcgm_exporter', 'defaults', 'main.yml')) as _handle:
    DCGM_COUNTERS = yaml.safe_load(_handle)['dcgm_exporter_counters']
# The dcgm_exporter role's counters without the enforced power limit, which GpuPowerOverLimit reads.
NO_POWER_LIMIT = [counter for counter in DCGM_COUNTERS if counter['field'] != 'DCGM_FI_DEV_ENFORCED_POWER_LIMIT']
# What the alert pack reads from dcgm-exporter (module_utils/_alert_pack.py), and what dcgm-exporter 4.1.3 serves
# without a counters CSV of its own (it lacks the Xid count, double-bit ECC and the enforced power limit).
PACK_FIELDS = ['DCGM_EXP_XID_ERRORS_COUNT', 'DCGM_FI_DEV_ECC_DBE_VOL_TOTAL', 'DCGM_FI_DEV_ROW_REMAP_FAILURE',
               'DCGM_FI_DEV_FB_USED', 'DCGM_FI_DEV_FB_FREE', 'DCGM_FI_DEV_GPU_TEMP', 'DCGM_FI_DEV_POWER_USAGE',
               'DCGM_FI_DEV_ENFORCED_POWER_LIMIT']
UPSTREAM_FIELDS = ['DCGM_FI_DEV_SM_CLOCK', 'DCGM_FI_DEV_GPU_TEMP', 'DCGM_FI_DEV_POWER_USAGE', 'DCGM_FI_DEV_FB_FREE',
                   'DCGM_FI_DEV_FB_USED', 'DCGM_FI_DEV_XID_ERRORS', 'DCGM_FI_DEV_ROW_REMAP_FAILURE']

MONITORING_COMMON = {
    'monitoring_fleet_hosts': ['{{ inventory_hostname }}'],
    'monitoring_gpu_group': 'all',
    'gpufleet_management_address': '10.20.0.5',
    'gpufleet_management_cidrs': ['10.20.0.0/24'],
    'gpufleet_dc': 'hk1',
    'gpufleet_rack': 'r07',
    'gpufleet_expected_gpus': {'count': 8, 'model': 'NVIDIA H100 80GB HBM3'},
    'gpu_services_services': [{'name': 'llm', 'gpus': 2}, {'name': 'imagegen', 'gpus': 1}],
}

MONITORING_ACCEPTED = [
    ('the common variables', {}),
    ('an IPv6 target written without brackets', {'gpufleet_management_address': 'fd00::5',
                                                 'gpufleet_management_cidrs': ['fd00::/64']}),
    ('a budget for a service the inventory places', {'monitoring_gpu_memory_budgets': {'imagegen': 80}}),
    ('an Alertmanager by IPv6 address and port', {'monitoring_alertmanagers': ['[fd00::9]:9093']}),
    ('an IPv6 management network in upper case', {'gpufleet_management_address': 'fd00::5',
                                                  'monitoring_management_cidrs': ['FD00::/64']}),
    ("a site's own Prometheus with a snippet", {'monitoring_install_prometheus': False,
                                                'monitoring_promtool': sys.executable}),
    ('no report, and a reported address of its own', {'monitoring_api_url': '',
                                                      'monitoring_report_url': 'https://prometheus.hk1.example.com'}),
    ('a GPU host whose counters lack a field, with monitoring_missing_counters warn',
     {'dcgm_exporter_counters': NO_POWER_LIMIT, 'monitoring_missing_counters': 'warn'}),
    ("a site's own exporter that serves every field the pack reads", {'monitoring_exporter_counters': PACK_FIELDS}),
]

MONITORING_CASES = [
    ('memory budget 0', {'monitoring_gpu_memory_budget_percent': 0},
     ['monitoring_gpu_memory_budget_percent is 0', 'from 1 to 100']),
    ('memory budget 101', {'monitoring_gpu_memory_budget_percent': 101},
     ['monitoring_gpu_memory_budget_percent is 101', 'from 1 to 100']),
    ('memory budget with a percent sign', {'monitoring_gpu_memory_budget_percent': '85%'},
     ['monitoring_gpu_memory_budget_percent is 85%', 'such as 85']),
    ('per-service budget -1', {'monitoring_gpu_memory_budgets': {'imagegen': -1}},
     ['monitoring_gpu_memory_budgets', 'imagegen', 'from 1 to 100']),
    ('per-service budget with a percent sign', {'monitoring_gpu_memory_budgets': {'imagegen': '80%'}},
     ['monitoring_gpu_memory_budgets', 'imagegen']),
    ('per-service budgets as a list', {'monitoring_gpu_memory_budgets': [{'imagegen': 80}]},
     ['monitoring_gpu_memory_budgets is [{"imagegen": 80}]', 'a mapping of service name']),
    ('per-service budget for a service the inventory does not place',
     {'monitoring_gpu_memory_budgets': {'image-gen': 80}},
     ['monitoring_gpu_memory_budgets names image-gen', "no fleet host's gpu_services_services", 'llm, imagegen']),
    ('temperature 20', {'monitoring_gpu_temperature_celsius': 20}, ['monitoring_gpu_temperature_celsius is 20']),
    ('power 0', {'monitoring_gpu_power_percent': 0}, ['monitoring_gpu_power_percent is 0']),
    ('remote fraction written as a percentage', {'monitoring_binding_max_remote_fraction': 2},
     ['monitoring_binding_max_remote_fraction is 2', 'such as 0.02']),
    ('scrape interval without a unit', {'monitoring_scrape_interval': '30'},
     ['monitoring_scrape_interval', 'got "30"', 'such as 30s']),
    ('scrape interval as a number', {'monitoring_scrape_interval': 30}, ['monitoring_scrape_interval', 'got 30 and']),
    ('evaluation interval with a trailing line break', {'monitoring_evaluation_interval': '30s\n'},
     ['monitoring_evaluation_interval', '30s']),
    ('exporter port out of range', {'monitoring_dcgm_exporter_port': 94000},
     ['monitoring_dcgm_exporter_port (94000)', '1-65535']),
    ('Alertmanager without a port', {'monitoring_alertmanagers': ['am1.example.com']},
     ['monitoring_alertmanagers', 'am1.example.com', 'host:port']),
    ('Alertmanagers as a string', {'monitoring_alertmanagers': 'am1.example.com:9093'},
     ['monitoring_alertmanagers must be a list', '"am1.example.com:9093"']),
    ('rules directory with a trailing line break', {'monitoring_rules_dir': '/etc/prometheus/rules.d\n'},
     ['monitoring_rules_dir', '/etc/prometheus/rules.d']),
    ('target directory climbing out with ..', {'monitoring_file_sd_dir': '/etc/prometheus/../../tmp/sd'},
     ['monitoring_file_sd_dir', '/etc/prometheus/../../tmp/sd', 'without ..']),
    ('relative scrape configuration file', {'monitoring_install_prometheus': False,
                                            'monitoring_scrape_config_file': 'gpufleet-scrape.yml'},
     ['monitoring_scrape_config_file', 'gpufleet-scrape.yml', 'absolute']),
    ('own Prometheus with the snippet as its main configuration',
     {'monitoring_install_prometheus': False, 'monitoring_scrape_config_file': '/etc/prometheus/prometheus.yml'},
     ['monitoring_scrape_config_file', 'monitoring_config_file']),
    ('service name with a shell character', {'monitoring_prometheus_service': 'prometheus;reboot'},
     ['monitoring_prometheus_service is "prometheus;reboot"', 'a unit name']),
    ('extra rule groups as a mapping', {'monitoring_extra_rule_groups': {'name': 'site', 'rules': []}},
     ['monitoring_extra_rule_groups must be a list', '{"name": "site"']),
    ('extra scrape job named like the exporter job',
     {'monitoring_extra_scrape_configs': [{'job_name': 'gpufleet_dcgm_exporter', 'static_configs': []}]},
     ['monitoring_extra_scrape_configs', 'gpufleet_dcgm_exporter']),
    ('extra scrape job reading a missing file',
     {'monitoring_extra_scrape_configs': [{'job_name': 'site', 'file_sd_configs': [
         {'files': ['/etc/prometheus/file_sd/site-missing.yml']}]}]},
     ['monitoring_extra_scrape_configs', '/etc/prometheus/file_sd/site-missing.yml', 'does not exist']),
    ('management networks as a string', {'monitoring_management_cidrs': '10.20.0.0/24'},
     ['monitoring_management_cidrs must be a list of networks', 'got "10.20.0.0/24"']),
    ('management network that is a word', {'monitoring_management_cidrs': ['mgmt']},
     ['monitoring_management_cidrs', 'not a network: "mgmt"']),
    ('management network with host bits set', {'monitoring_management_cidrs': ['10.20.0.5/24']},
     ['monitoring_management_cidrs', 'not a network: "10.20.0.5/24"']),
    ('target address outside the management networks', {'monitoring_management_cidrs': ['10.99.0.0/16']},
     ['10.20.0.5', 'is outside', '10.99.0.0/16']),
    ('IPv6 target written with brackets', {'gpufleet_management_address': '[fd00::5]',
                                           'gpufleet_management_cidrs': ['fd00::/64']},
     ['gpufleet_management_address', '[fd00::5]', 'not an IP address']),
    ('rack with a space', {'gpufleet_rack': 'r 07'}, ['gpufleet_rack', 'r 07']),
    ('GPU host without a GPU count', {'gpufleet_expected_gpus': {'model': 'NVIDIA H100 80GB HBM3'}},
     ['gpufleet_expected_gpus.count']),
    ('fleet host not in the inventory', {'monitoring_fleet_hosts': ['gpu-missing-01']},
     ['gpu-missing-01', 'monitoring_fleet_hosts']),
    ('API address without a scheme', {'monitoring_api_url': '127.0.0.1:9090'},
     ['monitoring_api_url is "127.0.0.1:9090"', 'http(s)://host:port']),
    ('API address with a trailing slash', {'monitoring_api_url': 'http://127.0.0.1:9090/'},
     ['monitoring_api_url is "http://127.0.0.1:9090/"', 'no trailing slash']),
    ('report wait of -1 seconds', {'monitoring_report_wait_sec': -1},
     ['monitoring_report_wait_sec -1', '0 to 3600 seconds']),
    ('a GPU host whose dcgm_exporter_counters lack the enforced power limit', {'dcgm_exporter_counters': NO_POWER_LIMIT},
     ['dcgm_exporter_counters lacks DCGM_FI_DEV_ENFORCED_POWER_LIMIT (GpuPowerOverLimit reads it)',
      "Add DCGM_FI_DEV_ENFORCED_POWER_LIMIT to dcgm_exporter_counters, or to your exporter's counters CSV and to "
      'monitoring_exporter_counters', 'monitoring_missing_counters: warn']),
    ("a site's own exporter with dcgm-exporter's default counters", {'monitoring_exporter_counters': UPSTREAM_FIELDS},
     ['monitoring_exporter_counters (the counters your exporter serves on the GPU host case', 'lacks '
      'DCGM_EXP_XID_ERRORS_COUNT (GpuXidRestartApplication', 'DCGM_FI_DEV_ECC_DBE_VOL_TOTAL (GpuEccDoubleBitErrors',
      "to your exporter's counters CSV and to monitoring_exporter_counters"]),
    ("a site exporter's counters as one string", {'monitoring_exporter_counters': 'DCGM_FI_DEV_GPU_TEMP'},
     ['monitoring_exporter_counters is the string "DCGM_FI_DEV_GPU_TEMP"', 'DCGM field names']),
    ('missing counters neither fail nor warn', {'monitoring_missing_counters': 'ignore'},
     ['monitoring_missing_counters', 'fail, warn']),
]

PLAN = {'version': 1, 'services': [{'name': 'llm'}, {'name': 'imagegen'}]}

GPU_WATCHDOG_ACCEPTED = [
    ('the common variables', {}),
    ('a budget for a planned service', {'gpu_watchdog_service_budgets': {'imagegen': 80}}),
    ('a window as long as the interval', {'gpu_watchdog_interval_sec': 60, 'gpu_watchdog_rate_limit_window_sec': 60}),
    ('an environment for the unit',
     {'gpu_watchdog_environment': {'LD_LIBRARY_PATH': '/opt/nvidia/lib', 'CUDA_DEVICE_ORDER': 'PCI_BUS_ID'}}),
    ('disabled without a plan', {'gpu_watchdog_enabled': False, 'gpu_watchdog_plan_file': '/nonexistent/plan.json'}),
    ('a fleet cap counted by a Prometheus', {'gpu_watchdog_fleet_max_quarantined': 2,
                                             'gpu_watchdog_fleet_prometheus_url': 'http://10.20.3.41:9090'}),
]

GPU_WATCHDOG_CASES = [
    ('memory budget 0', {'gpu_watchdog_memory_budget_percent': 0}, ['gpu_watchdog_memory_budget_percent', '1 to 100']),
    ('memory budget 101', {'gpu_watchdog_memory_budget_percent': 101},
     ['gpu_watchdog_memory_budget_percent', '101', '1 to 100']),
    ('memory budget with a percent sign', {'gpu_watchdog_memory_budget_percent': '85%'},
     ['gpu_watchdog_memory_budget_percent', '85%']),
    ('per-service budget -1', {'gpu_watchdog_service_budgets': {'imagegen': -1}},
     ['gpu_watchdog_service_budgets', 'imagegen', '1 to 100']),
    ('per-service budgets as a list', {'gpu_watchdog_service_budgets': [{'imagegen': 80}]},
     ['gpu_watchdog_service_budgets', 'a mapping', '[{"imagegen": 80}]']),
    ('per-service budget for a service the plan does not place', {'gpu_watchdog_service_budgets': {'image-gen': 80}},
     ['gpu_watchdog_service_budgets names image-gen', 'it places: llm, imagegen']),
    ('window shorter than the interval', {'gpu_watchdog_interval_sec': 60, 'gpu_watchdog_rate_limit_window_sec': 30},
     ['gpu_watchdog_rate_limit_window_sec (30)', 'gpu_watchdog_interval_sec (60)', 'Lengthen the window']),
    ('interval 0', {'gpu_watchdog_interval_sec': 0}, ['gpu_watchdog_interval_sec (0)', '1 or more']),
    ('interval with a unit', {'gpu_watchdog_interval_sec': '30s'}, ['gpu_watchdog_interval_sec', '30s']),
    ('no restarts allowed', {'gpu_watchdog_rate_limit_restarts': 0}, ['gpu_watchdog_rate_limit_restarts (0)']),
    ('negative cooldown', {'gpu_watchdog_reboot_cooldown_sec': -1}, ['gpu_watchdog_reboot_cooldown_sec (-1)']),
    ('event wait as long as the interval', {'gpu_watchdog_xid_event_wait_ms': 30000},
     ['gpu_watchdog_xid_event_wait_ms (30000)', 'shorter than the interval']),
    ('remote fraction written as a percentage', {'gpu_watchdog_max_remote_fraction': 2},
     ['gpu_watchdog_max_remote_fraction (2)', '0.02']),
    ('plan file with a trailing line break', {'gpu_watchdog_plan_file': '/etc/gpufleet/placement.json\n'},
     ['gpu_watchdog_plan_file is "/etc/gpufleet/placement.json\\n"', 'on one line']),
    ('state directory climbing out with ..', {'gpu_watchdog_state_dir': '/var/lib/../../tmp/watchdog'},
     ['gpu_watchdog_state_dir is "/var/lib/../../tmp/watchdog"', 'without ..']),
    ('relative textfile directory', {'gpu_watchdog_textfile_dir': 'var/lib/prometheus/node-exporter'},
     ['gpu_watchdog_textfile_dir is "var/lib/prometheus/node-exporter"', 'absolute']),
    ('interpreter by name only', {'gpu_watchdog_python_interpreter': 'python3'},
     ['gpu_watchdog_python_interpreter is "python3"', 'absolute']),
    ('stop unit with a shell character', {'gpu_watchdog_reset_stop_units': ['dcgm;reboot.service']},
     ['gpu_watchdog_reset_stop_units', 'dcgm;reboot.service']),
    ('MIG unit with a second line', {'gpu_watchdog_mig_unit': 'gpufleet-mig.service\nExecStartPre=/bin/sh'},
     ['gpu_watchdog_mig_unit']),
    ('MPS unit prefix with a space', {'gpu_watchdog_mps_unit_prefix': 'gpufleet mps@'},
     ['gpu_watchdog_mps_unit_prefix', 'gpufleet mps@']),
    ('reset command as one string', {'gpu_watchdog_gpu_reset_command': 'nvidia-smi --gpu-reset -i'},
     ['gpu_watchdog_gpu_reset_command must be a non-empty list of words', 'got "nvidia-smi --gpu-reset -i"']),
    ('reset command as one word with spaces', {'gpu_watchdog_gpu_reset_command': ['nvidia-smi --gpu-reset -i']},
     ['gpu_watchdog_gpu_reset_command must be a non-empty list of words', 'got ["nvidia-smi --gpu-reset -i"]']),
    ('environment as a list', {'gpu_watchdog_environment': ['LD_LIBRARY_PATH=/opt/nvidia/lib']},
     ['gpu_watchdog_environment must be a mapping', 'got ["LD_LIBRARY_PATH=/opt/nvidia/lib"]']),
    ('environment value with a second line',
     {'gpu_watchdog_environment': {'LD_LIBRARY_PATH': '/opt/nvidia/lib\nExecStartPre=/bin/sh'}},
     ['gpu_watchdog_environment', 'one-line values', 'LD_LIBRARY_PATH']),
    ('environment value with a quote', {'gpu_watchdog_environment': {'CUDA_VISIBLE_DEVICES': '0" ExecStartPre="/bin/sh'}},
     ['gpu_watchdog_environment', 'without quotes', 'CUDA_VISIBLE_DEVICES']),
    ('environment name with a space', {'gpu_watchdog_environment': {'LD LIBRARY PATH': '/opt/nvidia/lib'}},
     ['gpu_watchdog_environment', 'LD LIBRARY PATH']),
    ('missing plan while enabled', {'gpu_watchdog_plan_file': '/nonexistent/plan.json'},
     ['gpu_watchdog_plan_file /nonexistent/plan.json does not exist', 'gpu_watchdog_enabled to false']),
    ('fleet cap of -1 hosts', {'gpu_watchdog_fleet_max_quarantined': -1},
     ['gpu_watchdog_fleet_max_quarantined must be a whole number', 'got -1']),
    ('fleet cap as a percentage', {'gpu_watchdog_fleet_max_quarantined': '10%'},
     ['gpu_watchdog_fleet_max_quarantined must be a whole number', 'got "10%"']),
    ('fleet Prometheus without a scheme', {'gpu_watchdog_fleet_prometheus_url': '10.20.3.41:9090'},
     ['gpu_watchdog_fleet_prometheus_url an http(s) URL', 'got "10.20.3.41:9090"']),
]

# role -> (its refused cases, its accepted cases, the variables every case of it gets)
ROLES = {
    'monitoring': (MONITORING_CASES, MONITORING_ACCEPTED, MONITORING_COMMON),
    'gpu_watchdog': (GPU_WATCHDOG_CASES, GPU_WATCHDOG_ACCEPTED, {}),
}


def watched():
    """The files under what the roles would change first, with their bytes and modes."""
    found = {}
    for folder in WATCHED:
        found.update(snapshot(folder))
    return found


@pytest.fixture(scope='module')
def role_outcomes(tmp_path_factory):
    """Each role's cases, refused and accepted, in one check-mode run of its preflight: {role: (outcomes, before,
    after)}."""
    found = {}
    for role, (cases, accepted, common) in sorted(ROLES.items()):
        common = dict(common)
        plan_dir = tmp_path_factory.mktemp('%s-plan' % role)
        if role == 'gpu_watchdog':
            (plan_dir / 'placement.json').write_text(json.dumps(PLAN))
            common['gpu_watchdog_plan_file'] = str(plan_dir / 'placement.json')
        before = dict(watched(), **snapshot(plan_dir))
        outcomes = run_role_cases(role, 'preflight.yml', [(case[0], case[1]) for case in cases + accepted],
                                  tmp_path_factory.mktemp('%s-cases' % role), common_vars=common)
        found[role] = (outcomes, before, dict(watched(), **snapshot(plan_dir)))
    return found


def _params(table_index):
    return [pytest.param(role, case[0], case[2] if table_index == 0 else None, id='%s: %s' % (role, case[0]))
            for role, tables in sorted(ROLES.items()) for case in tables[table_index]]


@pytest.mark.parametrize('role, case_id, names', _params(0))
def test_role_preflight_refuses(role_outcomes, role, case_id, names):
    outcomes, before, after = role_outcomes[role]
    outcome = outcomes[case_id]
    assert_refused(outcome['failed'] and not outcome.get('changed'), outcome['message'], names, before, after)


@pytest.mark.parametrize('role, case_id, names', _params(1))
def test_role_preflight_accepts(role_outcomes, role, case_id, names):
    outcome = role_outcomes[role][0][case_id]
    assert not outcome['failed'], outcome['message']


def test_the_tables_are_big_enough_and_ids_unique():
    for role, (cases, accepted, _common) in ROLES.items():
        assert len(cases) >= 10, role
        ids = [case[0] for case in cases + accepted]
        assert len(set(ids)) == len(ids), role
