# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.core contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""MIG layouts: validation against a GPU's profiles, placement, and the smallest change.

Pure code: it works on the profile tables NVML reports (as topology_facts returns them)
and on plain descriptions of the instances that exist. This is a private module: its API
may change without notice.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import itertools

from ansible_collections.gpufleet.core.plugins.module_utils._errors import GpufleetError
from ansible_collections.gpufleet.core.plugins.module_utils._mig_catalog import MigGeometry

# Compute-instance sizes a GPU instance of N compute slices offers (A100/H100/H200, MIG user guide).
# NVML only describes compute-instance profiles of an existing GPU instance, so a layout is checked
# against this table before anything is created; NVML still has the last word at creation.
COMPUTE_INSTANCE_SIZES = {1: (1,), 2: (1, 2), 3: (1, 2, 3), 4: (1, 2, 4), 7: (1, 2, 3, 4, 7)}


class LayoutError(GpufleetError, ValueError):
    """A layout that cannot be applied; the message says why and what would work."""


class GpuShape(MigGeometry):
    """The MIG geometry of one GPU model (``_mig_catalog.MigGeometry``, from its NVML profile table), named for
    messages."""

    def __init__(self, name, profiles):
        super(GpuShape, self).__init__(profiles)
        self.name = name

    def describe(self):
        ordered = sorted(self.profiles.items(), key=lambda kv: (kv[1]['slice_count'], kv[1]['memory_mb'], kv[0]))
        return ', '.join('%s (up to %d)' % (name, profile['max_count']) for name, profile in ordered)


def _layout_text(names):
    return ', '.join(names) if names else '(no instances)'


def _sort_key(shape):
    # Big instances first: they have the fewest allowed placements.
    return lambda name: (-shape.memory_size(name), -shape.profile(name)['slice_count'], name)


def pack(shape, names, fixed=()):
    """Placements {index in names: start} for the profiles, around fixed (name, start) instances.

    Returns None when they do not fit. Deterministic: big profiles first, highest allowed start first,
    which leaves the low slices free for small instances added later.
    """
    used = set()
    compute = 0
    counts = {}
    for name, start in fixed:
        used.update(range(start, start + shape.memory_size(name)))
        compute += shape.profile(name)['slice_count']
        counts[name] = counts.get(name, 0) + 1
    order = sorted(range(len(names)), key=lambda i: _sort_key(shape)(names[i]))
    chosen = {}

    def place(position, used, compute):
        if position == len(order):
            return True
        index = order[position]
        profile = shape.profile(names[index])
        if compute + profile['slice_count'] > shape.compute_slices:
            return False
        for placement in sorted(profile['placements'], key=lambda pl: -pl['start']):
            span = set(range(placement['start'], placement['start'] + placement['size']))
            if span & used:
                continue
            chosen[index] = placement['start']
            if place(position + 1, used | span, compute + profile['slice_count']):
                return True
        chosen.pop(index, None)
        return False

    for name in set(names):
        if counts.get(name, 0) + names.count(name) > shape.profile(name)['max_count']:
            return None
    return dict(chosen) if place(0, used, compute) else None


def why_not(shape, names):
    """Why the profiles cannot share one GPU, in one sentence."""
    for name in sorted(set(names)):
        maximum = shape.profile(name)['max_count']
        if names.count(name) > maximum:
            return '%s allows at most %d per GPU, and %d were asked for' % (name, maximum, names.count(name))
    compute = sum(shape.profile(name)['slice_count'] for name in names)
    if compute > shape.compute_slices:
        return 'they need %d compute slices and the GPU has %d' % (compute, shape.compute_slices)
    memory = sum(shape.memory_size(name) for name in names)
    if memory > shape.memory_slices:
        return 'they need %d memory slices and the GPU has %d' % (memory, shape.memory_slices)
    starts = ['%s starts at %s' % (name, '/'.join(str(pl['start']) for pl in shape.profile(name)['placements']))
              for name in sorted(set(names))]
    return 'their allowed placements overlap: no choice of start slices fits them all (%s)' % '; '.join(starts)


