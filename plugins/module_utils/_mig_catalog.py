# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.core contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""NVIDIA's MIG GPU-instance profiles per GPU model, for checking a hardware class's layouts before any host is read.

From NVIDIA's MIG user guide ("Supported MIG Profiles") and nvidia-smi mig -lgip/-lgipp output. On a host the mig
module reads the live table from NVML instead; this one serves validate, which reaches no host. memory_mb varies a
little between driver versions and is for messages only. Pure data; a private module: its API may change without
notice.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

# Product name as NVML reports it -> (name, profile id, compute slices, memory slices, max count, placement starts
# in memory slices, memory MB) per GPU-instance profile.
PROFILES = {
    'NVIDIA A100-SXM4-40GB': (
        ('1g.5gb', 19, 1, 1, 7, (0, 1, 2, 3, 4, 5, 6), 4864),
        ('1g.5gb+me', 20, 1, 1, 1, (0, 1, 2, 3, 4, 5, 6), 4864),
        ('1g.10gb', 15, 1, 2, 4, (0, 2, 4, 6), 9856),
        ('2g.10gb', 14, 2, 2, 3, (0, 2, 4), 9856),
        ('3g.20gb', 9, 3, 4, 2, (0, 4), 19968),
        ('4g.20gb', 5, 4, 4, 1, (0,), 19968),
        ('7g.40gb', 0, 7, 8, 1, (0,), 40192),
    ),
    'NVIDIA A100 80GB PCIe': (
        ('1g.10gb', 19, 1, 1, 7, (0, 1, 2, 3, 4, 5, 6), 9728),
        ('1g.10gb+me', 20, 1, 1, 1, (0, 1, 2, 3, 4, 5, 6), 9728),
        ('1g.20gb', 15, 1, 2, 4, (0, 2, 4, 6), 19968),
        ('2g.20gb', 14, 2, 2, 3, (0, 2, 4), 19968),
        ('3g.40gb', 9, 3, 4, 2, (0, 4), 40192),
        ('4g.40gb', 5, 4, 4, 1, (0,), 40192),
        ('7g.80gb', 0, 7, 8, 1, (0,), 80896),
    ),
    'NVIDIA H100 80GB HBM3': (
        ('1g.10gb', 19, 1, 1, 7, (0, 1, 2, 3, 4, 5, 6), 9984),
        ('1g.10gb+me', 20, 1, 1, 1, (0, 1, 2, 3, 4, 5, 6), 9984),
        ('1g.20gb', 15, 1, 2, 4, (0, 2, 4, 6), 20096),
        ('2g.20gb', 14, 2, 2, 3, (0, 2, 4), 20096),
        ('3g.40gb', 9, 3, 4, 2, (0, 4), 40448),
        ('4g.40gb', 5, 4, 4, 1, (0,), 40448),
        ('7g.80gb', 0, 7, 8, 1, (0,), 81152),
    ),
    'NVIDIA H200': (
        ('1g.18gb', 19, 1, 1, 7, (0, 1, 2, 3, 4, 5, 6), 16384),
        ('1g.18gb+me', 20, 1, 1, 1, (0, 1, 2, 3, 4, 5, 6), 16384),
        ('1g.35gb', 15, 1, 2, 4, (0, 2, 4, 6), 33024),
        ('2g.35gb', 14, 2, 2, 3, (0, 2, 4), 33024),
        ('3g.71gb', 9, 3, 4, 2, (0, 4), 71168),
        ('4g.71gb', 5, 4, 4, 1, (0,), 71168),
        ('7g.141gb', 0, 7, 8, 1, (0,), 143104),
    ),
}


def profiles(model):
    """The model's profiles in the form NVML gives the mig module (GpuShape's input); None for an unknown model."""
    rows = PROFILES.get(model)
    if rows is None:
        return None
    return [{'name': name, 'id': profile_id, 'slice_count': compute, 'max_count': count, 'memory_mb': memory,
             'placements': [{'start': start, 'size': size} for start in starts]}
            for name, profile_id, compute, size, count, starts, memory in rows]
