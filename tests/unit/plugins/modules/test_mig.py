# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""gpufleet.core.mig against the NVML simulator.

Expected layouts and messages are written by hand from NVIDIA's MIG user guide; the per-model profile counts
come from tests/nvml_sim/gpu_models.json (support/mig_tables.py), which is checked against the guide once.
"""

from __future__ import absolute_import, division, print_function

import os
import re

import pytest
import yaml

import simctl
from ansible_collections.gpufleet.core.plugins.modules import mig

from ...conftest import ModuleFail
from ...support import mig_tables
from ...support.sim import gpu_uuid

SAMPLES = os.path.join(os.path.dirname(__file__), '..', '..', 'mig_samples')
GPU0 = gpu_uuid(0)


@pytest.fixture
def host(sim_hosts):
    """A host of `count` GPUs of one model on a base host's CPUs; returns host_file and state_file."""
    def make(model='A100-80GB-PCIe', count=1, mig_mode=0, base='reference-a100', **gpu_extra):
        return sim_hosts.with_gpus(model, count, base=base, mig_mode=mig_mode, **gpu_extra)
    return make


def apply(run_module, args, check=False, diff=False):
    args = dict(args, sysfs_root='/sys', procfs_root='/proc', _ansible_check_mode=check, _ansible_diff=diff)
    return run_module(mig, args)


def refuse(run_module, args):
    with pytest.raises(ModuleFail) as failed:
        apply(run_module, args)
    return failed.value.result['msg']


def layout_of(result, index=0):
    return result['gpus'][index]['layout_after']


def uuids_of(result, index=0):
    return [device['uuid'] for device in result['gpus'][index]['devices']]


@pytest.mark.parametrize('model', mig_tables.mig_models())
def test_every_profile_fills_to_its_maximum_and_one_more_is_refused(run_module, host, model):
    paths = host(model, mig_mode=1)
    for profile, maximum in sorted(mig_tables.maxima(model).items()):
        result = apply(run_module, {'layouts': [{'gpus': 0, 'layout': [{'profile': profile, 'count': maximum}]}]})
        assert [entry.split('@')[0] for entry in layout_of(result)] == [profile] * maximum
        assert len(uuids_of(result)) == maximum
        before = simctl.mutations(paths['state_file'])
        msg = refuse(run_module, {'layouts': [{'gpus': 0, 'layout': [{'profile': profile, 'count': maximum + 1}]}]})
        assert '%s allows at most %d per GPU' % (profile, maximum) in msg
        assert simctl.mutations(paths['state_file']) == before


def test_a_layout_that_fits_only_at_the_right_placement(run_module, host):
    # nvidia-smi's order (-cgi 19,19,19,19,9) strands the 3g; planned placements fit all five.
    host(mig_mode=1)
    result = apply(run_module, {'layouts': [{'gpus': 0, 'layout': ['1g.10gb'] * 4 + ['3g.40gb']}]})
    assert layout_of(result) == ['1g.10gb@0', '1g.10gb@1', '1g.10gb@2', '1g.10gb@3', '3g.40gb@4']
    result = apply(run_module, {'layouts': [{'gpus': 0, 'layout': ['2g.20gb', '3g.40gb', '2g.20gb']}]})
    assert layout_of(result) == ['2g.20gb@0', '2g.20gb@2', '3g.40gb@4']


@pytest.mark.parametrize('layout, reason, nearest', [
    (['4g.40gb', '2g.20gb', '2g.20gb'], 'they need 8 compute slices and the GPU has 7', '4g.40gb, 2g.20gb'),
    (['3g.40gb', '1g.20gb', '1g.20gb', '1g.10gb'], 'they need 9 memory slices and the GPU has 8',
     '3g.40gb, 1g.20gb, 1g.20gb'),
    (['7g.80gb', '1g.10gb'], 'they need 8 compute slices', '7g.80gb'),
])
def test_layouts_that_do_not_fit_say_why_and_what_would(run_module, host, layout, reason, nearest):
    paths = host(mig_mode=1)
    msg = refuse(run_module, {'layouts': [{'gpus': 0, 'layout': layout}]})
    assert msg.startswith('No GPU was changed')
    assert reason in msg
    assert 'The nearest layout that fits is %s.' % nearest in msg
    assert simctl.mutations(paths['state_file']) == 0


