# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.core contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Writes the fleet report (one HTML page and its JSON) on the controller, keeping the previous JSON for the diff.

Each host's values are read from hostvars (plugin_utils/_report/hostvars.py); what is drawn, compared and written is
plugin_utils/_report's. This file checks the task's arguments and writes the files it is given.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import datetime
import os

from ansible.errors import AnsibleActionFail
from ansible.plugins.action import ActionBase

from ansible_collections.gpufleet.core.plugins.module_utils._values import is_integer
from ansible_collections.gpufleet.core.plugins.plugin_utils._fleet_inventory import Inventory
from ansible_collections.gpufleet.core.plugins.plugin_utils._report.diff import change_count
from ansible_collections.gpufleet.core.plugins.plugin_utils._report.files import (
    HTML_NAME, JSON_NAME, PREVIOUS_NAME, WRITE_ORDER, ReportFiles, plan_report)
from ansible_collections.gpufleet.core.plugins.plugin_utils._report.hostvars import host_inputs
from ansible_collections.gpufleet.core.plugins.plugin_utils._report.model import FleetReportError

ARGUMENT_SPEC = {
    'dest': {'type': 'path', 'required': True},
    'hosts': {'type': 'list', 'elements': 'raw', 'required': True},
    'generated_at': {'type': 'str'},
    'fleet': {'type': 'list', 'elements': 'str'},
    'mode': {'type': 'raw', 'default': '0644'},
}


def report_line(result):
    """The report in one line, for the site playbook's summary (gpufleet.core.fleet_summary prints it)."""
    return 'Fleet report: %s (%s; %d host(s)%s; %d change(s) since the previous report%s; failed audits: %s)' % (
        result['html'], 'written' if result['written'] else 'unchanged', result['hosts'],
        '; not in this run: ' + ', '.join(result['not_in_run']) if result['not_in_run'] else '', result['changes'],
        '' if result['previous_problem'] is None else ': ' + result['previous_problem'],
        ', '.join(result['failed_audits']) or 'none')


def _mode(value):
    if is_integer(value):
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
        found = files.read_all()
        try:
            hosts = host_inputs(Inventory(task_vars or {}, self._templar), args['hosts'])
            planned = plan_report(hosts, generated_at, found, args['fleet'])
        except FleetReportError as exc:
            raise AnsibleActionFail('gpufleet.core.fleet_report: %s' % exc)
        write = planned['write']
        if not self._task.check_mode:
            for name in WRITE_ORDER:
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
        result['line'] = report_line(result)
        if self._task.diff and JSON_NAME in write:
            result['diff'] = {'before_header': files.path(JSON_NAME), 'after_header': files.path(JSON_NAME),
                              'before': found[JSON_NAME] or '', 'after': write[JSON_NAME]}
        return result
