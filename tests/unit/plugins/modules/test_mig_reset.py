# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""gpufleet.core.mig against the NVML simulator: a MIG mode change that waits for a GPU reset does not claim its
instances (issue 29)."""

from __future__ import absolute_import, division, print_function

import pytest

import simctl
from ansible_collections.gpufleet.core.plugins.modules import mig

from .test_mig import GPU0, layout_of


@pytest.fixture
def host(sim_hosts):
    """A host of `count` GPUs of one model on a base host's CPUs, as test_mig's; returns host_file and state_file."""
    def make(model='A100-80GB-PCIe', count=1, mig_mode=0, base='reference-a100', **gpu_extra):
        return sim_hosts.with_gpus(model, count, base=base, mig_mode=mig_mode, **gpu_extra)
    return make


NAME0 = 'GPU 0 (%s, NVIDIA A100 80GB PCIe)' % GPU0
TWO = {'layouts': [{'gpus': 0, 'layout': ['3g.40gb', '1g.10gb']}]}
CREATIONS = ['%s: create 3g.40gb at memory slice 4 with compute instances 3c' % NAME0,
             '%s: create 1g.10gb at memory slice 3 with compute instances 1c' % NAME0]


def blocked_trees(tmp_path, blocker=None):
    """A sysfs and a procfs root holding one thing that blocks a GPU reset: nvidia_drm loaded, or nvidia-persistenced;
    with no BLOCKER, nothing."""
    sysfs, procfs = tmp_path / 'sys', tmp_path / 'proc'
    sysfs.mkdir()
    procfs.mkdir()
    if blocker is None:
        return {'sysfs_root': str(sysfs), 'procfs_root': str(procfs)}, None
    if blocker == 'nvidia_drm':
        (sysfs / 'module' / 'nvidia_drm').mkdir(parents=True)
        (sysfs / 'module' / 'nvidia_drm' / 'initstate').write_text('live\n')
        return {'sysfs_root': str(sysfs), 'procfs_root': str(procfs)}, 'the nvidia_drm kernel module'
    (procfs / '812').mkdir()
    (procfs / '812' / 'comm').write_text('nvidia-persiste\n')
    (procfs / '812' / 'cmdline').write_text('/usr/bin/nvidia-persistenced\0--verbose\0')
    return {'sysfs_root': str(sysfs), 'procfs_root': str(procfs)}, 'nvidia-persistenced'


@pytest.mark.parametrize('blocker', ['nvidia_drm', 'nvidia-persistenced'])
def test_an_ampere_mode_change_a_blocked_reset_holds_lists_its_instances_as_deferred(run_module, host, tmp_path, blocker):
    paths = host(mig_mode=0, reset_blocked_by=[blocker])
    roots, named = blocked_trees(tmp_path, blocker)
    args = dict(TWO, **roots)
    diff_after = ('GPU 0 %s: disabled; MIG mode enabled at the next GPU reset or reboot, then 1g.10gb@3, 3g.40gb@4 by '
                  'the first run after it (deferred)\n' % GPU0)
    for check in (True, False):
        result = run_module(mig, dict(args, _ansible_check_mode=check, _ansible_diff=True))
        gpu = result['gpus'][0]
        # Only the mode change runs (or would run); the instances wait for the reset, and say so.
        assert result['operations'] == gpu['operations'] == ['%s: enable MIG mode' % NAME0], check
        assert result['deferred'] == gpu['deferred'] == CREATIONS
        assert result['applied'] == ([] if check else ['%s: enable MIG mode' % NAME0])
        assert result['not_run'] == (result['operations'] + CREATIONS if check else CREATIONS)
        assert result['changed'] is True and gpu['changed'] is True
        assert gpu['layout_before'] == gpu['layout_after'] == 'disabled'
        assert gpu['layout_wanted'] == ['1g.10gb@3', '3g.40gb@4']  # the plan in words, and as data:
        assert gpu['mig_wanted'] == {'mig_mode': 'enabled', 'gpu_instances': [
            {'profile': '1g.10gb', 'placement_start': 3, 'compute_instances': [{'slice_count': 1}]},
            {'profile': '3g.40gb', 'placement_start': 4, 'compute_instances': [{'slice_count': 3}]}]}
        assert result['reset_required'] is True and gpu['reset_required'] is True
        assert result['reboot_required'] is True and [b for b in result['reset_blockers'] if b.startswith(named)]
        assert gpu['devices'] == []
        assert result['diff'] == {'before': 'GPU 0 %s: disabled\n' % GPU0, 'after': diff_after}
        if check:
            assert simctl.mutations(paths['state_file']) == 0
    assert gpu['mig_mode'] == 'disabled' and gpu['mig_mode_pending'] == 'enabled'
    # After the reset, the next run makes the deferred instances, and nothing is deferred any more.
    simctl.reset_gpu(paths['state_file'], GPU0)
    planned = run_module(mig, dict(args, _ansible_check_mode=True))
    assert planned['operations'] == CREATIONS and planned['deferred'] == [] and planned['reset_required'] is False
    done = run_module(mig, args)
    assert done['operations'] == CREATIONS and done['deferred'] == [] and done['not_run'] == []
    assert layout_of(done) == ['1g.10gb@3', '3g.40gb@4']


def test_a_reset_nvml_keeps_pending_unforeseen_defers_the_instances_in_a_real_run(run_module, host, tmp_path):
    # Nothing on the host is known to block a reset, so check mode plans the instances; NVML then leaves the mode
    # pending (the simulator's reset_blocked_by), and the real run reports what it learnt.
    host(mig_mode=0, reset_blocked_by=['something unknown'])
    roots, _named = blocked_trees(tmp_path, 'nvidia-persistenced')
    (tmp_path / 'proc' / '812' / 'comm').write_text('bash\n')
    (tmp_path / 'proc' / '812' / 'cmdline').write_text('bash\0')
    args = dict(TWO, **roots)
    planned = run_module(mig, dict(args, _ansible_check_mode=True))
    assert planned['operations'] == ['%s: enable MIG mode' % NAME0] + CREATIONS and planned['deferred'] == []
    result = run_module(mig, args)
    assert result['operations'] == result['applied'] == ['%s: enable MIG mode' % NAME0]
    assert result['deferred'] == result['not_run'] == CREATIONS
    assert result['reset_required'] is True and result['reboot_required'] is False and result['reset_blockers'] == []


def test_compute_processes_that_block_the_reset_defer_the_instances_in_check_mode_too(run_module, host, tmp_path):
    paths = host(mig_mode=0)
    roots, _named = blocked_trees(tmp_path)
    args = dict(TWO, force=True, **roots)
    run_module(mig, dict(args, layouts=[{'gpus': 0, 'layout': 'disabled'}]))  # the simulator's state starts on first use
    simctl.add_process(paths['state_file'], GPU0, 4242)
    planned = run_module(mig, dict(args, _ansible_check_mode=True))
    result = run_module(mig, args)
    for got in (planned, result):
        assert got['operations'] == ['%s: enable MIG mode' % NAME0] and got['deferred'] == CREATIONS
        assert got['reset_blockers'] == ['compute processes 4242 on %s (stop them during the reset)' % NAME0]


@pytest.mark.parametrize('model, name', [('H100-SXM5-80GB', 'NVIDIA H100 80GB HBM3'),
                                         ('A100-80GB-PCIe', 'NVIDIA A100 80GB PCIe')])
def test_a_mode_change_that_takes_effect_at_once_plans_and_makes_its_instances(run_module, host, tmp_path, model, name):
    """Hopper switches MIG mode without a reset, whatever is loaded; an Ampere GPU nothing blocks the reset of is
    reset by the driver there and then. Either way the instances are made in the same run."""
    paths = host(model, mig_mode=0)
    roots, _named = blocked_trees(tmp_path, 'nvidia_drm' if model.startswith('H100') else None)
    args = {'layouts': [{'gpus': 0, 'layout': ['3g.40gb']}]}
    args.update(roots)
    planned = run_module(mig, dict(args, _ansible_check_mode=True))
    gpu_name = 'GPU 0 (%s, %s)' % (GPU0, name)
    assert planned['operations'][0] == '%s: enable MIG mode' % gpu_name and len(planned['operations']) == 2
    assert 'create 3g.40gb' in planned['operations'][1] and planned['deferred'] == []
    assert planned['reset_required'] is False and simctl.mutations(paths['state_file']) == 0
    result = run_module(mig, args)
    assert result['operations'] == planned['operations'] and result['applied'][0] == planned['operations'][0]
    assert result['deferred'] == [] and result['not_run'] == [] and result['reset_required'] is False
    assert layout_of(result) == planned['gpus'][0]['layout_after']
