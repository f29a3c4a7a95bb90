# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.core contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""How MIG divides a GPU, for the fleet report: its compute and memory slices, from NVIDIA's profile table.

The model places each instance on these slices and the drawing draws them; both ask here, by GPU model, so that the
report's JSON (which has the model, not the table) draws as it was made.
This is a private module: its API may change without notice.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.gpufleet.core.plugins.module_utils._mig_catalog import PROFILES, profiles


def _whole(value):
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def slices_of(table):
    """(compute slices, memory slices) of a MIG profile table in NVML's form (module_utils/_mig_catalog.profiles):
    the widest profile's compute slices and the end of the furthest memory placement; None for an empty table."""
    table = [profile for profile in table or [] if isinstance(profile, dict)]
    compute = max([_whole(profile.get('slice_count')) for profile in table] or [0])
    memory = max([_whole(placement.get('start')) + _whole(placement.get('size'))
                  for profile in table for placement in profile.get('placements') or [] if isinstance(placement, dict)]
                 or [0])
    return (compute, memory) if compute and memory else None


# A model the catalog lacks is drawn on the widest division of the catalog's models (all of them divide alike today).
WIDEST_SLICES = max(slices_of(profiles(model)) for model in PROFILES)


def gpu_slices(model):
    """(compute slices, memory slices) MIG divides a GPU of this model (its product name) into."""
    return slices_of(profiles(model) if isinstance(model, str) else None) or WIDEST_SLICES


def profile_table(fact_profiles, model):
    """The model's MIG profiles by name: the fact's own table (what the host's NVML said), else NVIDIA's from the
    catalog; empty when neither has the model."""
    rows = fact_profiles.get(model) if isinstance(fact_profiles, dict) and isinstance(model, str) else None
    if not rows:
        rows = (profiles(model) if isinstance(model, str) else None) or []
    return dict((profile['name'], profile) for profile in rows
                if isinstance(profile, dict) and isinstance(profile.get('name'), str))
