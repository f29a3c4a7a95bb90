# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""The GPU alert pack's contract: every alert is complete, and tests/promtool/ fires it and holds it back.

promtool itself runs the tests (tests/integration/alert_rules.sh); this reads the files, so that an alert added
without a test, or a test of an alert that no longer exists, fails in the unit stage too.
"""

from __future__ import absolute_import, division, print_function

import os
import re

import pytest
import yaml

from .conftest import ROLES

REPO = os.path.dirname(ROLES)
PACK = os.path.join(ROLES, 'monitoring', 'templates', 'gpu_alerts.rules.yml.j2')
TESTS = os.path.join(REPO, 'tests', 'promtool')
INHIBIT = os.path.join(ROLES, 'monitoring', 'files', 'alertmanager-inhibit.yml')
# NVIDIA's Xid catalog buckets, and what the pack does where no Xid applies.
XID_ACTIONS = {'restart-application', 'reset-gpu', 'schedule-reset', 'reboot-host', 'drain-and-rma', 'fallen-off-bus'}
OTHER_ACTIONS = {'investigate', 'check-cooling', 'check-power', 'restart-exporter', 'rebind-service',
                 'wait-for-maintenance', 'run-site-stage'}
# Alerts about a host or a service rather than one GPU: no GPU UUID to name.
HOST_LEVEL = {'GpuExporterDown', 'GpusMissing', 'GpuServiceBindingDrift', 'GpuHostDrained', 'GpuHostDrifted'}
# Alerts that tell, and page nobody: planned maintenance.
INFO = {'GpuHostDrained'}


def load_pack(text=None):
    # The template's own placeholders ([[ ... ]]) sit inside YAML scalars, so the template parses as YAML.
    if text is None:
        with open(PACK) as handle:
            text = handle.read()
    return [rule for group in yaml.safe_load(text)['groups'] for rule in group['rules'] if 'alert' in rule]


def load_tests():
    fired, held_back = set(), set()
    names = sorted(name for name in os.listdir(TESTS) if name.endswith('_test.yml'))
    for name in names:
        with open(os.path.join(TESTS, name)) as handle:
            for case in yaml.safe_load(handle)['tests']:
                for check in case.get('alert_rule_test', []):
                    (fired if check.get('exp_alerts') else held_back).add(check['alertname'])
    return names, fired, held_back


def coverage_problems(alerts, fired, held_back):
    names = {rule['alert'] for rule in alerts}
    problems = ['%s: no test fires it' % name for name in sorted(names - fired)]
    problems += ['%s: no test holds it back' % name for name in sorted(names - held_back)]
    problems += ['%s: tested, but not in the pack' % name for name in sorted((fired | held_back) - names)]
    return problems


def test_the_promtool_tests_are_found():
    names, fired, _held_back = load_tests()
    assert names and len(fired) >= 10


def test_every_alert_is_fired_and_held_back_by_a_test():
    _names, fired, held_back = load_tests()
    assert coverage_problems(load_pack(), fired, held_back) == []


def test_an_alert_without_a_test_is_caught():
    _names, fired, held_back = load_tests()
    alerts = load_pack() + [{'alert': 'GpuUntested', 'expr': 'vector(1)'}]
    assert coverage_problems(alerts, fired, held_back) == [
        'GpuUntested: no test fires it', 'GpuUntested: no test holds it back']


@pytest.mark.parametrize('rule', load_pack(), ids=lambda rule: rule['alert'])
def test_every_alert_is_complete(rule):
    labels, annotations = rule.get('labels', {}), rule.get('annotations', {})
    assert labels.get('severity') == 'info' if rule['alert'] in INFO else labels.get('severity') in ('warning', 'critical')
    assert labels.get('action') in XID_ACTIONS | OTHER_ACTIONS
    assert labels.get('pack') == 'gpufleet', 'the inhibit rule selects the pack by this label'
    assert annotations.get('summary')
    assert '$labels.host' in annotations.get('description', '')
    if rule['alert'] not in HOST_LEVEL:
        assert '$labels.UUID' in annotations['description']


def test_each_xid_alert_selects_its_bucket_of_the_xid_table():
    """The pack takes its Xids from the table (gpufleet.core.xid_alert), one bucket per alert; every bucket but the
    application Xids and those the catalog says to ignore has an alert. tests/promtool/xid_catalog_test.yml fires
    every Xid of the catalog through the rendered pack."""
    pieces = {}
    for rule in load_pack():
        found = re.findall(r'DCGM_EXP_XID_ERRORS_COUNT\{xid(=~|!~)"\[\[ \'([a-z_]+)\' \| gpufleet\.core\.xid_alert \]\]"\}',
                           rule['expr'])
        if found:
            pieces[rule['alert']] = (found, rule['labels']['action'])
    assert pieces == {
        'GpuXidRestartApplication': ([('=~', 'restart_app')], 'restart-application'),
        'GpuXidResetGpu': ([('=~', 'reset_gpu')], 'reset-gpu'),
        'GpuXidScheduleReset': ([('=~', 'schedule_reset')], 'schedule-reset'),
        'GpuXidRebootHost': ([('=~', 'reboot_host')], 'reboot-host'),
        'GpuXidDrainAndRma': ([('=~', 'rma')], 'drain-and-rma'),
        'GpuFallenOffBus': ([('=~', 'fallen_off_bus')], 'fallen-off-bus'),
        # The investigate bucket and every Xid the catalog does not list.
        'GpuXidOther': ([('!~', 'not_investigate')], 'investigate'),
    }


def load_inhibit():
    with open(INHIBIT) as handle:
        return yaml.safe_load(handle)['inhibit_rules']


def test_the_inhibit_rule_silences_the_hosts_other_gpu_alerts_on_xid_79():
    assert load_inhibit()[0] == {
        'source_matchers': ['alertname="GpuFallenOffBus"'],
        'target_matchers': ['pack="gpufleet"', 'alertname!="GpuFallenOffBus"', 'alertname!="GpuHostDrained"'],
        'equal': ['host'],
    }
    assert 'GpuFallenOffBus' in {rule['alert'] for rule in load_pack()}


def test_a_drained_host_holds_back_its_other_alerts_and_stays_visible():
    """Planned maintenance pages nobody: while GpuHostDrained fires for a host, every other alert of the pack for
    that host is held back; no rule holds back GpuHostDrained itself."""
    rules = load_inhibit()
    assert rules[1:] == [{
        'source_matchers': ['alertname="GpuHostDrained"'],
        'target_matchers': ['pack="gpufleet"', 'alertname!="GpuHostDrained"'],
        'equal': ['host'],
    }]
    alerts = {rule['alert']: rule for rule in load_pack()}
    assert alerts['GpuHostDrained']['labels']['severity'] == 'info'
    for rule in rules:
        assert 'alertname!="GpuHostDrained"' in rule['target_matchers']
        # The source alert keeps the host label, or equal: [host] never matches.
        source = rule['source_matchers'][0].split('"')[1]
        kept = re.match(r'\s*max by \(([^)]*)\)', alerts[source]['expr']).group(1)
        assert 'host' in [label.strip() for label in kept.split(',')]
