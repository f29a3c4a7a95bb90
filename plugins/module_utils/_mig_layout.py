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
from ansible_collections.gpufleet.core.plugins.module_utils._values import is_integer as _is_int

_CI_NAME = re.compile(r'(\d+)c(?:\.(\d+g\.\d+gb(?:\+me)?))?')


def select_gpus(selector, gpus, where):
    """GPUs chosen by 'all', an index, a GPU-... UUID, a product name, or a list of those.

    ``gpus`` are NVML's view of the GPUs (the mig module reads them live, not from the fact), so they are matched by
    _topology's one rule for GPU references, with product names allowed; a MIG-... UUID names no whole GPU here.
    """
    items = selector if isinstance(selector, list) else [selector]
    if not items:
        raise LayoutError('%s: gpus is an empty list, so it selects no GPU; use all, an index, a GPU UUID or a '
                          'product name' % where)
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
    if not isinstance(value, list):
        raise LayoutError('%s: compute_instances must be a list of sizes such as [1c, 2c], got %r' % (where, value))
    sizes = []
    for item in value:
        if _is_int(item):
            sizes.append(item)
            continue
        match = _CI_NAME.fullmatch(str(item).strip())
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
        if _is_int(profile) or str(profile).strip().isdigit():
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


def _entry_where(name, position):
    return 'mig-parted config %s, entry %d' % (name, position)


def _type_name(value):
    if value is None:
        return 'nothing (null)'
    if isinstance(value, bool):
        return 'the boolean %s' % ('true' if value else 'false')
    if isinstance(value, dict):
        return 'a mapping'
    if isinstance(value, list):
        return 'a list'
    if isinstance(value, str):
        return 'the string %r' % value
    return '%r' % (value,)


def from_mig_parted(config, name, gpus):
    """Raw layouts per GPU index from a mig-parted config (version v1) and one of its config names.

    Reads the format as mig-parted does (docs/dev/mig_parted_semantics.md); where the module deliberately refuses
    what mig-parted accepts, docs/mig.md says so. ``gpus`` carry 'mig_capable' where known.
    """
    entries = _mig_parted_entries(config, name)
    layouts = {}
    claimed = {}
    for position, entry in enumerate(entries, 1):
        where = _entry_where(name, position)
        enabled, devices, filters, mig_devices = _mig_parted_entry(entry, where)
        raw = group_mig_devices(mig_devices, where) if enabled else 'disabled'
        chosen = []
        for gpu in gpus:
            if devices != 'all' and gpu['index'] not in devices:
                continue  # mig-parted ignores indices this host does not have: they select nothing
            if filters and not any(_filter_matches(spec, gpu) for spec in filters):
                continue
            if devices == 'all' and gpu.get('mig_capable') is False:
                continue  # mig-parted's `devices: all` passes over GPUs that cannot do MIG
            chosen.append(gpu)
        again = [gpu for gpu in chosen if gpu['index'] in claimed]
        if again:
            raise LayoutError('%s: %s already configured by entry %d; mig-parted would let the last entry win, '
                              'this module wants each GPU in one entry' % (
                                  where, _gpu_list(again), claimed[again[0]['index']]))
        for gpu in chosen:
            claimed[gpu['index']] = position
            layouts[gpu['index']] = raw
    return layouts


def _gpu_list(gpus):
    if len(gpus) == 1:
        return 'GPU %d is' % gpus[0]['index']
    return 'GPUs %s are' % ', '.join(str(gpu['index']) for gpu in gpus)


