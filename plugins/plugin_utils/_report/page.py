# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.core contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The fleet report's page: one self-contained HTML document (inline style and SVG; no script, and nothing fetched).

Every text from inventory or facts is escaped here or in the drawing (svg.py).
This is a private module: its API may change without notice.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from html import escape

from ansible_collections.gpufleet.core.plugins.module_utils._cpulist import format_cpulist
from ansible_collections.gpufleet.core.plugins.module_utils._mig_catalog import WIDEST_DIVISION
from ansible_collections.gpufleet.core.plugins.plugin_utils._report.diff import change_count
from ansible_collections.gpufleet.core.plugins.plugin_utils._report.svg import draw_host
from ansible_collections.gpufleet.core.plugins.plugin_utils._report.words import audit_words, text

STYLE = '''
body{font:14px/1.4 "DejaVu Sans",Arial,sans-serif;margin:0;background:#f4f6f9;color:#1d2330}
header,section{padding:12px 24px}header{background:#1d2330;color:#fff}h1{margin:0;font-size:22px}
h2{font-size:18px;margin:18px 0 8px}h3{font-size:15px;margin:10px 0 4px}
table{border-collapse:collapse;background:#fff;margin:4px 0 10px}td,th{border:1px solid #d5dae3;padding:3px 8px;
text-align:left;vertical-align:top;font-size:13px}th{background:#e9edf3}
.cards{display:flex;flex-wrap:wrap;gap:16px}.tables{display:flex;flex-wrap:wrap;gap:24px}
.host{background:#fff;border:1px solid #d5dae3;border-radius:6px;padding:10px 12px;flex:1 1 640px;max-width:100%;
box-sizing:border-box;min-width:0}
.host svg{max-width:100%;height:auto;display:block}.host h3{display:flex;gap:10px;align-items:baseline}
.status{font-size:12px;padding:1px 8px;border-radius:9px;background:#2e9d5b;color:#fff}
.status-failed,.status-audit-failed{background:#c73a3a}.status-quarantined{background:#b26a00}
.status-unknown{background:#6b7385}.meta{color:#4a5366;font-size:13px;margin:0 0 6px}
.missing{color:#8a4b00;font-size:13px;margin:4px 0}.problems{color:#a02c2c}
.bad{color:#c73a3a;font-weight:bold}.ok{color:#2e7d4f}
text{font-family:"DejaVu Sans Mono",Menlo,Consolas,monospace;fill:#1d2330}
text.title{font-weight:bold}text.note,text.label{fill:#4a5366}text.on-fill{fill:#10151f}
rect.socket{fill:none;stroke:#9aa3b5;stroke-dasharray:4 3}rect.node{fill:#f7f9fc;stroke:#9aa3b5}
rect.memory-only{fill:#f1eefa}rect.unknown{fill:#fff7ea;stroke:#d9a441}rect.missing{fill:#fff1f1;stroke:#c73a3a}
rect.cpu.free{fill:#dfe4ec}rect.cpu.reserved{fill:#4a5366}rect.memory{fill:#8ea3c4}
rect.gpu{fill:#ffffff;stroke:#6b7385}rect.slot{fill:#eef1f6;stroke:#c5ccd8}rect.whole-gpu{fill:#eef1f6}
rect.mig-instance,rect.mig-memory{fill:#d8e2f3;stroke:#4f6fa8}
.audit-pass{fill:#5dbb7a}.audit-pass-remote{fill:#c3d65a}.audit-fail{fill:#e26d6d}
.audit-missing,.audit-none{fill:#b7c0d0}rect.mps-share{stroke:#ffffff;stroke-width:1}
rect.service-chip{stroke:#4a5366;stroke-width:.5}
path.cross-link{fill:none;stroke:#c73a3a;stroke-width:2;stroke-dasharray:5 3}
.legend span{display:inline-block;width:12px;height:12px;margin:0 4px 0 12px;vertical-align:middle;border-radius:2px}
'''


def _e(value):
    return escape(text(value), True)


def _table(head, rows):
    return '<table><tr>%s</tr>%s</table>' % (''.join('<th>%s</th>' % _e(cell) for cell in head), ''.join(
        '<tr>%s</tr>' % ''.join('<td>%s</td>' % _e(cell) for cell in row) for row in rows))


