# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""The gpufleet.core.helper_bundle action in a real play on localhost: check mode, idempotence, refusals."""

from __future__ import absolute_import, division, print_function

import json
import os
import subprocess
import sys
import zipfile

from ansible_collections.gpufleet.core.plugins.plugin_utils._helper_bundle import build, bundle_name, collection_version

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), '..', '..', '..'))
PLAY = '''
- hosts: localhost
  gather_facts: false
  tasks:
    - {name: check mode, gpufleet.core.helper_bundle: {directory: "%(dir)s"}, check_mode: true, register: checked}
    - {name: install, gpufleet.core.helper_bundle: {directory: "%(dir)s", mode: "0640"}, register: installed}
    - {name: again, gpufleet.core.helper_bundle: {directory: "%(dir)s", mode: "0640"}, register: again}
    - {name: refused, gpufleet.core.helper_bundle: {directory: "%(dir)s", bogus: 1}, register: refused, ignore_errors: true}
    - name: results
      ansible.builtin.copy:
        dest: "%(dir)s/results.json"
        content: "{{ {'checked': checked, 'installed': installed, 'again': again, 'refused': refused} | to_json }}"
'''


def run_play(tmp_path):
    """ansible-playbook on tmp_path/play.yml against localhost, with this checkout's collection."""
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=os.path.join(REPO, 'build', 'collections'),
               ANSIBLE_LOCALHOST_WARNING='0', ANSIBLE_NOCOLOR='1', ANSIBLE_LOCAL_TEMP=str(tmp_path / 'tmp'))
    return subprocess.run([os.path.join(os.path.dirname(sys.executable), 'ansible-playbook'), '-i', 'localhost,',
                           '-c', 'local', '-e', 'ansible_python_interpreter=' + sys.executable,
                           str(tmp_path / 'play.yml')],
                          env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True,
                          check=False)


def test_the_action_installs_the_bundle_once(tmp_path):
    target = tmp_path / 'lib'
    target.mkdir()
    (tmp_path / 'play.yml').write_text(PLAY % {'dir': target})
    play = run_play(tmp_path)
    assert play.returncode == 0, play.stdout
    results = json.loads((target / 'results.json').read_text())
    version = collection_version()
    path = str(target / bundle_name(version))
    assert results['checked']['changed'] is True
    assert results['installed']['changed'] is True and results['installed']['bundle'] == path
    assert results['again']['changed'] is False and results['again']['version'] == version
    assert '_helpers_main.py' in results['installed']['modules']
    assert 'Unsupported parameters' in results['refused']['msg'] and 'bogus' in results['refused']['msg']
    with open(path, 'rb') as handle:
        assert handle.read() == build(version)[0]
    assert oct(os.stat(path).st_mode & 0o777) == oct(0o640)
    assert sorted(os.listdir(str(target))) == sorted([bundle_name(version), 'results.json'])
    assert zipfile.is_zipfile(path)


TWO_ROLES = '''
- hosts: localhost
  gather_facts: false
  tasks:
    - name: the first role of a run that includes it
      ansible.builtin.include_role: {name: gpufleet.core.host_helpers}
      vars: {host_helpers_install_dir: "%(dir)s", host_helpers_retire: [gpufleet-mig-apply]}
    - name: a later role of the same run
      ansible.builtin.include_role: {name: gpufleet.core.host_helpers}
      vars: {host_helpers_install_dir: "%(dir)s", host_helpers_retire: [gpufleet-compute-mode]}
'''


def test_a_run_installs_the_bundle_once_however_many_roles_include_it(tmp_path):
    # Each role still retires its own earlier scripts; the bundle, its link and the cleanup of other versions run once.
    target = tmp_path / 'lib'
    target.mkdir()
    for name in ('gpufleet-mig-apply', 'gpufleet-compute-mode', bundle_name('0.0.1')):
        (target / name).write_text('# left by an earlier release\n')
    (tmp_path / 'play.yml').write_text(TWO_ROLES % {'dir': target})
    play = run_play(tmp_path)
    assert play.returncode == 0, play.stdout
    blocks = play.stdout.split('TASK [gpufleet.core.host_helpers : Install the helper bundle of this collection version]')
    outcomes = [block.split('\n', 1)[1].strip().split(':', 1)[0] for block in blocks[1:]]
    assert outcomes == ['changed', 'skipping'], play.stdout
    bundle = bundle_name(collection_version())
    assert sorted(os.listdir(str(target))) == sorted([bundle, 'gpufleet-helpers.pyz'])
    assert os.readlink(str(target / 'gpufleet-helpers.pyz')) == bundle
