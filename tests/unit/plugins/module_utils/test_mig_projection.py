# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""Topology.after_mig: services placed on the projected topology land where they land once the MIG change is made.

The proof runs the real mig module on the simulated reference host: its check-mode plan is projected, services are
placed on the projection, then the change is applied, the topology gathered again and the same services placed on
it. Both placements must agree on everything but the MIG devices' UUIDs.
"""

from __future__ import absolute_import, division, print_function

import pytest

import simctl
from ansible_collections.gpufleet.core.plugins.module_utils._placement import place
from ansible_collections.gpufleet.core.plugins.module_utils._topology import (
    Topology, TopologyModelError, placeholder_mig_uuid)
from ansible_collections.gpufleet.core.plugins.modules import mig, topology_facts

from ...support import mig_tables
from ...support.topology import A100, A100_PROFILES, gpu, mig_instance, node, topology

LAYOUTS = [{'gpus': [2, 3], 'layout': ['3g.40gb', '3g.40gb']}]
SERVICES = [
    {'name': 'llm', 'gpus': 2, 'cpus': 8, 'command': '/opt/llm/serve'},
    {'name': 'imagegen', 'gpus': {'mig_profile': '3g.40gb', 'count': 1}, 'cpus': 4, 'command': '/opt/img/serve'},
    {'name': 'embed', 'gpus': {'mig_profile': '3g.40gb', 'count': 2}, 'cpus': 4, 'command': '/opt/embed/serve'},
]


def topology_after_mig(fact, mig_gpus):
    return Topology(fact).after_mig(mig_gpus).fact


def _wanted(*instances):
    """A mig_wanted with MIG on and these (profile, start, [compute slice counts]) GPU instances."""
    return {'mig_mode': 'enabled', 'gpu_instances': [
        {'profile': profile, 'placement_start': start, 'compute_instances': [{'slice_count': size} for size in sizes]}
        for profile, start, sizes in instances]}


DISABLED = {'mig_mode': 'disabled', 'gpu_instances': []}


def _gather(run_module, roots):
    return run_module(topology_facts, dict(roots))['ansible_facts']['gpufleet_topology']


def _shape(plans, fact):
    """What a placement decides, with MIG devices named by their parent GPU and placement instead of their UUID."""
    where = {}
    for found in fact['gpus']:
        where[found['uuid']] = (found['uuid'], None)
        for gi in found['mig']['gpu_instances']:
            for ci in gi['compute_instances']:
                where[ci['uuid']] = (found['uuid'], gi['profile'], gi['placement']['start'], ci['id'])
    return [(plan['name'], [where[uuid] for uuid in plan['gpus']], plan['numa_node'], plan['cpulist'], plan['memlist'])
            for plan in plans]


def test_services_placed_on_the_projection_land_where_they_do_after_the_change(run_module, sim_host):
    paths = sim_host('reference-a100')
    roots = {'sysfs_root': paths['sysfs_root'], 'procfs_root': paths['procfs_root']}
    before = _gather(run_module, roots)
    planned = run_module(mig, dict(roots, layouts=LAYOUTS, _ansible_check_mode=True))
    projected = topology_after_mig(before, planned['gpus'])

    # The fact itself is not touched, and without the plan the MIG services cannot be placed at all.
    assert all(found['mig']['gpu_instances'] == [] for found in before['gpus'])
    with pytest.raises(Exception) as refused:
        place(before, SERVICES, reserved_cpus='0,32')
    assert '3g.40gb' in str(refused.value)

    on_projection = place(projected, SERVICES, reserved_cpus='0,32')
    run_module(mig, dict(roots, layouts=LAYOUTS))
    after = _gather(run_module, roots)
    on_real = place(after, SERVICES, reserved_cpus='0,32')

    assert _shape(on_projection, projected) == _shape(on_real, after)
    # The reference host: GPU2/3 (node 1) carry the slices, so the MIG services sit on node 1's CPUs.
    assert [plan['numa_node'] for plan in on_real] == [0, 1, 1]
    # Placeholders are MIG-style UUIDs that no real device has.
    real = set(uuid for plan in on_real for uuid in plan['gpus'])
    assert all(uuid.startswith('MIG-') and uuid not in real for plan in on_projection[1:] for uuid in plan['gpus'])


def test_the_plan_is_read_as_data_and_its_words_are_only_for_people(run_module, sim_host):
    paths = sim_host('reference-a100')
    roots = {'sysfs_root': paths['sysfs_root'], 'procfs_root': paths['procfs_root']}
    planned = run_module(mig, dict(roots, layouts=[{'gpus': [2], 'layout': [
        {'profile': '3g.40gb', 'compute_instances': ['1c', '2c']}, '3g.40gb']}], _ansible_check_mode=True))
    assert planned['gpus'][0]['layout_wanted'] == ['3g.40gb@0 [1c+2c]', '3g.40gb@4'] or \
        planned['gpus'][0]['layout_wanted'] == ['3g.40gb@0', '3g.40gb@4 [1c+2c]']
    starts = dict((gi['placement_start'], [ci['slice_count'] for ci in gi['compute_instances']])
                  for gi in planned['gpus'][0]['mig_wanted']['gpu_instances'])
    assert planned['gpus'][0]['mig_wanted']['mig_mode'] == 'enabled' and sorted(starts.values()) == [[1, 2], [3]]
    # The words changed for people change nothing: the projection never reads them.
    reworded = [dict(found, layout_wanted=['(reworded)']) for found in planned['gpus']]
    before = _gather(run_module, roots)
    assert topology_after_mig(before, reworded) == topology_after_mig(before, planned['gpus'])


def test_a_gpu_taken_out_of_mig_loses_its_instances_and_unlisted_gpus_keep_theirs():
    fact = topology([node(0, range(0, 8))], mig_profiles=A100_PROFILES, gpus=[
        gpu(0, 'GPU-a', bus='17', instances=[mig_instance('3g.40gb', ['MIG-old'], start=0)]),
        gpu(1, 'GPU-b', bus='18', instances=[mig_instance('1g.10gb', ['MIG-kept'], start=6)]),
    ])
    projected = Topology(fact).after_mig([{'uuid': 'GPU-a', 'mig_wanted': DISABLED}])
    assert projected.fact['gpus'][0]['mig']['mode_current'] == 'disabled'
    assert projected.fact['gpus'][0]['mig']['gpu_instances'] == []
    assert projected.fact['gpus'][1] == fact['gpus'][1]
    assert 'MIG-old' not in projected.devices and 'MIG-kept' in projected.devices
    assert fact['gpus'][0]['mig']['gpu_instances'][0]['compute_instances'][0]['uuid'] == 'MIG-old'


def test_compute_instances_that_split_a_gpu_instance_become_devices_of_their_own():
    fact = topology([node(0, range(0, 8))], gpus=[gpu(0, 'GPU-a', bus='17', name=A100)], mig_profiles=A100_PROFILES)
    wanted = _wanted(('1g.10gb', 0, [1]), ('3g.40gb', 4, [1, 2]))
    projected = Topology(fact).after_mig([{'uuid': 'GPU-a', 'mig_wanted': wanted}])
    instances = projected.fact['gpus'][0]['mig']['gpu_instances']
    assert [(gi['id'], gi['profile'], gi['placement']['start'], [ci['slice_count'] for ci in gi['compute_instances']])
            for gi in instances] == [(1, '1g.10gb', 0, [1]), (2, '3g.40gb', 4, [1, 2])]
    uuids = [ci['uuid'] for gi in instances for ci in gi['compute_instances']]
    assert uuids == [placeholder_mig_uuid('GPU-a', 0, 0), placeholder_mig_uuid('GPU-a', 4, 0),
                     placeholder_mig_uuid('GPU-a', 4, 1)]
    assert len(set(uuids)) == 3 and placeholder_mig_uuid('GPU-a', 4, 0) == placeholder_mig_uuid('GPU-a', 4, 0)
    assert [projected.devices[uuid]['profile'] for uuid in uuids] == ['1g.10gb', '3g.40gb', '3g.40gb']
    assert A100 in projected.fact['mig_profiles']


@pytest.mark.parametrize('wanted, words', [
    (None, 'mig_wanted is None, not the MIG plan as gpufleet.core.mig returns it'),
    (['3g.40gb@0'], "mig_wanted is ['3g.40gb@0']"),
    ({'mig_mode': 'on', 'gpu_instances': []}, "'mig_mode': 'on'"),
    ({'mig_mode': 'disabled', 'gpu_instances': _wanted(('3g.40gb', 0, [3]))['gpu_instances']}, "'disabled'"),
    (_wanted(('3g.40gb', -1, [3])), "'placement_start': -1"),
    (_wanted(('3g.40gb', 0, [])), "'compute_instances': []"),
    (_wanted(('3g.40gb', 0, [0])), "'slice_count': 0"),
    ({'mig_mode': 'enabled', 'gpu_instances': [{'profile': '3g.40gb', 'placement_start': True,
                                               'compute_instances': [{'slice_count': 3}]}]}, "'placement_start': True"),
])
def test_a_plan_it_cannot_read_is_refused_naming_it(wanted, words):
    fact = topology([node(0, range(0, 8))], gpus=[gpu(0, 'GPU-a', bus='17')])
    with pytest.raises(TopologyModelError) as refused:
        Topology(fact).after_mig([{'uuid': 'GPU-a', 'mig_wanted': wanted, 'layout_wanted': ['3g.40gb@0']}])
    assert str(refused.value).startswith('GPU GPU-a: mig_wanted is ') and words in str(refused.value)
    assert "plan the MIG change with this release's gpufleet.core.mig" in str(refused.value)


def test_a_plan_for_another_host_or_a_wrong_input_is_refused():
    fact = topology([node(0, range(0, 8))], gpus=[gpu(0, 'GPU-a', bus='17')])
    with pytest.raises(TopologyModelError) as refused:
        topology_after_mig(fact, [{'uuid': 'GPU-z', 'mig_wanted': DISABLED}])
    assert 'GPU-z' in str(refused.value) and 'same host' in str(refused.value)
    with pytest.raises(TopologyModelError) as refused:
        topology_after_mig({'gpus': []}, [])
    assert 'gpufleet.core.topology_facts' in str(refused.value)
    with pytest.raises(TopologyModelError) as refused:
        topology_after_mig(fact, {'gpus': []})
    assert 'gpus list of a gpufleet.core.mig result' in str(refused.value)
    # A placement the GPU's profile table does not offer: a plan from another host or release.
    for profile, start in (('3g.40gb', 2), ('5g.50gb', 0)):
        with pytest.raises(TopologyModelError) as refused:
            topology_after_mig(fact, [{'uuid': 'GPU-a', 'mig_wanted': _wanted((profile, start, [1]))}])
        assert 'places %s at memory slice %d of GPU GPU-a' % (profile, start) in str(refused.value)
        assert 'plan the MIG change on the same host' in str(refused.value)


# The simulated host that has each MIG model of gpu_models.json; its first GPU takes the layouts.
MIG_MODEL_HOSTS = {'A100-SXM4-40GB': 'quirks', 'A100-80GB-PCIe': 'reference-a100', 'H100-SXM5-80GB': 'dgx-h100',
                   'H200-SXM-141GB': 'single-h200'}


def _as_the_driver_leaves_open(fact):
    """The fact's GPUs with what only the driver decides left out (GPU instance ids, UUIDs, compute instances'
    profile ids), and GPU instances in placement order."""
    gpus = []
    for found in fact['gpus']:
        instances = [dict((key, value) for key, value in gi.items() if key != 'id')
                     for gi in found['mig']['gpu_instances']]
        for gi in instances:
            gi['compute_instances'] = [dict((key, value) for key, value in ci.items()
                                            if key not in ('uuid', 'profile_id')) for ci in gi['compute_instances']]
        instances.sort(key=lambda gi: gi['placement']['start'])
        gpus.append(dict(found, mig=dict(found['mig'], gpu_instances=instances)))
    return gpus


def _spans(found):
    """Each GPU's MIG instances as the topology model reads them, in placement order, with how many devices each has
    instead of their UUIDs."""
    spans = {}
    for uuid, instances in found.mig_instances.items():
        read = [dict([(key, value) for key, value in instance.items() if key != 'uuids'],
                     devices=len(instance['uuids'])) for instance in instances]
        spans[uuid] = sorted(read, key=lambda instance: instance['start'])
    return spans


def test_the_simulator_has_a_host_for_every_mig_model():
    assert sorted(MIG_MODEL_HOSTS) == mig_tables.mig_models()


@pytest.mark.parametrize('model', sorted(MIG_MODEL_HOSTS))
def test_the_projection_of_each_profile_is_the_fact_nvml_reports_once_it_is_applied(run_module, sim_host, model):
    paths = sim_host(MIG_MODEL_HOSTS[model])
    roots = {'sysfs_root': paths['sysfs_root'], 'procfs_root': paths['procfs_root']}
    _gather(run_module, roots)
    simctl.reboot(paths['host_file'], paths['state_file'])  # no processes hold the single H200's instances
    for profile, maximum in sorted(mig_tables.maxima(model).items()):
        # The profile as many times as the GPU holds it, the first split into compute instances of one slice.
        slices = mig_tables.profiles(model)[profile]['compute_slices']
        layouts = [{'gpus': [0], 'layout': [{'profile': profile, 'compute_instances': ['1c'] * slices}]
                    + [profile] * (maximum - 1)}]
        planned = run_module(mig, dict(roots, layouts=layouts, _ansible_check_mode=True))
        projected = Topology(_gather(run_module, roots)).after_mig(planned['gpus'])
        run_module(mig, dict(roots, layouts=layouts))
        applied = _gather(run_module, roots)
        assert len(applied['gpus'][0]['mig']['gpu_instances']) == maximum, (model, profile)
        assert _as_the_driver_leaves_open(projected.fact) == _as_the_driver_leaves_open(applied), (model, profile)
        # And the model reads both alike: where each instance lies on the memory and compute slices.
        assert _spans(projected) == _spans(Topology(applied)), (model, profile)
