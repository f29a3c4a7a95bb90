#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.core contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r'''
---
module: state_receipt
short_description: Record what a stage converged a GPU host to, and check whether the host is still so
version_added: 0.1.0
description:
  - A stage's receipt (C(<receipt_dir>/<stage>.json)) holds the digest of the stage's inputs, what the stage owns on
    the host (C(owns) in O(stages)) and the fingerprint of that state when it was recorded - each package's version and
    hold, each file's sha256, each unit's unit-file and active state, each GPU's MIG layout with its MIG device
    UUIDs, each MPS daemon's default active thread percentage and pinned memory limits.
  - V(record) fingerprints what each stage owns now and writes its receipt; a receipt already so is left alone.
  - V(check) reads each stage's receipt and fingerprints what the stage owns now (what the receipt names, where a
    stage leaves out C(owns)). A stage is current when its inputs have the recorded digest and every item its
    fingerprint; RV(stages) names each item that differs, and RV(skippable) the stages a run can leave out.
  - V(absent) removes the stages' receipts, so that the next run does not skip them (the site playbook does so for a
    stage that failed part way).
  - On the controller, the action plugin digests each stage's C(roles) - every variable of the named roles' argument
    specs as the host has it, with the defaults, and the content of the roles and of the collection's modules - into
    its inputs, so that a new value or a new collection version makes the stage run (docs/drift.md).
  - The helper bundle's C(drift) command runs the same check on the host, without Ansible, against every receipt in
    the directory, and writes the result for node_exporter's textfile collector (docs/drift.md).
  - Every input is checked before anything is read or written.
author:
  - gpufleet.core developers (@gpufleet)
extends_documentation_fragment:
  - gpufleet.core.attributes
attributes:
  check_mode:
    support: full
  diff_mode:
    support: full
    details: With V(record), the diff is each receipt's text before and after, under its path.
requirements:
  - dpkg-query and systemctl on the host, where a stage owns packages, holds or units.
  - nvidia-ml-py (the C(pynvml) module) where a stage owns the MIG layout; nvidia-cuda-mps-control where it owns MPS
    daemons.
