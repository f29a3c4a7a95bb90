# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""Each role of a receipt-kept stage names in _<role>_owns (vars/main.yml) every file its tasks write, so that the
stage's receipt fingerprints it and an edit by hand is drift (docs/drift.md).

A task's dest is held against the owns expression's text: each literal part of the path and each variable in it must
be there (a path built in a loop, as /etc/systemd/system/{{ item.unit }}, by its literal part). The apt source, pins
and keyring that apt_pinned writes for an install role are held the same way, from the role's import of apt_pinned.
"""

from __future__ import absolute_import, division, print_function

import glob
import os
import re

import pytest
import yaml

from ansible_collections.gpufleet.core.plugins.module_utils import _stage_plan as stage_plan

from .conftest import ROLES, role_yaml

# The roles the rollout's receipt-kept stages run (the stage plan's).
STAGE_ROLES = [role for stage in stage_plan.RECEIPT_STAGES for role in stage_plan.STAGE_ROLES[stage]]
WRITERS = ('ansible.builtin.template', 'ansible.builtin.copy')
# Written on purpose but not state: the reboot-required marker lives in /run until the reboot it asks for; the
# services' runtime files are written again at each boot from the device map, which is owned (_device_env).
NOT_STATE = {'/run/reboot-required', '{{ _gpu_services_runtime_dir }}/{{ item.key }}.env'}
EXPRESSION = re.compile(r'\{\{(.*?)\}\}')
NAME = re.compile(r'[A-Za-z_][A-Za-z0-9_]*')


def tasks(role):
    found = []
    for path in sorted(glob.glob(os.path.join(ROLES, role, 'tasks', '*.yml'))):
        with open(path) as handle:
            stack = list(yaml.safe_load(handle) or [])
        while stack:
            task = stack.pop(0)
            stack.extend(task.get('block', []) + task.get('rescue', []) + task.get('always', []))
            found.append(task)
    return found


def owns_text(role):
    return yaml.safe_dump(role_yaml(role, 'vars/main.yml')['_%s_owns' % role])


def uncovered(dest, text):
    """The parts of DEST (a path template) the owns text lacks."""
    missing = [part.strip('/') for part in EXPRESSION.split(dest)[::2] if part.strip('/') and part.strip('/') not in text]
    for expression in EXPRESSION.findall(dest):
        missing.extend(name for name in NAME.findall(expression)
                       if name not in ('item', 'dirname', 'basename') and not name.startswith('__')
                       and name not in text and not expression.strip().startswith('item'))
    return missing


@pytest.mark.parametrize('role', STAGE_ROLES)
def test_every_file_a_stage_role_writes_is_in_what_it_owns(role):
    text = owns_text(role)
    checked, problems = 0, []
    for task in tasks(role):
        for writer in WRITERS:
            if writer in task and 'dest' in task[writer] and task[writer]['dest'] not in NOT_STATE:
                checked += 1
                missing = uncovered(task[writer]['dest'], text)
                if missing:
                    problems.append('%s: dest %s: %s not in _%s_owns'
                                    % (task['name'], task[writer]['dest'], ', '.join(missing), role))
        if task.get('ansible.builtin.import_role', {}).get('name') == 'gpufleet.core.apt_pinned':
            given = task['vars']
            name = given['apt_pinned_name']
            for path in ('/etc/apt/sources.list.d/%s.sources' % name,
                         '/etc/apt/preferences.d/%s' % given.get('apt_pinned_preferences_name', name)):
                checked += 1
                if path not in text:
                    problems.append('apt_pinned for %s: %s not in _%s_owns' % (role, path, role))
            checked += 1
            problems.extend('apt_pinned keyring: %s not in _%s_owns' % (missing, role)
                            for missing in uncovered(given['apt_pinned_keyring'], text))
    assert checked > 0, 'no file-writing task found: the test reads the wrong files'
    assert problems == []


def test_the_check_holds_a_path_the_owns_lack():
    assert uncovered('/etc/gpufleet/{{ item.device }}.env', "files: ['/etc/gpufleet/x']") == ['.env']
    assert uncovered('{{ mps_config_dir }}/x.conf', "files: [x.conf]") == ['mps_config_dir']
    assert uncovered('/etc/systemd/system/{{ item }}', "- /etc/systemd/system/a") == []


def test_what_mps_owns_renders_to_each_daemons_files_and_unit():
    # A whole GPU's daemon is named by its UUID, a MIG device's by its slot, which a reboot keeps (issue 42).
    from .conftest import RoleRender
    slot = 'GPU-bbb:1g.10gb:6:0'
    plan = [{'name': 'GPU-aaa', 'device': 'GPU-aaa', 'pipe_directory': '/run/gpufleet-mps/GPU-aaa'},
            {'name': slot, 'device': 'MIG-bbb', 'pipe_directory': '/run/gpufleet-mps/' + slot}]
    owns = RoleRender('mps', _mps_plan=plan).value('_mps_owns')
    assert owns['files'] == ['/usr/local/lib/gpufleet/gpufleet-helpers.pyz', '/etc/systemd/system/gpufleet-mps@.service',
                             '/etc/gpufleet/mps/GPU-aaa.env', '/etc/gpufleet/mps/%s.env' % slot,
                             '/etc/systemd/system/gpufleet-mps@GPU-aaa.service.d/gpufleet.conf',
                             '/etc/systemd/system/gpufleet-mps@%s.service.d/gpufleet.conf' % slot]
    assert owns['units'] == ['gpufleet-mps@GPU-aaa.service', 'gpufleet-mps@%s.service' % slot]
    assert owns['mps'] == [{'pipe_directory': '/run/gpufleet-mps/GPU-aaa', 'devices': ['GPU-aaa']},
                           {'pipe_directory': '/run/gpufleet-mps/' + slot, 'devices': [slot]}]
