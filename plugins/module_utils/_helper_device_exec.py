# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.core contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Run a command on the device a name stands for now, with CUDA_VISIBLE_DEVICES set to its UUID.

usage: gpufleet-helpers device-exec NAME COMMAND [ARGUMENTS...]

NAME is a whole GPU's UUID, used as it is, or a MIG device's slot (GPU-UUID:PROFILE:START:ORDINAL), found among the
MIG devices present now (_mig_slots.resolve): gpufleet-mps@.service starts the MPS control daemon of a MIG device
this way, since the device's UUID can change at each boot. COMMAND replaces this process. When the slot is empty,
the reason goes to stderr and the exit code is 1, so that nothing starts on a wrong device.
This is a private module: its API may change without notice.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import sys

from ansible_collections.gpufleet.core.plugins.module_utils._device_env import is_gpu_uuid
from ansible_collections.gpufleet.core.plugins.module_utils._errors import GpufleetError
from ansible_collections.gpufleet.core.plugins.module_utils._host import HostFiles
from ansible_collections.gpufleet.core.plugins.module_utils._mig_slots import parse_slot, resolve
from ansible_collections.gpufleet.core.plugins.module_utils._nvml import pynvml
from ansible_collections.gpufleet.core.plugins.module_utils._topology import Topology
from ansible_collections.gpufleet.core.plugins.module_utils._topology_facts import gather

SUMMARY = "run a command on a GPU, or on the MIG device in a slot now (the MPS daemon's unit)"
PROGRAM = 'gpufleet-device-exec'


def main(argv, files=None, execute=os.execvpe):
    """argv[0] is the command's name, as sys.argv; FILES the host's /sys and /proc (HostFiles); EXECUTE replaces the
    process (os.execvpe's arguments). Returns the exit code when it does not."""
    if len(argv) < 3:
        sys.stderr.write(__doc__.split('\n\n', 2)[1] + '\n')
        return 2
    name, command = argv[1], argv[2:]
    try:
        uuid = name if is_gpu_uuid(name) else device_now(parse_slot(name), files)
    except GpufleetError as exc:
        sys.stderr.write('%s: %s\n' % (PROGRAM, exc))
        return 1
    sys.stdout.write('%s: %s is %s now\n' % (PROGRAM, name, uuid))
    sys.stdout.flush()
    execute(command[0], command, dict(os.environ, CUDA_VISIBLE_DEVICES=uuid))
    return 0


def device_now(slot, files=None):
    """The UUID of the MIG device in SLOT on the devices present now."""
    if pynvml is None:
        raise GpufleetError('nvidia-ml-py (pynvml) is not installed')
    topology = Topology(gather(files or HostFiles('/sys', '/proc'), pynvml, require_gpus=True))
    return resolve(topology, [slot])[str(slot)]