options:
  state:
    description: Whether to record the stages' receipts or to check the host against them.
    type: str
    choices: [check, record, absent]
    default: check
  stages:
    description:
      - Without it, V(check) checks every receipt the host has against what the receipt names, comparing no inputs
        (as the drift command does; the fleet report's view). V(record) and V(absent) need it.
      - Each stage by name (lower case, digits and C(_)), with C(inputs), any data whose digest stands for the
        stage's inputs (its roles' variables, the plan), and C(owns), what the stage owns on the host. V(check) may
        leave out C(owns); V(absent) needs the names alone.
      - "C(roles): a list of the collection's role names, digested on the controller with C(inputs) (see the
        description); C(roles_digest): that digest as RV(roles_digests) returned it, for a V(record) after the roles
        ran (their variables then hold what the roles set)."
      - C(owns.packages) and C(owns.holds) are Debian package names; C(owns.files) absolute paths of files;
        C(owns.units) systemd unit names (their unit-file and active state); C(owns.enabled) units owned by their
        unit-file state alone (a unit that runs once at boot); C(owns.mig) true for every GPU's MIG layout;
        C(owns.mps) a list of C({pipe_directory, devices}), one for each MPS control daemon, with the UUIDs of its
        devices. C(owns) may be a list of such mappings, one for each role of the stage, which are joined.
    type: dict
  order:
    description:
      - The stages in the order a run goes through them. A stage is only in RV(skippable) when it is current and so is
        every stage before it that is checked, since a stage that runs may change what the later ones build on.
      - Empty, no stage is skippable.
    type: list
    elements: str
    default: []
  textfile_dir:
    description:
      - With V(record) or V(absent), node_exporter's textfile directory, where the drift metric
        (C(gpufleet-drift.prom), as the helper bundle's C(drift) command writes it) is written again from every
        receipt after the change, so a run that converged a drifted stage clears its C(gpufleet_drift) at once,
        not at the drift timer's next check. Not in check mode; not counted as a change.
      - Empty, no metric is written.
    type: path
    default: ''
  receipt_dir:
    description: Where the receipts are kept.
    type: path
    default: /var/lib/gpufleet/receipts
seealso:
  - module: gpufleet.core.drain
'''

EXAMPLES = r'''
- name: Record what the drivers stage converged
  gpufleet.core.state_receipt:
    state: record
    stages:
      drivers:
        inputs: {nvidia_driver_version: "550.127.05-0ubuntu1"}
        owns:
          packages: [nvidia-driver-550-server]
          holds: [nvidia-driver-550-server]
          files: [/etc/apt/preferences.d/gpufleet-nvidia.pref]
          units: [nvidia-persistenced.service]

- name: Which stages have nothing to do on this host
  gpufleet.core.state_receipt:
    stages:
      partition:
        inputs: {mig_layouts: {all: [3g.40gb, 3g.40gb]}}
        owns: {files: [/etc/gpufleet/mig-layout.json], units: [gpufleet-mig.service], mig: true}
  register: __receipts
'''

RETURN = r'''
stages:
  description:
    - "V(check) - for each stage, whether it is C(current), whether its C(inputs_changed), each C(drift) item
      (C(<item>: <recorded> -> <now>), or why there is no receipt), its C(receipt) file and whether it was
      C(recorded) (the file is there). Without O(stages), a
      receipt that cannot be read gives the stage C(error), why, instead."
    - V(record) and V(absent) - for each stage, its C(receipt) file.
  returned: always
  type: dict
  sample:
    partition:
      current: false
      inputs_changed: false
      drift: ["mig GPU-5f2c...: MIG on: 3g.40gb@0[3c] 3g.40gb@4[3c] -> MIG on: 3g.40gb@0[3c]"]
      receipt: /var/lib/gpufleet/receipts/partition.json
      recorded: true
current:
  description: The stages that are current (V(check)); empty with V(record).
  returned: always
  type: list
  elements: str
  sample: [drivers, exporter]
skippable:
  description: The stages a run can leave out (V(check)), in O(order); empty otherwise.
  returned: always
  type: list
  elements: str
  sample: [drivers, exporter]
roles_digests:
  description: For each stage given with C(roles), the digest of its roles' variables and content (the action plugin).
  returned: when a stage has roles
  type: dict
  sample: {drivers: 3f1c...}
'''

from ansible.module_utils.basic import AnsibleModule, missing_required_lib

from ansible_collections.gpufleet.core.plugins.module_utils._nvml import PYNVML_IMPORT_ERROR, PYNVML_PACKAGE, pynvml
from ansible_collections.gpufleet.core.plugins.module_utils._receipt import (
    RECEIPT_DIR, ReceiptError, apply, reads_mig, validated_stages)
from ansible_collections.gpufleet.core.plugins.module_utils._receipt_host import ReceiptHost


def main():
    module = AnsibleModule(
        argument_spec={
            'state': {'type': 'str', 'choices': ['check', 'record', 'absent'], 'default': 'check'},
            'stages': {'type': 'dict'},
            'order': {'type': 'list', 'elements': 'str', 'default': []},
            'textfile_dir': {'type': 'path', 'default': ''},
            'receipt_dir': {'type': 'path', 'default': RECEIPT_DIR},
        },
        supports_check_mode=True,
    )
    params = module.params
    try:
        stages = validated_stages(params['state'], params['stages'], params['order'])
        if pynvml is None and reads_mig(params['state'], stages):
            module.fail_json(msg=missing_required_lib(PYNVML_PACKAGE, reason='to read the MIG layout a stage owns'),
                             exception=PYNVML_IMPORT_ERROR)
        result = apply(ReceiptHost(module.run_command, pynvml), params, stages, module.check_mode, module._diff)
    except ReceiptError as exc:
        module.fail_json(msg=str(exc))
    module.exit_json(**result)


if __name__ == '__main__':
    main()