def _mig_parted_entries(config, name):
    if not isinstance(config, dict):
        raise LayoutError('mig-parted config: expected a mapping with version: v1 and mig-configs, got %s'
                          % _type_name(config))
    unknown = sorted(str(key) for key in config if key not in ('version', 'mig-configs'))
    if unknown:
        raise LayoutError('mig-parted config: unexpected top-level key %s; a v1 config has version and mig-configs'
                          % ', '.join(unknown))
    if 'version' not in config:
        raise LayoutError("mig-parted config: missing 'version' field; expected version: v1 at the top")
    if config['version'] != 'v1':
        raise LayoutError('mig-parted config: version %r is not supported; expected version: v1'
                          % (config['version'],))
    configs = config.get('mig-configs')
    if not isinstance(configs, dict) or not configs:
        raise LayoutError('mig-parted config: mig-configs must map config names to lists of entries, got %s'
                          % ('an empty mapping' if configs == {} else _type_name(configs)))
    if name not in configs:
        raise LayoutError('mig-parted config has no mig-configs entry %r; it has %s'
                          % (name, ', '.join(sorted(str(key) for key in configs)) or 'none'))
    entries = configs[name]
    if not isinstance(entries, list) or not entries:
        raise LayoutError('mig-parted config: mig-configs %s must be a non-empty list of entries '
                          '(devices, mig-enabled, mig-devices), got %s'
                          % (name, 'an empty list' if entries == [] else _type_name(entries)))
    return entries


def _mig_parted_entry(entry, where):
    """(enabled, devices, filters, mig_devices) of one entry, checked as mig-parted's spec parser checks them."""
    if not isinstance(entry, dict):
        raise LayoutError('%s: expected a mapping with devices, mig-enabled and mig-devices, got %s'
                          % (where, _type_name(entry)))
    unknown = sorted(str(key) for key in entry if key not in _ENTRY_KEYS)
    if unknown:
        raise LayoutError('%s: unexpected field %s; an entry takes %s'
                          % (where, ', '.join(unknown), ', '.join(_ENTRY_KEYS)))
    for key in ('devices', 'mig-enabled'):
        if key not in entry:
            raise LayoutError('%s: missing required field %s' % (where, key))
    enabled = entry['mig-enabled']
    if not isinstance(enabled, bool):
        # mig-parted takes a null as false; a stray empty value should not mean "destroy every instance".
        raise LayoutError('%s: mig-enabled must be true or false (unquoted), got %s'
                          % (where, _type_name(enabled)))
    devices = entry['devices']
    if devices != 'all' and not (isinstance(devices, list) and all(_is_int(item) for item in devices)):
        raise LayoutError('%s: devices must be "all" or a list of GPU indices such as [0, 1], got %s'
                          % (where, _type_name(devices)))
    filters = _device_filters(entry.get('device-filter'), where)
    mig_devices = entry.get('mig-devices')
    if not enabled:
        if mig_devices:
            raise LayoutError('%s: mig-devices given while mig-enabled is false; remove them or set mig-enabled: '
                              'true' % where)
        return enabled, devices, filters, None
    if mig_devices is None:
        raise LayoutError("%s: missing required field mig-devices when mig-enabled is true (write mig-devices: {} "
                          "for MIG on with no instances)" % where)
    if not isinstance(mig_devices, dict):
        raise LayoutError('%s: mig-devices must map profile names to counts, got %s'
                          % (where, _type_name(mig_devices)))
    return enabled, devices, filters, mig_devices


_ENTRY_KEYS = ('devices', 'device-filter', 'mig-enabled', 'mig-devices')
# mig-parted reads a filter with Go's ParseUint(s, 0, 32): a base prefix is needed, 0x for hex.
_FILTER_NUMBER = re.compile(r'0[xX][0-9a-fA-F]{1,8}|0[bB][01]{1,32}|0[oO]?[0-7]+|[1-9][0-9]*|0')


def _parse_filter_number(text):
    if not _FILTER_NUMBER.fullmatch(text):
        return None
    lowered = text.lower()
    if lowered.startswith('0x'):
        value = int(lowered[2:], 16)
    elif lowered.startswith('0b'):
        value = int(lowered[2:], 2)
    elif lowered.startswith('0o'):
        value = int(lowered[2:], 8)
    elif lowered.startswith('0') and len(lowered) > 1:
        value = int(lowered[1:], 8)
    else:
        value = int(lowered)
    return value if value < 2 ** 32 else None


