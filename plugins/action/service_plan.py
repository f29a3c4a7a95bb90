# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.core contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Places a host's services and joins them with their units, in one step on the controller.

The host's gpufleet_topology fact is read from the task's variables as it is: it is not an argument, so it is never
templated (on ansible-core 2.19 and later, templating a fact of some thousands of values costs more than planning).
The planner is imported when this file is, and ansible-core's linear strategy loads this file in the main process
before it forks a worker per host, so the workers do not compile it again.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible.errors import AnsibleActionFail
from ansible.plugins.action import ActionBase

from ansible_collections.gpufleet.core.plugins.module_utils._plan import CONTAINER_RUNTIMES, DEFAULT_USER_PREFIX, UNIT_PREFIX
from ansible_collections.gpufleet.core.plugins.plugin_utils._placement import (
    ServicePlanError, plan_services, previous_plan)

# Option -> (the types it takes, what to say when it is something else, default). Checked here rather than by
# validate_argument_spec, which walks every value of every service (the planner checks the specs itself, naming the
# service and the fix) and cost more than planning them.
OPTIONS = {
    'services': (list, 'the list of service specs', None),
    'reserved_cpus': (object, None, None),
    'previous': (object, None, None),
    'mps_daemons': (list, 'the mps role\'s mps_daemons list', None),
    'topology': (dict, 'a gpufleet_topology fact', None),
    'unit_prefix': (str, 'a string', UNIT_PREFIX),
    'user_prefix': (str, 'a string', DEFAULT_USER_PREFIX),
    'container_runtime': (str, 'a string', CONTAINER_RUNTIMES[0]),
}


def _kind(value):
    """A value's kind in the words of YAML (ansible-core hands over tagged subclasses of the plain types)."""
    for kind, name in ((bool, 'a boolean'), (str, 'a string'), (int, 'a number'), (float, 'a number'), (list, 'a list'),
                       (dict, 'a mapping')):
        if isinstance(value, kind):
            return name
    return type(value).__name__


def _arguments(given):
    """The task's arguments with their defaults, or AnsibleActionFail naming every problem."""
    problems = ['unsupported parameter %s (it takes %s)' % (key, ', '.join(sorted(OPTIONS)))
                for key in sorted(set(given) - set(OPTIONS))]
    if given.get('services') is None:
        problems.append('services is required: the list of service specs')
    args = {}
    for key, (kinds, what, default) in OPTIONS.items():
        value = given.get(key)
        if value is None:
            args[key] = default
        elif not isinstance(value, kinds):
            problems.append('%s must be %s, got %s' % (key, what, _kind(value)))
        else:
            args[key] = value
    if problems:
        raise AnsibleActionFail('gpufleet.core.service_plan: %s' % '; '.join(problems))
    return args


class ActionModule(ActionBase):

    TRANSFERS_FILES = False
    _requires_connection = False

    def run(self, tmp=None, task_vars=None):
        result = super(ActionModule, self).run(tmp, task_vars)
        del tmp
        args = _arguments(self._task.args)
        topology = args['topology']
        if topology is None:
            topology = ((task_vars or {}).get('ansible_facts') or {}).get('gpufleet_topology')
        try:
            previous = previous_plan(args['previous'], 'the previous plan')
            planned = plan_services(topology, args['services'], args['reserved_cpus'], previous,
                                    args['mps_daemons'] or None, args['unit_prefix'], args['user_prefix'],
                                    args['container_runtime'])
        except ServicePlanError as exc:
            raise AnsibleActionFail('gpufleet.core.service_plan: %s' % exc)
        result.update(planned)
        result['changed'] = False
        return result