def test_reapplying_makes_no_nvml_changes(run_module, host):
    paths = host(count=2)
    args = {'layouts': [{'gpus': 'all', 'layout': ['3g.40gb', {'profile': '1g.10gb', 'count': 2}]}]}
    first = apply(run_module, args)
    assert first['changed'] is True
    mutations = simctl.mutations(paths['state_file'])
    second = apply(run_module, args)
    assert second['changed'] is False and second['operations'] == []
    assert simctl.mutations(paths['state_file']) == mutations
    assert uuids_of(second, 1) == uuids_of(first, 1)


def test_changing_one_gpu_of_eight_touches_only_that_gpu(run_module, host):
    paths = host('H100-SXM5-80GB', count=8, base='dgx-h100')
    apply(run_module, {'layouts': [{'gpus': 'all', 'layout': ['3g.40gb', '3g.40gb']}]})
    before = apply(run_module, {'layouts': [{'gpus': 'all', 'layout': ['3g.40gb', '3g.40gb']}]}, check=True)
    mutations = simctl.mutations(paths['state_file'])
    layouts = [{'gpus': [i for i in range(8) if i != 5], 'layout': ['3g.40gb', '3g.40gb']},
               {'gpus': 5, 'layout': ['3g.40gb', '1g.10gb', '1g.10gb', '1g.10gb']}]
    after = apply(run_module, {'layouts': layouts})
    assert [gpu['changed'] for gpu in after['gpus']] == [i == 5 for i in range(8)]
    assert all(op.startswith('GPU 5 ') for op in after['operations'])
    # One GPU instance destroyed (with its compute instance), three created (each with one).
    assert simctl.mutations(paths['state_file']) - mutations == 2 + 6
    for index in range(8):
        if index != 5:
            assert uuids_of(after, index) == uuids_of(before, index)
    assert uuids_of(before, 5)[0] in uuids_of(after, 5)


def test_adding_a_1g_keeps_the_existing_instances_and_their_uuids(run_module, host):
    host(mig_mode=1)
    first = apply(run_module, {'layouts': [{'gpus': 0, 'layout': ['4g.40gb', '1g.10gb']}]})
    second = apply(run_module, {'layouts': [{'gpus': 0, 'layout': ['4g.40gb', '1g.10gb', '1g.10gb']}]})
    assert set(uuids_of(first)) < set(uuids_of(second))
    assert len(second['operations']) == 1 and 'create 1g.10gb' in second['operations'][0]


def test_running_processes_block_destruction_unless_forced(run_module, host):
    paths = host(mig_mode=1)
    first = apply(run_module, {'layouts': [{'gpus': 0, 'layout': ['3g.40gb', '3g.40gb']}]})
    busy = first['gpus'][0]['devices'][1]
    simctl.add_process(paths['state_file'], GPU0, 4711, busy['gpu_instance_id'], busy['compute_instance_id'])
    mutations = simctl.mutations(paths['state_file'])
    msg = refuse(run_module, {'layouts': [{'gpus': 0, 'layout': 'disabled'}]})
    assert 'while PIDs 4711 run' in msg and 'force: true' in msg
    assert simctl.mutations(paths['state_file']) == mutations
    # A change that can keep the busy instance keeps it and goes ahead.
    idle = [d for d in first['gpus'][0]['devices'] if d['uuid'] != busy['uuid']][0]
    kept = apply(run_module, {'layouts': [{'gpus': 0, 'layout': ['3g.40gb', '1g.10gb']}]})
    assert busy['uuid'] in uuids_of(kept) and idle['uuid'] not in uuids_of(kept)
    # force skips the module's own refusal; NVML still refuses to destroy an instance a process holds.
    with pytest.raises(ModuleFail) as failed:
        apply(run_module, {'layouts': [{'gpus': 0, 'layout': 'disabled'}], 'force': True})
    assert 'In use by another client' in failed.value.result['msg']
    assert 'destroy compute instance %d of GPU instance %d' % (busy['compute_instance_id'],
                                                               busy['gpu_instance_id']) in failed.value.result['msg']
    simctl.remove_process(paths['state_file'], 4711)
    assert layout_of(apply(run_module, {'layouts': [{'gpus': 0, 'layout': 'disabled'}]})) == 'disabled'


