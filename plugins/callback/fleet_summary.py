# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.core contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r'''
name: fleet_summary
type: aggregate
short_description: Print what became of each host of a gpufleet.core.site run
version_added: 0.1.0
description:
  - At the end of a run of the C(gpufleet.core.site) playbook, prints one line per host of the run - converged with its
    audit, failed with the stage, task and reason, unreachable with the stage, quarantined or failed by preflight
    with the reason, or not changed - and the counts.
  - It is printed however the run ends, including when Ansible stops the rollout early because a batch went over
    C(gpufleet_max_fail_percentage) or a whole batch failed, which a last play could not do.
  - It reads the facts the site playbook's stages set, so it prints nothing for other playbooks.
  - Enable it with C(callbacks_enabled = gpufleet.core.fleet_summary) in C(ansible.cfg), as C(examples/hk-fleet) does.
author:
  - gpufleet.core developers (@gpufleet)
requirements:
  - enabled in C(callbacks_enabled)
'''

from ansible.plugins.callback import CallbackBase

from ansible_collections.gpufleet.core.plugins.plugin_utils._fleet_summary import FleetRun


def _parts(result):
    """(host name, result dict, task) across ansible-core's result classes (2.16's TaskResult, 2.19's
    CallbackTaskResult)."""
    host = getattr(result, 'host', None) or getattr(result, '_host')
    data = getattr(result, 'result', None)
    if not isinstance(data, dict):
        data = getattr(result, '_result', None) or {}
    task = getattr(result, 'task', None) or getattr(result, '_task', None)
    return host.get_name(), data, task


def _stage_of(task):
    """validate or preflight, for a task of those stages' task files; None for any other task."""
    path = (task.get_path() or '') if task is not None else ''
    for stage in ('validate', 'preflight'):
        if '/tasks/%s.yml' % stage in path:
            return stage
    return None


class CallbackModule(CallbackBase):

    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = 'aggregate'
    CALLBACK_NAME = 'gpufleet.core.fleet_summary'
    CALLBACK_NEEDS_ENABLED = True

    def __init__(self):
        super(CallbackModule, self).__init__()
        self.run = FleetRun()

    def v2_runner_on_ok(self, result):
        host, data, task = _parts(result)
        facts = data.get('ansible_facts')
        if isinstance(facts, dict):
            self.run.facts(host, facts)
        if data.get('add_group') == 'gpufleet_quarantine':
            self.run.quarantine(host)
        if isinstance(data.get('gate'), dict):
            self.run.gate(data['gate'])

    def v2_runner_on_failed(self, result, ignore_errors=False):
        host, data, task = _parts(result)
        if isinstance(data.get('gate'), dict):
            self.run.gate(data['gate'])  # a gate that stopped the rollout
        stage = _stage_of(task)
        # Preflight's checks are rescued and recorded with their reason; the gates ('Stop here ...') fail on the host
        # that runs them once, for the others.
        if not ignore_errors and stage is not None and not (task.name or '').startswith('Stop here') \
                and not self._in_rescued_block(task):
            self.run.refusal(host, stage, data.get('msg'))

    def v2_runner_on_unreachable(self, result):
        host, data, _task = _parts(result)
        self.run.lost(host, data.get('msg'))

    @staticmethod
    def _in_rescued_block(task):
        parent = getattr(task, '_parent', None)
        while parent is not None:
            if getattr(parent, 'rescue', None):
                return True
            parent = getattr(parent, '_parent', None)
        return False

    def v2_playbook_on_stats(self, stats):
        lines = self.run.lines()
        if lines:
            self._display.banner('FLEET SUMMARY')
            for line in lines:
                self._display.display(line)
