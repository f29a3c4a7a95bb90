# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.core contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Set a GPU's compute mode by UUID, with the gpufleet.core.compute_mode module's own logic.

usage: gpufleet-helpers compute-mode GPU-UUID default|exclusive_process|prohibited

The compute mode does not survive a reboot; gpufleet-mps@.service runs this before its daemon starts.
This is a private module: its API may change without notice.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import sys

from ansible_collections.gpufleet.core.plugins.module_utils._compute_mode import ComputeModeError, ensure
from ansible_collections.gpufleet.core.plugins.module_utils._nvml import pynvml

SUMMARY = "set a GPU's compute mode (the MPS daemon's unit)"


def main(argv):
    """argv[0] is the command's name, as sys.argv; returns the exit code."""
    if len(argv) != 3:
        sys.stderr.write(__doc__.split('\n\n', 2)[1] + '\n')
        return 2
    if pynvml is None:
        sys.stderr.write('gpufleet-compute-mode: nvidia-ml-py (pynvml) is not installed\n')
        return 1
    try:
        changed, changes = ensure(pynvml, [argv[1]], argv[2], check_mode=False)
    except ComputeModeError as exc:
        sys.stderr.write('gpufleet-compute-mode: %s\n' % exc)
        return 1
    before, after = changes[argv[1]]
    sys.stdout.write('%s: compute mode %s%s\n' % (argv[1], after, ' (was %s)' % before if changed else ''))
    return 0