def _device_filters(value, where):
    """Parsed device-filter: a list of (device_vendor, subsystem_or_None); empty means no filter."""
    if value in (None, '', []):
        return []
    items = value if isinstance(value, list) else [value]
    if not all(isinstance(item, str) for item in items):
        raise LayoutError('%s: device-filter must be a PCI id string such as "0x20B510DE" or a list of them, got %s'
                          % (where, _type_name(value)))
    parsed = []
    for item in items:
        parts = item.split(':')
        numbers = [_parse_filter_number(part) for part in parts]
        if len(parts) > 2 or None in numbers:
            # mig-parted turns an unreadable filter into one that matches nothing; here it is a typo to fix.
            raise LayoutError('%s: device-filter %r is not a PCI id; write 0x<device><vendor> such as "0x20B510DE", '
                              'optionally followed by :0x<subsystem device><subsystem vendor>' % (where, item))
        parsed.append((numbers[0], numbers[1] if len(numbers) == 2 else None))
    return parsed


def _filter_matches(spec, gpu):
    device_vendor, subsystem = spec
    ids = gpu.get('pci_device_id')
    if ids is None or int(ids, 16) != device_vendor:
        return False
    if subsystem is None:
        return True
    found = gpu.get('pci_subsystem_id')
    return found is not None and int(found, 16) == subsystem


# go-nvlib's profile grammar: [<C>c.]<G>g.<GB>gb[+attr,...|-attr,...]
_PROFILE_KEY = re.compile(r'(?:(\d+)c\.)?(\d+)g\.(\d+)gb(?:([+-])([A-Za-z][A-Za-z0-9.]*(?:,[A-Za-z][A-Za-z0-9.]*)*))?')


def group_mig_devices(mig_devices, where):
    """A mig-devices map as mig-parted builds it: raw GPU instances with their compute instances.

    mig-parted expands every key into `count` items, sorts them (GPU-instance slices, then compute slices, then
    attributes, all descending) and walks the list, putting a compute instance into the GPU instance made last
    when their GPU-instance profiles agree and it still has room, else into a new GPU instance.
    """
    items = []
    for key in sorted(mig_devices, key=str):
        count = mig_devices[key]
        match = _PROFILE_KEY.fullmatch(key) if isinstance(key, str) else None
        if match is None or match.group(5) and any(
                attr.endswith('.') for attr in match.group(5).split(',')):
            raise LayoutError('%s: mig-devices key %r is not a MIG profile name such as 1g.10gb, 3g.40gb+me or '
                              '1c.3g.40gb%s' % (where, key, '; numeric profile ids mean different profiles on '
                                                'different GPU models' if str(key).isdigit() else ''))
        if not _is_int(count) or count < 0:
            raise LayoutError('%s: mig-devices %s: the count must be a whole number of 0 or more, got %s'
                              % (where, key, _type_name(count)))
        slices = int(match.group(2))
        compute = int(match.group(1)) if match.group(1) else slices
        attrs = match.group(5) or ''
        profile = '%dg.%dgb%s' % (slices, int(match.group(3)), match.group(4) + attrs if attrs else '')
        items.extend([(slices, compute, attrs, profile)] * count)
    if mig_devices and not items:
        raise LayoutError('%s: all counts in mig-devices are 0; give at least one a count, or write mig-devices: {} '
                          'for MIG on with no instances' % where)
    # GB is no sort key in mig-parted and its sort is not stable: the profile name breaks ties here.
    items.sort(key=lambda item: (-item[0], -item[1], _descending(item[2]), item[3]))
    raw = []
    for slices, compute, _attrs, profile in items:
        last = raw[-1] if raw else None
        if last is not None and last['profile'] == profile and sum(last['compute_instances']) + compute <= slices:
            last['compute_instances'].append(compute)
        else:
            raw.append({'profile': profile, 'compute_instances': [compute]})
    return raw


def _descending(text):
    # Sorts strings in descending order inside an ascending sort key; '' (no attributes) comes last.
    return [-ord(char) for char in text] + [0]
