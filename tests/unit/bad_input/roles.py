# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""Run one task file of a role for many bad-input cases in ONE ansible-playbook run, and say how each case ended.

Each case becomes a host of its own: an alias of localhost (``ansible_connection=local``) that carries the case's
variables, so one playbook run covers the whole table. The play runs in check mode and only includes the task
file it is given (a role's ``preflight.yml``), which reads and refuses but changes nothing; the caller still
measures what it cares about before and after (support.bad_input.snapshot, the simulator's mutation counter).

    outcomes = run_role_cases('mps', 'preflight.yml', {'wrong root': {'mps_pipe_root': '/run/../etc'}}, tmp_path,
                              common_vars={'mps_environment': {...}})
    outcomes['wrong root'] == {'failed': True, 'task': 'The pipe and log roots ...', 'message': '...'}

A case that no task failed has ``failed`` False and the empty message. ``message`` is what the user would read:
the failed task's ``msg`` (with the filter's or module's own text in it), or Ansible's error for the host.
"""

from __future__ import absolute_import, division, print_function

import json
import os
import subprocess
import sys

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), '..', '..', '..'))
COLLECTIONS = os.path.join(REPO, 'build', 'collections')
CALLBACK_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), 'callback_plugins')
CALLBACK = 'bad_input_outcomes'


def _host_name(position):
    return 'case%03d' % position


def run_role_cases(role, tasks_from, cases, workdir, common_vars=None, timeout=600):
    """Include gpufleet.core.ROLE's TASKS_FROM once per case, in check mode; returns {case id: outcome}.

    CASES: {case id: the variables of that case} (an ordered dict or a list of (id, vars) pairs); COMMON_VARS go to
    every case first. WORKDIR (a fresh directory) holds the inventory, the playbook and Ansible's temporary files.
    """
    cases = list(cases.items()) if isinstance(cases, dict) else list(cases)
    workdir = str(workdir)
    hosts = {}
    for position, (_case_id, variables) in enumerate(cases):
        hosts[_host_name(position)] = dict(common_vars or {}, ansible_connection='local',
                                           ansible_python_interpreter=sys.executable, **variables)
    inventory = os.path.join(workdir, 'inventory.json')
    with open(inventory, 'w') as handle:
        json.dump({'all': {'hosts': hosts}}, handle)
    playbook = os.path.join(workdir, 'cases.yml')
    with open(playbook, 'w') as handle:
        json.dump([{'name': 'Bad input cases', 'hosts': 'all', 'gather_facts': False, 'tasks': [
            {'name': 'Run the task file', 'ansible.builtin.include_role': {
                'name': 'gpufleet.core.%s' % role, 'tasks_from': tasks_from}}]}], handle)
    report = os.path.join(workdir, 'outcomes.json')
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=COLLECTIONS, ANSIBLE_CALLBACK_PLUGINS=CALLBACK_DIR,
               ANSIBLE_STDOUT_CALLBACK=CALLBACK, GPUFLEET_BAD_INPUT_REPORT=report,
               ANSIBLE_HOME=os.path.join(workdir, 'ansible-home'), ANSIBLE_LOCAL_TEMP=os.path.join(workdir, 'tmp'),
               ANSIBLE_REMOTE_TEMP=os.path.join(workdir, 'tmp'), ANSIBLE_RETRY_FILES_ENABLED='false',
               ANSIBLE_FORKS='8', ANSIBLE_NOCOLOR='1', ANSIBLE_DEPRECATION_WARNINGS='false')
    playbook_command = os.path.join(os.path.dirname(sys.executable), 'ansible-playbook')
    ran = subprocess.run([playbook_command, '-i', inventory, '--check', playbook], env=env, cwd=workdir,
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True, timeout=timeout,
                         check=False)
    if not os.path.exists(report):
        raise AssertionError('ansible-playbook wrote no outcomes (rc=%d):\n%s' % (ran.returncode, ran.stdout))
    with open(report) as handle:
        by_host = json.load(handle)
    return dict((case_id, by_host.get(_host_name(position), {'failed': False, 'task': None, 'message': ''}))
                for position, (case_id, _variables) in enumerate(cases))
