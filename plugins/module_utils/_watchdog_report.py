# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.core contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""What the GPU watchdog reports: one journal line per decision, and node_exporter textfile metrics.

Pure code: text from the decisions and summary of ``_watchdog.decide``. docs/gpu_watchdog.md lists the metrics.
This is a private module: its API may change without notice.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json

from ansible_collections.gpufleet.core.plugins.module_utils._watchdog_state import KINDS, REPORT

PREFIX = 'gpufleet_watchdog_'
TEXTFILE_NAME = 'gpufleet_watchdog.prom'


def journal_lines(decisions):
    """One line per decision, evidence as JSON: what was done (ACT), or what was not and why (SKIP, REPORT)."""
    lines = []
    for decision in decisions:
        if decision['act']:
            verdict = 'ACT'
        elif decision['kind'] == REPORT:
            verdict = 'REPORT'
        else:
            verdict = 'SKIP'
        why = '' if decision['act'] or decision['kind'] == REPORT else ' (not done: %s)' % decision['why_not']
        evidence = json.dumps(decision['evidence'], sort_keys=True, default=str)
        lines.append('%s %s: %s%s evidence=%s' % (verdict, decision['kind'], decision['reason'], why, evidence))
    return lines


def _label(value):
    return str(value).replace('\\', '\\\\').replace('\n', '\\n').replace('"', '\\"')


def _sample(name, labels, value):
    text = ','.join('%s="%s"' % (key, _label(val)) for key, val in labels)
    return '%s%s%s %s' % (PREFIX, name, '{%s}' % text if text else '', _number(value))


def _number(value):
    if isinstance(value, bool):
        return '1' if value else '0'
    if isinstance(value, int):
        return str(value)
    return repr(float(value))


def metrics(decisions, state, summary):
    """The textfile collector's text: Prometheus exposition format, every family with HELP and TYPE."""
    families = []

    def family(name, kind, help_text, samples):
        families.append('# HELP %s%s %s' % (PREFIX, name, help_text))
        families.append('# TYPE %s%s %s' % (PREFIX, name, kind))
        families.extend(_sample(name, labels, value) for labels, value in samples)

    family('last_check_timestamp_seconds', 'gauge', 'When the last check ended (Unix time).',
           [((), summary['now'])])
    family('plan_ok', 'gauge', '1 when the plan was read and names only units this host has; 0 means no action.',
           [((), summary['plan_ok'])])
    family('actions_total', 'counter', 'Actions carried out, by kind, since the state file was created.',
           [((('kind', kind),), state['actions_total'].get(kind, 0)) for kind in KINDS if kind != REPORT])
    last = {}
    for decision in decisions:
        key = (decision['kind'], 'true' if decision['act'] else 'false')
        last[key] = last.get(key, 0) + 1
    family('last_check_decisions', 'gauge', 'Decisions of the last check, by kind and whether they were acted on.',
           [((('kind', kind), ('acted', acted)), last.get((kind, acted), 0))
            for kind in KINDS for acted in ('true', 'false')])
    family('quarantined', 'gauge', '1 while the host is quarantined (a lost GPU, or one that needs a reset or RMA).',
           [((), bool(summary['quarantined']))])
    family('quarantine_held', 'gauge', '1 when the fleet cap (gpufleet_watchdog_max_quarantined) held back a '
           'quarantine in the last check.', [((), bool(summary.get('quarantine_held')))])
    family('gpu_quarantined', 'gauge', 'Each quarantined GPU (UUID, or index when the UUID is unknown).',
           [((('gpu', key),), 1) for key in summary['quarantined']])
    family('gpu_reset_pending', 'gauge', 'Each GPU with a row remap waiting for a reset (Xid 63).',
           [((('gpu', key),), 1) for key in summary['reset_pending']])
    services = sorted(summary['services'].items())
    family('service_active', 'gauge', "1 when the service's unit is active.",
           [((('service', name),), info['active']) for name, info in services])
    family('service_memory_budget_ratio', 'gauge',
           "GPU memory the service's processes use over its budget (1 is the budget) on its fullest device.",
           [((('service', name),), info['ratio']) for name, info in services if info['ratio'] is not None])
    family('service_remote_fraction', 'gauge', "Share of the service's memory pages outside its NUMA node(s).",
           [((('service', name),), info['remote_fraction']) for name, info in services
            if info['remote_fraction'] is not None])
    family('service_rate_limited', 'gauge', '1 when the service needed a restart but the rate limit held it.',
           [((('service', name),), info['rate_limited']) for name, info in services])
    return '\n'.join(families) + '\n'
