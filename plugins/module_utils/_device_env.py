# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.core contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The GPU devices each unit runs on, named so that the names survive a reboot, and resolved to the devices present.

A MIG device does not survive a reboot, and need not come back with its UUID (_mig_slots). So the device map
(DEVICE_MAP, one JSON document a host) names each unit's devices as a whole GPU's UUID, which is the board's, or as a
MIG device's slot. Resolving the map on the host's topology now gives each unit its runtime file,
RUNTIME_DIR/UNIT.env, which the unit reads with EnvironmentFile=: its unit file stays the same when a MIG device's UUID
changes, and only the runtime file says which UUID it is today. The site run and the boot unit resolve the same map
with the same function (``runtime_files``), so a run and a boot give the same files.

The map:  {"version": 1, "units": {"gpufleet-svc-llm.service": {"devices": ["GPU-…:3g.40gb:4:0"],
                                                                 "container": false}}}
A unit's runtime file sets CUDA_VISIBLE_DEVICES (the UUIDs, in the map's order) and, for a container unit, CDI_DEVICES
(podman's --device argument for each, which ExecStart= takes as $CDI_DEVICES, split into words).

This is a private module: its API may change without notice.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.gpufleet.core.plugins.module_utils._errors import GpufleetError
from ansible_collections.gpufleet.core.plugins.module_utils._mig_slots import MigSlotError, resolve, slot_form, slot_of
from ansible_collections.gpufleet.core.plugins.module_utils._values import describe, is_device_uuid, is_unit_name

DEVICE_MAP = '/etc/gpufleet/devices.json'
RUNTIME_DIR = '/run/gpufleet/devices'
MAP_VERSION = 1
CDI_KIND = 'nvidia.com/gpu'


class DeviceMapError(GpufleetError):
    """A device map that is not one, or a device the topology does not have."""


def is_gpu_uuid(name):
    """A whole GPU's UUID (GPU-...), as the map names a device that is not a MIG device."""
    return isinstance(name, str) and name.startswith('GPU-') and is_device_uuid(name)


def device_name(topology, uuid):
    """How the map names the device ``uuid`` of a Topology: its slot's text for a MIG device, the UUID for a whole
    GPU. DeviceMapError when the topology has no such device, or a MIG device without a placement."""
    device = topology.devices.get(uuid)
    if device is None:
        raise DeviceMapError('no GPU or MIG device %s on this host' % uuid)
    if not uuid.startswith('MIG-'):
        return uuid
    slot = slot_of(topology, uuid)
    if slot is None:
        raise DeviceMapError('MIG device %s has no placement in NVML, so it has no slot to be found by after a reboot'
                             % uuid)
    return str(slot)


def device_map(topology, units):
    """The device map of ``units`` ({unit name: (device UUIDs, whether it runs a container)}) on a Topology."""
    found = {}
    for unit in sorted(units):
        uuids, container = units[unit]
        found[unit] = {'devices': [device_name(topology, uuid) for uuid in uuids], 'container': bool(container)}
    document = {'version': MAP_VERSION, 'units': found}
    check_map(document)
    return document


def check_map(document, source=DEVICE_MAP):
    """DeviceMapError naming every problem of a device map read from ``source``; the map otherwise."""
    if not isinstance(document, dict) or document.get('version') != MAP_VERSION \
            or not isinstance(document.get('units'), dict):
        raise DeviceMapError('%s is not a device map of version %d ({"version": %d, "units": {...}}): %s; run the '
                             'site playbook again to write it' % (source, MAP_VERSION, MAP_VERSION, describe(document)))
    problems = []
    for unit, entry in sorted(document['units'].items()):
        if not is_unit_name(unit, ('service',)):
            problems.append('%s is not a service unit name' % describe(unit))
            continue
        if not isinstance(entry, dict) or not isinstance(entry.get('devices'), list) \
                or not isinstance(entry.get('container'), bool):
            problems.append('%s: %s is not {"devices": [...], "container": true or false}' % (unit, describe(entry)))
            continue
        for name in entry['devices']:
            if not is_gpu_uuid(name) and slot_form(name) is None:
                problems.append('%s: %s is neither a GPU UUID nor a MIG slot (GPU-UUID:PROFILE:START:ORDINAL)'
                                % (unit, describe(name)))
    if problems:
        raise DeviceMapError('%s has %d problem(s): %s; run the site playbook again to write it'
                             % (source, len(problems), '; '.join(problems)))
    return document


def runtime_files(topology, document):
    """{unit: its runtime file's text} for every unit of a checked device map, on a Topology gathered now.

    Every device must be present: DeviceMapError (a MigSlotError for MIG slots) names each one that is not, so that no
    unit starts on a wrong device. A map whose units have no device (a host without GPUs) needs no topology: None."""
    check_map(document)
    gpus = set(gpu['uuid'] for gpu in topology.gpus) if topology is not None else set()
    slots, missing = [], []
    for entry in document['units'].values():
        for name in entry['devices']:
            if is_gpu_uuid(name):
                if name not in gpus:
                    missing.append('no GPU %s on this host' % name)
            elif name not in slots:
                slots.append(name)
    try:
        resolved = resolve(topology, slots) if slots else {}
    except MigSlotError as exc:
        if not missing:
            raise
        raise MigSlotError('%s; %s' % ('; '.join(missing), exc))
    if missing:
        raise DeviceMapError('the host lacks GPUs its units run on: %s' % '; '.join(missing))
    files = {}
    for unit, entry in sorted(document['units'].items()):
        uuids = [resolved.get(name, name) for name in entry['devices']]
        files[unit] = runtime_text(uuids, entry['container'])
    return files


def names_devices(document):
    """Whether any unit of a checked device map runs on a device: only then must the host's GPUs be read."""
    return any(entry['devices'] for entry in document['units'].values())


def runtime_text(uuids, container, source=DEVICE_MAP):
    """A unit's runtime file: the variables its unit reads, one a line (systemd's EnvironmentFile= syntax). SOURCE
    says what the devices were resolved from: the device map, or an MPS daemon's device name."""
    lines = ['# gpufleet.core: %s resolved from %s; written at boot and by the site playbook, do not edit'
             % ('the devices' if uuids else 'no device', source),
             'CUDA_VISIBLE_DEVICES=%s' % ','.join(uuids)]
    if container:
        lines.append('CDI_DEVICES=%s' % ' '.join('--device=%s=%s' % (CDI_KIND, uuid) for uuid in uuids))
    return '\n'.join(lines) + '\n'


def runtime_path(unit, directory=RUNTIME_DIR):
    """Where unit UNIT reads its runtime file (its unit file says EnvironmentFile=RUNTIME_DIR/%n.env)."""
    return '%s/%s.env' % (directory.rstrip('/'), unit)


def runtime_devices(text):
    """The device UUIDs a runtime file's CUDA_VISIBLE_DEVICES names, in order; None when it names none."""
    for line in (text or '').splitlines():
        if line.startswith('CUDA_VISIBLE_DEVICES='):
            value = line[len('CUDA_VISIBLE_DEVICES='):].strip()
            return [uuid for uuid in value.split(',') if uuid] if value else []
    return None


def read_runtime_devices(unit, directory=RUNTIME_DIR):
    """The devices unit UNIT runs on now, from its runtime file; None when it has none (not written by this
    collection's boot unit or site run, or not yet)."""
    try:
        with open(runtime_path(unit, directory)) as handle:
            return runtime_devices(handle.read())
    except (IOError, OSError):
        return None


def resolve_entries(entries, directory=RUNTIME_DIR):
    """Each plan Entry (_plan.Entry) with ``devices`` as its unit's runtime file names them now, where it has one: a
    MIG device made again at boot may have a new UUID in the same slot, and the readers of the plan (the audit, the
    watchdog) are to hold the service to that one, not to the UUID the plan's run saw. ENTRIES, changed in place."""
    for entry in entries:
        devices = read_runtime_devices(entry.unit, directory) if entry.unit else None
        if devices is not None:
            entry.devices = devices
    return entries


def unit_devices(topology, units):
    """The device map of joined service units (``_plan.service_units``' units: unit, mode, plan) on a Topology, and
    each unit's runtime file: (map, {unit: runtime file text}). The run writes both; the boot unit resolves the map
    again with ``runtime_files``, which gives the same files while the layout is the same."""
    document = device_map(topology, dict((unit['unit'], (unit['plan']['gpus'], unit['mode'] == 'container'))
                                         for unit in units))
    return document, runtime_files(topology, document)


def slot_named(text, uuids, names):
    """TEXT with each MIG device UUID of UUIDS replaced by its name in the map (NAMES, in the same order): a unit
    file that says which devices it runs on stays the same when a MIG device is made again with a new UUID."""
    for uuid, name in zip(uuids, names):
        if uuid != name:
            text = text.replace(uuid, 'MIG slot ' + name)
    return text
