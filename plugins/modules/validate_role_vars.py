#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.core contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r'''
---
module: validate_role_vars
short_description: Check a host's variables for several gpufleet.core roles against their argument specs, at once
version_added: 0.1.0
description:
  - Reads each named role's C(meta/argument_specs.yml) from the installed collection and checks the host's variables
    against it, as the role would when it starts, and reports every problem of every role in one result.
  - The site playbook's C(validate) stage runs it on every host before any role changes anything, so that a mistake
    in the inventory stops the run before the first host is touched.
  - Variables a role would take from its C(defaults/main.yml) are checked against the argument spec's defaults,
    which a unit test keeps equal to them.
  - This is an action plugin; nothing runs on the host.
author:
  - gpufleet.core developers (@gpufleet)
extends_documentation_fragment:
  - gpufleet.core.attributes
attributes:
  check_mode:
    support: full
    details: It changes nothing, in any mode.
  diff_mode:
    support: none
    details: It changes nothing, so there is nothing to show.
  action:
    description: Runs on the controller only.
    support: full
options:
  roles:
    description: Short names of the collection's roles whose variables to check, such as C(mig).
    type: list
    elements: str
    required: true
seealso:
  - module: ansible.builtin.validate_argument_spec
'''

EXAMPLES = r'''
- name: Check the variables of every role this host will run, before any of them runs
  gpufleet.core.validate_role_vars:
    roles: [nvidia_driver, mig, gpu_services]
'''

RETURN = r'''
roles:
  description: The roles checked.
  returned: always
  type: list
  elements: str
  sample: [mig, gpu_services]
problems:
  description: Role name to the problems found in its variables; empty when there are none.
  returned: always
  type: dict
  sample: {"mig": ["value of mig_reset_strategy must be one of: reset, reboot, none, got: rest"]}
msg:
  description: What was found, with every problem and the role whose documentation explains the variable.
  returned: always
  type: str
'''
