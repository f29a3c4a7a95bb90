# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""The state_receipt action in a real playbook: a stage given by its roles is digested on the controller from the
roles' variables (defaults filled in), a record reuses the check's digest, a changed variable makes the stage not
current while the default given explicitly does not, skippable follows the order, absent forgets a receipt, and bad
roles are refused before the host is read."""

from __future__ import absolute_import, division, print_function

import json
import os
import subprocess
import sys

from ...conftest import REPO

PLAYBOOK = r'''
- name: Receipts of a stage given by its roles
  hosts: localhost
  gather_facts: false
  vars:
    owns: {files: ["{{ owned }}"]}
  tasks:
    - name: No receipt yet
      gpufleet.core.state_receipt:
        receipt_dir: "{{ receipts }}"
        order: [partition, services]
        stages: {partition: {roles: [mig]}, services: {inputs: {services: [llm]}, owns: "{{ owns }}"}}
      register: first

    - name: Record with the check's digest
      gpufleet.core.state_receipt:
        state: record
        receipt_dir: "{{ receipts }}"
        stages:
          partition: {roles_digest: "{{ first.roles_digests.partition }}", owns: "{{ owns }}"}
          services: {inputs: {services: [llm]}, owns: ["{{ owns }}", "{{ owns }}"]}
      register: recorded

    - name: Check again
      gpufleet.core.state_receipt:
        receipt_dir: "{{ receipts }}"
        order: [partition, services]
        stages: {partition: {roles: [mig]}, services: {inputs: {services: [llm]}}}
      register: again

    - name: The default given explicitly
      gpufleet.core.state_receipt:
        receipt_dir: "{{ receipts }}"
        stages: {partition: {roles: [mig]}}
      vars:
        mig_reset_strategy: "{{ default_strategy }}"
      register: explicit

    - name: A variable of the role changed
      gpufleet.core.state_receipt:
        receipt_dir: "{{ receipts }}"
        order: [partition, services]
        stages: {partition: {roles: [mig]}, services: {inputs: {services: [llm]}}}
      vars:
        mig_layouts: [{gpus: all, layout: [3g.40gb, 3g.40gb]}]
      register: changed_var

    - name: Not a role of the collection
      gpufleet.core.state_receipt:
        receipt_dir: "{{ receipts }}"
        stages: {partition: {roles: [mig, nginx]}}
      register: unknown
      ignore_errors: true

    - name: Both roles and a digest, and a digest that is not one
      gpufleet.core.state_receipt:
        state: record
        receipt_dir: "{{ receipts }}"
        stages:
          partition: {roles: [mig], roles_digest: "{{ first.roles_digests.partition }}", owns: "{{ owns }}"}
          services: {roles_digest: "abc", owns: "{{ owns }}"}
      register: both
      ignore_errors: true

    - name: Forget the partition stage
      gpufleet.core.state_receipt:
        state: absent
        receipt_dir: "{{ receipts }}"
        stages: {partition: {}}
      register: forgotten

    - name: Check after forgetting
      gpufleet.core.state_receipt:
        receipt_dir: "{{ receipts }}"
        order: [partition, services]
        stages: {partition: {roles: [mig]}, services: {inputs: {services: [llm]}}}
      register: after

    - name: Keep what happened
      ansible.builtin.copy:
        content: "{{ {'first': first, 'recorded': recorded, 'again': again, 'explicit': explicit,
                      'changed_var': changed_var, 'unknown': unknown, 'both': both, 'forgotten': forgotten,
                      'after': after} | to_json }}"
        dest: "{{ out }}"
        mode: '0600'
'''


def test_a_stage_given_by_its_roles_is_digested_on_the_controller(tmp_path):
    (tmp_path / 'play.yml').write_text(PLAYBOOK)
    owned = tmp_path / 'owned.conf'
    owned.write_text('x = 1\n')
    out = tmp_path / 'out.json'
    extra = {'out': str(out), 'receipts': str(tmp_path / 'receipts'), 'owned': str(owned),
             'default_strategy': 'reset', 'ansible_python_interpreter': sys.executable}
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=os.path.join(REPO, 'build', 'collections'),
               ANSIBLE_LOCALHOST_WARNING='false', ANSIBLE_INVENTORY_UNPARSED_WARNING='false')
    ran = subprocess.run([os.path.join(os.path.dirname(sys.executable), 'ansible-playbook'), '-i', 'localhost,',
                          '-c', 'local', '-e', json.dumps(extra), str(tmp_path / 'play.yml')], env=env,
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True, check=False,
                         timeout=300)
    assert ran.returncode == 0, ran.stdout
    got = json.loads(out.read_text())
    digest = got['first']['roles_digests']['partition']
    assert len(digest) == 64 and got['first']['skippable'] == []
    assert got['first']['stages']['partition']['current'] is False
    assert got['recorded']['changed'] is True
    receipt = json.loads((tmp_path / 'receipts' / 'services.json').read_text())
    assert receipt['owns'] == {'files': [str(owned)]}  # the two roles' owns joined, without repeats
    assert got['again']['roles_digests']['partition'] == digest
    assert got['again']['current'] == ['partition', 'services']
    assert got['again']['skippable'] == ['partition', 'services']
    assert got['explicit']['current'] == ['partition']
    assert got['changed_var']['roles_digests']['partition'] != digest
    assert got['changed_var']['stages']['partition']['inputs_changed'] is True
    # services is current itself, but comes after a stage that will run.
    assert got['changed_var']['current'] == ['services'] and got['changed_var']['skippable'] == []
    assert got['unknown']['failed'] and 'nginx not a role of gpufleet.core' in got['unknown']['msg']
    assert got['both']['failed'] and 'give roles or roles_digest, not both' in got['both']['msg']
    assert "'abc' is not a digest" in got['both']['msg']
    assert got['forgotten']['changed'] is True
    assert not (tmp_path / 'receipts' / 'partition.json').exists()
    assert got['after']['skippable'] == [] and got['after']['current'] == ['services']