def test_an_nvml_error_mid_apply_says_what_was_applied_and_a_rerun_converges(run_module, host):
    paths = host(mig_mode=1)
    simctl.inject_fault(paths['state_file'], 'nvmlDeviceCreateGpuInstanceWithPlacement', error=999, skip=1)
    args = {'layouts': [{'gpus': 0, 'layout': ['3g.40gb', '2g.20gb', '1g.10gb']}]}
    with pytest.raises(ModuleFail) as failed:
        apply(run_module, args)
    msg = failed.value.result['msg']
    assert 'NVML failed at "GPU 0' in msg and 'Unknown Error' in msg
    assert 'Already applied: GPU 0' in msg and 'create 3g.40gb at memory slice 4' in msg
    assert 're-run to converge' in msg and failed.value.result['changed'] is True
    result = apply(run_module, args)
    assert layout_of(result) == ['1g.10gb@1', '2g.20gb@2', '3g.40gb@4']
    assert apply(run_module, args)['changed'] is False


def test_after_a_reboot_the_layout_is_restored(run_module, host):
    paths = host('H100-SXM5-80GB', mig_mode=0)
    args = {'layouts': [{'gpus': 0, 'layout': ['4g.40gb', '3g.40gb']}]}
    apply(run_module, args)
    simctl.reboot(paths['host_file'], paths['state_file'])  # Hopper: instances and MIG mode are gone
    result = apply(run_module, args)
    assert result['gpus'][0]['layout_before'] == 'disabled'
    assert 'enable MIG mode' in result['operations'][0]
    assert layout_of(result) == ['4g.40gb@0', '3g.40gb@4']


def test_wrong_recipe_profile_19_is_not_a_20gb_instance(run_module, host):
    paths = host(mig_mode=1)
    msg = refuse(run_module, {'layouts': [{'gpus': 0, 'layout': [19, 19, 19, 19]}]})
    assert 'profile id 19 means 1g.10gb on NVIDIA A100 80GB PCIe (9.5 GiB' in msg
    assert '1g.20gb (up to 4)' in msg
    assert simctl.mutations(paths['state_file']) == 0


def test_wrong_recipe_four_3g_40gb(run_module, host):
    paths = host(mig_mode=1)
    msg = refuse(run_module, {'layouts': [{'gpus': 0, 'layout': ['3g.40gb'] * 4}]})
    assert '3g.40gb allows at most 2 per GPU, and 4 were asked for' in msg
    assert 'The nearest layout that fits is 3g.40gb, 3g.40gb.' in msg
    assert simctl.mutations(paths['state_file']) == 0


def test_wrong_recipe_instances_before_mig_mode(run_module, host):
    paths = host(mig_mode=0)
    msg = refuse(run_module, {'layouts': [{'gpus': 0, 'layout': ['1g.10gb']}], 'allow_mode_change': False})
    assert 'MIG mode is disabled and the layout needs it enabled' in msg and 'nvidia-smi -i 0 -mig 1' in msg
    assert simctl.mutations(paths['state_file']) == 0
    result = apply(run_module, {'layouts': [{'gpus': 0, 'layout': ['1g.10gb']}]})
    assert 'enable MIG mode' in result['operations'][0] and 'create 1g.10gb' in result['operations'][1]


def test_ampere_waits_for_a_reset_and_names_what_blocks_it(run_module, host, tmp_path):
    paths = host(mig_mode=0, reset_blocked_by=['nvidia-persistenced'])
    proc = tmp_path / 'proc' / '812'
    proc.mkdir(parents=True)
    (proc / 'comm').write_text('nvidia-persiste\n')
    (proc / 'cmdline').write_text('/usr/bin/nvidia-persistenced\0--verbose\0')
    args = {'layouts': [{'gpus': 0, 'layout': ['3g.40gb']}], 'procfs_root': str(tmp_path / 'proc')}
    result = run_module(mig, dict(args, sysfs_root='/sys'))
    assert result['reset_required'] is True and result['gpus'][0]['mig_mode_pending'] == 'enabled'
    assert result['reset_blockers'] == ['nvidia-persistenced (stop it during the reset)']
    assert result['reboot_required'] is True
    assert layout_of(result) == 'disabled'  # instances wait for the mode
    simctl.reset_gpu(paths['state_file'], GPU0)
    result = run_module(mig, dict(args, sysfs_root='/sys'))
    assert layout_of(result) == ['3g.40gb@4'] and result['reset_required'] is False


