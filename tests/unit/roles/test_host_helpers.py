# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""The units of the mig and mps roles run the bundle the host_helpers role installs, by its stable path."""

from __future__ import absolute_import, division, print_function

import fnmatch

from ansible_collections.gpufleet.core.plugins.module_utils._helpers_main import COMMANDS
from ansible_collections.gpufleet.core.plugins.module_utils._mps import plan as mps_plan
from ansible_collections.gpufleet.core.plugins.plugin_utils._helper_bundle import bundle_name

from ..support.topology import gpu, node, topology
from .conftest import role_yaml

GPU0 = 'GPU-5c6f7a2e-1b3d-4e8f-9a0b-1c2d3e4f5a60'


def exec_lines(text, key):
    return [line.split('=', 1)[1] for line in text.splitlines() if line.startswith(key + '=')]


def test_the_roles_name_the_stable_path_the_host_helpers_role_keeps(render):
    link = render('host_helpers').value('host_helpers_install_dir ~ "/" ~ _host_helpers_link_name')
    assert link == '/usr/local/lib/gpufleet/gpufleet-helpers.pyz'
    assert render('mig').value('_mig_helpers') == link
    assert render('mps').value('_mps_helpers') == link
    assert render('mig', mig_install_dir='/opt/g').value('_mig_helpers') == '/opt/g/gpufleet-helpers.pyz'


def test_the_boot_unit_runs_mig_apply_from_the_bundle(render):
    unit = render('mig').template('gpufleet-mig.service.j2')
    assert exec_lines(unit, 'ExecStart') == [
        '/usr/bin/python3 /usr/local/lib/gpufleet/gpufleet-helpers.pyz mig-apply /etc/gpufleet/mig-layout.json']
    assert 'mig-apply' in COMMANDS


def test_a_whole_gpu_daemon_sets_its_compute_mode_with_the_bundle_and_its_defaults_at_each_start(render):
    declared = [{'device': GPU0, 'user': 'infer', 'group': 'video', 'default_active_thread_percentage': 50,
                 'default_pinned_mem_limit': '20G'}]
    daemon = mps_plan(topology([node(0, range(4))], [gpu(0, GPU0, bus='17')]), declared)[0]
    dropin = render('mps', item=daemon, mps_daemons=declared).template('dropin.conf.j2')
    assert exec_lines(dropin, 'ExecStartPre') == [
        '+/usr/bin/python3 /usr/local/lib/gpufleet/gpufleet-helpers.pyz compute-mode %s exclusive_process' % GPU0]
    assert 'compute-mode' in COMMANDS
    assert exec_lines(dropin, 'Group') == ['video']
    # The SM share and the pinned-memory cap, in the forms nvidia-cuda-mps-control takes (_mps.control_commands).
    assert exec_lines(dropin, 'ExecStartPost') == [
        "/bin/sh -c 'echo set_default_active_thread_percentage 50 | /usr/bin/nvidia-cuda-mps-control'",
        "/bin/sh -c 'echo set_default_device_pinned_mem_limit 0 20G | /usr/bin/nvidia-cuda-mps-control'"]


def test_the_cleanup_finds_every_versioned_bundle_and_never_the_stable_path():
    tasks = role_yaml('host_helpers', 'tasks/install.yml')
    patterns = [task['ansible.builtin.find']['patterns'] for task in tasks if 'ansible.builtin.find' in task][0]
    link = role_yaml('host_helpers', 'vars/main.yml')['_host_helpers_link_name']
    assert [pattern for pattern in patterns if fnmatch.fnmatch(bundle_name('0.1.0'), pattern)]
    assert [pattern for pattern in patterns if fnmatch.fnmatch(bundle_name('10.2.0-rc.1'), pattern)]
    assert not [pattern for pattern in patterns if fnmatch.fnmatch(link, pattern)]


def test_the_roles_no_longer_ship_their_own_copies():
    legacy = role_yaml('host_helpers', 'vars/main.yml')['_host_helpers_legacy_scripts']
    assert legacy == ['gpufleet-mig-apply', 'gpufleet-compute-mode']
    for role, script in (('mig', 'gpufleet-mig-apply'), ('mps', 'gpufleet-compute-mode')):
        internal = role_yaml(role, 'vars/main.yml')
        assert not [name for name in internal if name.endswith('_modules')]
        includes = [task for task in role_yaml(role, 'tasks/install.yml') if 'ansible.builtin.include_role' in task]
        assert [task['ansible.builtin.include_role']['name'] for task in includes] == ['gpufleet.core.host_helpers']
        # Each role retires only its own script: the other role's units run theirs until that role runs too.
        assert includes[0]['vars']['host_helpers_retire'] == [script]


def test_the_old_module_utils_copy_goes_only_once_no_old_script_is_left():
    tasks = role_yaml('host_helpers', 'tasks/retire.yml')
    removal = [task for task in tasks if task.get('ansible.builtin.file', {}).get('path', '').endswith('/python')]
    assert len(removal) == 1
    assert "selectattr('stat.exists')" in removal[0]['when'] and 'length == 0' in removal[0]['when']
    looked_up = [task for task in tasks if 'ansible.builtin.stat' in task]
    assert looked_up[0]['loop'] == '{{ _host_helpers_legacy_scripts }}'
