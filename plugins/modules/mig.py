#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.core contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r'''
---
module: mig
short_description: Declare the MIG partitions of NVIDIA GPUs
version_added: 0.1.0
description:
  - Makes the MIG mode and the GPU and compute instances of the selected GPUs match a declared layout.
  - Validates every selected GPU's layout first, against the profiles NVML reports for that GPU
    (names, maximum counts, and whether the instances can be placed together), and changes nothing when
    any layout is invalid. The error says why a layout does not fit and names the nearest layout that does.
  - Changes the minimum. Instances that already match are kept, with their C(MIG-...) UUIDs; only extra
    instances are destroyed, and missing ones are created at explicit placements chosen so that the whole
    layout fits. Applying the same layout again makes no NVML changes.
  - Refuses to destroy an instance, or to change MIG mode, while compute processes run on it, unless
    O(force=true), and names the blocking PIDs.
  - Enables MIG mode before creating instances. Where the new mode waits for a GPU reset (Ampere, when something
    blocks the reset the driver attempts), it reports RV(reset_required) and the things known to block a reset;
    the instances are not created then, and are returned in RV(deferred), not in RV(operations); the first run
    after the reset or reboot creates them.
  - Instances never survive a reboot, and on Hopper the MIG mode does not either; the P(gpufleet.core.mig#role)
    role installs a boot unit that runs this module's logic again.
author:
  - gpufleet.core developers (@gpufleet)
extends_documentation_fragment:
  - gpufleet.core.attributes
  - gpufleet.core.host_roots
  - gpufleet.core.nvml
attributes:
  check_mode:
    support: full
    details:
      - Returns the exact plan of NVML operations in RV(operations) without running them.
      - On an Ampere GPU whose MIG mode must be enabled while something in RV(reset_blockers) blocks a GPU reset,
        it foresees that the mode change will wait for the reset and returns the instance steps in RV(deferred),
        as a real run does.
  diff_mode:
    support: full
options:
  layouts:
    description:
      - The desired layout per GPU. GPUs that no entry selects are left alone.
      - Each GPU may be selected by one entry only.
    type: list
    elements: dict
    suboptions:
      gpus:
        description:
          - Which GPUs, by V(all), an index, a C(GPU-...) UUID, a product name such as V(NVIDIA A100 80GB PCIe),
            or a list of those.
        type: raw
        required: true
      layout:
        description:
          - V(disabled), or a list of GPU-instance profiles by name (V(1g.10gb), V(3g.40gb), V(1g.10gb+me), ...).
          - An element can be a dict with C(profile), C(count) (default 1) and C(compute_instances), a list of
            compute-instance sizes (V(1c), V(2c), or V(1c.3g.40gb)); the default is one compute instance
            spanning the GPU instance.
          - Numeric profile ids (as C(nvidia-smi mig -cgi) takes them) are refused, since they mean different
            profiles on different GPU models; the error names the profile the id means on that GPU.
        type: raw
        required: true
  mig_parted_config:
    description:
      - "A mig-parted configuration (C(version: v1), C(mig-configs)) as data, for example from
        C(lookup('ansible.builtin.file', 'config.yaml') | from_yaml). Use with O(mig_parted_name)."
      - C(devices), C(device-filter), C(mig-enabled) and C(mig-devices) mean what they mean to mig-parted,
        including compute-instance keys such as C(1c.3g.40gb), which share one GPU instance as mig-parted groups
        them. C(mig-enabled) is required and must be a boolean; C(devices) is V(all) or a list of indices.
      - Where the module deliberately differs from mig-parted (it refuses what mig-parted would silently accept,
        keeps matching instances, never destroys busy ones), the collection's C(docs/mig.md) says so.
    type: dict
  mig_parted_file:
    description:
      - Path on the target of a mig-parted configuration file; needs PyYAML on the target unless the file is JSON.
    type: path
  mig_parted_name:
    description: The entry of C(mig-configs) to apply.
    type: str
  force:
    description:
      - Skip the module's own refusal to change a GPU while compute processes run on instances the change
        destroys, or on a GPU whose MIG mode it changes.
      - It does not stop processes. NVML refuses to destroy a compute instance that runs processes (C(In use by
        another client)), so before the first change on each GPU the module checks every such instance again,
        and the steps NVML may refuse run first. If processes still run there, that GPU is left exactly as it
        was and the run fails naming the PIDs; force is complete or a no-op per GPU.
      - A MIG mode change while processes run on the GPU waits for a GPU reset, which the driver refuses while
        they run; they are reported in RV(reset_blockers), and the P(gpufleet.core.mig#role) role reboots instead of
        attempting that reset.
    type: bool
    default: false
  allow_mode_change:
    description:
      - Whether the module may enable or disable MIG mode. With V(false), a layout that needs a mode change fails
        before anything changes.
    type: bool
    default: true
notes:
  - Profile names, ids, sizes and placements come from NVML at run time and are never hard-coded.
seealso:
  - name: NVIDIA MIG user guide
    description: MIG profiles, placements and the reset rules per GPU generation.
    link: https://docs.nvidia.com/datacenter/tesla/mig-user-guide/
  - module: gpufleet.core.topology_facts
'''

EXAMPLES = r'''
- name: Two 3g.40gb instances on every A100 80GB (at most two fit)
  gpufleet.core.mig:
    layouts:
      - gpus: NVIDIA A100 80GB PCIe
        layout: [3g.40gb, 3g.40gb]

- name: An LLM on a 4g and three image-generation workers on 1g instances, GPU 0 only
  gpufleet.core.mig:
    layouts:
      - gpus: 0
        layout:
          - 4g.40gb
          - {profile: 1g.10gb, count: 3}

- name: One 3g GPU instance split into three 1-slice compute instances
  gpufleet.core.mig:
    layouts:
      - gpus: GPU-5c6f7a2e-1b3d-4e8f-9a0b-1c2d3e4f5a62
        layout:
          - {profile: 3g.40gb, compute_instances: [1c, 1c, 1c]}

- name: Apply an existing mig-parted configuration
  gpufleet.core.mig:
    mig_parted_config: "{{ lookup('ansible.builtin.file', 'mig-parted-config.yaml') | from_yaml }}"
    mig_parted_name: all-1g.10gb

- name: Turn MIG off on GPU 3
  gpufleet.core.mig:
    layouts:
      - gpus: 3
        layout: disabled
'''

RETURN = r'''
gpus:
  description: One entry per selected GPU.
  returned: always
  type: list
  elements: dict
  contains:
    index:
      description: NVML index.
      type: int
      returned: always
      sample: 0
    uuid:
      description: The GPU's UUID.
      type: str
      returned: always
      sample: GPU-5c6f7a2e-1b3d-4e8f-9a0b-1c2d3e4f5a60
    name:
      description: Product name.
      type: str
      returned: always
      sample: NVIDIA A100 80GB PCIe
    changed:
      description: Whether this GPU was (or, in check mode, would be) changed.
      type: bool
      returned: always
      sample: true
    mig_mode:
      description: Current MIG mode after the run.
      type: str
      returned: always
      sample: enabled
    mig_mode_pending:
      description: MIG mode after the next GPU reset.
      type: str
      returned: always
      sample: enabled
    reset_required:
      description: Whether this GPU's MIG mode waits for a GPU reset or a reboot; its instances follow on a later run.
      type: bool
      returned: always
      sample: false
    layout_before:
      description:
        - V(disabled), or the GPU instances before the run as C(profile@start), with compute instances in
          brackets where they do not span the whole GPU instance.
      type: raw
      returned: always
      sample: [1g.10gb@6]
    layout_after:
      description:
        - The same after the run; in check mode, the layout the plan leads to.
        - While the MIG mode change waits for a GPU reset, the layout before it (V(disabled)); the instances are in
          RV(gpus[].deferred).
      type: raw
      returned: always
      sample: [3g.40gb@0, 1g.10gb@4, 1g.10gb@6]
    layout_wanted:
      description:
        - The layout the plan leads to, once any RV(gpus[].deferred) steps have run after a GPU reset, in words as
          RV(gpus[].layout_before) writes them.
        - For people; code reads the same plan as data, RV(gpus[].mig_wanted).
      type: raw
      returned: always
      sample: [3g.40gb@0, 1g.10gb@4, 1g.10gb@6]
    mig_wanted:
      description:
        - The MIG state the plan leads to (RV(gpus[].layout_wanted)), as data. In check mode, the plan; the
          P(gpufleet.core.topology_after_mig#filter) filter reads it to place services before the change.
      type: dict
      returned: always
      sample:
        mig_mode: enabled
        gpu_instances:
          - {"profile": "3g.40gb", "placement_start": 0, "compute_instances": [{"slice_count": 3}]}
          - {"profile": "3g.40gb", "placement_start": 4, "compute_instances": [{"slice_count": 1}, {"slice_count": 2}]}
      contains:
        mig_mode:
          description: V(enabled) or V(disabled).
          type: str
          returned: always
          sample: enabled
        gpu_instances:
          description: The GPU instances, in the order of their placement; empty when MIG mode is disabled.
          type: list
          elements: dict
          returned: always
          contains:
            profile:
              description: The GPU-instance profile's name.
              type: str
              returned: always
              sample: 3g.40gb
            placement_start:
              description: The first memory slice of the instance's placement.
              type: int
              returned: always
              sample: 4
            compute_instances:
              description: The instance's compute instances, in order; one spanning it unless the layout splits it.
              type: list
              elements: dict
              returned: always
              contains:
                slice_count:
                  description: The compute slices of the compute instance.
                  type: int
                  returned: always
                  sample: 1
    compute_pids:
      description: PIDs of the compute processes on this GPU after the run; they block a GPU reset.
      type: list
      elements: int
      returned: always
      sample: []
    operations:
      description:
        - The NVML operations this run makes (in check mode, would make) on this GPU, in order; RV(applied) and
          RV(not_run) say which ran.
        - Steps that must wait for a GPU reset are not among them but in RV(gpus[].deferred).
      type: list
      elements: str
      returned: always
      sample:
        - "GPU 0 (GPU-5c6f..., NVIDIA A100 80GB PCIe): create 3g.40gb at memory slice 0 with compute instances 3c"
    deferred:
      description:
        - The steps of this GPU's layout that wait for its MIG mode change, which waits for a GPU reset (Ampere, with
          the reset blocked); they were not run (in check mode, would not be). The first run after the reset or
          reboot makes them; the P(gpufleet.core.mig#role) role runs it.
        - Empty when nothing waits.
      type: list
      elements: str
      returned: always
      sample:
        - "GPU 0 (GPU-5c6f..., NVIDIA A100 80GB PCIe): create 3g.40gb at memory slice 4 with compute instances 3c"
    devices:
      description: Every MIG device after the run, for CUDA_VISIBLE_DEVICES.
      type: list
      elements: dict
      returned: always
      sample:
        - {"gpu_instance_id": 1, "compute_instance_id": 0, "profile": "3g.40gb", "placement_start": 0,
           "uuid": "MIG-0c8d7b3e-7f1a-5a2b-9c4d-3e2f1a0b9c8d"}
applied:
  description: The NVML steps that ran, in order; empty in check mode.
  returned: always, and on failure part-way
  type: list
  elements: str
  sample: []
failed_on:
  description:
    - The step NVML refused, with its error; empty unless the run failed part-way.
    - Named C(failed_on) because Ansible owns a result's C(failed) key.
  returned: always, and on failure part-way
  type: list
  elements: str
  sample: []
not_run:
  description:
    - Planned steps that did not run; in check mode, the whole plan (RV(operations), then RV(deferred)).
    - After a failure, the steps after the failed one; after a MIG mode change that waits for a GPU reset, that
      GPU's instance steps (RV(deferred)), which follow on a run after the reset.
  returned: always, and on failure part-way
  type: list
  elements: str
  sample: []
operations:
  description:
    - All GPUs' operations of this run (in check mode, of the run it plans), in planned order; RV(applied) and
      RV(not_run) say which ran.
    - Instance steps that wait for a MIG mode change that waits for a GPU reset are not among them; see RV(deferred).
  returned: always
  type: list
  elements: str
  sample: []
deferred:
  description:
    - All GPUs' steps that wait for a GPU reset (RV(gpus[].deferred)), in planned order. They did not run (in check
      mode, would not run); the first run after the reset or reboot makes them. Empty when nothing waits.
  returned: always, and on failure part-way
  type: list
  elements: str
  sample:
    - "GPU 0 (GPU-5c6f..., NVIDIA A100 80GB PCIe): create 3g.40gb at memory slice 4 with compute instances 3c"
reset_required:
  description: Whether any GPU's MIG mode waits for a GPU reset.
  returned: always
  type: bool
  sample: false
reset_blockers:
  description:
    - Things found on the host that are known to block a GPU reset, by name, including compute processes running
      on a GPU whose reset is required; only checked when a reset is required.
  returned: always
  type: list
  elements: str
  sample: ["nvidia-persistenced (stop it during the reset)"]
reboot_required:
  description: Whether a reset is required and something blocks it, so a reboot is the way through.
  returned: always
  type: bool
  sample: false
'''

import json

from ansible.module_utils.basic import AnsibleModule, missing_required_lib

from ansible_collections.gpufleet.core.plugins.module_utils._argspec import HOST_ROOTS, argument_spec
from ansible_collections.gpufleet.core.plugins.module_utils._errors import GpufleetError
from ansible_collections.gpufleet.core.plugins.module_utils._host import HostFiles
from ansible_collections.gpufleet.core.plugins.module_utils._mig import MigApplyError, MigRun
from ansible_collections.gpufleet.core.plugins.module_utils._nvml import PYNVML_IMPORT_ERROR, PYNVML_PACKAGE, pynvml

try:
    import yaml
except ImportError:
    yaml = None


def load_mig_parted_file(module, path):
    try:
        with open(path) as handle:
            text = handle.read()
    except (IOError, OSError) as exc:
        module.fail_json(msg='mig_parted_file=%s cannot be read: %s' % (path, exc))
    if yaml is not None:
        try:
            return yaml.safe_load(text)
        except yaml.YAMLError as exc:
            module.fail_json(msg='mig_parted_file=%s is not valid YAML: %s' % (path, exc))
    try:
        return json.loads(text)
    except ValueError:
        module.fail_json(msg=missing_required_lib('PyYAML', reason='to read the YAML file %s; or pass its content '
                                                  'as mig_parted_config' % path))


def main():
    module = AnsibleModule(
        argument_spec=argument_spec(
            HOST_ROOTS,
            layouts={'type': 'list', 'elements': 'dict', 'options': {
                'gpus': {'type': 'raw', 'required': True},
                'layout': {'type': 'raw', 'required': True},
            }},
            mig_parted_config={'type': 'dict'},
            mig_parted_file={'type': 'path'},
            mig_parted_name={'type': 'str'},
            force={'type': 'bool', 'default': False},
            allow_mode_change={'type': 'bool', 'default': True},
        ),
        mutually_exclusive=[('layouts', 'mig_parted_config', 'mig_parted_file')],
        required_one_of=[('layouts', 'mig_parted_config', 'mig_parted_file')],
        required_by={'mig_parted_config': 'mig_parted_name', 'mig_parted_file': 'mig_parted_name'},
        supports_check_mode=True,
    )
    if pynvml is None:
        module.fail_json(msg=missing_required_lib(PYNVML_PACKAGE), exception=PYNVML_IMPORT_ERROR)
    params = module.params
    mig_parted = params['mig_parted_config']
    if params['mig_parted_file']:
        mig_parted = load_mig_parted_file(module, params['mig_parted_file'])
    run = MigRun(pynvml, HostFiles(params['sysfs_root'], params['procfs_root']), layouts=params['layouts'],
                 mig_parted=mig_parted, mig_parted_name=params['mig_parted_name'], force=params['force'],
                 allow_mode_change=params['allow_mode_change'])
    try:
        result = run.run(module.check_mode)
    except MigApplyError as exc:
        module.fail_json(msg=str(exc), changed=bool(run.applied), applied=run.applied, failed_on=run.failed,
                         not_run=run.not_run, deferred=run.deferred)
    except GpufleetError as exc:
        module.fail_json(msg=str(exc), changed=False)
    diff = result.pop('diff')
    if module._diff:
        result['diff'] = diff
    module.exit_json(**result)


if __name__ == '__main__':
    main()
