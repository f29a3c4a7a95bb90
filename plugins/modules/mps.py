#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.core contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r'''
---
module: mps
short_description: Manage the settings of a running CUDA MPS control daemon
version_added: 0.1.0
description:
  - Talks to one running MPS control daemon, through its pipe directory, in C(nvidia-cuda-mps-control)'s
    command language.
  - Ensures the default active thread percentage and the default pinned device memory limits, reading the
    current values first, so that a second run changes nothing. Lists the daemon's servers and their clients.
  - The active thread percentage limits the share of SMs a client may use, not its memory. The memory cap is
    the pinned device memory limit (C(set_default_device_pinned_mem_limit)).
  - Defaults apply to the next MPS server the daemon starts, and are lost when the daemon quits; the
    P(gpufleet.core.mps#role) role's unit sets them each time it starts the daemon, and this module reports
    RV(restart_required) when a change waits for running servers to end.
  - O(state=absent) shuts the daemon down with C(quit).
author:
  - gpufleet.core developers (@gpufleet)
extends_documentation_fragment:
  - gpufleet.core.attributes
attributes:
  check_mode:
    support: full
  diff_mode:
    support: full
options:
  pipe_directory:
    description: The daemon's C(CUDA_MPS_PIPE_DIRECTORY).
    type: path
    required: true
  state:
    description: V(present) ensures the settings on a running daemon; V(absent) shuts the daemon down.
    type: str
    choices: [present, absent]
    default: present
  default_active_thread_percentage:
    description:
      - Share of the device's SMs each client may use by default, 1 to 100.
      - A number, or a string that is plainly one (V("50") from C(-e)); anything else is refused.
    type: raw
  default_pinned_mem_limit:
    description:
      - "Default pinned device memory limit: one size for device 0 as the daemon sees it, such as V(20G), or one
        per device, such as C({\"0\": \"20G\"}). Devices are named as the daemon sees them, by ordinal after its
        C(CUDA_VISIBLE_DEVICES), or by C(GPU-)/C(MIG-) UUID."
      - Sizes need a unit (C(M), C(G); C(1.5G) is 1536 MiB); a bare number, a negative size or one under 1 MiB is
        refused.
      - The same name as the P(gpufleet.core.mps#role) role's and the P(gpufleet.core.mps_plan#filter) filter's option.
        The old name O(default_pinned_mem_limits) still works and is deprecated.
    aliases: [default_pinned_mem_limits]
    type: raw
  control_command:
    description: The C(nvidia-cuda-mps-control) program.
    type: path
    default: nvidia-cuda-mps-control
seealso:
  - name: NVIDIA Multi-Process Service
    description: The MPS documentation, including the control daemon's commands.
    link: https://docs.nvidia.com/deploy/mps/
'''

EXAMPLES = r'''
- name: Limit each client of GPU 0's daemon to 40% of the SMs and 20 GiB of pinned memory
  gpufleet.core.mps:
    pipe_directory: /run/gpufleet-mps/GPU-5c6f7a2e-1b3d-4e8f-9a0b-1c2d3e4f5a60
    default_active_thread_percentage: 40
    default_pinned_mem_limit: 20G

- name: Shut a daemon down
  gpufleet.core.mps:
    pipe_directory: /run/gpufleet-mps/GPU-5c6f7a2e-1b3d-4e8f-9a0b-1c2d3e4f5a60
    state: absent
'''

RETURN = r'''
running:
  description: Whether the daemon is running after the run.
  returned: always
  type: bool
  sample: true
servers:
  description: The daemon's MPS servers with the PIDs of their clients.
  returned: when the daemon is running
  type: list
  elements: dict
  sample: [{"pid": 40211, "clients": [5150, 5151]}]
default_active_thread_percentage:
  description: The default active thread percentage after the run.
  returned: when the daemon is running
  type: float
  sample: 40.0
default_pinned_mem_limits:
  description: The default pinned memory limit per requested device as the daemon shows it (whole G from 1G up).
  returned: when the daemon is running
  type: dict
  sample: {"0": "20G"}
commands:
  description: The commands sent to the daemon (in check mode, the ones that would be sent).
  returned: always
  type: list
  elements: str
  sample: ["set_default_active_thread_percentage 40"]
restart_required:
  description: Whether defaults changed while servers were running; they apply to the next server.
  returned: always
  type: bool
  sample: false
applied:
  description: The commands the daemon accepted in this run (none in check mode).
  returned: always
  type: list
  elements: str
  sample: ["set_default_active_thread_percentage 40"]
failed_on:
  description: The command the daemon refused, when it refused one (the run then fails with its answer).
  returned: always
  type: list
  elements: str
  sample: []
not_run:
  description: The commands not sent, after a refusal or in check mode.
  returned: always
  type: list
  elements: str
  sample: []
'''

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.gpufleet.core.plugins.module_utils._diff import make_diff
from ansible_collections.gpufleet.core.plugins.module_utils._mps_control import (
    MpsControl,
    MpsControlError,
    converge,
    validate,
)


def main():
    module = AnsibleModule(
        argument_spec={
            'pipe_directory': {'type': 'path', 'required': True},
            'state': {'type': 'str', 'choices': ['present', 'absent'], 'default': 'present'},
            'default_active_thread_percentage': {'type': 'raw'},
            'default_pinned_mem_limit': {
                'type': 'raw', 'aliases': ['default_pinned_mem_limits'],
                'deprecated_aliases': [{'name': 'default_pinned_mem_limits', 'version': '2.0.0',
                                        'collection_name': 'gpufleet.core'}]},
            'control_command': {'type': 'path', 'default': 'nvidia-cuda-mps-control'},
        },
        supports_check_mode=True,
    )
    params = module.params
    control = MpsControl(module.run_command, params['control_command'], params['pipe_directory'])
    try:
        percentage, limits_mb = validate(params['default_active_thread_percentage'],
                                         params['default_pinned_mem_limit'])
        if params['state'] == 'absent':
            running = control.running()
            quit_commands = ['quit'] if running else []
            if running and not module.check_mode:
                control.send('quit')
            module.exit_json(changed=running, running=running and module.check_mode, commands=quit_commands,
                             restart_required=False, applied=[] if module.check_mode else quit_commands, failed_on=[],
                             not_run=quit_commands if module.check_mode else [])
        commands, before, after = converge(control, percentage, limits_mb, module.check_mode)
    except MpsControlError as exc:
        # failed_on, not failed: Ansible owns a result's failed key and overwrites it.
        module.fail_json(msg=str(exc), changed=bool(exc.applied), applied=exc.applied, failed_on=exc.failed,
                         not_run=exc.not_run, commands=exc.applied + exc.failed + exc.not_run)
    result = dict(after, changed=bool(commands), running=True, commands=commands,
                  restart_required=bool(commands) and bool(before['servers']),
                  applied=[] if module.check_mode else commands, failed_on=[],
                  not_run=commands if module.check_mode else [])
    if module._diff:
        result['diff'] = make_diff(_settings(before),
                                   _settings(after if not module.check_mode else dict(before, planned=commands)))
    module.exit_json(**result)


def _settings(state):
    lines = ['default_active_thread_percentage: %s' % state['default_active_thread_percentage']]
    lines.extend('default_pinned_mem_limit %s: %s' % (device, limit or 'none')
                 for device, limit in sorted(state['default_pinned_mem_limits'].items()))
    lines.extend('will send: %s' % command for command in state.get('planned', []))
    return lines


if __name__ == '__main__':
    main()