def test_check_mode_returns_the_plan_and_changes_nothing(run_module, host):
    paths = host(mig_mode=1)
    result = apply(run_module, {'layouts': [{'gpus': 0, 'layout': ['3g.40gb', '1g.10gb']}]}, check=True, diff=True)
    assert result['changed'] is True
    # Big instances take the highest allowed start first, small ones the highest free slot below them.
    assert result['operations'] == [
        'GPU 0 (%s, NVIDIA A100 80GB PCIe): create 3g.40gb at memory slice 4 with compute instances 3c' % GPU0,
        'GPU 0 (%s, NVIDIA A100 80GB PCIe): create 1g.10gb at memory slice 3 with compute instances 1c' % GPU0,
    ]
    assert result['diff'] == {'before': 'GPU 0 %s: (MIG on, no instances)\n' % GPU0,
                              'after': 'GPU 0 %s: 1g.10gb@3, 3g.40gb@4\n' % GPU0}
    assert simctl.mutations(paths['state_file']) == 0


def test_compute_instance_split(run_module, host):
    host(mig_mode=1)
    result = apply(run_module, {'layouts': [{'gpus': 0, 'layout': [
        {'profile': '3g.40gb', 'compute_instances': ['1c', '2c.3g.40gb']}]}]})
    assert layout_of(result) == ['3g.40gb@4 [1c+2c]'] or layout_of(result) == ['3g.40gb@4 [2c+1c]']
    assert len(uuids_of(result)) == 2
    msg = refuse(run_module, {'layouts': [{'gpus': 0, 'layout': [
        {'profile': '4g.40gb', 'compute_instances': ['3c']}]}]})
    assert 'offers compute instances of 1/2/4 slices' in msg


def test_a_gpu_selected_twice_is_refused(run_module, host):
    host(count=2)
    msg = refuse(run_module, {'layouts': [{'gpus': 'all', 'layout': ['7g.80gb']},
                                          {'gpus': 1, 'layout': 'disabled'}]})
    assert 'GPU 1' in msg and 'already given a layout by entry 1' in msg


def test_one_invalid_gpu_means_no_gpu_is_touched(run_module, host):
    paths = host(count=2)
    msg = refuse(run_module, {'layouts': [{'gpus': 0, 'layout': ['7g.80gb']},
                                          {'gpus': 1, 'layout': ['9g.99gb']}]})
    assert 'offers no MIG profile 9g.99gb' in msg
    assert simctl.mutations(paths['state_file']) == 0


def test_mig_parted_config_applies_the_same_layouts_as_native_input(run_module, host, tmp_path, monkeypatch):
    with open(os.path.join(SAMPLES, 'mig-parted-config.yaml')) as handle:
        config = yaml.safe_load(handle)
    native = [
        {'gpus': [0, 1], 'layout': ['4g.40gb', {'profile': '1g.10gb', 'count': 3}]},
        {'gpus': 2, 'layout': ['3g.40gb', {'profile': '3g.40gb', 'compute_instances': ['1c', '1c', '1c']}]},
        {'gpus': 3, 'layout': 'disabled'},
    ]
    host(count=4)
    from_parted = apply(run_module, {'mig_parted_config': config, 'mig_parted_name': 'llm-and-imagegen'},
                        check=True)
    from_native = apply(run_module, {'layouts': native}, check=True)
    assert [g['layout_after'] for g in from_parted['gpus']] == [g['layout_after'] for g in from_native['gpus']]
    assert from_parted['gpus'][2]['layout_after'] == ['3g.40gb@0', '3g.40gb@4 [1c+1c+1c]'] or \
        from_parted['gpus'][2]['layout_after'] == ['3g.40gb@0 [1c+1c+1c]', '3g.40gb@4']
    by_file = apply(run_module, {'mig_parted_file': os.path.join(SAMPLES, 'mig-parted-config.yaml'),
                                 'mig_parted_name': 'all-3g.40gb'})
    assert [g['layout_after'] for g in by_file['gpus']] == [['3g.40gb@0', '3g.40gb@4']] * 4
    msg = refuse(run_module, {'mig_parted_config': config, 'mig_parted_name': 'nope'})
    assert "no mig-configs entry 'nope'" in msg and 'all-3g.40gb' in msg