def _summary_html(data):
    found = data['summary']
    classes = sorted(found['by_class'])
    dc_rows = [[dc] + [found['by_dc_class'][dc].get(klass, 0) for klass in classes] + [found['by_dc'][dc]]
               for dc in sorted(found['by_dc_class'])]
    dc_rows.append(['all'] + [found['by_class'][klass] for klass in classes] + [found['hosts']])
    gpu_rows = [[model, item['gpus'], item['mig_enabled'], item['mig_instances'],
                 ', '.join('%s x%d' % (name, count) for name, count in sorted(item['profiles'].items())) or '-']
                for model, item in sorted(found['gpus_by_model'].items())]
    versions = [['driver', ', '.join('%s (%d)' % item for item in sorted(found['drivers'].items())) or '-'],
                ['CUDA', ', '.join('%s (%d)' % item for item in sorted(found['cuda'].items())) or '-']]
    counts = [['hosts', found['hosts']], ['GPUs', found['gpus']], ['MIG instances', found['mig_instances']],
              ['services', found['services']], ['audits passed', '%d of %d' % (found['services_passed'], found['services'])],
              ['MPS shares', found['mps_shares']], ['services across NUMA nodes', found['cross_node_services']],
              ['failed hosts', len(found['failed_hosts'])], ['quarantined hosts', len(found['quarantined_hosts'])],
              ['hosts without facts', len(found['unknown_hosts'])], ['hosts without GPUs', len(found['hosts_without_gpus'])],
              ['hosts not in this run', len(found['not_in_run'])]]
    if found.get('drifted_hosts'):
        counts.append(['hosts drifted', len(set(item['host'] for item in found['drifted_hosts']))])
    parts = ['<section id="summary"><h2>Fleet summary</h2><div class="tables">',
             '<div><h3>Hosts by data centre and class</h3>%s</div>' % _table(['data centre'] + classes + ['hosts'], dc_rows),
             '<div><h3>GPUs by model</h3>%s</div>' % _table(['model', 'GPUs', 'MIG on', 'MIG instances', 'profiles'], gpu_rows),
             '<div><h3>Versions</h3>%s</div>' % _table(['', 'versions (hosts)'], versions),
             '<div><h3>Counts</h3>%s</div>' % _table(['', ''], counts), '</div>']
    problems = ([['failed', item['host'], item['reason']] for item in found['failed_hosts']]
                + [['quarantined', item['host'], item['reason']] for item in found['quarantined_hosts']]
                + [['no facts', item['host'], item['reason']] for item in found['unknown_hosts']])
    audits = [[item['host'], item['service'], '%.1f%%' % (item['remote_fraction'] * 100) if item['remote_fraction'] is not None else '-',
               '; '.join(item['reasons'])] for item in found['failed_audits']]
    parts.append('<h3>Hosts failed, quarantined or unread</h3>%s' % (
        _table(['', 'host', 'why'], problems) if problems else '<p class="ok">none</p>'))
    drifted = [[item['host'], item['stage'], '; '.join(item['items'])] for item in found.get('drifted_hosts') or []]
    if drifted:
        parts.append('<h3 id="drift">Drift since the site playbook converged them</h3>%s'
                     % _table(['host', 'stage', 'what changed'], drifted))
    parts.append('<h3 id="failed-audits">Failed audits</h3>%s' % (
        _table(['host', 'service', 'remote', 'reasons'], audits) if audits else '<p class="ok">none</p>'))
    if found['not_in_run']:
        parts.append('<h3 id="not-in-run">Not in this run</h3><p class="meta">Shown as an earlier report found them: %s</p>' % _e(
            ', '.join('%s (%s)' % (item['host'], item['as_of']) for item in found['not_in_run'])))
    parts.extend('<p class="missing problems">%s</p>' % _e(problem) for problem in found['not_drawn'])
    return ''.join(parts) + '</section>'


def _changes_html(changes):
    previous = changes['previous']
    parts = ['<section id="changes"><h2>What changed since the previous report</h2>']
    if not previous['found']:
        parts.append('<p class="missing" data-previous="missing">%s</p></section>' % _e(previous['problem']))
        return ''.join(parts)
    parts.append('<p class="meta" data-previous="found" data-changes="%d">Compared with the report of %s.</p>' % (
        change_count(changes), _e(previous['generated_at'] or 'an unknown time')))
    if not change_count(changes):
        parts.append('<p class="ok">Nothing changed.</p>')
    if changes['hosts_added'] or changes['hosts_removed']:
        parts.append(_table(['hosts added', 'hosts removed'],
                            [[', '.join(changes['hosts_added']) or '-', ', '.join(changes['hosts_removed']) or '-']]))
    if changes['status']:
        parts.append('<h3>Status</h3>' + _table(['host', 'before', 'now'], [
            [item['host'], item['before'], item['after']] for item in changes['status']]))
    if changes['layouts']:
        parts.append('<h3>Layouts</h3>' + _table(['host', 'gone', 'new'], [
            [item['host'], '; '.join(item['removed']) or '-', '; '.join(item['added']) or '-'] for item in changes['layouts']]))
    if changes['placements']:
        parts.append('<h3>Placements</h3>' + _table(['host', 'service', 'before', 'now'], [
            [item['host'], item['service'], item['before'] or '(new)', item['after'] or '(removed)'] for item in changes['placements']]))
    if changes['audits']:
        parts.append('<h3>Audit results</h3>' + _table(['host', 'service', 'before', 'now'], [
            [item['host'], item['service'], item['before'], item['after']] for item in changes['audits']]))
    return ''.join(parts) + '</section>'


