# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.core contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""What changed between two fleet reports' data: hosts added and removed, status, layouts, placements, audits.

The previous report is read back from disk and may have been edited by hand, so it is read with .get throughout.
This is a private module: its API may change without notice.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.gpufleet.core.plugins.plugin_utils._report.words import audit_words, gib, placement_words, text

CHANGE_KINDS = ('hosts_added', 'hosts_removed', 'status', 'layouts', 'placements', 'audits')


def layout_lines(host):
    """A host's hardware layout in short lines, to compare across reports."""
    topology = host.get('topology')
    if not isinstance(topology, dict):
        return []
    lines = ['node %s: CPUs %s, %s' % (node.get('id'), node.get('cpulist') or 'none', gib(node.get('memory_mb')))
             for node in topology.get('nodes') or [] if isinstance(node, dict)]
    for gpu in topology.get('gpus') or []:
        if isinstance(gpu, dict):
            mig = ', MIG %s' % ' '.join('%s@%s' % (item.get('profile'), item.get('memory_start'))
                                        for item in gpu.get('instances') or []) if gpu.get('mig') else ''
            lines.append('%s %s on node %s%s' % (gpu.get('label'), gpu.get('model'), gpu.get('node'), mig))
    return lines


def _service_changes(name, old, host, changes):
    """The placements and audit results of one host that changed."""
    old_services = dict((item.get('name'), item) for item in old.get('services') or [] if isinstance(item, dict))
    new_services = dict((item['name'], item) for item in host['services'])
    for service in list(new_services) + sorted(set(old_services) - set(new_services)):
        was, now = old_services.get(service), new_services.get(service)
        was_text, now_text = placement_words(was) if was else None, placement_words(now) if now else None
        if was_text != now_text:
            changes['placements'].append({'host': name, 'service': service, 'before': was_text, 'after': now_text})
        if was and now and audit_words(was.get('audit')) != audit_words(now['audit']):
            changes['audits'].append({'host': name, 'service': service, 'before': audit_words(was.get('audit')),
                                      'after': audit_words(now['audit'])})


def diff_reports(previous, current, problem=None):
    """What changed between two reports' data; ``problem`` says why there is no previous report to compare with."""
    changes = {'previous': {'found': previous is not None, 'problem': problem or '',
                            'generated_at': text((previous or {}).get('generated_at'))}}
    changes.update((kind, []) for kind in CHANGE_KINDS)
    if previous is None:
        return changes
    before = dict((host['name'], host) for host in previous['hosts'])
    after = dict((host['name'], host) for host in current['hosts'])
    changes['hosts_added'] = [name for name in after if name not in before]
    changes['hosts_removed'] = sorted(name for name in before if name not in after)
    for name, host in after.items():
        old = before.get(name)
        if old is None:
            continue
        if old.get('status') != host['status']:
            changes['status'].append({'host': name, 'before': text(old.get('status')), 'after': host['status']})
        old_layout, new_layout = layout_lines(old), layout_lines(host)
        if old_layout != new_layout:
            changes['layouts'].append({'host': name, 'removed': [line for line in old_layout if line not in new_layout],
                                       'added': [line for line in new_layout if line not in old_layout]})
        _service_changes(name, old, host, changes)
    return changes


def change_count(changes):
    return sum(len(changes[kind]) for kind in CHANGE_KINDS)
