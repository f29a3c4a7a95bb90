# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""validate_role_vars in a real playbook: each role's argument spec read from the collection, every problem of every
role reported at once, templated defaults rendered as the role would render them, and bad arguments refused."""

from __future__ import absolute_import, division, print_function

import json
import os
import subprocess
import sys

from ...conftest import REPO

PLAYBOOK = r'''
- name: Check role variables
  hosts: localhost
  gather_facts: false
  tasks:
    - name: Good values, and a default that is a template (gpu_services_mps_daemons from mps_daemons)
      gpufleet.core.validate_role_vars:
        roles: [mig, mps, gpu_services, dcgm_exporter]
      vars:
        mig_layouts: [{gpus: all, layout: {1g.10gb: 7}}]
        mps_daemons: [{device: GPU-0, user: infer}]
        dcgm_exporter_management_cidrs: [10.20.0.0/24]
      register: good

    - name: Values the argument specs take but the roles' value rules refuse
      gpufleet.core.validate_role_vars:
        roles: [mps, dcgm_exporter]
      vars:
        mps_daemons: [{device: GPU-0, user: infer, default_active_thread_percentage: "50%"}]
        dcgm_exporter_management_cidrs: "10.20.0.0/24"
        dcgm_exporter_listen_port: "94000"
      register: values
      ignore_errors: true

    - name: Two roles with problems
      gpufleet.core.validate_role_vars:
        roles: [mig, gpu_services]
      vars:
        mig_reset_strategy: rest
        mig_force: maybe
        gpu_services_services: {name: llm}
      register: bad
      ignore_errors: true

    - name: A role that is not the collection's, and a path
      gpufleet.core.validate_role_vars:
        roles: [mig, nginx, ../mig]
      register: unknown
      ignore_errors: true

    - name: Roles given as a string
      gpufleet.core.validate_role_vars:
        roles: mig
        extra: 1
      register: wrong_kind
      ignore_errors: true

    - name: Keep what happened
      ansible.builtin.copy:
        content: "{{ {'good': good, 'bad': bad, 'values': values, 'unknown': unknown, 'wrong_kind': wrong_kind} | to_json }}"
        dest: "{{ out }}"
        mode: '0600'
'''


def test_problems_of_every_role_are_reported_at_once(tmp_path):
    (tmp_path / 'play.yml').write_text(PLAYBOOK)
    out = tmp_path / 'out.json'
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=os.path.join(REPO, 'build', 'collections'),
               ANSIBLE_LOCALHOST_WARNING='false', ANSIBLE_INVENTORY_UNPARSED_WARNING='false')
    ran = subprocess.run([os.path.join(os.path.dirname(sys.executable), 'ansible-playbook'), '-i', 'localhost,',
                          '-c', 'local', '-e', json.dumps({'out': str(out), 'ansible_python_interpreter': sys.executable}),
                          str(tmp_path / 'play.yml')], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                         universal_newlines=True, check=False, timeout=300)
    assert ran.returncode == 0, ran.stdout
    got = json.loads(out.read_text())

    assert not got['good'].get('failed') and got['good']['problems'] == {} and got['good']['changed'] is False
    assert got['good']['roles'] == ['mig', 'mps', 'gpu_services', 'dcgm_exporter']

    bad = got['bad']
    assert bad['failed'] and sorted(bad['problems']) == ['gpu_services', 'mig']
    mig = ' '.join(bad['problems']['mig'])
    assert 'mig_reset_strategy must be one of: reset, reboot, none, got: rest' in mig
    assert 'mig_force' in mig and 'bool' in mig
    assert 'gpu_services_services' in ' '.join(bad['problems']['gpu_services'])
    assert bad['msg'].startswith('role variables that would be refused: gpufleet.core.gpu_services: ')
    assert '(see ansible-doc -t role gpufleet.core.mig)' in bad['msg'] and bad['msg'].endswith('. Nothing was changed.')

    values = got['values']
    assert values['failed'] and sorted(values['problems']) == ['dcgm_exporter', 'mps']
    mps = ' '.join(values['problems']['mps'])
    assert 'mps_daemons[0].default_active_thread_percentage is the string "50%"' in mps and "not '50%'" in mps
    dcgm = ' '.join(values['problems']['dcgm_exporter'])
    assert "dcgm_exporter_management_cidrs is the string '10.20.0.0/24'" in dcgm
    assert 'dcgm_exporter_listen_port is the string "94000"' in dcgm and '1 to 65535' in dcgm
    assert '(see ansible-doc -t role gpufleet.core.mps)' in values['msg']

    assert got['unknown']['failed']
    assert got['unknown']['msg'].startswith('gpufleet.core.validate_role_vars: nginx, ../mig are not a role of '
                                            'gpufleet.core with an argument spec (those are: ')
    assert 'gpu_services' in got['unknown']['msg']
    assert got['wrong_kind']['failed']
    assert got['wrong_kind']['msg'] == 'gpufleet.core.validate_role_vars: unsupported parameter extra (it takes roles)'
