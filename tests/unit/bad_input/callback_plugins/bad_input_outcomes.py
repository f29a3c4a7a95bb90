# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""Stdout callback for tests/unit/bad_input/roles.py: each host's first failure, written as JSON at the end.

Written here rather than taken from ansible.posix.json so that every ansible-core the tests run on has it.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = '''
    name: bad_input_outcomes
    type: stdout
    short_description: Each host's first failure, as JSON in the file GPUFLEET_BAD_INPUT_REPORT names
    description: Test support for the bad-input suite.
'''

import json
import os

from ansible.plugins.callback import CallbackBase


class CallbackModule(CallbackBase):
    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = 'stdout'
    CALLBACK_NAME = 'bad_input_outcomes'

    def __init__(self, *args, **kwargs):
        super(CallbackModule, self).__init__(*args, **kwargs)
        self.outcomes = {}

    def _record(self, result, what):
        host = result._host.get_name()
        if host in self.outcomes:
            return
        found = result._result
        message = found.get('msg') or found.get('message') or found.get('stderr') or json.dumps(found, default=str)
        self.outcomes[host] = {'failed': True, 'task': result._task.get_name(), 'message': str(message),
                               'how': what, 'changed': bool(found.get('changed'))}

    def v2_runner_on_failed(self, result, ignore_errors=False):
        self._record(result, 'failed')

    def v2_runner_on_unreachable(self, result):
        self._record(result, 'unreachable')

    def v2_playbook_on_stats(self, stats):
        with open(os.environ['GPUFLEET_BAD_INPUT_REPORT'], 'w') as handle:
            json.dump(self.outcomes, handle, indent=1, sort_keys=True)
