# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.core contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""A role's variables checked on the controller: its argument spec (meta/argument_specs.yml, read from the collection
it ships in) and its value rules (module_utils/_role_values.py), in one list of problems.

The action validate_role_vars (a role's preflight, one host) and the fleet-wide validate (every host at once) both call
role_problems(role, values) with the role's variables already rendered. This is a private module: its API may change
without notice.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import copy
import os

from ansible.module_utils.common.arg_spec import ArgumentSpecValidator

from ansible_collections.gpufleet.core.plugins.module_utils._role_values import check_role_values

import yaml

ROLES_DIR = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), 'roles')
_OPTIONS = {}


def role_names():
    """The collection's roles that have an argument spec."""
    return sorted(name for name in os.listdir(ROLES_DIR)
                  if os.path.isfile(os.path.join(ROLES_DIR, name, 'meta', 'argument_specs.yml')))


def role_options(role):
    """The options of a role's main entry point, from its meta/argument_specs.yml (read once per process)."""
    if role not in _OPTIONS:
        with open(os.path.join(ROLES_DIR, role, 'meta', 'argument_specs.yml')) as spec_file:
            specs = yaml.safe_load(spec_file)
        _OPTIONS[role] = specs['argument_specs']['main'].get('options') or {}
    return copy.deepcopy(_OPTIONS[role])


def is_template(value):
    return isinstance(value, str) and ('{{' in value or '{%' in value)


def with_defaults(role, values, render=None):
    """The role's variables: VALUES, and for each option missing there its argument spec's default. A default that is
    a template is given to RENDER (the text -> the value) and left out when there is no RENDER."""
    filled = dict(values)
    for name, spec in role_options(role).items():
        if name in filled or 'default' not in spec:
            continue
        default = spec['default']
        if is_template(default):
            if render is not None:
                filled[name] = render(default)
        else:
            filled[name] = copy.deepcopy(default)
    return filled


def role_problems(role, values, render=None):
    """Every problem of a role's variables: the argument spec's, then the role's value rules (check_role_values).

    VALUES: the role's variables already rendered; those missing take the argument spec's defaults (with_defaults,
    RENDER for a default that is a template)."""
    options = role_options(role)
    filled = with_defaults(role, dict((name, value) for name, value in values.items() if name in options), render)
    checked = ArgumentSpecValidator(options).validate(copy.deepcopy(filled), validate_role_argument_spec=True)
    problems = list(checked.error_messages)
    problems.extend(check_role_values(role, filled))
    return problems
