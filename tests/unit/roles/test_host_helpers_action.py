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


def test_the_action_installs_the_bundle_once(tmp_path):
    target = tmp_path / 'lib'
    target.mkdir()
    (tmp_path / 'play.yml').write_text(PLAY % {'dir': target})
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=os.path.join(REPO, 'build', 'collections'),
               ANSIBLE_LOCALHOST_WARNING='0', ANSIBLE_NOCOLOR='1', ANSIBLE_LOCAL_TEMP=str(tmp_path / 'tmp'))
    play = subprocess.run([os.path.join(os.path.dirname(sys.executable), 'ansible-playbook'), '-i', 'localhost,',
                           '-c', 'local', '-e', 'ansible_python_interpreter=' + sys.executable,
                           str(tmp_path / 'play.yml')],
                          env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True,
                          check=False)
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