def nearest_fit(shape, names):
    """The largest part of the requested layout that fits, dropping as few instances as possible."""
    for drop in range(1, len(names) + 1):
        candidates = []
        for removed in itertools.combinations(range(len(names)), drop):
            kept = [name for i, name in enumerate(names) if i not in removed]
            if pack(shape, kept) is not None:
                # Ties: keep more of the compute, then more of the memory, that was asked for.
                compute = sum(shape.profile(name)['slice_count'] for name in kept)
                memory = sum(shape.memory_size(name) for name in kept)
                candidates.append((-compute, -memory, sorted(kept, key=_sort_key(shape))))
        if candidates:
            return min(candidates)[2]
    return []


def validate(shape, layout, where=None):
    """Check a layout (a list of {'profile', 'compute_instances'}) against the GPU; raise LayoutError."""
    where = where or shape.name
    unknown = sorted(set(entry['profile'] for entry in layout) - set(shape.profiles))
    if unknown:
        raise LayoutError('%s: no MIG profile %s; this GPU offers %s'
                          % (where, ', '.join(unknown), shape.describe()))
    for entry in layout:
        slices = shape.profile(entry['profile'])['slice_count']
        offered = COMPUTE_INSTANCE_SIZES.get(slices, (slices,))
        bad = [size for size in entry['compute_instances'] if size not in offered]
        if bad or sum(entry['compute_instances']) > slices:
            raise LayoutError(
                '%s: compute instances %s do not fit a %s GPU instance: it has %d compute slices and offers '
                'compute instances of %s slices' % (
                    where, '+'.join('%dc' % size for size in entry['compute_instances']), entry['profile'],
                    slices, '/'.join(str(size) for size in offered)))
    names = [entry['profile'] for entry in layout]
    if pack(shape, names) is None:
        nearest = nearest_fit(shape, names)
        raise LayoutError('%s: the layout %s does not fit: %s. The nearest layout that fits is %s.'
                          % (where, _layout_text(names), why_not(shape, names), _layout_text(nearest)))


def plan_instances(shape, layout, existing):
    """The smallest change from the existing GPU instances to the layout.

    existing: [{'id', 'profile', 'start', 'compute_instances': [size, ...], 'busy': bool}].
    Returns (keep, destroy, create) where keep and destroy hold existing entries and create holds
    {'profile', 'start', 'compute_instances'}. Kept instances whose compute instances differ are
    listed in keep with 'recreate_compute_instances': True.
    """
    # A canonical order, so that equal layouts written differently give equal results.
    layout = sorted(layout, key=lambda entry: (_sort_key(shape)(entry['profile']), entry['compute_instances']))
    wanted = [entry['profile'] for entry in layout]
    candidates = [gi for gi in existing if gi['profile'] in wanted]
    # Prefer keeping more instances, then busy ones, then the lowest ids: deterministic and safest.
    best = None
    for size in range(len(candidates), -1, -1):
        options = []
        for kept in itertools.combinations(candidates, size):
            remaining = list(wanted)
            fits = True
            for gi in kept:
                if gi['profile'] in remaining:
                    remaining.remove(gi['profile'])
                else:
                    fits = False
                    break
            if not fits:
                continue
            placements = pack(shape, remaining, fixed=[(gi['profile'], gi['start']) for gi in kept])
            if placements is not None:
                options.append((-sum(1 for gi in kept if gi['busy']), [gi['id'] for gi in kept],
                                kept, remaining, placements))
        if options:
            best = min(options, key=lambda option: option[:2])
            break
    _busy, _ids, kept, remaining, placements = best
    # Give each kept instance the requested entry of its profile whose compute split matches, if any.
    entries = list(layout)
    keep = []
    for gi in kept:
        same = [e for e in entries if e['profile'] == gi['profile']
                and sorted(e['compute_instances']) == sorted(gi['compute_instances'])]
        entry = same[0] if same else [e for e in entries if e['profile'] == gi['profile']][0]
        entries.remove(entry)
        keep.append(dict(gi, wanted_compute_instances=list(entry['compute_instances']),
                         recreate_compute_instances=not same))
    kept_ids = set(gi['id'] for gi in kept)
    destroy = [gi for gi in existing if gi['id'] not in kept_ids]
    create = []
    for index, name in enumerate(remaining):
        entry = [e for e in entries if e['profile'] == name][0]
        entries.remove(entry)
        create.append({'profile': name, 'start': placements[index],
                       'compute_instances': list(entry['compute_instances'])})
    # Create big instances first, in the order they were placed.
    create.sort(key=lambda item: (_sort_key(shape)(item['profile']), -item['start']))
    return keep, destroy, create
