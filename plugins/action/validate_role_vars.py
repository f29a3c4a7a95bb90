# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.core contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Checks a host's variables for several of the collection's roles against their argument specs, in one task.

The site playbook's validate stage runs it on every host before anything changes. A role checks its own variables
when it starts, but by then earlier roles have changed the host; this reads each role's meta/argument_specs.yml from
the collection it ships in and reports every problem of every role at once.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import re

from ansible.errors import AnsibleActionFail
from ansible.module_utils.common.arg_spec import ArgumentSpecValidator
from ansible.plugins.action.validate_argument_spec import ActionModule as ValidateArgumentSpec

import yaml

try:  # ansible-core 2.19 and later render only strings marked as trusted templates
    from ansible.template import trust_as_template
except ImportError:  # older ansible-core renders any string
    def trust_as_template(value):
        return value

ROLES_DIR = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), 'roles')


def role_names():
    """The collection's roles that have an argument spec."""
    return sorted(name for name in os.listdir(ROLES_DIR)
                  if os.path.isfile(os.path.join(ROLES_DIR, name, 'meta', 'argument_specs.yml')))


def role_options(role):
    """The options of a role's main entry point, from its meta/argument_specs.yml."""
    with open(os.path.join(ROLES_DIR, role, 'meta', 'argument_specs.yml')) as spec_file:
        specs = yaml.safe_load(spec_file)
    return specs['argument_specs']['main'].get('options') or {}


class ActionModule(ValidateArgumentSpec):

    TRANSFERS_FILES = False
    _requires_connection = False

    def run(self, tmp=None, task_vars=None):
        result = super(ValidateArgumentSpec, self).run(tmp, task_vars)  # ActionBase's: the parent's run checks one spec
        del tmp
        task_vars = task_vars or {}
        roles = self._task.args.get('roles')
        unknown = sorted(set(self._task.args) - set(['roles']))
        known = role_names()
        if unknown:
            raise AnsibleActionFail('gpufleet.core.validate_role_vars: unsupported parameter %s (it takes roles)'
                                    % ', '.join(unknown))
        if not isinstance(roles, list) or not roles or not all(isinstance(r, str) for r in roles):
            raise AnsibleActionFail('gpufleet.core.validate_role_vars: roles must be a list of role names of '
                                    'gpufleet.core, such as [mig, gpu_services]')
        strange = [r for r in roles if not re.fullmatch(r'[a-z][a-z0-9_]*', r) or r not in known]
        if strange:
            raise AnsibleActionFail('gpufleet.core.validate_role_vars: %s %s not a role of gpufleet.core with an '
                                    'argument spec (those are: %s)'
                                    % (', '.join(strange), 'is' if len(strange) == 1 else 'are', ', '.join(known)))
        problems = {}
        for role in roles:
            options = role_options(role)
            values = self.get_args_from_task_vars(options, task_vars)
            # A default that is a template (gpu_services_mps_daemons: "{{ mps_daemons | default([]) }}") is what the
            # role would get when it runs: render it as the role's defaults would be, rather than check its text.
            for name, spec in options.items():
                default = spec.get('default')
                if name not in values and isinstance(default, str) and '{{' in default:
                    values[name] = self._templar.template(trust_as_template(default))
            checked = ArgumentSpecValidator(options).validate(values, validate_role_argument_spec=True)
            if checked.error_messages:
                problems[role] = ['%s (see ansible-doc -t role gpufleet.core.%s)' % (message, role)
                                  for message in checked.error_messages]
        result['changed'] = False
        result['problems'] = problems
        result['roles'] = list(roles)
        if problems:
            result['failed'] = True
            result['msg'] = 'role variables that would be refused: %s' % '; '.join(
                'gpufleet.core.%s: %s' % (role, '; '.join(messages)) for role, messages in sorted(problems.items()))
        else:
            result['msg'] = 'the variables of %s match their argument specs' % ', '.join(roles)
        return result