# force: complete or a no-op per GPU --------------------------------------------------------------------------------

def test_force_with_a_busy_instance_leaves_the_gpu_as_it_was(run_module, host):
    """NVML refuses to destroy a compute instance that runs processes (NVML_ERROR_IN_USE), force or not; the module
    checks every such instance before its first change on the GPU, so the idle instance is not destroyed either."""
    paths = host(mig_mode=1)
    first = apply(run_module, {'layouts': [{'gpus': 0, 'layout': ['3g.40gb', '1g.10gb', '1g.10gb']}]})
    busy = [d for d in first['gpus'][0]['devices'] if d['profile'] == '3g.40gb'][0]
    simctl.add_process(paths['state_file'], GPU0, 4711, busy['gpu_instance_id'], busy['compute_instance_id'])
    mutations = simctl.mutations(paths['state_file'])
    with pytest.raises(ModuleFail) as failed:
        apply(run_module, {'layouts': [{'gpus': 0, 'layout': 'disabled'}], 'force': True})
    result = failed.value.result
    assert simctl.mutations(paths['state_file']) == mutations
    assert 'PIDs 4711 still run there' in result['msg'] and 'In use by another client' in result['msg']
    assert 'GPU 0 (%s, NVIDIA A100 80GB PCIe) was not changed' % GPU0 in result['msg']
    assert result['changed'] is False and result['applied'] == []
    assert result['failed_on'] == [
        'GPU 0 (%s, NVIDIA A100 80GB PCIe): destroy compute instance %d of GPU instance %d: %s'
        % (GPU0, busy['compute_instance_id'], busy['gpu_instance_id'],
           result['msg'].split('": ', 1)[1].split('. GPU 0', 1)[0])]
    assert len(result['not_run']) == 3 * 2 + 1 - 1 and any('disable MIG mode' in op for op in result['not_run'])
    assert layout_of(apply(run_module, {'layouts': [{'gpus': 0, 'layout': ['3g.40gb', '1g.10gb', '1g.10gb']}]},
                           check=True)) == layout_of(first)
    # Once the process is gone, force (or no force) completes the change.
    simctl.remove_process(paths['state_file'], 4711)
    assert layout_of(apply(run_module, {'layouts': [{'gpus': 0, 'layout': 'disabled'}], 'force': True})) == 'disabled'


def test_force_runs_the_busy_steps_first(run_module, host):
    """The steps NVML may refuse come before every other step on the GPU, so a refusal changes nothing."""
    paths = host(mig_mode=1)
    first = apply(run_module, {'layouts': [{'gpus': 0, 'layout': ['1g.10gb', '1g.10gb', '3g.40gb']}]})
    busy = [d for d in first['gpus'][0]['devices'] if d['profile'] == '3g.40gb'][0]
    simctl.add_process(paths['state_file'], GPU0, 4711, busy['gpu_instance_id'], busy['compute_instance_id'])
    plan = apply(run_module, {'layouts': [{'gpus': 0, 'layout': 'disabled'}], 'force': True}, check=True)
    assert plan['operations'][0].endswith('destroy compute instance %d of GPU instance %d'
                                          % (busy['compute_instance_id'], busy['gpu_instance_id']))
    assert plan['operations'][-1].endswith('disable MIG mode')


