# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.core contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Re-apply the declared MIG layout at boot, with the gpufleet.core.mig module's own logic.

usage: gpufleet-helpers mig-apply LAYOUT.json

Instances never survive a reboot, and on Hopper the MIG mode does not either. This runs from
gpufleet-mig.service before gpufleet-gpu.target, so GPU services start on the declared partitions.
This is a private module: its API may change without notice.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import sys

from ansible_collections.gpufleet.core.plugins.module_utils._errors import GpufleetError
from ansible_collections.gpufleet.core.plugins.module_utils._host import HostFiles
from ansible_collections.gpufleet.core.plugins.module_utils._mig import MigRun
from ansible_collections.gpufleet.core.plugins.module_utils._nvml import pynvml

SUMMARY = 'apply the declared MIG layout (the boot unit)'


def main(argv):
    """argv[0] is the command's name, as sys.argv; returns the exit code."""
    if len(argv) != 2:
        sys.stderr.write(__doc__.split('\n\n', 2)[1] + '\n')
        return 2
    if pynvml is None:
        sys.stderr.write('gpufleet-mig-apply: nvidia-ml-py (pynvml) is not installed\n')
        return 1
    try:
        with open(argv[1]) as handle:
            declared = json.load(handle)
    except (IOError, OSError, ValueError) as exc:
        sys.stderr.write('gpufleet-mig-apply: %s cannot be read as JSON: %s\n' % (argv[1], exc))
        return 1
    if not isinstance(declared, dict):
        sys.stderr.write('gpufleet-mig-apply: %s: expected a JSON object with layouts or mig_parted_config\n'
                         % argv[1])
        return 1
    run = MigRun(pynvml, HostFiles('/sys', '/proc'), layouts=declared.get('layouts'),
                 mig_parted=declared.get('mig_parted_config'), mig_parted_name=declared.get('mig_parted_name'),
                 force=False)
    try:
        result = run.run(check_mode=False)
    except GpufleetError as exc:
        sys.stderr.write('gpufleet-mig-apply: %s\n' % exc)
        return 1
    # What ran; steps that wait for a reset are not listed as done.
    for operation in result['applied']:
        sys.stdout.write('%s\n' % operation)
    for gpu in result['gpus']:
        sys.stdout.write('GPU %d %s: %s\n' % (gpu['index'], gpu['uuid'], gpu['layout_after'] if isinstance(
            gpu['layout_after'], str) else ', '.join(gpu['layout_after']) or 'MIG on, no instances'))
    if result['reset_required']:
        sys.stderr.write('gpufleet-mig-apply: a MIG mode change waits for a GPU reset: %s\n'
                         % (', '.join(result['reset_blockers']) or 'nothing blocks it'))
        for operation in result['not_run']:
            sys.stderr.write('gpufleet-mig-apply: not run until after the reset: %s\n' % operation)
        return 1
    return 0
