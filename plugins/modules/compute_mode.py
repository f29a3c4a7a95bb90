#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.core contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r'''
---
module: compute_mode
short_description: Set the compute mode of NVIDIA GPUs
version_added: 0.1.0
description:
  - Sets the compute mode of whole GPUs, named by UUID, through NVML.
  - V(exclusive_process) is what NVIDIA recommends for a GPU shared through an MPS control daemon;
    V(default) gives the GPU back to every process.
  - The compute mode does not survive a reboot; the P(gpufleet.core.mps#role) role sets it again when its daemon starts.
  - Every GPU is checked before any is changed. If NVML fails part-way, the module fails with C(changed=true),
    names the GPU that failed and those already changed, and returns them in RV(applied), RV(failed_on) and
    RV(not_run).
author:
  - gpufleet.core developers (@gpufleet)
extends_documentation_fragment:
  - gpufleet.core.attributes
  - gpufleet.core.nvml
attributes:
  check_mode:
    support: full
  diff_mode:
    support: full
options:
  gpus:
    description: The GPUs, by UUID (C(GPU-...)). MIG devices have no compute mode of their own.
    type: list
    elements: str
    required: true
  mode:
    description: The compute mode.
    type: str
    choices: [default, exclusive_process, prohibited]
    required: true
'''

EXAMPLES = r'''
- name: Reserve a GPU for its MPS control daemon
  gpufleet.core.compute_mode:
    gpus: [GPU-5c6f7a2e-1b3d-4e8f-9a0b-1c2d3e4f5a60]
    mode: exclusive_process
'''

RETURN = r'''
modes:
  description: The compute mode of each GPU before and after the run (in check mode, after it would run).
  returned: always
  type: dict
  sample: {"GPU-5c6f7a2e-1b3d-4e8f-9a0b-1c2d3e4f5a60": {"before": "default", "after": "exclusive_process"}}
applied:
  description: The GPUs whose compute mode this run changed (none in check mode).
  returned: always
  type: list
  elements: str
  sample: ["GPU-5c6f7a2e-1b3d-4e8f-9a0b-1c2d3e4f5a60"]
failed_on:
  description: The GPU whose change NVML refused, when it refused one (the run then fails).
  returned: always
  type: list
  elements: str
  sample: []
not_run:
  description: The GPUs still to change that were not tried, after a failure or in check mode.
  returned: always
  type: list
  elements: str
  sample: []
'''

from ansible.module_utils.basic import AnsibleModule, missing_required_lib

from ansible_collections.gpufleet.core.plugins.module_utils._compute_mode import ComputeModeError, ensure
from ansible_collections.gpufleet.core.plugins.module_utils._diff import make_diff, mapping_lines
from ansible_collections.gpufleet.core.plugins.module_utils._nvml import PYNVML_IMPORT_ERROR, PYNVML_PACKAGE, pynvml


def main():
    module = AnsibleModule(
        argument_spec={
            'gpus': {'type': 'list', 'elements': 'str', 'required': True},
            'mode': {'type': 'str', 'choices': ['default', 'exclusive_process', 'prohibited'], 'required': True},
        },
        supports_check_mode=True,
    )
    if pynvml is None:
        module.fail_json(msg=missing_required_lib(PYNVML_PACKAGE), exception=PYNVML_IMPORT_ERROR)
    try:
        changed, changes = ensure(pynvml, module.params['gpus'], module.params['mode'], module.check_mode)
    except ComputeModeError as exc:
        # failed_on, not failed: Ansible owns a result's failed key and overwrites it.
        module.fail_json(msg=str(exc), changed=bool(exc.applied), applied=exc.applied, failed_on=exc.failed,
                         not_run=exc.not_run)
    to_change = [uuid for uuid, (before, after) in changes.items() if before != after]
    result = {'changed': changed,
              'modes': dict((uuid, {'before': before, 'after': after}) for uuid, (before, after) in changes.items()),
              'applied': [] if module.check_mode else to_change, 'failed_on': [],
              'not_run': to_change if module.check_mode else []}
    if module._diff:
        result['diff'] = make_diff(mapping_lines(dict((uuid, before) for uuid, (before, _after) in changes.items())),
                                   mapping_lines(dict((uuid, after) for uuid, (_before, after) in changes.items())))
    module.exit_json(**result)


if __name__ == '__main__':
    main()
