# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.core contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Resolve the device map to the devices present now, and write each unit's runtime file.

usage: gpufleet-helpers devices [MAP.json [DIRECTORY]]

MAP.json is the device map (default /etc/gpufleet/devices.json; none: nothing to resolve), DIRECTORY where the
runtime files go (default /run/gpufleet/devices). Every file is written, and files of units the map no longer has
are removed, only when every device resolves: otherwise nothing is written, the reason goes to stderr and the exit
code is 1, so that no unit starts on a wrong device (_device_env).
This is a private module: its API may change without notice.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import sys

from ansible_collections.gpufleet.core.plugins.module_utils._device_env import (
    DEVICE_MAP, RUNTIME_DIR, check_map, names_devices, runtime_files, runtime_path)
from ansible_collections.gpufleet.core.plugins.module_utils._errors import GpufleetError
from ansible_collections.gpufleet.core.plugins.module_utils._host import HostFiles
from ansible_collections.gpufleet.core.plugins.module_utils._nvml import pynvml
from ansible_collections.gpufleet.core.plugins.module_utils._topology import Topology
from ansible_collections.gpufleet.core.plugins.module_utils._topology_facts import gather

SUMMARY = "resolve the device map's MIG slots to the devices present, for the units' runtime files"
PROGRAM = 'gpufleet-devices'


def main(argv, files=None):
    """argv[0] is the command's name, as sys.argv; FILES the host's /sys and /proc (HostFiles); the exit code."""
    if len(argv) > 3:
        sys.stderr.write(__doc__.split('\n\n', 2)[1] + '\n')
        return 2
    map_path = argv[1] if len(argv) > 1 else DEVICE_MAP
    directory = argv[2] if len(argv) > 2 else RUNTIME_DIR
    try:
        with open(map_path) as handle:
            document = json.load(handle)
    except (IOError, OSError) as exc:
        if not os.path.exists(map_path):
            sys.stdout.write('%s: no device map %s: no unit to resolve devices for\n' % (PROGRAM, map_path))
            return 0
        sys.stderr.write('%s: %s cannot be read: %s\n' % (PROGRAM, map_path, exc))
        return 1
    except ValueError as exc:
        sys.stderr.write('%s: %s is not JSON: %s; run the site playbook again to write it\n' % (PROGRAM, map_path, exc))
        return 1
    try:
        topology = None
        # A host whose services run on no GPU (a CPU-only host) has nothing to resolve and may have no NVML.
        if names_devices(check_map(document, map_path)):
            topology = host_topology(files)
        written = runtime_files(topology, document)
    except GpufleetError as exc:
        sys.stderr.write('%s: %s\n' % (PROGRAM, exc))
        return 1
    write_files(directory, written)
    for unit in sorted(written):
        sys.stdout.write('%s: %s\n' % (unit, written[unit].splitlines()[1]))
    return 0


def write_files(directory, written):
    """Each {unit: text} as DIRECTORY/UNIT.env, replaced whole (a unit never reads half a file); other units' files
    there removed."""
    for unit, text in written.items():
        write_file(runtime_path(unit, directory), text)
    for name in os.listdir(directory):
        if name.endswith('.env') and name[:-len('.env')] not in written:
            os.remove(os.path.join(directory, name))


def write_file(path, text):
    """PATH replaced whole by TEXT, mode 0644 (a unit never reads half a file); its directory made when missing."""
    directory = os.path.dirname(path)
    if not os.path.isdir(directory):
        os.makedirs(directory, 0o755)
    with open(path + '.new', 'w') as handle:
        handle.write(text)
    os.chmod(path + '.new', 0o644)
    os.rename(path + '.new', path)


def host_topology(files=None):
    """The Topology of the host's GPUs now, through NVML (FILES: the host's /sys and /proc, HostFiles)."""
    if pynvml is None:
        raise GpufleetError('nvidia-ml-py (pynvml) is not installed')
    return Topology(gather(files or HostFiles('/sys', '/proc'), pynvml, require_gpus=True))
