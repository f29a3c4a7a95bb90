# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.core contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""NVIDIA's MIG GPU-instance profiles per GPU model, and how a profile table divides a GPU (``MigGeometry``).

The profiles are from NVIDIA's MIG user guide ("Supported MIG Profiles") and nvidia-smi mig -lgip/-lgipp output. On a
host the mig module reads the live table from NVML instead; this one serves validate, which reaches no host, and
stands in where a fact lacks its model's table. memory_mb varies a little between driver versions and is for messages
only. ``MigGeometry`` is the one reading of a table's slices: the mig module's layouts (``_mig_plan.GpuShape``), the
topology model's MIG instances and its projection after a MIG change (``_topology``) and the fleet report's drawing
take their spans from it. Pure code; a private module: its API may change without notice.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.gpufleet.core.plugins.module_utils._values import is_integer

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


def _is_count(value, least=0):
    return is_integer(value) and value >= least


def _gives_geometry(row):
    """Does this row of a profile table say where its instances lie: a name, compute slices and placements?"""
    return isinstance(row, dict) and isinstance(row.get('name'), str) and _is_count(row.get('slice_count'), 1) \
        and isinstance(row.get('placements'), list) and len(row['placements']) > 0 and all(
            isinstance(placement, dict) and _is_count(placement.get('start')) and _is_count(placement.get('size'), 1)
            for placement in row['placements'])


def _division(table):
    """(compute slices, memory slices) of a table: its widest profile's compute slices, the end of its furthest
    memory placement."""
    return (max(row['slice_count'] for row in table),
            max(placement['start'] + placement['size'] for row in table for placement in row['placements']))


class MigGeometry:
    """How MIG divides a GPU of one model, from its profile table in NVML's form (``profiles()``, a fact's
    mig_profiles, or the live table the mig module reads).

    - ``compute_slices``, ``memory_slices``: the GPU's slices (7 and 8 on every model of the catalog).
    - ``profiles``: name -> the table's row; ``profile(name)``; ``memory_size(name)``: the memory slices an instance
      of the profile spans (every placement of a profile is as wide).
    - ``placement(name, start)``: the table's placement of the profile at that memory start, None where it has none.
    - ``span(name, start)``: where a GPU instance at that memory start lies, on memory and compute slices.
    """

    def __init__(self, table, division=None):
        self.profiles = dict((row['name'], row) for row in table)
        self.compute_slices, self.memory_slices = division or _division(table)

    def profile(self, name):
        return self.profiles[name]

    def memory_size(self, name):
        return self.profiles[name]['placements'][0]['size']

    def placement(self, name, start):
        row = self.profiles.get(name)
        found = [placement for placement in (row or {}).get('placements') or [] if placement['start'] == start]
        return dict(found[0]) if found else None

    def span(self, name, start, memory=None, compute=None):
        """{'start', 'memory_slices', 'compute_start', 'compute_slices'} of a GPU instance of the profile at this
        memory start, or None where that does not lie on the GPU's slices.

        ``memory`` and ``compute`` (what a fact says: its placement's size, its compute instances' slices) stand in
        for a profile the table lacks. A GPU instance's compute slices begin at its memory start, as far as the
        compute slices allow: a 3g at memory slice 4 computes on slices 4-6.
        """
        row = self.profiles.get(name)
        if row is not None:
            memory, compute = self.memory_size(name), row['slice_count']
        if not (_is_count(start) and _is_count(memory, 1) and _is_count(compute, 1)) \
                or start + memory > self.memory_slices or compute > self.compute_slices:
            return None
        return {'start': start, 'memory_slices': memory, 'compute_start': min(start, self.compute_slices - compute),
                'compute_slices': compute}


# A model the catalog lacks divides as the widest of the catalog's models (all of them divide alike today).
WIDEST_DIVISION = max(_division(profiles(model)) for model in PROFILES)


def geometry(model, table=None):
    """The MIG geometry of a GPU of this model (its product name): from ``table`` (what the host's NVML said, in
    NVML's form) where it says where instances lie, else from NVIDIA's table here, else the widest division of the
    catalog's models with no profiles of its own."""
    if isinstance(table, list) and table and all(map(_gives_geometry, table)):
        return MigGeometry(table)
    rows = profiles(model) if isinstance(model, str) else None
    return MigGeometry(rows) if rows else MigGeometry([], WIDEST_DIVISION)
