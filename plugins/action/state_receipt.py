# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.core contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""gpufleet.core.state_receipt on the controller: a stage given with ``roles`` has its roles' variables (as the host
has them, defaults filled in) and content digested here (plugin_utils/_stage_inputs.py) into its inputs; a stage
given with ``roles_digest`` reuses a digest an earlier check returned. Then the module runs on the host.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import copy
import re

from ansible.errors import AnsibleActionFail
from ansible.plugins.action.validate_argument_spec import ActionModule as ValidateArgumentSpec

from ansible_collections.gpufleet.core.plugins.plugin_utils._fleet_inventory import trust_as_template
from ansible_collections.gpufleet.core.plugins.plugin_utils._role_vars import role_names, role_options, with_defaults
from ansible_collections.gpufleet.core.plugins.plugin_utils._stage_inputs import roles_digest

DIGEST = re.compile(r'[0-9a-f]{64}')


class ActionModule(ValidateArgumentSpec):

    TRANSFERS_FILES = False

    def run(self, tmp=None, task_vars=None):
        result = super(ValidateArgumentSpec, self).run(tmp, task_vars)  # ActionBase's: the parent's checks one spec
        del tmp
        task_vars = task_vars or {}
        args = copy.deepcopy(self._task.args)
        stages = args.get('stages')
        digests = {}
        if isinstance(stages, dict):
            problems = []
            for name, spec in sorted(stages.items()):
                if not isinstance(spec, dict) or ('roles' not in spec and 'roles_digest' not in spec):
                    continue
                if 'roles' in spec and 'roles_digest' in spec:
                    problems.append('stages.%s: give roles or roles_digest, not both' % name)
                    continue
                if 'roles' in spec:
                    digest, found = self._roles_digest(name, spec.pop('roles'), task_vars)
                    problems.extend(found)
                else:
                    digest = spec.pop('roles_digest')
                    if not isinstance(digest, str) or not DIGEST.fullmatch(digest):
                        problems.append('stages.%s.roles_digest: %r is not a digest that a check returned '
                                        '(roles_digests)' % (name, digest))
                        continue
                spec['inputs'] = {'roles': digest, 'inputs': spec.get('inputs')}
                digests[name] = digest
            if problems:
                raise AnsibleActionFail('gpufleet.core.state_receipt: nothing was read or changed: %s'
                                        % '; '.join(problems))
        result.update(self._execute_module(module_name='gpufleet.core.state_receipt', module_args=args,
                                           task_vars=task_vars))
        if digests:
            result['roles_digests'] = digests
        return result

    def _roles_digest(self, stage, roles, task_vars):
        known = role_names()
        if not isinstance(roles, list) or not roles or not all(isinstance(role, str) for role in roles):
            return None, ['stages.%s.roles: %r is not a list of role names of gpufleet.core' % (stage, roles)]
        strange = [role for role in roles if role not in known]
        if strange:
            return None, ['stages.%s.roles: %s not a role of gpufleet.core with an argument spec (those are: %s)'
                          % (stage, ', '.join(strange), ', '.join(known))]
        values = {}
        for role in roles:
            given = self.get_args_from_task_vars(role_options(role), task_vars)
            values[role] = with_defaults(role, given,
                                         render=lambda text: self._templar.template(trust_as_template(text)))
        return roles_digest(values), []
