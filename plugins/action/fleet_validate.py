# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.core contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The site playbook's validate stage in one task: every host's inventory values and role variables, and the fleet's
own rules, from the inventory alone (no facts, no connection). The rules are module_utils/_fleet_inventory.py's and
each role's checker (plugin_utils/_role_vars.py); this file reads the task's variables and returns the verdict.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible.errors import AnsibleActionFail
from ansible.plugins.action import ActionBase

from ansible_collections.gpufleet.core.plugins.module_utils._fleet_inventory import HANDED_DOWN, renderable
from ansible_collections.gpufleet.core.plugins.plugin_utils._fleet_inventory import Inventory, check
from ansible_collections.gpufleet.core.plugins.plugin_utils._role_vars import role_options, role_problems


class ActionModule(ActionBase):

    TRANSFERS_FILES = False
    _requires_connection = False

    def run(self, tmp=None, task_vars=None):
        result = super(ActionModule, self).run(tmp, task_vars)
        del tmp
        if self._task.args:
            raise AnsibleActionFail('gpufleet.core.fleet_validate takes no parameters (got %s); it reads the '
                                    'inventory' % ', '.join(sorted(self._task.args)))
        inventory = Inventory(task_vars or {}, self._templar)
        addresses = {}  # each host's management address, read once for all its roles

        def problems_of(role, host):
            given = inventory.variables_of(host)
            values = dict((name, inventory.value(host, name)) for name in role_options(role) if name in given)
            # The shared thresholds are what the site playbook hands the role (playbooks/fleet/rollout.yml).
            values.update((name, inventory.value(host, knob)) for name, knob in HANDED_DOWN.items()
                          if name in role_options(role))
            if host not in addresses:
                addresses[host] = inventory.value(host, 'gpufleet_management_address')
            values, unrendered = renderable(values, addresses[host])
            return ['gpufleet.core.%s: %s (see ansible-doc -t role gpufleet.core.%s)' % (role, problem, role)
                    for problem in unrendered + role_problems(role, values, lambda text: inventory.render(host, text))]

        outcome = check(inventory, problems_of)
        failed = sorted(host for host, found in outcome['hosts'].items() if found)
        result.update({
            'changed': False,
            'hosts': outcome['hosts'],
            'messages': outcome['messages'],
            'fleet': outcome['fleet'],
            'roles': outcome['roles'],
            'failed_hosts': failed,
            'ansible_facts': {'_gpufleet_fleet': {
                'settings': outcome['settings'], 'models': outcome['models'], 'fleet_problems': outcome['fleet_all'],
                'stages': outcome['stages'], 'handed_down': outcome['handed_down'],
                'host_problems': dict((host, found) for host, found in outcome['hosts'].items() if found),
                'watchdog': outcome.get('watchdog', {})}},
            'msg': 'Validated %d host(s): %s' % (len(outcome['hosts']), '%d with problems (%s)%s' % (
                len(failed), ', '.join(failed), '; and the fleet has %d problem(s)' % len(outcome['fleet'])
                if outcome['fleet'] else '') if failed else 'the fleet has %d problem(s)' % len(outcome['fleet'])
                if outcome['fleet'] else 'every value is valid'),
        })
        return result
