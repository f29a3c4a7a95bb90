# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.core contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Writes the fleet report (one HTML page and its JSON) on the controller, keeping the previous JSON for the diff.

What is drawn and compared is plugin_utils/_fleet_report.py's; this file reads and writes the three files.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import datetime
import os
import tempfile

from ansible.errors import AnsibleActionFail
from ansible.plugins.action import ActionBase

from ansible_collections.gpufleet.core.plugins.plugin_utils._fleet_report import (
    HTML_NAME, JSON_NAME, PREVIOUS_NAME, FleetReportError, change_count, plan_report)

ARGUMENT_SPEC = {
    'dest': {'type': 'path', 'required': True},
    'hosts': {'type': 'list', 'elements': 'raw', 'required': True},
    'generated_at': {'type': 'str'},
    'fleet': {'type': 'list', 'elements': 'str'},
    'mode': {'type': 'raw', 'default': '0644'},
}


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

    def write(self, name, text, mode):
        """Replace the file at once (a reader never sees half a report)."""
        if not os.path.isdir(self.directory):
            os.makedirs(self.directory)
        handle, temporary = tempfile.mkstemp(prefix='.' + name, dir=self.directory)
        try:
            with os.fdopen(handle, 'wb') as out:
                out.write(text.encode('utf-8'))
            os.chmod(temporary, mode)
            os.replace(temporary, self.path(name))
        except BaseException:
            if os.path.exists(temporary):
                os.unlink(temporary)
            raise


def _mode(value):
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    text = str(value)
    if len(text) in (3, 4) and all(char in '01234567' for char in text):
        return int(text, 8)
    raise AnsibleActionFail('gpufleet.core.fleet_report: mode must be octal permissions such as \'0644\', got %r' % (value,))


class ActionModule(ActionBase):

    TRANSFERS_FILES = False
    _requires_connection = False

    def run(self, tmp=None, task_vars=None):
        result = super(ActionModule, self).run(tmp, task_vars)
        del tmp
        dummy, args = self.validate_argument_spec(argument_spec=ARGUMENT_SPEC)
        mode = _mode(args['mode'])
        directory = args['dest']
        if os.path.exists(directory) and not os.path.isdir(directory):
            raise AnsibleActionFail('gpufleet.core.fleet_report: dest %s is not a directory; give the directory the '
                                    'report is written into' % directory)
        files = ReportFiles(directory)
        generated_at = args['generated_at'] or datetime.datetime.now(datetime.timezone.utc).strftime('%Y-%m-%dT%H:%M:%SZ')
        found = dict((name, files.read(name)) for name in (HTML_NAME, JSON_NAME, PREVIOUS_NAME))
        try:
            planned = plan_report(args['hosts'], generated_at, found, args['fleet'])
        except FleetReportError as exc:
            raise AnsibleActionFail('gpufleet.core.fleet_report: %s' % exc)
        write = planned['write']
        if not self._task.check_mode:
            # The previous report first: a run stopped half-way then still has it.
            for name in (PREVIOUS_NAME, JSON_NAME, HTML_NAME):
                if name in write:
                    try:
                        files.write(name, write[name], mode)
                    except (IOError, OSError) as exc:
                        raise AnsibleActionFail('gpufleet.core.fleet_report: cannot write %s (%s); make dest a directory '
                                                'the controller\'s user can write' % (files.path(name), exc))
        summary = planned['data']['summary']
        result.update({
            'changed': bool(write),
            'html': files.path(HTML_NAME),
            'json': files.path(JSON_NAME),
            'previous': files.path(PREVIOUS_NAME) if PREVIOUS_NAME in write or found[PREVIOUS_NAME] is not None else None,
            'written': sorted(files.path(name) for name in write),
            'changes': change_count(planned['changes']),
            'previous_problem': planned['changes']['previous']['problem'] or None,
            'hosts': summary['hosts'],
            'failed_hosts': [item['host'] for item in summary['failed_hosts']],
            'quarantined_hosts': [item['host'] for item in summary['quarantined_hosts']],
            'failed_audits': ['%s/%s' % (item['host'], item['service']) for item in summary['failed_audits']],
            'not_in_run': [item['host'] for item in summary['not_in_run']],
        })
        if self._task.diff and JSON_NAME in write:
            result['diff'] = {'before_header': files.path(JSON_NAME), 'after_header': files.path(JSON_NAME),
                              'before': found[JSON_NAME] or '', 'after': write[JSON_NAME]}
        return result
