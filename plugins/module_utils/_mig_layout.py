# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.core contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Desired MIG layouts: the native form, mig-parted's config format, and GPU selection.

Pure code. A layout for one GPU is either None (MIG disabled) or a list of
{'profile': name, 'compute_instances': [sizes]}. This is a private module: its API may
change without notice.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

from ansible_collections.gpufleet.core.plugins.module_utils._mig_plan import LayoutError
from ansible_collections.gpufleet.core.plugins.module_utils._topology import match_gpu_ref

_CI_NAME = re.compile(r'^(\d+)c(?:\.(\d+g\.\d+gb(?:\+me)?))?$')
_CI_PROFILE_KEY = re.compile(r'^(\d+)c\.(\d+g\.\d+gb(?:\+me)?)$')


def select_gpus(selector, gpus, where):
    """GPUs chosen by 'all', an index, a GPU-... UUID, a product name, or a list of those.

    ``gpus`` are NVML's view of the GPUs (the mig module reads them live, not from the fact), so they are matched by
    _topology's one rule for GPU references, with product names allowed; a MIG-... UUID names no whole GPU here.
    """
    items = selector if isinstance(selector, list) else [selector]
    chosen = []
    for item in items:
        text = str(item).strip()
        matched = list(gpus) if text == 'all' else match_gpu_ref(text, gpus, names=True)
        if not matched:
            raise LayoutError('%s: no GPU matches %r; use all, an index, a GPU UUID or a product name '
                              '(this host has %s)' % (where, text, ', '.join(
                                  '%d %s %s' % (g['index'], g['uuid'], g['name']) for g in gpus) or 'no GPUs'))
        chosen.extend(gpu for gpu in matched if gpu not in chosen)
    return chosen


def _compute_sizes(value, profile, slices, where):
    if value is None:
        return [slices]
    sizes = []
    for item in value:
        if isinstance(item, int) and not isinstance(item, bool):
            sizes.append(item)
            continue
        match = _CI_NAME.match(str(item).strip())
        if not match or (match.group(2) and match.group(2) != profile):
            raise LayoutError('%s: compute instance %r is not a size like 1c or %dc.%s' % (where, item, slices, profile))
        sizes.append(int(match.group(1)))
    return sizes


def resolve(raw_layout, shape, where):
    """Turn one GPU's raw layout into the normal form, checking names against the GPU's profiles."""
    if raw_layout in (None, 'disabled', False):
        return None
    if not isinstance(raw_layout, list):
        raise LayoutError('%s: a layout is "disabled" or a list of MIG profiles, got %r' % (where, raw_layout))
    layout = []
    for position, entry in enumerate(raw_layout, 1):
        spot = '%s, entry %d' % (where, position)
        if isinstance(entry, dict):
            unknown = set(entry) - {'profile', 'count', 'compute_instances'}
            if unknown or 'profile' not in entry:
                raise LayoutError('%s: an entry takes profile, count and compute_instances (got %s)'
                                  % (spot, ', '.join(sorted(entry))))
            profile, count, split = entry['profile'], entry.get('count', 1), entry.get('compute_instances')
        else:
            profile, count, split = entry, 1, None
        if isinstance(profile, int) and not isinstance(profile, bool) or str(profile).strip().isdigit():
            _refuse_profile_id(int(profile), shape, spot)
        profile = str(profile).strip()
        if profile not in shape.profiles:
            raise LayoutError('%s: %s offers no MIG profile %s; it offers %s'
                              % (spot, shape.name, profile, shape.describe()))
        if not isinstance(count, int) or isinstance(count, bool) or count < 1:
            raise LayoutError('%s: count must be a whole number of 1 or more, got %r' % (spot, count))
        slices = shape.profile(profile)['slice_count']
        sizes = _compute_sizes(split, profile, slices, spot)
        layout.extend({'profile': profile, 'compute_instances': list(sizes)} for _copy in range(count))
    return layout


def _refuse_profile_id(profile_id, shape, where):
    """nvidia-smi's numeric profile ids differ between GPU models; names do not. Say what the id means here."""
    for name, profile in shape.profiles.items():
        if profile['id'] == profile_id:
            raise LayoutError(
                '%s: profile id %d means %s on %s (%.1f GiB, up to %d per GPU); ids mean different profiles on '
                'different GPU models, so layouts take profile names. This GPU offers %s' % (
                    where, profile_id, name, shape.name, profile['memory_mb'] / 1024.0, profile['max_count'],
                    shape.describe()))
    raise LayoutError('%s: %s has no MIG profile id %d; write a profile name: %s'
                      % (where, shape.name, profile_id, shape.describe()))


def from_mig_parted(config, name, gpus):
    """Raw layouts per GPU index from a mig-parted config (version v1) and one of its config names."""
    if not isinstance(config, dict) or config.get('version') != 'v1':
        raise LayoutError('mig-parted config: expected "version: v1" at the top')
    configs = config.get('mig-configs')
    if not isinstance(configs, dict) or name not in configs:
        raise LayoutError('mig-parted config has no mig-configs entry %r; it has %s'
                          % (name, ', '.join(sorted(configs or {})) or 'none'))
    layouts = {}
    for position, block in enumerate(configs[name], 1):
        where = 'mig-parted config %s, entry %d' % (name, position)
        unknown = set(block) - {'devices', 'device-filter', 'mig-enabled', 'mig-devices'}
        if unknown:
            raise LayoutError('%s: unknown keys %s' % (where, ', '.join(sorted(unknown))))
        devices = block.get('devices', 'all')
        chosen = select_gpus(devices if devices == 'all' else list(devices), gpus, where)
        filters = block.get('device-filter')
        if filters:
            filters = [f.lower() for f in (filters if isinstance(filters, list) else [filters])]
            chosen = [gpu for gpu in chosen if (gpu.get('pci_device_id') or '').lower() in filters]
        if not block.get('mig-enabled', False):
            raw = 'disabled'
        else:
            raw = _mig_devices(block.get('mig-devices') or {}, where)
        for gpu in chosen:
            if gpu['index'] in layouts:
                raise LayoutError('%s: GPU %d is already configured by an earlier entry' % (where, gpu['index']))
            layouts[gpu['index']] = raw
    return layouts


def _mig_devices(devices, where):
    """mig-devices maps GPU-instance profiles, or compute-instance profiles like 1c.3g.40gb, to counts."""
    raw = []
    for key in sorted(devices):
        count = devices[key]
        match = _CI_PROFILE_KEY.match(key)
        if match is None:
            raw.append({'profile': key, 'count': count})
            continue
        size, profile = int(match.group(1)), match.group(2)
        slices = int(profile.split('g', 1)[0])
        per_instance = max(slices // size, 1)
        # mig-parted packs compute instances of one profile into as few GPU instances as hold them.
        remaining = count
        while remaining > 0:
            take = min(per_instance, remaining)
            raw.append({'profile': profile, 'compute_instances': [size] * take})
            remaining -= take
    if not raw:
        raise LayoutError('%s: mig-enabled is true but mig-devices is empty' % where)
    return raw
