# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.core contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The fleet report's files: the report directory, the previous report read back from it, and what to write there.

    fleet-report.html           the page (page.py)
    fleet-report.json           its data (model.py)
    fleet-report.previous.json  the JSON of the report before, kept when the fleet changed

This is a private module: its API may change without notice.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import tempfile

from ansible_collections.gpufleet.core.plugins.plugin_utils._report.diff import diff_reports
from ansible_collections.gpufleet.core.plugins.plugin_utils._report.model import REPORT_VERSION, build_report, comparable, summary
from ansible_collections.gpufleet.core.plugins.plugin_utils._report.page import host_html, render_html
from ansible_collections.gpufleet.core.plugins.plugin_utils._report.words import text

HTML_NAME = 'fleet-report.html'
JSON_NAME = 'fleet-report.json'
PREVIOUS_NAME = 'fleet-report.previous.json'
# Written in this order: the previous report first, so that a run stopped half-way still has it.
WRITE_ORDER = (PREVIOUS_NAME, JSON_NAME, HTML_NAME)


class ReportFiles:
    """The report directory on the controller: the one place that reads and writes it."""

    def __init__(self, directory):
        self.directory = directory

    def path(self, name):
        return os.path.join(self.directory, name)

    def read(self, name):
        """The file's text, or None when it is not there."""
        try:
            with open(self.path(name), 'rb') as handle:
                return handle.read().decode('utf-8', 'replace')
        except (IOError, OSError):
            return None

    def read_all(self):
        """{file name: its text, or None} for the report's three files."""
        return dict((name, self.read(name)) for name in (HTML_NAME, JSON_NAME, PREVIOUS_NAME))

    def write(self, name, content, mode):
        """Replace the file at once (a reader never sees half a report)."""
        if not os.path.isdir(self.directory):
            os.makedirs(self.directory)
        handle, temporary = tempfile.mkstemp(prefix='.' + name, dir=self.directory)
        try:
            with os.fdopen(handle, 'wb') as out:
                out.write(content.encode('utf-8'))
            os.chmod(temporary, mode)
            os.replace(temporary, self.path(name))
        except BaseException:
            if os.path.exists(temporary):
                os.unlink(temporary)
            raise


def read_previous(content, where):
    """(data, None) from a previous report's JSON text, or (None, what is wrong with it, in words)."""
    if content is None:
        return None, 'there is no previous report (%s); this is the first one' % where
    try:
        data = json.loads(content)
    except ValueError as exc:
        return None, 'the previous report %s is not JSON (%s), so the changes cannot be shown this time; the next ' \
                     'report compares with this one' % (where, exc)
    if not isinstance(data, dict) or not isinstance(data.get('hosts'), list):
        return None, 'the previous report %s is not a fleet report (no hosts list)' % where
    if data.get('version') != REPORT_VERSION:
        return None, 'the previous report %s has version %r; this release reads version %d' % (
            where, data.get('version'), REPORT_VERSION)
    if not all(isinstance(host, dict) and isinstance(host.get('name'), str) for host in data['hosts']):
        return None, 'the previous report %s has hosts without a name' % where
    return data, None


def report_json(data):
    return json.dumps(data, indent=1, sort_keys=True) + '\n'


def _carried(old, current, fleet):
    """Hosts of the previous report that are in the fleet but not in this run (a run with --limit), as that report
    has them, marked with when they were found (``as_of``); and, in words, those that report holds too damaged to
    draw."""
    present = set(host['name'] for host in current['hosts'])
    kept, problems = [], []
    for host in old['hosts']:
        if host['name'] not in fleet or host['name'] in present:
            continue
        host = dict(host, as_of=text(host.get('as_of') or old.get('generated_at') or 'an unknown time'))
        try:  # written by this code, but read back from disk: a hand-edited file must not stop the page
            summary([host])
            host_html(host)
        except (KeyError, TypeError, ValueError, AttributeError, IndexError) as exc:
            problems.append('%s is not in this run, and the previous report\'s data on it cannot be drawn (%s: %s)' % (
                host['name'], type(exc).__name__, exc))
            continue
        kept.append(host)
    return kept, problems


def plan_report(hosts, generated_at, found, fleet=None):
    """What to write: {'write': {file name: text}, 'data', 'changes'}.

    ``hosts`` are the hosts' inputs (model.py's doc). ``found`` holds the texts now in the report directory by file
    name (None for a missing file). The previous report is the JSON there; when the fleet is as it describes, nothing
    but a stale page is written and the page keeps comparing with the report before it, so a second run changes
    nothing. Otherwise the JSON there becomes the previous report, kept as it is, even when it is corrupt (the page
    says so).
    ``fleet`` names every host the report covers (the inventory's, whatever the run's limit): a host of the previous
    report that is in it but not in ``hosts`` stays on the page as that report found it. A host not in it is gone.
    """
    data = build_report(hosts, generated_at)
    # Named as it is kept: the JSON there now becomes the previous report when this one is written.
    old, problem = read_previous(found.get(JSON_NAME), PREVIOUS_NAME)
    if old is not None and fleet:
        kept, damaged = _carried(old, data, set(fleet))
        if kept or damaged:
            data['hosts'] = sorted(data['hosts'] + kept, key=lambda host: host['name'])
            data['summary'] = summary(data['hosts'])
            data['summary']['not_drawn'] = damaged
    content = report_json(data)
    write = {}
    if old is not None and comparable(old) == comparable(json.loads(content)):
        data['generated_at'] = old.get('generated_at', '')
        base, base_problem = read_previous(found.get(PREVIOUS_NAME), PREVIOUS_NAME)
        changes = diff_reports(base, data, base_problem)
    else:
        changes = diff_reports(old, data, problem)
        write[JSON_NAME] = content
        if found.get(JSON_NAME) is not None:
            write[PREVIOUS_NAME] = found[JSON_NAME]
    page = render_html(data, changes)
    if page != found.get(HTML_NAME):
        write[HTML_NAME] = page
    return {'write': write, 'data': data, 'changes': changes}