def host_html(host):
    topology = host['topology']
    labels = 'data centre %s, rack %s, class %s' % (host['dc'] or '-', host['rack'] or '-', host['class'] or '-')
    if topology:
        labels += '; %s; driver %s, CUDA %s' % (topology['cpu_model'] or 'CPU model unknown', topology['driver'] or '-',
                                                topology['cuda'] or '-')
    status = host['status'].replace(' ', '-')
    as_of = host.get('as_of')
    as_of_attribute = ' data-as-of="%s"' % _e(as_of) if as_of is not None else ''
    article = '<article class="host" id="host-%s" data-host="%s" data-status="%s"%s>' % (
        _e(host['name']), _e(host['name']), _e(status), as_of_attribute)
    parts = [article,
             '<h3>%s <span class="status status-%s">%s</span></h3>' % (_e(host['name']), _e(status), _e(host['status'])),
             '<p class="meta">%s</p>' % _e(labels)]
    if as_of is not None:
        parts.append('<p class="missing" data-missing="run">Not in this run: drawn as the report of %s found it.</p>' % _e(as_of))
    if host['failure']:
        parts.append('<p class="problems">%s: %s</p>' % ('Quarantined' if host['status'] == 'quarantined' else 'Failed', _e(host['failure'])))
    parts.extend('<p class="missing" data-missing="%s">Missing: %s</p>' % (_e(item.split(' ')[0]), _e(item)) for item in host['missing'])
    parts.extend('<p class="missing problems">%s</p>' % _e(problem) for problem in host['problems'])
    parts.extend('<p class="problems" data-drift="%s">Drifted since the %s stage converged it: %s</p>'
                 % (_e(entry['stage']), _e(entry['stage']), _e('; '.join(entry['items'])))
                 for entry in host.get('drift') or [])
    parts.append(draw_host(host))
    if host['services']:
        rows = [[service['name'], service['cpulist'] or '-', format_cpulist(service['mems']) or '-',
                 ' '.join(device['label'] for device in service['devices']) or '-',
                 audit_words(service['audit']), '; '.join(service['audit']['reasons'])] for service in host['services']]
        parts.append(_table(['service', 'CPUs', 'memory', 'GPU', 'audit', 'reasons'], rows))
    return ''.join(parts) + '</article>'


def render_html(data, changes):
    """The page: one self-contained HTML document (inline style and SVG; no script, and nothing fetched)."""
    found = data['summary']
    bad = len(found['failed_hosts']) + len(found['quarantined_hosts']) + len(found['failed_audits'])
    legend = ''.join('<span class="%s" style="background:%s"></span>%s' % (cls, colour, _e(words)) for cls, colour, words in (
        ('pass', '#5dbb7a', 'audit passed'), ('pass-remote', '#c3d65a', 'passed, remote pages >= 1%'),
        ('fail', '#e26d6d', 'audit failed'), ('none', '#b7c0d0', 'not audited'), ('reserved', '#4a5366', 'reserved CPU'),
        ('free', '#dfe4ec', 'free CPU'), ('mig', '#d8e2f3', 'MIG instance')))
    return ''.join([
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        '<title>gpufleet report</title><style>%s</style></head><body>' % STYLE,
        '<header><h1>gpufleet report</h1><p>%s &middot; %d host(s) &middot; %s</p></header>' % (
            _e(data['generated_at'] or 'time unknown'), found['hosts'],
            '<span class="bad">%d problem(s)</span>' % bad if bad else 'no problems'),
        _summary_html(data), _changes_html(changes),
        '<section id="hosts"><h2>Hosts</h2><p class="meta legend">%s; a dashed red line: a service across NUMA nodes. '
        'MIG instances on the %d compute (upper) and %d memory (lower) slices.</p><div class="cards">' % (
            (legend,) + WIDEST_DIVISION),
        ''.join(host_html(host) for host in data['hosts']),
        '</div></section></body></html>\n'])
