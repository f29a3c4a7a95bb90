# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.core contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import absolute_import, division, print_function

__metaclass__ = type


class ModuleDocFragment:

    DOCUMENTATION = r'''
options: {}
requirements:
  - nvidia-ml-py (the Python package that provides the C(pynvml) module) on the target.
  - The NVIDIA driver, whose C(libnvidia-ml.so.1) NVML loads.
notes:
  - GPUs are identified by UUID (C(GPU-...), C(MIG-...)); indices can change order between boots.
'''
