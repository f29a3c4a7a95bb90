# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""Render roles' variables and templates with Ansible's own templating, for systems this machine is not."""

from __future__ import absolute_import, division, print_function

import os

import pytest
import yaml
from ansible.parsing.dataloader import DataLoader
from ansible.template import Templar

try:  # ansible-core >= 2.19 renders only templates marked as trusted; files from the collection are.
    from ansible.template import trust_as_template
except ImportError:  # pragma: no cover - older ansible-core trusts every string
    def trust_as_template(value):
        return value

ROLES = os.path.abspath(os.path.join(os.path.dirname(__file__), '..', '..', '..', 'roles'))
SYSTEMS = {
    'ubuntu2204': {'distribution': 'Ubuntu', 'distribution_version': '22.04', 'distribution_major_version': '22'},
    'ubuntu2404': {'distribution': 'Ubuntu', 'distribution_version': '24.04', 'distribution_major_version': '24'},
    'debian12': {'distribution': 'Debian', 'distribution_version': '12.8', 'distribution_major_version': '12'},
}


def trusted(value):
    if isinstance(value, str):
        return trust_as_template(value)
    if isinstance(value, list):
        return [trusted(item) for item in value]
    if isinstance(value, dict):
        return dict((key, trusted(item)) for key, item in value.items())
    return value


def role_yaml(role, relpath):
    path = os.path.join(ROLES, role, relpath)
    if not os.path.exists(path):
        return {}
    with open(path) as handle:
        return yaml.safe_load(handle) or {}


def included_vars(role):
    """The variables the role's tasks load with include_vars from a file beside it, as the play will have them."""
    found = {}
    tasks = os.path.join(ROLES, role, 'tasks')
    for name in sorted(os.listdir(tasks)) if os.path.isdir(tasks) else []:
        for task in role_yaml(role, os.path.join('tasks', name)) or []:
            spec = task.get('ansible.builtin.include_vars') if isinstance(task, dict) else None
            if isinstance(spec, dict) and 'file' in spec:
                path = spec['file'].replace('{{ role_path }}', os.path.join(ROLES, role))
                with open(path) as handle:
                    found.update(yaml.safe_load(handle) or {})
    return found


class RoleRender(object):
    """A role's defaults and vars, with overrides and ansible_facts, rendered by Ansible's Templar."""

    def __init__(self, role, system='debian12', architecture='x86_64', facts=None, **overrides):
        self.role = role
        variables = {}
        variables.update(role_yaml(role, 'defaults/main.yml'))
        variables.update(role_yaml(role, 'vars/main.yml'))
        variables.update(included_vars(role))  # include_vars outranks role vars
        variables.update(overrides)
        ansible_facts = dict(SYSTEMS[system], architecture=architecture)
        ansible_facts.update(facts or {})
        variables['ansible_facts'] = ansible_facts
        variables['ansible_managed'] = 'Ansible managed'
        self.templar = Templar(loader=DataLoader(), variables=trusted(variables))

    def value(self, expression):
        return self.templar.template(trust_as_template('{{ %s }}' % expression))

    def template(self, name):
        with open(os.path.join(ROLES, self.role, 'templates', name)) as handle:
            # As the template action renders files: backslashes in the file are Jinja's own, not YAML's.
            return self.templar.template(trust_as_template(handle.read()), escape_backslashes=False)


@pytest.fixture
def render():
    return RoleRender
