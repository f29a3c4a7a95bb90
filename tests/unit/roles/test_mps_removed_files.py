# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""The mps role removes exactly the settings file and the unit drop-in of each daemon no longer declared.

The paths are built by joining strings; this renders the task's own loop with Ansible's Templar, as the play does.
"""

from __future__ import absolute_import, division, print_function

from .conftest import role_yaml, trust_as_template

REMOVE_TASK = 'Remove the settings of the daemons that are no longer declared'


def removed_paths(render, removed, **overrides):
    task = [t for t in role_yaml('mps', 'tasks/run.yml') if t.get('name') == REMOVE_TASK][0]
    role = render('mps', _mps_removed=removed, **overrides)
    return role.templar.template(trust_as_template(task['loop']))


def test_each_removed_daemon_loses_its_settings_file_and_drop_in(render):
    removed = ['GPU-5b4a3c2d-0000-4000-8000-000000000002', 'MIG-0a1b2c3d-0000-4000-8000-000000000007']
    assert removed_paths(render, removed, mps_config_dir='/etc/gpufleet/mps') == [
        '/etc/gpufleet/mps/GPU-5b4a3c2d-0000-4000-8000-000000000002.env',
        '/etc/gpufleet/mps/MIG-0a1b2c3d-0000-4000-8000-000000000007.env',
        '/etc/systemd/system/gpufleet-mps@GPU-5b4a3c2d-0000-4000-8000-000000000002.service.d',
        '/etc/systemd/system/gpufleet-mps@MIG-0a1b2c3d-0000-4000-8000-000000000007.service.d',
    ]


def test_nothing_removed_removes_nothing(render):
    assert removed_paths(render, []) == []
