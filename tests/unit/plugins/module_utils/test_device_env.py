# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""_device_env and the devices helper: a unit's devices named by slot give the same device map before and after the
MIG instances are made again, and only the runtime files carry the UUIDs of the day; a map that cannot be resolved
writes nothing."""

from __future__ import absolute_import, division, print_function

import json
import os

import pytest

import simctl
from ansible_collections.gpufleet.core.plugins.module_utils import _helper_device_env, _helper_devices
from ansible_collections.gpufleet.core.plugins.module_utils._device_env import (
    DeviceMapError, check_map, device_map, device_name, read_runtime_devices, resolve_entries, runtime_devices,
    runtime_files, runtime_text, slot_named, unit_devices)
from ansible_collections.gpufleet.core.plugins.module_utils._host import HostFiles
from ansible_collections.gpufleet.core.plugins.module_utils._mig_slots import slot_of
from ansible_collections.gpufleet.core.plugins.module_utils._mps import MpsPlanError, plan_daemons
from ansible_collections.gpufleet.core.plugins.module_utils._plan import Entry
from ansible_collections.gpufleet.core.plugins.modules import mig

from ...support.sim import gathered_topology, host_roots

LAYOUTS = [{'gpus': [2], 'layout': ['3g.40gb', '3g.40gb']}, {'gpus': [3], 'layout': ['1g.10gb', '1g.10gb']}]


def _units(topology):
    """A native service on GPU 0, one on the second 3g.40gb of GPU 2, a container on both 1g.10gb of GPU 3."""
    by_index = dict((gpu['index'], gpu) for gpu in topology.gpus)

    def migs(index, profile):
        return sorted((device['uuid'] for device in topology.devices.values()
                       if device['mig'] and device['parent'] == by_index[index]['uuid']
                       and device['profile'] == profile), key=lambda uuid: slot_of(topology, uuid).start)
    return {'gpufleet-svc-whole.service': ([by_index[0]['uuid']], False),
            'gpufleet-svc-llm.service': (migs(2, '3g.40gb')[1:], False),
            'gpufleet-svc-imagegen.service': (migs(3, '1g.10gb'), True)}


def _partitioned(run_module, sim_host, behaviour='new'):
    """(paths, Topology) of the reference host with LAYOUTS made, MIG UUIDs given as BEHAVIOUR says."""
    paths = sim_host('reference-a100')
    simctl.mig_uuids(paths['state_file'], behaviour)
    run_module(mig, dict(host_roots(paths), layouts=LAYOUTS))
    return paths, gathered_topology(run_module, paths)


def _rebooted(run_module, paths, layouts=None):
    """The Topology after a reboot in which the boot unit made LAYOUTS (the same ones by default) again."""
    simctl.reboot(paths['host_file'], paths['state_file'])
    run_module(mig, dict(host_roots(paths), layouts=layouts or LAYOUTS))
    return gathered_topology(run_module, paths)


@pytest.mark.parametrize('behaviour', ['new', 'stable'])
def test_a_remade_layout_gives_the_same_map_and_runtime_files_differing_only_in_uuids(run_module, sim_host, behaviour):
    paths, before = _partitioned(run_module, sim_host, behaviour)
    units = _units(before)
    written = device_map(before, units)
    files_before = runtime_files(before, written)
    assert files_before['gpufleet-svc-llm.service'].splitlines()[1] == \
        'CUDA_VISIBLE_DEVICES=%s' % units['gpufleet-svc-llm.service'][0][0]
    assert 'CDI_DEVICES' not in files_before['gpufleet-svc-llm.service']

    # A reboot clears the instances; the boot unit makes the same layout again.
    after = _rebooted(run_module, paths)
    again = _units(after)
    # The same placement written after the re-creation: the same map, byte for byte.
    assert json.dumps(device_map(after, again), sort_keys=True) == json.dumps(written, sort_keys=True)
    files_after = runtime_files(after, written)
    old_uuids = [uuid for uuids, _container in units.values() for uuid in uuids]
    new_uuids = [uuid for uuids, _container in again.values() for uuid in uuids]
    expected = {}
    for unit, text in files_before.items():
        for old, new in zip(old_uuids, new_uuids):
            text = text.replace(old, new)
        expected[unit] = text
    assert files_after == expected
    if behaviour == 'new':
        assert files_after != files_before
        assert files_after['gpufleet-svc-imagegen.service'].splitlines()[2] == 'CDI_DEVICES=%s' % ' '.join(
            '--device=nvidia.com/gpu=%s' % uuid for uuid in again['gpufleet-svc-imagegen.service'][0])
    else:
        assert files_after == files_before


def test_the_helper_writes_every_file_or_none(run_module, sim_host, tmp_path, capsys):
    paths = sim_host('reference-a100')
    run_module(mig, dict(host_roots(paths), layouts=LAYOUTS))
    topology = gathered_topology(run_module, paths)
    files = HostFiles(paths['sysfs_root'], paths['procfs_root'])
    map_path, runtime = tmp_path / 'devices.json', tmp_path / 'run'
    map_path.write_text(json.dumps(device_map(topology, _units(topology))))
    runtime.mkdir()
    (runtime / 'gpufleet-svc-gone.service.env').write_text('CUDA_VISIBLE_DEVICES=GPU-x\n')
    assert _helper_devices.main(['devices', str(map_path), str(runtime)], files=files) == 0
    assert sorted(os.listdir(str(runtime))) == ['gpufleet-svc-imagegen.service.env', 'gpufleet-svc-llm.service.env',
                                                'gpufleet-svc-whole.service.env']
    assert (runtime / 'gpufleet-svc-llm.service.env').read_text() == \
        runtime_files(topology, json.loads(map_path.read_text()))['gpufleet-svc-llm.service']
    capsys.readouterr()

    # After a reboot with GPU 2 made whole again: nothing is written and the reason names the slot's GPU.
    kept = dict((name, (runtime / name).read_text()) for name in os.listdir(str(runtime)))
    simctl.reboot(paths['host_file'], paths['state_file'])
    run_module(mig, dict(host_roots(paths), layouts=[{'gpus': [2], 'layout': ['7g.80gb']}, LAYOUTS[1]]))
    assert _helper_devices.main(['devices', str(map_path), str(runtime)], files=files) == 1
    err = capsys.readouterr().err
    assert err.startswith('gpufleet-devices: the live MIG layout differs from the declared one: ')
    assert 'has no 3g.40gb at placement 4 (it has 7g.80gb@0)' in err
    assert dict((name, (runtime / name).read_text()) for name in os.listdir(str(runtime))) == kept


def test_the_helper_without_a_map_has_nothing_to_do(tmp_path, capsys):
    assert _helper_devices.main(['devices', str(tmp_path / 'none.json'), str(tmp_path / 'run')]) == 0
    assert 'no device map' in capsys.readouterr().out and not (tmp_path / 'run').exists()


def test_a_missing_whole_gpu_is_named(run_module, sim_host):
    topology = gathered_topology(run_module, sim_host('reference-a100'))
    document = {'version': 1, 'units': {'gpufleet-svc-a.service': {
        'devices': ['GPU-00000000-0000-0000-0000-000000000000'], 'container': False}}}
    with pytest.raises(DeviceMapError, match='no GPU GPU-00000000-0000-0000-0000-000000000000 on this host'):
        runtime_files(topology, document)
    with pytest.raises(DeviceMapError, match='no GPU or MIG device MIG-0000 on this host'):
        device_name(topology, 'MIG-0000')


@pytest.mark.parametrize('document, names', [
    ([], ['is not a device map of version 1', 'the list []']),
    ({'version': 2, 'units': {}}, ['is not a device map of version 1']),
    ({'version': 1, 'units': {'llm': {'devices': [], 'container': False}}}, ['the string "llm" is not a service unit']),
    ({'version': 1, 'units': {'a.service': {'devices': 'GPU-1'}}}, ['a.service: ', 'is not {"devices"']),
    ({'version': 1, 'units': {'a.service': {'devices': ['MIG-1', 'GPU-1:3g.40gb:4', 'GPU-1\n'], 'container': True}}},
     ['3 problem(s)', 'the string "MIG-1" is neither', 'the string "GPU-1:3g.40gb:4" is neither',
      'the string "GPU-1\\n" is neither']),
])
def test_a_bad_map_is_refused_with_every_problem(document, names):
    with pytest.raises(DeviceMapError) as refused:
        check_map(document, source='/etc/gpufleet/devices.json')
    message = str(refused.value)
    assert message.startswith('/etc/gpufleet/devices.json ') and 'run the site playbook again' in message
    for name in names:
        assert name in message, message


def test_a_unit_without_devices_still_gets_its_file():
    assert runtime_text([], False) == ('# gpufleet.core: no device resolved from /etc/gpufleet/devices.json; written '
                                       'at boot and by the site playbook, do not edit\nCUDA_VISIBLE_DEVICES=\n')


def test_joined_units_are_named_for_a_reboot_and_their_sentences_lose_the_mig_uuids(run_module, sim_host):
    paths = sim_host('reference-a100')
    run_module(mig, dict(host_roots(paths), layouts=LAYOUTS))
    topology = gathered_topology(run_module, paths)
    units = _units(topology)
    joined = [{'unit': unit, 'mode': 'container' if container else 'native', 'plan': {'gpus': uuids}}
              for unit, (uuids, container) in units.items()]
    document, files = unit_devices(topology, joined)
    assert document == device_map(topology, units) and files == runtime_files(topology, document)
    whole, = document['units']['gpufleet-svc-whole.service']['devices']
    assert whole == units['gpufleet-svc-whole.service'][0][0]  # a whole GPU keeps its UUID
    llm_uuid, = units['gpufleet-svc-llm.service'][0]
    llm_slot, = document['units']['gpufleet-svc-llm.service']['devices']
    assert llm_slot == str(slot_of(topology, llm_uuid)) and llm_slot.endswith(':3g.40gb:4:0')
    sentence = '%s (3g.40gb on %s), exclusive; %s (bus 0000:01:00.0)' % (llm_uuid, llm_slot.split(':')[0], whole)
    named = slot_named(sentence, [llm_uuid, whole], [llm_slot, whole])
    assert named == 'MIG slot %s (3g.40gb on %s), exclusive; %s (bus 0000:01:00.0)' % (
        llm_slot, llm_slot.split(':')[0], whole)
    assert runtime_devices(files['gpufleet-svc-llm.service']) == [llm_uuid]


def test_a_runtime_file_is_read_back_as_its_devices(tmp_path):
    (tmp_path / 'gpufleet-svc-a.service.env').write_text(runtime_text(['MIG-1', 'GPU-2'], True))
    (tmp_path / 'gpufleet-svc-b.service.env').write_text(runtime_text([], False))
    (tmp_path / 'gpufleet-svc-c.service.env').write_text('# not ours\n')
    assert read_runtime_devices('gpufleet-svc-a.service', str(tmp_path)) == ['MIG-1', 'GPU-2']
    assert read_runtime_devices('gpufleet-svc-b.service', str(tmp_path)) == []
    assert read_runtime_devices('gpufleet-svc-c.service', str(tmp_path)) is None
    assert read_runtime_devices('gpufleet-svc-d.service', str(tmp_path)) is None


def test_a_host_whose_services_run_on_no_gpu_needs_no_nvml(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(_helper_devices, 'pynvml', None)
    map_path, runtime = tmp_path / 'devices.json', tmp_path / 'run'
    map_path.write_text(json.dumps({'version': 1, 'units': {
        'gpufleet-svc-gateway.service': {'devices': [], 'container': False}}}))
    assert _helper_devices.main(['devices', str(map_path), str(runtime)]) == 0, capsys.readouterr().err
    assert (runtime / 'gpufleet-svc-gateway.service.env').read_text() == runtime_text([], False)
    # A device to resolve, and no NVML: refused, nothing written.
    map_path.write_text(json.dumps({'version': 1, 'units': {
        'gpufleet-svc-llm.service': {'devices': ['GPU-5c6f7a2e-1b3d-4e8f-9a0b-1c2d3e4f5a60'], 'container': False}}}))
    assert _helper_devices.main(['devices', str(map_path), str(runtime)]) == 1
    assert 'pynvml' in capsys.readouterr().err
    assert os.listdir(str(runtime)) == ['gpufleet-svc-gateway.service.env']


def test_plan_entries_take_their_devices_from_the_runtime_files(tmp_path):
    """The readers of the plan (the audit, the watchdog) see the UUID in each service's slot now, not the plan's."""
    gpu, old, new = ('GPU-33333333-3333-3333-3333-333333333333', 'MIG-11111111-1111-1111-1111-111111111111',
                     'MIG-22222222-2222-2222-2222-222222222222')
    fields = {'name': 'imagegen', 'gpus': [old], 'gpu_uuids': [gpu], 'unit': 'gpufleet-svc-imagegen.service'}
    imagegen, llm = Entry(fields), Entry(dict(fields, name='llm', unit='gpufleet-svc-llm.service'))
    (tmp_path / 'gpufleet-svc-imagegen.service.env').write_text(runtime_text([new], False))
    assert resolve_entries([imagegen, llm], str(tmp_path)) == [imagegen, llm]
    assert (imagegen.devices, llm.devices) == ([new], [old])
    assert imagegen.uses(gpu, new) and not imagegen.uses(gpu, old) and imagegen.uses(gpu)
    assert imagegen.expectations()['gpus'] == [new] and llm.expectations()['gpus'] == [old]


def _mps_daemons(topology):
    """An MPS daemon on GPU 0 and one on the first 1g.10gb of GPU 3, named by its slot."""
    gpu0 = [gpu['uuid'] for gpu in topology.gpus if gpu['index'] == 0][0]
    small = _units(topology)['gpufleet-svc-imagegen.service'][0][0]
    return [{'device': gpu0, 'user': 'infer'}, {'device': str(slot_of(topology, small)), 'user': 'infer'}]


@pytest.mark.parametrize('behaviour', ['new', 'stable'])
def test_mps_daemons_on_mig_devices_are_named_by_slot_before_and_after_a_remade_layout(run_module, sim_host, behaviour):
    paths, before = _partitioned(run_module, sim_host, behaviour)
    declared = _mps_daemons(before)
    planned = plan_daemons(before, declared)
    small = _units(before)['gpufleet-svc-imagegen.service'][0][0]
    assert [(daemon.name, daemon.device) for daemon in planned] == [
        (declared[0]['device'], declared[0]['device']), (declared[1]['device'], small)]
    assert planned[1].pipe_directory == '/run/gpufleet-mps/' + declared[1]['device']
    # Declared by the MIG device's UUID, the daemon is still named by the slot.
    assert plan_daemons(before, [dict(declared[1], device=small)])[0].name == declared[1]['device']

    after = _rebooted(run_module, paths)
    again = plan_daemons(after, declared)
    now = _units(after)['gpufleet-svc-imagegen.service'][0][0]
    # The same names and directories (so the same unit, files and drop-ins); only the device UUID may differ.
    same = ('name', 'pipe_directory', 'log_directory', 'user', 'control_commands', 'clients')
    assert [[getattr(d, key) for key in same] for d in again] == [[getattr(d, key) for key in same] for d in planned]
    assert again[1].device == now and (now != small) == (behaviour == 'new')


def test_an_mps_daemon_in_an_empty_slot_or_twice_on_a_device_is_refused(run_module, sim_host):
    _paths, topology = _partitioned(run_module, sim_host)
    daemon = _mps_daemons(topology)[1]
    small = _units(topology)['gpufleet-svc-imagegen.service'][0][0]
    empty = daemon['device'].replace(':1g.10gb:', ':2g.20gb:')
    with pytest.raises(MpsPlanError) as caught:
        plan_daemons(topology, [dict(daemon, device=empty), daemon, dict(daemon, device=small)])
    message = str(caught.value)
    assert 'MPS daemon 1 (%s): the live MIG layout differs from the declared one: ' % empty in message
    assert 'has no 2g.20gb at placement' in message
    assert 'MPS daemon 3 (%s): daemon 2 already serves this device' % small in message


def test_the_mps_daemon_starts_on_the_device_in_its_slot_or_not_at_all(run_module, sim_host, tmp_path, capsys):
    paths, topology = _partitioned(run_module, sim_host)
    gpu0, slot = [daemon['device'] for daemon in _mps_daemons(topology)]
    files = HostFiles(paths['sysfs_root'], paths['procfs_root'])
    env = tmp_path / 'run' / ('gpufleet-mps@%s.service.env' % slot)
    whole = tmp_path / 'run' / ('gpufleet-mps@%s.service.env' % gpu0)
    assert _helper_device_env.main(['device-env', slot, str(env)], files=files) == 0
    assert _helper_device_env.main(['device-env', gpu0, str(whole)], files=files) == 0
    small = _units(topology)['gpufleet-svc-imagegen.service'][0][0]
    assert env.read_text() == runtime_text([small], False, source=slot)
    assert runtime_devices(env.read_text()) == [small] and runtime_devices(whole.read_text()) == [gpu0]
    assert oct(os.stat(str(env)).st_mode & 0o777) == oct(0o644)
    capsys.readouterr()

    # After a reboot whose layout leaves the slot empty: nothing is written (the unit's start fails), and the reason
    # names the slot.
    _rebooted(run_module, paths, [LAYOUTS[0], {'gpus': [3], 'layout': ['7g.80gb']}])
    env.unlink()
    assert _helper_device_env.main(['device-env', slot, str(env)], files=files) == 1
    assert not env.exists()
    err = capsys.readouterr().err
    assert err.startswith('gpufleet-device-env: the live MIG layout differs from the declared one: ')
    assert 'has no 1g.10gb at placement' in err and '(it has 7g.80gb@0)' in err
    assert _helper_device_env.main(['device-env', slot]) == 2
