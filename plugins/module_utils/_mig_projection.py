# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.core contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The topology a host will have once a MIG plan is applied, so that services can be placed before any change.

The site playbook's preflight plans each host's MIG change in check mode (the mig module's ``layout_wanted`` per
GPU), then places the host's services on the topology this returns. MIG devices that do not exist yet get
placeholder UUIDs (``MIG-`` and a name-based UUID of the GPU and slot): they are only placed on, never used.
Pure code with no system access. This is a private module: its API may change without notice.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import copy
import re
import uuid

from ansible_collections.gpufleet.core.plugins.module_utils._errors import GpufleetError

# One entry of the mig module's layout_wanted: 3g.40gb@0, or 3g.40gb@4 [1c+2c] where compute instances split it.
_LAYOUT_ITEM = re.compile(r'(?P<profile>[0-9]+g\.[0-9]+gb(?:\+[a-z0-9]+)*)@(?P<start>[0-9]+)'
                          r'(?: \[(?P<cis>[0-9]+c(?:\+[0-9]+c)*)\])?')
# A fixed namespace, so that a slot's placeholder UUID is the same on every run.
_PLACEHOLDER_NAMESPACE = uuid.UUID('8d5b1c52-6f0e-4c38-9a7e-3b1d2f6a9e41')


class MigProjectionError(GpufleetError, ValueError):
    """The MIG plan or the topology cannot be read; the message says which value and what to give instead."""


def placeholder_uuid(gpu_uuid, start, compute_index):
    """The stand-in UUID of a MIG device that the plan creates: stable for its GPU, placement and index."""
    return 'MIG-%s' % uuid.uuid5(_PLACEHOLDER_NAMESPACE, '%s@%d/%d' % (gpu_uuid, start, compute_index))


def parse_layout(layout, where):
    """A layout_wanted value: 'disabled' (None), or a list of (profile, start, [compute slice counts or None])."""
    if layout == 'disabled':
        return None
    if not isinstance(layout, list):
        raise MigProjectionError("%s: layout_wanted must be 'disabled' or a list such as ['3g.40gb@0'], got %r"
                                 % (where, layout))
    parsed = []
    for item in layout:
        match = _LAYOUT_ITEM.fullmatch(item) if isinstance(item, str) else None
        if match is None:
            raise MigProjectionError("%s: %r is not a layout entry as the gpufleet.core.mig module writes them "
                                     "(profile@start, such as 3g.40gb@0 or 3g.40gb@4 [1c+2c])" % (where, item))
        cis = [int(size[:-1]) for size in match.group('cis').split('+')] if match.group('cis') else [None]
        parsed.append((match.group('profile'), int(match.group('start')), cis))
    return parsed


def topology_after_mig(fact, mig_gpus):
    """A copy of the gpufleet_topology fact as it will be once the mig module's plan is applied.

    ``mig_gpus`` is the module's ``gpus`` result (check mode gives the plan): each entry's ``uuid`` and
    ``layout_wanted``. GPUs it does not list keep their MIG state; a listed GPU gets MIG mode on or off and exactly
    the GPU instances of its wanted layout, with one compute instance each unless the layout splits it.
    """
    if not isinstance(fact, dict) or not isinstance(fact.get('gpus'), list):
        raise MigProjectionError("the topology must be ansible_facts['gpufleet_topology'] from "
                                 "gpufleet.core.topology_facts (a dict with gpus)")
    if not isinstance(mig_gpus, list) or not all(isinstance(gpu, dict) and isinstance(gpu.get('uuid'), str)
                                                 for gpu in mig_gpus):
        raise MigProjectionError('the MIG plan must be the gpus list of a gpufleet.core.mig result (each with uuid '
                                 'and layout_wanted), got %r' % (mig_gpus,))
    wanted = dict((gpu['uuid'], parse_layout(gpu.get('layout_wanted'), 'GPU %s' % gpu['uuid'])) for gpu in mig_gpus)
    known = set(gpu.get('uuid') for gpu in fact['gpus'] if isinstance(gpu, dict))
    unknown = sorted(set(wanted) - known)
    if unknown:
        raise MigProjectionError('the MIG plan names GPUs the topology does not have (%s): gather the topology and '
                                 'plan the MIG change on the same host' % ', '.join(unknown))
    projected = copy.deepcopy(fact)
    profiles = projected.get('mig_profiles') or {}
    for gpu in projected['gpus']:
        if not isinstance(gpu, dict) or gpu.get('uuid') not in wanted:
            continue
        layout = wanted[gpu['uuid']]
        mig = dict(gpu.get('mig') or {})
        mig['mode_current'] = mig['mode_pending'] = 'disabled' if layout is None else 'enabled'
        by_name = dict((p.get('name'), p) for p in profiles.get(gpu.get('name')) or [] if isinstance(p, dict))
        instances = []
        for number, (profile, start, cis) in enumerate(layout or [], 1):
            slices = (by_name.get(profile) or {}).get('slice_count')
            instances.append({
                'id': number, 'profile': profile, 'profile_id': (by_name.get(profile) or {}).get('id'),
                'placement': {'start': start, 'size': slices},
                'compute_instances': [{'id': index, 'slice_count': size if size is not None else slices,
                                       'uuid': placeholder_uuid(gpu['uuid'], start, index)}
                                      for index, size in enumerate(cis)],
            })
        mig['gpu_instances'] = instances
        gpu['mig'] = mig
    return projected