def test_compute_processes_block_a_reset_and_are_reported(run_module, host):
    """A mode change on a GPU running compute processes waits for a reset the driver refuses while they run: they
    are reset blockers, so the role reboots instead of resetting."""
    paths = host(mig_mode=0)
    apply(run_module, {'layouts': [{'gpus': 0, 'layout': 'disabled'}]})  # the simulator's state starts on first use
    simctl.add_process(paths['state_file'], GPU0, 4242)
    msg = refuse(run_module, {'layouts': [{'gpus': 0, 'layout': ['7g.80gb']}]})
    assert 'enabling MIG mode while PIDs 4242 run' in msg
    result = apply(run_module, {'layouts': [{'gpus': 0, 'layout': ['7g.80gb']}], 'force': True})
    assert result['reset_required'] is True and result['reboot_required'] is True
    assert 'compute processes 4242 on GPU 0 (%s, NVIDIA A100 80GB PCIe) (stop them during the reset)' % GPU0 \
        in result['reset_blockers']
    assert result['gpus'][0]['compute_pids'] == [4242]


# Partial failures tell the truth ---------------------------------------------------------------------------------

def test_a_failed_step_is_reported_as_failed_and_the_rest_as_not_run(run_module, host):
    paths = host(count=2, mig_mode=1)
    simctl.inject_fault(paths['state_file'], 'nvmlDeviceCreateGpuInstanceWithPlacement', error=999, skip=1)
    with pytest.raises(ModuleFail) as failed:
        apply(run_module, {'layouts': [{'gpus': 'all', 'layout': ['3g.40gb', '2g.20gb']}]})
    result = failed.value.result
    name0 = 'GPU 0 (%s, NVIDIA A100 80GB PCIe)' % GPU0
    assert result['changed'] is True
    assert [re.sub(r' \(?GPU instance \d+\)?', '', op.split(': ', 1)[1]) for op in result['applied']] == [
        'create 3g.40gb at memory slice 4', 'create a 3c compute instance in']
    assert len(result['failed_on']) == 1 and result['failed_on'][0].startswith(
        name0 + ': create 2g.20gb at memory slice 2 with compute instances 2c: ')
    assert [op.split(': ', 1)[1] for op in result['not_run']] == [
        'create 3g.40gb at memory slice 4 with compute instances 3c',
        'create 2g.20gb at memory slice 2 with compute instances 2c']
    assert all(op.startswith('GPU 1 ') for op in result['not_run'])
    # The message names each GPU once.
    assert result['msg'].count(name0) == 2  # where it failed, and before what was applied there


def test_a_mode_change_waiting_for_a_reset_does_not_list_the_instances_as_applied(run_module, host):
    host(mig_mode=0, reset_blocked_by=['nvidia-persistenced'])
    result = apply(run_module, {'layouts': [{'gpus': 0, 'layout': ['3g.40gb', '1g.10gb']}]})
    assert [op.split(': ', 1)[1] for op in result['applied']] == ['enable MIG mode']
    assert [op.split(': ', 1)[1] for op in result['not_run']] == [
        'create 3g.40gb at memory slice 4 with compute instances 3c',
        'create 1g.10gb at memory slice 3 with compute instances 1c']
    assert result['failed_on'] == []
    # Ansible reads a result's "failed" key as the task's status: the module never sets it itself.
    assert 'failed' not in result


def test_check_mode_runs_nothing(run_module, host):
    host(mig_mode=1)
    result = apply(run_module, {'layouts': [{'gpus': 0, 'layout': ['7g.80gb']}]}, check=True)
    assert result['applied'] == [] and result['not_run'] == result['operations'] and result['operations']


# Messages name a GPU once; one refusal on eight GPUs is one message ----------------------------------------------

def test_the_same_refusal_on_eight_gpus_is_one_message(run_module, host):
    paths = host('H100-SXM5-80GB', count=8, base='dgx-h100')
    msg = refuse(run_module, {'layouts': [{'gpus': 'all', 'layout': ['3g.40gb'] * 3}]})
    assert msg.count('3g.40gb allows at most 2 per GPU') == 1
    assert msg.startswith('No GPU was changed, because: GPUs 0, 1, 2, 3, 4, 5, 6, 7 (%s): '
                          % ', '.join(gpu_uuid(i) for i in range(8)))
    msg = refuse(run_module, {'layouts': [{'gpus': 'all', 'layout': ['7g.80gb']}], 'allow_mode_change': False})
    assert msg.count('MIG mode is disabled') == 1 and 'nvidia-smi -i 0,1,2,3,4,5,6,7 -mig 1' in msg
    assert simctl.mutations(paths['state_file']) == 0
