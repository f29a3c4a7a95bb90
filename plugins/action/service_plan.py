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

from ansible_collections.gpufleet.core.plugins.plugin_utils._placement import (
    ServicePlanError, plan_services, previous_plan)

ARGUMENT_SPEC = {
    'services': {'type': 'list', 'elements': 'raw', 'required': True},
    'reserved_cpus': {'type': 'raw'},
    'previous': {'type': 'raw'},
    'mps_daemons': {'type': 'list', 'elements': 'raw'},
    'topology': {'type': 'dict'},
    'unit_prefix': {'type': 'str', 'default': 'gpufleet-svc-'},
    'user_prefix': {'type': 'str', 'default': 'gpufleet-'},
    'container_runtime': {'type': 'str', 'default': 'podman'},
}


class ActionModule(ActionBase):

    TRANSFERS_FILES = False
    _requires_connection = False

    def run(self, tmp=None, task_vars=None):
        result = super(ActionModule, self).run(tmp, task_vars)
        del tmp
        dummy, args = self.validate_argument_spec(argument_spec=ARGUMENT_SPEC)
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
