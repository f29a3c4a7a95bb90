# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""The rollout's stages and their tags: each stage is the stage plan's (module_utils/_stage_plan.py), and Ansible's
own tag selection picks them - ``--list-tags`` shows every stage tag and every role's own tags, ``--tags`` with a stage
or a role tag runs that stage, ``--skip-tags`` with either leaves it out whole (docs/fleet.md).

The selection is shown with ``--list-tasks`` on the example fleet: nothing is contacted or changed. What a selected
stage does on a host is the lab's (tests/integration/lab_site.py, step rolling: --tags partition,services,verify).
"""

from __future__ import absolute_import, division, print_function

import glob
import os
import re
import subprocess
import sys

import pytest
import yaml

from ansible_collections.gpufleet.core.plugins.module_utils import _stage_plan as plan

from ..conftest import REPO

ROLLOUT = os.path.join(REPO, 'playbooks', 'fleet', 'rollout.yml')
EXAMPLE = os.path.join(REPO, 'examples', 'hk-fleet')
ROLE_TAG_SUFFIXES = ('install', 'configure', 'run')


def stage_tags(stage):
    return [stage] + ['%s_%s' % (role, suffix) for role in plan.STAGE_ROLES[stage] for suffix in ROLE_TAG_SUFFIXES]


def includes():
    with open(ROLLOUT) as handle:
        tasks = yaml.safe_load(handle)[0]['tasks']
    return [task for task in tasks if 'ansible.builtin.include_tasks' in task]


def test_the_rollout_includes_each_stage_of_the_plan_in_its_order_tagged_with_it_and_its_roles_tags():
    found = includes()
    assert [os.path.basename(task['ansible.builtin.include_tasks']['file'])[:-len('.yml')] for task in found] \
        == list(plan.STAGES)
    for stage, task in zip(plan.STAGES, found):
        assert task['tags'] == stage_tags(stage), stage
        # The plan decides whether the stage runs here; the receipt whether it has anything to do.
        assert task['when'][0] == "'%s' in _gpufleet_stages" % stage
        assert any('__gpufleet_receipts.skippable' in condition for condition in task['when']) \
            == (stage in plan.RECEIPT_STAGES), stage


def _tasks(document):
    stack = list(document or [])
    while stack:
        task = stack.pop(0)
        yield task
        stack.extend(task.get('block', []) + task.get('rescue', []) + task.get('always', []))


@pytest.mark.parametrize('role', sorted(role for roles in plan.STAGE_ROLES.values() for role in roles))
def test_a_role_tags_its_tasks_only_with_its_own_tags(role):
    # A tag of a role task that its stage's include lacks could never be selected: the include is not run for it.
    used = set()
    for path in glob.glob(os.path.join(REPO, 'roles', role, 'tasks', '*.yml')):
        with open(path) as handle:
            for task in _tasks(yaml.safe_load(handle)):
                tags = task.get('tags', [])
                used.update([tags] if isinstance(tags, str) else tags)
    assert used == set('%s_%s' % (role, suffix) for suffix in ROLE_TAG_SUFFIXES)


@pytest.mark.parametrize('stage', plan.RECEIPT_STAGES)
def test_a_stage_records_its_receipt_only_under_its_own_tag(stage):
    # --tags nvidia_driver_configure runs part of the drivers stage: a receipt would call the stage converged.
    with open(os.path.join(REPO, 'playbooks', 'fleet', 'tasks', stage + '.yml')) as handle:
        document = yaml.safe_load(handle)
    assert len(document) == 1 and document[0]['tags'] == [stage]
    records = [task for task in document[0]['block'] if task.get('gpufleet.core.state_receipt', {}).get('state') == 'record']
    assert len(records) == 1 and 'tags' not in records[0]


def ansible_playbook(*arguments):
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=os.path.join(REPO, 'build', 'collections'), ANSIBLE_NOCOLOR='1')
    ran = subprocess.run([os.path.join(os.path.dirname(sys.executable), 'ansible-playbook'), 'site.yml'] + list(arguments),
                         cwd=EXAMPLE, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True,
                         check=False, timeout=300)
    assert ran.returncode == 0, ran.stdout[-4000:]
    return ran.stdout


def rollout_section(listing):
    return listing[listing.index('Roll the changes out'):listing.index('play #4')]


def test_list_tags_shows_every_stage_tag_and_every_role_tag():
    section = rollout_section(ansible_playbook('--list-tags'))
    listed = set(re.search(r'TASK TAGS: \[([^\]]*)\]', section).group(1).split(', '))
    assert set(tag for stage in plan.STAGES for tag in stage_tags(stage)) | {'always'} == listed


STAGE_TITLES = dict((stage, task['name']) for stage, task in zip(plan.STAGES, includes()))


@pytest.mark.parametrize('arguments, stages', [
    ([], list(plan.STAGES)),
    (['--tags', 'drivers'], ['drivers']),
    (['--tags', 'nvidia_driver_configure'], ['drivers']),
    (['--tags', 'partition,services,verify'], ['partition', 'services', 'verify']),
    (['--tags', 'mps_run'], ['partition']),
    (['--skip-tags', 'watchdog'], [stage for stage in plan.STAGES if stage != 'watchdog']),
    (['--skip-tags', 'mig_install'], [stage for stage in plan.STAGES if stage != 'partition']),
    (['--tags', 'preflight'], []),
])
def test_tags_and_skip_tags_select_whole_stages_by_stage_or_role_tag(arguments, stages):
    section = rollout_section(ansible_playbook('--list-tasks', *arguments))
    assert [stage for stage in plan.STAGES if STAGE_TITLES[stage] in section] == stages
    # The receipts' check, the give-back and the health gate run whatever is selected.
    assert 'Which stages are converged' in section and 'Health gate' in section


HANDED = re.compile(r"""^\s*([a-z_]+): "\{\{ _gpufleet_handed_down\['([a-z_]+)'\] \}\}"$""", re.M)


def test_every_value_handed_down_to_a_role_is_validates_and_is_handed_where_its_role_runs():
    # The role variable -> the site playbook's knob is fleet.HANDED_DOWN's; the YAML only names where each goes.
    from ansible_collections.gpufleet.core.plugins.module_utils._fleet_inventory import HANDED_DOWN
    found = {}
    for path in (ROLLOUT, os.path.join(REPO, 'playbooks', 'fleet', 'tasks', 'monitoring.yml'),
                 os.path.join(REPO, 'roles', 'gpufleet', 'tasks', 'preflight.yml')):
        with open(path) as handle:
            pairs = HANDED.findall(handle.read())
        assert all(variable == key for variable, key in pairs), pairs
        found[os.path.basename(path)] = sorted(variable for variable, _key in pairs)
    assert found['rollout.yml'] == sorted(name for name in HANDED_DOWN if name.startswith('gpu_watchdog_'))
    assert found['monitoring.yml'] == found['preflight.yml'] == sorted(
        name for name in HANDED_DOWN if name.startswith('monitoring_'))
