# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.core contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import absolute_import, division, print_function

__metaclass__ = type


class ModuleDocFragment:

    DOCUMENTATION = r'''
options:
  sysfs_root:
    description:
      - Root of the sysfs tree to read.
      - Point it at a captured copy of another host's C(/sys) to analyse that host offline,
        in the way C(HWLOC_FSROOT) works for hwloc.
    type: path
    default: /sys
  procfs_root:
    description:
      - Root of the procfs tree to read, for C(cpuinfo), C(meminfo), kernel settings and processes.
    type: path
    default: /proc
'''
