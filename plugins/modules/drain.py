#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.core contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r'''
---
module: drain
short_description: Take a GPU host out of service before its packages change, and give it back
version_added: 0.1.0
description:
  - V(drained) first writes the mark C(gpufleet_host_drained{reason="..."} 1) into node_exporter's textfile collector
    directory (the GPU alert pack's C(GpuHostDrained) alert reads it, and the pack's Alertmanager inhibit rule holds
    back the host's other alerts while it fires), then stops the active units that match each of O(units), in the
    order given - the site playbook gives the GPU services, the watchdog's timer, the MPS daemons and the exporter.
  - V(undrained) starts each of O(units) that is not active, in the reverse order, then sets the mark to
    C(gpufleet_host_drained{reason="..."} 0) (same reason), so that C(GpuHostDrained) resolves at the next scrape.
    Without a mark it writes none. Give it the units the drain stopped (RV(units)).
  - Every input is checked before anything changes.
author:
  - gpufleet.core developers (@gpufleet)
extends_documentation_fragment:
  - gpufleet.core.attributes
attributes:
  check_mode:
    support: full
  diff_mode:
    support: full
    details: The diff is the mark's content before and after.
options:
  state:
    description: Whether the host is to be drained or given back.
    type: str
    choices: [drained, undrained]
    default: drained
  units:
    description:
      - V(drained) - unit names or systemctl patterns (C(gpufleet-svc-*.service)), stopped in this order.
      - V(undrained) - unit names, started in the reverse order.
    type: list
    elements: str
    default: []
  reason:
    description:
      - Why the host is out, the mark's C(reason) label.
      - With V(undrained), used only where the mark has no sample to keep the reason of.
    type: str
    default: upgrade
  textfile_dir:
    description: node_exporter's textfile collector directory; an empty string writes no mark.
    type: path
    default: /var/lib/prometheus/node-exporter
seealso:
  - module: gpufleet.core.health_gate
'''

EXAMPLES = r'''
- name: Drain the host before its driver packages change
  gpufleet.core.drain:
    units: [gpufleet-svc-*.service, gpufleet-watchdog.timer, gpufleet-mps@*.service, gpufleet-dcgm-exporter.service]
  register: __drained

- name: Give the host back once its audit passed
  gpufleet.core.drain:
    state: undrained
    units: "{{ __drained.units }}"
'''

RETURN = r'''
units:
  description: The units this run stopped (V(drained)) or started (V(undrained)), in that order; in check mode, those it would.
  returned: always
  type: list
  elements: str
  sample: [gpufleet-svc-llm.service, gpufleet-watchdog.timer, gpufleet-dcgm-exporter.service]
mark:
  description: The mark's file, or V(null) without O(textfile_dir).
  returned: always
  type: str
  sample: /var/lib/prometheus/node-exporter/gpufleet-drain.prom
'''

import os

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.gpufleet.core.plugins.module_utils._diff import make_diff
from ansible_collections.gpufleet.core.plugins.module_utils._drain import (
    MARK_FILE, DrainError, DrainHost, check_inputs, drain, undrain)


def main():
    module = AnsibleModule(
        argument_spec={
            'state': {'type': 'str', 'choices': ['drained', 'undrained'], 'default': 'drained'},
            'units': {'type': 'list', 'elements': 'str', 'default': []},
            'reason': {'type': 'str', 'default': 'upgrade'},
            'textfile_dir': {'type': 'path', 'default': '/var/lib/prometheus/node-exporter'},
        },
        supports_check_mode=True,
    )
    params = module.params
    problems = check_inputs(params['units'], params['reason'], params['textfile_dir'])
    if problems:
        module.fail_json(msg='Nothing was changed: %s' % '; '.join(problems))
    host = DrainHost(module.run_command, module.get_bin_path('systemctl', required=True))
    try:
        if params['state'] == 'drained':
            changed, units, (before, after) = drain(host, params['units'], params['reason'], params['textfile_dir'],
                                                    module.check_mode)
        else:
            changed, units, (before, after) = undrain(host, params['units'], params['reason'], params['textfile_dir'],
                                                      module.check_mode)
    except DrainError as exc:
        module.fail_json(msg=str(exc))
    result = {'changed': changed, 'units': units,
              'mark': os.path.join(params['textfile_dir'], MARK_FILE) if params['textfile_dir'] else None}
    if module._diff:
        result['diff'] = make_diff((before or '').splitlines(), (after or '').splitlines())
    module.exit_json(**result)


if __name__ == '__main__':
    main()
