# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.core contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The rollout's health gate after a batch, on the controller: wait the soak time, ask the monitoring host's
Prometheus whether an alert of the GPU alert pack fires for the batch's hosts, and fail (stopping the rollout) when
one does or the canary failed. The verdict is module_utils/_health_gate.py's; this file reads the batch's hosts from
hostvars and asks Prometheus.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import time

from ansible.errors import AnsibleActionFail
from ansible.plugins.action import ActionBase

from ansible_collections.gpufleet.core.plugins.module_utils._health_gate import (
    alerts_query, batch_hosts, firing_alerts, verdict)
from ansible_collections.gpufleet.core.plugins.module_utils._prometheus import PrometheusError, query

ARGUMENTS = {
    'prometheus_url': {'type': 'str', 'default': ''},
    'rollout_hosts': {'type': 'list', 'elements': 'str', 'required': True},
    'canary': {'type': 'list', 'elements': 'str', 'default': []},
    'gated': {'type': 'list', 'elements': 'dict', 'default': []},
    'soak': {'type': 'int', 'default': 60},
    'required': {'type': 'bool', 'default': False},
}


class ActionModule(ActionBase):

    TRANSFERS_FILES = False
    _requires_connection = False

    def run(self, tmp=None, task_vars=None):
        result = super(ActionModule, self).run(tmp, task_vars)
        del tmp
        _spec, args = self.validate_argument_spec(ARGUMENTS)
        if args['soak'] < 0:
            raise AnsibleActionFail('gpufleet.core.health_gate: soak is %d; give the seconds to wait, 0 or more'
                                    % args['soak'])
        hostvars = (task_vars or {}).get('hostvars', {})
        alive = set((task_vars or {}).get('ansible_play_hosts') or [])
        entered = set(host for host in args['rollout_hosts'] if '_gpufleet_stage' in hostvars.get(host, {}))
        hosts = batch_hosts(args['rollout_hosts'], [host for gate in args['gated'] for host in gate.get('hosts', [])],
                            entered)
        failed = [host for host in hosts if host not in alive or '_gpufleet_failure' in hostvars.get(host, {})]
        canary = bool(hosts) and set(hosts) <= set(args['canary'])
        firing, problem = None, None
        if not args['prometheus_url']:
            problem = 'no monitoring host (gpufleet_monitoring_group has none in the inventory) and no ' \
                      'gpufleet_watchdog_prometheus_url'
        elif not hosts:
            problem = 'no host of this batch got through'
        else:
            try:
                # A Prometheus that is not there yet (the fleet's first run) is known at once, not after the soak.
                query(args['prometheus_url'], 'vector(1)', timeout=5)
                if args['soak'] and not self._task.check_mode:
                    time.sleep(args['soak'])
                firing = firing_alerts(query(args['prometheus_url'], alerts_query(hosts), timeout=10))
            except PrometheusError as exc:
                problem = str(exc)
        gate = verdict(len(args['gated']) + 1, hosts, canary, failed, firing, problem, args['required'], args['soak'])
        result.update({'changed': False, 'gate': gate, 'msg': gate['line']})
        if not gate['passed']:
            result['failed'] = True
        return result
