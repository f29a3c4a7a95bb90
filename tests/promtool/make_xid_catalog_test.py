# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""Writes tests/promtool/xid_catalog_test.yml: promtool tests of the alert pack for every Xid of the collection's table.

Run it after changing plugins/module_utils/_xid_catalog.py (tests/unit/roles/test_xid_catalog.py fails while the
committed file is out of date):

    PYTHONPATH=build/collections .venv/bin/python tests/promtool/make_xid_catalog_test.py

The expectations below are the pack's contract, written here and not read from the template: which alert each
bucket fires, that the application Xids and those the catalog says to ignore fire nothing, and that only a repeat
of a memory or bus fault within the window asks for an RMA.
"""

from __future__ import absolute_import, division, print_function

import os
import sys

from ansible_collections.gpufleet.core.plugins.module_utils import _xid_catalog as catalog

HERE = os.path.dirname(os.path.abspath(__file__))
TARGET = os.path.join(HERE, 'xid_catalog_test.yml')

# bucket -> (alert, severity, action); None: no alert at all.
BUCKET_ALERTS = {
    catalog.APPLICATION: None,
    catalog.IGNORE: None,
    catalog.RESTART_APP: ('GpuXidRestartApplication', 'warning', 'restart-application'),
    catalog.RESET_GPU: ('GpuXidResetGpu', 'critical', 'reset-gpu'),
    catalog.SCHEDULE_RESET: ('GpuXidScheduleReset', 'warning', 'schedule-reset'),
    catalog.REBOOT_HOST: ('GpuXidRebootHost', 'critical', 'reboot-host'),
    catalog.FALLEN_OFF_BUS: ('GpuFallenOffBus', 'critical', 'fallen-off-bus'),
    catalog.INVESTIGATE: ('GpuXidOther', 'warning', 'investigate'),
}
# Xids the catalog does not list are looked up by an operator.
UNLISTED = (163, 999)
FIRING = 'count by (alertname, severity, action, xid) (ALERTS{alertstate="firing", pack="gpufleet"})'
RMA_FIRING = 'count by (UUID) (ALERTS{alertname="GpuXidDrainAndRma", alertstate="firing"})'


def series(xid, uuid, values):
    labels = ('job="gpufleet_dcgm_exporter",dc="hk1",rack="hk1-a",host="hk1-a100-01",gpu_class="a100_pcie_4x",'
              'gpu="0",UUID="%s",xid="%d"' % (uuid, xid))
    return "      - {series: 'DCGM_EXP_XID_ERRORS_COUNT{%s}', values: '%s'}" % (labels, values)


def sample(labels, value=1):
    return "          - {labels: '{%s}', value: %d}" % (labels, value)


# The exporter counts an event for its 5-minute window: at one sample a minute, five samples of 1.
ONE_EVENT = '0 1 1 1 1 1 0x30'
TWO_EVENTS = '0 1 1 1 1 1 0x54 1 1 1 1 1 0x10'  # minutes 1-5 and 61-65


def every_xid_case():
    xids = sorted(catalog.CATALOG) + list(UNLISTED)
    lines = ['  - name: Every Xid of the catalog fires its bucket\'s alert once; application and ignored Xids fire '
             'nothing; one event asks for no RMA',
             '    interval: 1m', '    input_series:']
    lines += [series(xid, 'GPU-x%03d' % xid, ONE_EVENT) for xid in xids]
    expected = []
    for xid in xids:
        alert = BUCKET_ALERTS[catalog.bucket(xid) if xid in catalog.CATALOG else catalog.INVESTIGATE]
        if alert:
            expected.append('action="%s", alertname="%s", severity="%s", xid="%d"' % (alert[2], alert[0], alert[1], xid))
    lines += ['    promql_expr_test:', '      - expr: \'%s\'' % FIRING, '        eval_time: 3m', '        exp_samples:']
    lines += [sample(labels) for labels in expected]
    lines += ['      # The exporter\'s window has passed: every Xid alert has resolved.',
              '      - expr: \'%s\'' % FIRING, '        eval_time: 20m', '        exp_samples: []']
    return lines


def repeats_case():
    lines = ['  - name: A repeat of any memory or bus fault on one GPU within the window asks for an RMA; other Xids '
             'and other GPUs do not',
             '    interval: 1m', '    input_series:']
    rma = sorted(catalog.RMA_XIDS)
    for xid in rma:
        lines.append(series(xid, 'GPU-r%03d' % xid, TWO_EVENTS))
    # Two different memory or bus faults on one GPU (as on a MIG GPU without the row-remap counter: 48, then 64).
    lines.append(series(rma[0], 'GPU-mix', ONE_EVENT))
    lines.append(series(rma[1], 'GPU-mix', '0x60 1 1 1 1 1 0x10'))
    # A reset-class Xid that is not a memory or bus fault, twice: a reset each time, never an RMA.
    other = [x for x in catalog.xids_in(catalog.RESET_GPU) if x not in catalog.RMA_XIDS][0]
    lines.append(series(other, 'GPU-other', TWO_EVENTS))
    lines += ['    promql_expr_test:', '      - expr: \'%s\'' % RMA_FIRING, '        eval_time: 3m', '        exp_samples: []',
              '      - expr: \'%s\'' % RMA_FIRING, '        eval_time: 70m', '        exp_samples:']
    lines += [sample('UUID="%s"' % uuid) for uuid in sorted(['GPU-r%03d' % x for x in rma] + ['GPU-mix'])]
    return lines


def window_case():
    days = catalog.RMA_WINDOW_SEC // 86400
    # One sample per exporter window (5 minutes): each 1 is one event. Quiet between them: a day less or more.
    inside, outside = 288 * (days - 1), 288 * (days + 1)

    def two_events(gap):
        return '0 1 0x%d 1 0 0' % (gap - 1)

    return ['  - name: Repeats further apart than the window ask for no RMA',
            '    interval: 5m', '    input_series:',
            series(64, 'GPU-inside', two_events(inside)),
            series(64, 'GPU-outside', two_events(outside)),
            '    promql_expr_test:',
            "      - expr: '%s'" % RMA_FIRING,
            '        eval_time: %dm' % (5 * (2 + inside)),
            '        exp_samples:', sample('UUID="GPU-inside"'),
            "      - expr: '%s'" % RMA_FIRING,
            '        eval_time: %dm' % (5 * (2 + outside)),
            '        exp_samples: []']


def render():
    head = ['---', '# yamllint disable rule:line-length',
            '# Generated by tests/promtool/make_xid_catalog_test.py from plugins/module_utils/_xid_catalog.py: do not edit.',
            '# Every Xid of NVIDIA\'s catalog (and two it does not list) against the GPU alert pack, as tests/integration/',
            '# alert_rules.sh renders it.',
            'rule_files: [gpufleet-gpu-alerts.rules.yml]', 'evaluation_interval: 1m', 'tests:']
    return '\n'.join(head + every_xid_case() + [''] + repeats_case() + [''] + window_case()) + '\n'


def main():
    with open(TARGET, 'w') as handle:
        handle.write(render())
    print('wrote %s' % TARGET)
    return 0


if __name__ == '__main__':
    sys.exit(main())
