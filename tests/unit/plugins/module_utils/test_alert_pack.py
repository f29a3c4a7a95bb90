# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""What the GPU alert pack reads (module_utils/_alert_pack.py), the counters an exporter lacks, and how the monitoring
role's problems name them (module_utils/_monitoring_targets.py ``counter_problems``, the monitoring_problems and
monitoring_counter_problems filters) and the checker's rule for monitoring_exporter_counters. The table against the
pack itself is tests/unit/roles/test_alert_pack_inputs.py; the role's preflight on whole inventories is
tests/unit/bad_input/test_fleet_roles_bad_input.py."""

from __future__ import absolute_import, division, print_function

import os

import pytest
import yaml

from ansible_collections.gpufleet.core.plugins.filter.monitoring import FilterModule
from ansible_collections.gpufleet.core.plugins.module_utils import _alert_pack as pack
from ansible_collections.gpufleet.core.plugins.module_utils import _monitoring_targets as monitoring
from ansible_collections.gpufleet.core.plugins.module_utils._role_values import check_role_values
from ansible_collections.gpufleet.core.plugins.plugin_utils._role_vars import role_problems

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), '..', '..', '..', '..'))
XID_ALERTS = ['GpuXidRestartApplication', 'GpuXidResetGpu', 'GpuXidScheduleReset', 'GpuXidRebootHost',
              'GpuXidDrainAndRma', 'GpuFallenOffBus', 'GpuXidOther']
FILTERS = FilterModule().filters()


def role_counters():
    with open(os.path.join(REPO, 'roles', 'dcgm_exporter', 'defaults', 'main.yml')) as handle:
        return yaml.safe_load(handle)['dcgm_exporter_counters']


def without(*fields):
    return [counter for counter in role_counters() if counter['field'] not in fields]


# -- the table -------------------------------------------------------------------------------------------------------


def test_every_metric_of_the_table_has_a_source_and_every_alert_one_row():
    names = [alert for alert, _metrics in pack.ALERTS]
    assert len(names) == len(set(names))
    assert set(metric for _alert, metrics in pack.ALERTS for metric in metrics) == set(pack.SOURCES)
    assert set(pack.SOURCES.values()) == {pack.DCGM_EXPORTER, pack.NODE_TEXTFILE, pack.PROMETHEUS}


def test_the_dcgm_fields_the_pack_reads():
    assert pack.needed() == [
        'DCGM_EXP_XID_ERRORS_COUNT', 'DCGM_FI_DEV_ECC_DBE_VOL_TOTAL', 'DCGM_FI_DEV_ROW_REMAP_FAILURE',
        'DCGM_FI_DEV_FB_USED', 'DCGM_FI_DEV_FB_FREE', 'DCGM_FI_DEV_GPU_TEMP', 'DCGM_FI_DEV_POWER_USAGE',
        'DCGM_FI_DEV_ENFORCED_POWER_LIMIT']
    assert pack.needed(pack.NODE_TEXTFILE) == ['gpufleet_watchdog_service_remote_fraction', 'gpufleet_drift',
                                               'gpufleet_host_drained']
    assert pack.alerts_reading('gpufleet_host_drained') == ['GpuHostDrained']
    assert pack.alerts_reading('DCGM_EXP_XID_ERRORS_COUNT') == XID_ALERTS
    assert pack.alerts_reading('DCGM_FI_DEV_GPU_TEMP') == ['GpuTemperatureHigh', 'GpusMissing']


def test_the_dcgm_exporter_roles_default_list_serves_every_field_the_pack_reads():
    assert pack.missing_counters(role_counters()) == []


# -- what a set of counters lacks ------------------------------------------------------------------------------------


def test_a_missing_counter_names_the_alert_it_blinds_and_the_fix():
    assert pack.missing_counters(without('DCGM_FI_DEV_ENFORCED_POWER_LIMIT')) == [{
        'field': 'DCGM_FI_DEV_ENFORCED_POWER_LIMIT', 'alerts': ['GpuPowerOverLimit'],
        'fix': "add DCGM_FI_DEV_ENFORCED_POWER_LIMIT to dcgm_exporter_counters, or to your exporter's counters CSV and "
               "to monitoring_exporter_counters"}]


def test_dcgm_exporters_own_default_csv_lacks_the_xid_ecc_and_power_limit_fields():
    found = pack.missing_counters(list(pack.UPSTREAM_DEFAULT_FIELDS), own_exporter=True)
    assert [(item['field'], item['alerts']) for item in found] == [
        ('DCGM_EXP_XID_ERRORS_COUNT', XID_ALERTS),
        ('DCGM_FI_DEV_ECC_DBE_VOL_TOTAL', ['GpuEccDoubleBitErrors']),
        ('DCGM_FI_DEV_ENFORCED_POWER_LIMIT', ['GpuPowerOverLimit'])]
    assert found[0]['fix'] == ("add DCGM_EXP_XID_ERRORS_COUNT to your exporter's counters CSV and to "
                               "monitoring_exporter_counters")


@pytest.mark.parametrize('served', [
    pack.needed(),  # names
    [{'field': field, 'type': 'gauge', 'help': 'x'} for field in pack.needed()],  # the role's mappings
    pack.needed() + ['DCGM_FI_DEV_SM_CLOCK'],
    [' %s ' % field for field in pack.needed()],
])
def test_a_complete_list_has_no_problem(served):
    assert pack.missing_counters(served) == []


@pytest.mark.parametrize('served', ['DCGM_FI_DEV_GPU_TEMP', None, {'field': 'DCGM_FI_DEV_GPU_TEMP'}])
def test_counters_that_are_no_list_are_left_to_their_own_checker(served):
    assert pack.served_fields(served) is None
    assert pack.missing_counters(served) == []


def test_an_empty_list_lacks_every_field():
    assert [item['field'] for item in pack.missing_counters([])] == pack.needed()


def test_the_sentence_for_one_host_and_for_a_site_exporter():
    one = pack.missing_counters(without('DCGM_FI_DEV_ECC_DBE_VOL_TOTAL'))
    assert pack.describe_missing(['g1'], one, 'dcgm_exporter_counters') == (
        'g1: dcgm_exporter_counters lacks DCGM_FI_DEV_ECC_DBE_VOL_TOTAL (GpuEccDoubleBitErrors reads it): that alert '
        'of the GPU alert pack is blind on this host. Add DCGM_FI_DEV_ECC_DBE_VOL_TOTAL to dcgm_exporter_counters, or '
        "to your exporter's counters CSV and to monitoring_exporter_counters.")
    both = pack.missing_counters(['DCGM_EXP_XID_ERRORS_COUNT', 'DCGM_FI_DEV_ECC_DBE_VOL_TOTAL',
                                  'DCGM_FI_DEV_ROW_REMAP_FAILURE', 'DCGM_FI_DEV_FB_USED', 'DCGM_FI_DEV_FB_FREE',
                                  'DCGM_FI_DEV_POWER_USAGE'], own_exporter=True)
    assert pack.describe_missing(['g1', 'g2'], both, 'monitoring_exporter_counters', own_exporter=True) == (
        'monitoring_exporter_counters (the counters your exporter serves on the GPU hosts g1 and g2) lacks '
        'DCGM_FI_DEV_GPU_TEMP (GpuTemperatureHigh and GpusMissing read it) and DCGM_FI_DEV_ENFORCED_POWER_LIMIT '
        '(GpuPowerOverLimit reads it): those alerts of the GPU alert pack are blind on these hosts. Add '
        "DCGM_FI_DEV_GPU_TEMP and DCGM_FI_DEV_ENFORCED_POWER_LIMIT to your exporter's counters CSV and to "
        "monitoring_exporter_counters (dcgm-exporter's own default-counters.csv leaves "
        'DCGM_FI_DEV_ENFORCED_POWER_LIMIT out).')


# -- the monitoring role's problems ------------------------------------------------------------------------------------


GOOD = {
    'gpufleet_management_cidrs': ['10.20.0.0/24'],
    'gpufleet_dc': 'hk1',
    'gpufleet_rack': 'r07',
    'gpufleet_expected_gpus': {'count': 8, 'model': 'NVIDIA H100 80GB HBM3'},
}
GROUPS = {'all': ['g1', 'g2', 'g3', 'c1'], 'gpu_hosts': ['g1', 'g2', 'g3']}
HOSTS = ['g1', 'g2', 'g3', 'c1']


def fleet(**counters):
    """Three GPU hosts and a CPU host; ``counters`` gives a host its own dcgm_exporter_counters."""
    found = {}
    for position, host in enumerate(HOSTS):
        found[host] = dict(GOOD, gpufleet_management_address='10.20.0.%d' % (position + 5))
        if host in counters:
            found[host]['dcgm_exporter_counters'] = counters[host]
    found['c1']['gpufleet_expected_gpus'] = {'count': 0}
    return found


POWER = ("g2 and g3: dcgm_exporter_counters lacks DCGM_FI_DEV_ENFORCED_POWER_LIMIT (GpuPowerOverLimit reads it): "
         "that alert of the GPU alert pack is blind on these hosts. Add DCGM_FI_DEV_ENFORCED_POWER_LIMIT to "
         "dcgm_exporter_counters, or to your exporter's counters CSV and to monitoring_exporter_counters.")
OPT_OUT = ' Where the exporter cannot change, set monitoring_missing_counters: warn to go on regardless.'


def test_hosts_that_lack_the_same_fields_are_named_together_and_the_role_default_passes():
    hosts = fleet(g2=without('DCGM_FI_DEV_ENFORCED_POWER_LIMIT'), g3=without('DCGM_FI_DEV_ENFORCED_POWER_LIMIT'),
                  c1=[])
    assert monitoring.counter_problems(HOSTS, hosts, GROUPS, {}, role_counters()) == [POWER]
    assert monitoring.problems(HOSTS, hosts, GROUPS, {}, role_counters()) == [POWER + OPT_OUT]


def test_hosts_that_lack_different_fields_get_a_sentence_each():
    hosts = fleet(g1=without('DCGM_EXP_XID_ERRORS_COUNT'), g3=without('DCGM_FI_DEV_FB_FREE'))
    found = monitoring.counter_problems(HOSTS, hosts, GROUPS, {}, role_counters())
    assert [problem.split(':')[0] for problem in found] == ['g1', 'g3']
    xids = '%s and %s' % (', '.join(XID_ALERTS[:-1]), XID_ALERTS[-1])
    assert 'DCGM_EXP_XID_ERRORS_COUNT (%s read it)' % xids in found[0]
    assert 'DCGM_FI_DEV_FB_FREE (GpuMemoryOverBudget reads it)' in found[1]


def test_a_role_default_that_lacks_a_field_is_named_as_the_roles():
    found = monitoring.counter_problems(HOSTS, fleet(), GROUPS, {}, without('DCGM_FI_DEV_GPU_TEMP'))
    assert found == ["g1, g2 and g3: dcgm_exporter_counters (the dcgm_exporter role's default) lacks "
                     'DCGM_FI_DEV_GPU_TEMP (GpuTemperatureHigh and GpusMissing read it): those alerts of the GPU alert '
                     'pack are blind on these hosts. Add DCGM_FI_DEV_GPU_TEMP to dcgm_exporter_counters, or to your '
                     "exporter's counters CSV and to monitoring_exporter_counters."]


def test_a_site_exporter_is_checked_once_for_every_gpu_host():
    settings = {'monitoring_exporter_counters': list(pack.UPSTREAM_DEFAULT_FIELDS)}
    # Its list replaces the hosts' own (complete or not).
    found = monitoring.counter_problems(HOSTS, fleet(g1=[]), GROUPS, settings, role_counters())
    assert len(found) == 1
    assert found[0].startswith('monitoring_exporter_counters (the counters your exporter serves on the GPU hosts g1, '
                               'g2 and g3) lacks DCGM_EXP_XID_ERRORS_COUNT (')
    assert found[0].endswith("(dcgm-exporter's own default-counters.csv leaves them out).")
    settings = {'monitoring_exporter_counters': pack.needed()}
    assert monitoring.counter_problems(HOSTS, fleet(g1=[]), GROUPS, settings, role_counters()) == []


def test_warn_leaves_the_missing_counters_out_of_the_problems():
    hosts = fleet(g2=without('DCGM_FI_DEV_ENFORCED_POWER_LIMIT'), g3=without('DCGM_FI_DEV_ENFORCED_POWER_LIMIT'))
    settings = {'monitoring_missing_counters': 'warn'}
    assert monitoring.problems(HOSTS, hosts, GROUPS, settings, role_counters()) == []
    assert monitoring.counter_problems(HOSTS, hosts, GROUPS, settings, role_counters()) == [POWER]


def test_only_gpu_hosts_of_the_inventory_are_checked():
    hosts = fleet(c1=[], g1='DCGM_FI_DEV_GPU_TEMP')  # a CPU host; a list that is no list (its own checker's)
    assert monitoring.counter_problems(HOSTS + ['gpu-missing-01'], hosts, dict(GROUPS, gpu_hosts=[
        'g1', 'g2', 'g3', 'gpu-missing-01']), {}, role_counters()) == []
    assert monitoring.counter_problems([], {}, GROUPS, {'monitoring_exporter_counters': ['DCGM_FI_DEV_GPU_TEMP']},
                                       role_counters()) == []


# -- through the filters: each host's counters from hostvars, the role's default from its defaults file --------------


def test_the_filters_read_the_hosts_counters_and_the_roles_default_list():
    hostvars = fleet(g2=without('DCGM_FI_DEV_ENFORCED_POWER_LIMIT'), g3=without('DCGM_FI_DEV_ENFORCED_POWER_LIMIT'))
    assert FILTERS['monitoring_counter_problems'](HOSTS, hostvars, GROUPS, {}) == [POWER]
    assert FILTERS['monitoring_problems'](HOSTS, hostvars, GROUPS, {}) == [POWER + OPT_OUT]
    assert FILTERS['monitoring_problems'](HOSTS, hostvars, GROUPS, {'monitoring_missing_counters': 'warn'}) == []
    assert FILTERS['monitoring_problems'](HOSTS, fleet(), GROUPS, {}) == []


# -- the role's variables ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize('value, fragments', [
    ('DCGM_FI_DEV_GPU_TEMP, DCGM_EXP_XID_ERRORS_COUNT',
     ['monitoring_exporter_counters is the string', 'write ["DCGM_FI_DEV_GPU_TEMP", "DCGM_EXP_XID_ERRORS_COUNT"]']),
    (['DCGM_FI_DEV_GPU_TEMP', 'gpu_temp'], ['monitoring_exporter_counters has the string "gpu_temp"', 'DCGM field name']),
    ([{'field': 'DCGM_FI_DEV_GPU_TEMP', 'type': 'gauge', 'help': 'GPU temperature (in C).'}],
     ['monitoring_exporter_counters has the mapping', 'DCGM field names']),
])
def test_the_checker_refuses_exporter_counters_that_are_no_field_names(value, fragments):
    problems = check_role_values('monitoring', {'monitoring_exporter_counters': value})
    assert len(problems) == 1
    for fragment in fragments:
        assert fragment in problems[0]


@pytest.mark.parametrize('value', [[], pack.needed(), list(pack.UPSTREAM_DEFAULT_FIELDS)])
def test_the_checker_takes_field_names(value):
    # Whether they are the ones the pack reads is the problems' (they name the GPU hosts).
    assert check_role_values('monitoring', {'monitoring_exporter_counters': value}) == []


def test_the_argument_spec_takes_fail_or_warn():
    assert role_problems('monitoring', {'monitoring_missing_counters': 'warn'}) == []
    problems = role_problems('monitoring', {'monitoring_missing_counters': 'ignore'})
    assert len(problems) == 1 and 'monitoring_missing_counters' in problems[0] and 'fail, warn' in problems[0]
