# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.core contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Checks a host's variables for several of the collection's roles, in one task: each role's argument spec and its
value rules (plugin_utils/_role_vars.py, module_utils/_role_values.py).

Each role's preflight runs it for its own variables before it changes anything; a site's validate stage can run the
same checks for every host before any host is reached. Every problem of every role is reported at once.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

from ansible.errors import AnsibleActionFail
from ansible.plugins.action.validate_argument_spec import ActionModule as ValidateArgumentSpec

from ansible_collections.gpufleet.core.plugins.plugin_utils._fleet_inventory import trust_as_template
from ansible_collections.gpufleet.core.plugins.plugin_utils._role_vars import role_names, role_options, role_problems


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
            values = self.get_args_from_task_vars(role_options(role), task_vars)
            # A default that is a template (gpu_services_mps_daemons: "{{ mps_daemons | default([]) }}") is what the
            # role would get when it runs: render it as the role's defaults would be, rather than check its text.
            found = role_problems(role, values, render=lambda text: self._templar.template(trust_as_template(text)))
            if found:
                problems[role] = ['%s (see ansible-doc -t role gpufleet.core.%s)' % (problem, role) for problem in found]
        result['changed'] = False
        result['problems'] = problems
        result['roles'] = list(roles)
        if problems:
            result['failed'] = True
            # It runs before a role changes anything, and changes nothing itself.
            result['msg'] = 'role variables that would be refused: %s. Nothing was changed.' % '; '.join(
                'gpufleet.core.%s: %s' % (role, '; '.join(messages)) for role, messages in sorted(problems.items()))
        else:
            result['msg'] = 'the variables of %s match their argument specs and value rules' % ', '.join(roles)
        return result
