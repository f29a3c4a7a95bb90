# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""The table of what each alert reads (plugins/module_utils/_alert_pack.py) against the pack it describes
(roles/monitoring/templates/gpu_alerts.rules.yml.j2) and the page that prints it (docs/monitoring.md, "Counters each
alert needs"): an alert added, removed or changed in one and not the other fails here, so the preflight's check of the
exporters' counters cannot drift from the alerts."""

from __future__ import absolute_import, division, print_function

import os
import re

import yaml

from ansible_collections.gpufleet.core.plugins.module_utils import _alert_pack as pack
from ansible_collections.gpufleet.core.plugins.module_utils import _monitoring_targets as monitoring

from .conftest import ROLES

REPO = os.path.dirname(ROLES)
PACK = os.path.join(ROLES, 'monitoring', 'templates', 'gpu_alerts.rules.yml.j2')
FLEET_RULES = os.path.join(ROLES, 'monitoring', 'templates', 'fleet.rules.yml.j2')
DOC = os.path.join(REPO, 'docs', 'monitoring.md')
DCGM_DEFAULTS = os.path.join(ROLES, 'dcgm_exporter', 'defaults', 'main.yml')
# PromQL's words that are no series.
_WORDS = {'and', 'or', 'unless', 'bool', 'offset', 'by', 'without', 'on', 'ignoring', 'group_left', 'group_right',
          'inf', 'nan'}


def load_rules(text=None):
    # The template's own placeholders ([[ ... ]]) sit inside YAML scalars, so the template parses as YAML.
    if text is None:
        with open(PACK) as handle:
            text = handle.read()
    return [rule for group in yaml.safe_load(text)['groups'] for rule in group['rules']]


def series(expr):
    """The series names a PromQL expression reads: not functions, label names, label values, durations or the
    template's placeholders."""
    expr = re.sub(r'\[\[.*?\]\]', '', expr, flags=re.S)
    expr = re.sub(r'"(?:[^"\\]|\\.)*"', '""', expr)
    expr = re.sub(r'\{[^}]*\}', '', expr)
    expr = re.sub(r'\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)', '', expr)
    expr = re.sub(r'\[[^\]]*\]', '', expr)
    return set(name for name in re.findall(r'(?<![\w:.])([A-Za-z_:][\w:]*)(?![\w:]|\s*\()', expr)
               if name not in _WORDS)


def fleet_records():
    """The series the role writes from the inventory (fleet.rules.yml.j2, Jinja around YAML): they read nothing."""
    with open(FLEET_RULES) as handle:
        return set(re.findall(r'record: (\S+)', handle.read()))


def metrics_read(rules):
    """{alert: the metrics it reads}, through the pack's own recording rules; a series of fleet.rules.yml.j2 reads
    none."""
    records = dict((rule['record'], series(rule['expr'])) for rule in rules if 'record' in rule)
    inventory = fleet_records()
    found = {}
    for rule in rules:
        if 'alert' not in rule:
            continue
        metrics = set()
        for name in series(rule['expr']):
            if name in records:
                metrics |= records[name]
            elif name not in inventory:
                metrics.add(name)
        found[rule['alert']] = metrics
    return found


def drift(rules):
    """How the table and the pack differ, one line each."""
    table = dict((alert, set(metrics)) for alert, metrics in pack.ALERTS)
    read = metrics_read(rules)
    problems = ['%s: in the pack, not in _alert_pack.ALERTS' % alert for alert in sorted(set(read) - set(table))]
    problems += ['%s: in _alert_pack.ALERTS, not in the pack' % alert for alert in sorted(set(table) - set(read))]
    for alert in sorted(set(read) & set(table)):
        if read[alert] != table[alert]:
            problems.append('%s reads %s, the table says %s' % (alert, sorted(read[alert]), sorted(table[alert])))
    return problems


def test_the_reader_finds_the_series_of_an_expression():
    assert series('max by (host, UUID) (max_over_time(DCGM_EXP_XID_ERRORS_COUNT{xid=~"[[ x ]]"}[5m])) > 0') == {
        'DCGM_EXP_XID_ERRORS_COUNT'}
    assert series('(a:b:ratio > on (host) group_left () c or (d > 0.8 unless on (host) e)) and on (host) '
                  '(up{job="[[ j ]]"} == 1)') == {'a:b:ratio', 'c', 'd', 'e', 'up'}
    assert series('count by (host) (count by (host, UUID) (DCGM_FI_DEV_GPU_TEMP))') == {'DCGM_FI_DEV_GPU_TEMP'}


def test_every_alert_of_the_pack_reads_what_the_table_says_and_nothing_else():
    assert drift(load_rules()) == []


def test_the_pack_reads_recording_rules_through_their_expressions():
    read = metrics_read(load_rules())
    assert read['GpuMemoryOverBudget'] == {'DCGM_FI_DEV_FB_USED', 'DCGM_FI_DEV_FB_FREE'}
    assert read['GpusMissing'] == {'DCGM_FI_DEV_GPU_TEMP', 'up'}
    assert {'gpufleet:gpus_expected:count', 'gpufleet:gpu_memory_budget:ratio'} <= fleet_records()


def test_a_pack_that_drifts_from_the_table_is_caught():
    rules = load_rules()
    changed = [dict(rule, expr='DCGM_FI_DEV_POWER_USAGE / DCGM_FI_DEV_POWER_MGMT_LIMIT > 1')
               if rule.get('alert') == 'GpuPowerOverLimit' else rule for rule in rules]
    changed.append({'alert': 'GpuNvlinkErrors', 'expr': 'increase(DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL[5m]) > 0'})
    changed = [rule for rule in changed if rule.get('alert') != 'GpuRowRemapFailure']
    assert drift(changed) == [
        'GpuNvlinkErrors: in the pack, not in _alert_pack.ALERTS',
        'GpuRowRemapFailure: in _alert_pack.ALERTS, not in the pack',
        "GpuPowerOverLimit reads ['DCGM_FI_DEV_POWER_MGMT_LIMIT', 'DCGM_FI_DEV_POWER_USAGE'], the table says "
        "['DCGM_FI_DEV_ENFORCED_POWER_LIMIT', 'DCGM_FI_DEV_POWER_USAGE']"]


def test_every_metric_of_the_pack_has_a_source():
    names = set(name for metrics in metrics_read(load_rules()).values() for name in metrics)
    assert names <= set(pack.SOURCES)
    assert set(name for name in names if name.startswith('DCGM_')) == set(pack.needed(pack.DCGM_EXPORTER))


# -- docs/monitoring.md ------------------------------------------------------------------------------------------------


def _section():
    with open(DOC) as handle:
        text = handle.read()
    start = text.index('## Counters each alert needs\n')
    end = text.index('\n## ', start + 1)
    return text[start:end]


def _role_fields():
    with open(DCGM_DEFAULTS) as handle:
        return set(counter['field'] for counter in yaml.safe_load(handle)['dcgm_exporter_counters'])


def _served(metrics, fields):
    dcgm = [metric for metric in metrics if pack.SOURCES[metric] == pack.DCGM_EXPORTER]
    lacking = [metric for metric in dcgm if metric not in fields]
    if not dcgm:
        return 'not a DCGM field'
    if not lacking:
        return 'yes'
    return 'no' if lacking == dcgm else 'no: ' + ', '.join('`%s`' % metric for metric in lacking)


def test_the_pages_table_is_the_table():
    lines = _section().splitlines()
    start = lines.index([line for line in lines if line.startswith('| alert |')][0]) + 2
    rows = []
    for line in lines[start:]:
        if not line.startswith('|'):
            break
        rows.append(line)
    expected = []
    for alert, metrics in pack.ALERTS:
        sources = []
        for metric in metrics:
            sources += [pack.SOURCES[metric]] if pack.SOURCES[metric] not in sources else []
        expected.append('| `%s` | %s | %s | %s | %s |' % (
            alert, ', '.join('`%s`' % metric for metric in metrics), ', '.join(sources),
            _served(metrics, pack.UPSTREAM_DEFAULT_FIELDS), _served(metrics, _role_fields())))
    assert rows == expected


def test_the_pages_refusal_is_the_roles():
    block = _section().split('```\n')[1]
    hosts = {'gpu-a1': {'gpufleet_management_address': '10.20.0.5'},
             'gpu-a2': {'gpufleet_management_address': '10.20.0.6'}}
    with open(DCGM_DEFAULTS) as handle:
        counters = yaml.safe_load(handle)['dcgm_exporter_counters']
    lacking = [counter for counter in counters if counter['field'] != 'DCGM_FI_DEV_ENFORCED_POWER_LIMIT']
    for values in hosts.values():
        values.update({'gpufleet_management_cidrs': ['10.20.0.0/24'], 'gpufleet_dc': 'hk1', 'gpufleet_rack': 'r07',
                       'gpufleet_expected_gpus': {'count': 8}, 'dcgm_exporter_counters': lacking})
    found = monitoring.problems(sorted(hosts), hosts, {'gpu_hosts': sorted(hosts)}, {}, counters)
    # The role's preflight ends every refusal with this.
    assert ' '.join(block.split()) == ' '.join(found) + ' Nothing was changed.'
