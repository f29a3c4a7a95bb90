# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.core contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Write the runtime file of one device named by a GPU's UUID or a MIG slot: CUDA_VISIBLE_DEVICES, its UUID now.

usage: gpufleet-helpers device-env NAME FILE

NAME is a whole GPU's UUID, used as it is, or a MIG device's slot (GPU-UUID:PROFILE:START:ORDINAL), found among the
MIG devices present now (_mig_slots.resolve). gpufleet-mps@.service runs this as root before the MPS control daemon
of a MIG device starts (ExecStartPre=+), and the daemon reads FILE (EnvironmentFile=): the device's UUID can change at
each boot, and the daemon's user need not be able to read what NVML's discovery reads. FILE is replaced whole. When
the slot is empty nothing is written, the reason goes to stderr and the exit code is 1, so that the daemon does not
start on a wrong device.
This is a private module: its API may change without notice.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import sys

from ansible_collections.gpufleet.core.plugins.module_utils._device_env import is_gpu_uuid, runtime_text
from ansible_collections.gpufleet.core.plugins.module_utils._errors import GpufleetError
from ansible_collections.gpufleet.core.plugins.module_utils._helper_devices import host_topology, write_file
from ansible_collections.gpufleet.core.plugins.module_utils._mig_slots import parse_slot, resolve

SUMMARY = "write the runtime file of a GPU, or of the MIG device in a slot now (the MPS daemon's unit)"
PROGRAM = 'gpufleet-device-env'


def main(argv, files=None):
    """argv[0] is the command's name, as sys.argv; FILES the host's /sys and /proc (HostFiles); the exit code."""
    if len(argv) != 3:
        sys.stderr.write(__doc__.split('\n\n', 2)[1] + '\n')
        return 2
    name, path = argv[1], argv[2]
    try:
        uuid = name if is_gpu_uuid(name) else resolve(host_topology(files), [parse_slot(name)])[name]
    except GpufleetError as exc:
        sys.stderr.write('%s: %s\n' % (PROGRAM, exc))
        return 1
    write_file(path, runtime_text([uuid], False, source=name))
    sys.stdout.write('%s: %s is %s now\n' % (PROGRAM, name, uuid))
    return 0
