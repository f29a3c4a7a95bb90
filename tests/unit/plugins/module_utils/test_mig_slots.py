# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""_mig_slots: a MIG device named by its slot resolves to the device present now, across a re-creation that gives
new UUIDs, and a layout that does not fill the slots is refused with what each GPU holds."""

from __future__ import absolute_import, division, print_function

import pytest

import simctl
from ansible_collections.gpufleet.core.plugins.module_utils._errors import GpufleetError
from ansible_collections.gpufleet.core.plugins.module_utils._mig_slots import (
    MigSlotError, Slot, parse_slot, resolve, slot_form, slot_of, slots_of)
from ansible_collections.gpufleet.core.plugins.modules import mig

from ...support.sim import gathered_topology, host_roots

LAYOUTS = [{'gpus': [2], 'layout': ['3g.40gb', '3g.40gb']},
           {'gpus': [3], 'layout': [{'profile': '3g.40gb', 'compute_instances': ['1c', '2c']}, '1g.10gb']}]
GPU = 'GPU-5c6f7a2e-1b3d-4e8f-9a0b-1c2d3e4f5a62'


@pytest.mark.parametrize('behaviour', ['new', 'stable'])
def test_a_remade_layout_fills_the_same_slots_whether_the_driver_keeps_uuids_or_not(run_module, sim_host, behaviour):
    paths = sim_host('reference-a100')
    simctl.mig_uuids(paths['state_file'], behaviour)
    run_module(mig, dict(host_roots(paths), layouts=LAYOUTS))
    before = gathered_topology(run_module, paths)
    slots = slots_of(before)
    # Two 3g.40gb on GPU 2, at placements 0 and 4; on GPU 3 one 3g.40gb split in two compute instances, and a 1g.10gb
    # (where the mig module put them).
    by_gpu = dict((gpu['index'], gpu['uuid']) for gpu in before.gpus)
    split = [slot.start for slot in slots if slot.gpu == by_gpu[3] and slot.profile == '3g.40gb']
    small = [slot.start for slot in slots if slot.gpu == by_gpu[3] and slot.profile == '1g.10gb']
    assert len(split) == 2 and len(set(split)) == 1 and len(small) == 1, slots
    assert sorted(slots) == sorted([
        Slot(by_gpu[2], '3g.40gb', 0, 0), Slot(by_gpu[2], '3g.40gb', 4, 0), Slot(by_gpu[3], '3g.40gb', split[0], 0),
        Slot(by_gpu[3], '3g.40gb', split[0], 1), Slot(by_gpu[3], '1g.10gb', small[0], 0)])
    assert all(slot_of(before, uuid) == slot for slot, uuid in slots.items())

    # A reboot clears every instance; the boot unit's apply makes the same layout again, on new UUIDs or the same.
    simctl.reboot(paths['host_file'], paths['state_file'])
    run_module(mig, dict(host_roots(paths), layouts=LAYOUTS))
    after = gathered_topology(run_module, paths)
    resolved = resolve(after, [str(slot) for slot in slots])
    assert sorted(resolved) == sorted(str(slot) for slot in slots)
    assert set(resolved.values()) == set(slots_of(after).values())
    if behaviour == 'new':
        assert not set(resolved.values()) & set(slots.values())
        assert all(slot_of(after, uuid) is None for uuid in slots.values())
    else:
        assert resolved == dict((str(slot), uuid) for slot, uuid in slots.items())
    assert all(slot_of(after, resolved[str(slot)]) == slot for slot in slots)


def test_the_simulator_takes_only_the_two_behaviours(sim_host):
    with pytest.raises(SystemExit, match="mig-uuids takes new or stable, not 'same'"):
        simctl.mig_uuids(sim_host('reference-a100')['state_file'], 'same')


def test_a_layout_that_does_not_fill_the_slots_is_refused_with_what_each_gpu_holds(run_module, sim_host):
    paths = sim_host('reference-a100')
    run_module(mig, dict(host_roots(paths), layouts=LAYOUTS))
    slots = [str(slot) for slot in slots_of(gathered_topology(run_module, paths))]
    simctl.reboot(paths['host_file'], paths['state_file'])
    run_module(mig, dict(host_roots(paths), layouts=[{'gpus': [2], 'layout': ['7g.80gb']}, LAYOUTS[1]]))
    with pytest.raises(MigSlotError) as refused:
        resolve(gathered_topology(run_module, paths), slots + ['GPU-00000000-0000-0000-0000-000000000000:1g.10gb:6:0'])
    message = str(refused.value)
    assert 'has no 3g.40gb at placement 0 (it has 7g.80gb@0)' in message
    assert 'has no 3g.40gb at placement 4 (it has 7g.80gb@0)' in message
    assert 'no GPU GPU-00000000-0000-0000-0000-000000000000 on this host' in message
    assert 'Apply the declared layout' in message and isinstance(refused.value, GpufleetError)


def test_a_gpu_without_mig_devices_is_named_so(run_module, sim_host):
    paths = sim_host('reference-a100')
    with pytest.raises(MigSlotError, match='has no 3g.40gb at placement 4, compute instance 1 .it has no MIG device.'):
        resolve(gathered_topology(run_module, paths), [Slot(GPU, '3g.40gb', 4, 1)])


def test_nothing_to_resolve_is_nothing(run_module, sim_host):
    assert resolve(gathered_topology(run_module, sim_host('reference-a100')), []) == {}


@pytest.mark.parametrize('text, slot', [
    (GPU + ':3g.40gb:4:0', Slot(GPU, '3g.40gb', 4, 0)),
    (GPU + ':1g.10gb+me:6:0', Slot(GPU, '1g.10gb+me', 6, 0)),
    (GPU + ':3g.40gb:0:1', Slot(GPU, '3g.40gb', 0, 1)),
])
def test_a_slot_reads_back_from_its_text(text, slot):
    assert slot_form(text) == slot == parse_slot(text) and str(slot) == text


@pytest.mark.parametrize('text', [
    GPU + ':3g.40gb:4:0\n',  # a trailing newline: the whole value must match
    GPU + ':3g.40gb:4',
    GPU + ':3g.40gb:4:0:0',
    'MIG-5c6f7a2e-1b3d-4e8f-9a0b-1c2d3e4f5a62:3g.40gb:4:0',  # a MIG device's UUID is what a slot replaces
    GPU + ':3g 40gb:4:0',
    GPU + ':3g.40gb:04:0',
    GPU + ':3g.40gb:-1:0',
    ':3g.40gb:4:0',
    '',
    None,
    4,
])
def test_what_is_not_a_slot_is_refused_with_the_form(text):
    assert slot_form(text) is None
    with pytest.raises(MigSlotError, match='is not a MIG slot: write GPU-UUID:PROFILE:START:ORDINAL'):
        parse_slot(text)
