#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.core contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r'''
---
module: helper_bundle
short_description: Install the collection's host helpers as one versioned zipapp
version_added: 0.1.0
description:
  - Builds, on the controller, the zipapp C(gpufleet-helpers-<version>.pyz) that carries the programs the
    collection runs on the hosts outside Ansible (the MIG boot-time re-apply, the compute mode an MPS daemon's unit
    sets), and copies it into O(directory) with M(ansible.builtin.copy).
  - The zipapp holds the collection's entry module and every C(module_utils) file it imports, found by following
    the imports. Run it as C(python3 gpufleet-helpers-<version>.pyz COMMAND ARGUMENTS...); C(--help) lists the
    commands. It needs Python 3.8 or later and no ansible-core; the NVML helpers need nvidia-ml-py.
  - The same collection builds the same bytes, so a second run changes nothing.
  - This is an action plugin; the gpufleet.core.host_helpers role uses it and also removes older bundles.
author:
  - gpufleet.core developers (@gpufleet)
extends_documentation_fragment:
  - gpufleet.core.attributes
attributes:
  check_mode:
    support: full
  diff_mode:
    support: full
  action:
    description: Runs on the controller, which builds the file, and transfers it like M(ansible.builtin.copy).
    support: full
options:
  directory:
    description: The directory on the host the bundle is copied into. It must exist.
    type: path
    required: true
  owner:
    description: The bundle's owner, as M(ansible.builtin.copy) sets it.
    type: str
  group:
    description: The bundle's group, as M(ansible.builtin.copy) sets it.
    type: str
  mode:
    description: The bundle's permissions, as M(ansible.builtin.copy) sets them.
    type: raw
    default: '0644'
seealso:
  - module: ansible.builtin.copy
'''

EXAMPLES = r'''
- name: Install the helper bundle of this collection version
  gpufleet.core.helper_bundle:
    directory: /usr/local/lib/gpufleet
    owner: root
    group: root
  register: __helpers

- name: Show which file the boot units should run
  ansible.builtin.debug:
    msg: "{{ __helpers.bundle }}"
'''

RETURN = r'''
bundle:
  description: The bundle's path on the host.
  returned: success
  type: str
  sample: /usr/local/lib/gpufleet/gpufleet-helpers-0.1.0.pyz
name:
  description: The bundle's file name.
  returned: success
  type: str
  sample: gpufleet-helpers-0.1.0.pyz
version:
  description: The collection version the bundle was built from.
  returned: success
  type: str
  sample: 0.1.0
modules:
  description: The C(module_utils) files in the bundle, found by following the entry module's imports.
  returned: success
  type: list
  elements: str
  sample: [_compute_mode.py, _helpers_main.py, _nvml.py]
checksum:
  description: SHA-1 of the bundle, as M(ansible.builtin.copy) returns it.
  returned: success
  type: str
  sample: 6e642bb8dd5c2e027bf21dd923337cbb4214f827
'''
