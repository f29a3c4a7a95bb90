# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.core contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""A MIG device named by its slot, which survives a reboot, instead of its UUID, which need not.

NVML promises a MIG device's UUID only for the lifetime of the device, and MIG instances never survive a reboot: the
boot unit makes them again, and a driver may give them new UUIDs. What a re-made device keeps is where it is: its GPU
(by the GPU's UUID, which is the board's), its GPU instance's profile and placement start, and its place among that
GPU instance's compute instances. That is its slot. A plan names MIG devices by slot; ``resolve`` turns slots into the
UUIDs of the devices present now, on a Topology gathered now.

A slot's text is ``GPU-UUID:PROFILE:START:ORDINAL``, such as ``GPU-5f1e…:3g.40gb:4:0`` (``slot_form``).

This is a private module: its API may change without notice.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re
from collections import namedtuple
from operator import itemgetter

from ansible_collections.gpufleet.core.plugins.module_utils._errors import GpufleetError
from ansible_collections.gpufleet.core.plugins.module_utils._values import is_device_uuid

# A MIG profile's name as NVML gives it (1g.10gb, 1g.10gb+me, 7g.80gb); a count without a leading zero.
_PROFILE = re.compile(r'[0-9A-Za-z][0-9A-Za-z.+-]*')
_COUNT = re.compile(r'0|[1-9][0-9]*')


class MigSlotError(GpufleetError):
    """A slot that is not one, or slots the host's MIG devices do not fill."""


class Slot(namedtuple('Slot', ['gpu', 'profile', 'start', 'ordinal'])):
    """A MIG device's place: its GPU's UUID, its GPU instance's profile and placement start, and its compute
    instance's place (0, 1, ...) in that GPU instance, by compute instance id."""

    __slots__ = ()

    def __str__(self):
        return '%s:%s:%d:%d' % self


def slot_form(text):
    """The Slot that ``text`` names, or None when it is not a slot's text (each part whole: the GPU's UUID by
    ``_values.is_device_uuid``, the profile's name, two counts)."""
    parts = text.split(':') if isinstance(text, str) else []
    if len(parts) != 4:
        return None
    gpu, profile, start, ordinal = parts
    if not (gpu.startswith('GPU-') and is_device_uuid(gpu) and _PROFILE.fullmatch(profile)
            and _COUNT.fullmatch(start) and _COUNT.fullmatch(ordinal)):
        return None
    return Slot(gpu, profile, int(start), int(ordinal))


def is_device_name(text):
    """Whether TEXT names a device as a declaration or a receipt may: a GPU-/MIG- UUID, or a MIG device's slot."""
    return isinstance(text, str) and (is_device_uuid(text) or slot_form(text) is not None)


def parse_slot(text):
    """The Slot that ``text`` names; MigSlotError naming the form otherwise."""
    slot = slot_form(text)
    if slot is None:
        raise MigSlotError('%r is not a MIG slot: write GPU-UUID:PROFILE:START:ORDINAL, such as '
                           'GPU-5f1e2d3c-0000-1111-2222-333344445555:3g.40gb:4:0' % (text,))
    return slot


def slots_of(topology):
    """{Slot: MIG device UUID} of every MIG device of a Topology (``_topology.Topology``), read from its index of
    GPU instances and devices; a GPU instance's compute instances are ordered by the index's ``sort`` (by id)."""
    found = {}
    for gpu, instances in topology.mig_instances.items():
        for instance in instances:
            start = instance['placement'].get('start')
            if not isinstance(start, int):
                continue
            devices = sorted((topology.devices[uuid] for uuid in instance['uuids']), key=itemgetter('sort'))
            for ordinal, device in enumerate(devices):
                found[Slot(gpu, instance['profile'], start, ordinal)] = device['uuid']
    return found


def slot_of(topology, uuid):
    """The Slot of the MIG device ``uuid`` on this Topology, or None for a whole GPU or a device it lacks."""
    for slot, found in slots_of(topology).items():
        if found == uuid:
            return slot
    return None


def resolve(topology, slots):
    """{slot text: MIG device UUID now} for each slot (Slot or its text) in ``slots``.

    Every slot must be filled: MigSlotError lists each one that is not, with what its GPU holds now, so that a boot
    never starts a service on a wrong device.
    """
    present = slots_of(topology)
    gpus = dict((gpu['uuid'], gpu) for gpu in topology.gpus)
    resolved, missing = {}, []
    for given in slots:
        slot = given if isinstance(given, Slot) else parse_slot(given)
        if slot in present:
            resolved[str(slot)] = present[slot]
        else:
            missing.append(_why_empty(slot, gpus.get(slot.gpu), present))
    if missing:
        raise MigSlotError('the live MIG layout differs from the declared one: %s. Apply the declared layout '
                           '(gpufleet.core.mig, or the boot unit gpufleet-mig.service) before the services start'
                           % '; '.join(missing))
    return resolved


def _why_empty(slot, gpu, present):
    if gpu is None:
        return 'no GPU %s on this host (slot %s)' % (slot.gpu, slot)
    held = sorted(set('%s@%d' % (other.profile, other.start) for other in present if other.gpu == slot.gpu))
    return 'GPU %s (index %s) has no %s at placement %d%s (it has %s)' % (
        slot.gpu, gpu.get('index'), slot.profile, slot.start,
        ', compute instance %d' % slot.ordinal if slot.ordinal else '', ', '.join(held) or 'no MIG device')
