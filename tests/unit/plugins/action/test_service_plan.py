# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""The service_plan action in a real playbook: the same plan and units as the two filters it replaces in the
gpu_services role, the fact read from the host's facts, the previous plan as the JSON text read back, and every
refusal a failed task that names the fix."""

from __future__ import absolute_import, division, print_function

import json
import os
import subprocess
import sys

from ...conftest import REPO, SIM_DIR

SERVICES = [
    {'name': 'llm', 'gpus': 2, 'cpus': 8, 'command': '/opt/llm/serve'},
    {'name': 'sdxl', 'gpus': 1, 'cpus': 4, 'mode': 'container', 'image': 'registry.example/sdxl:1'},
    {'name': 'batch', 'gpus': 0, 'cpus': 2, 'command': '/opt/batch/run', 'user': 'batch'},
]

PLAYBOOK = r'''
- name: Plan with the action and with the filters, and try what it refuses
  hosts: localhost
  gather_facts: false
  tasks:
    - name: No fact yet
      gpufleet.core.service_plan:
        services: "{{ services }}"
      register: without_fact
      ignore_errors: true

    - name: Gather the topology
      gpufleet.core.topology_facts:
        sysfs_root: "{{ roots.sysfs_root }}"
        procfs_root: "{{ roots.procfs_root }}"

    - name: Plan with the action
      gpufleet.core.service_plan:
        services: "{{ services }}"
        reserved_cpus: "0,32"
        container_runtime: docker
      register: planned

    - name: Plan with the filters
      ansible.builtin.set_fact:
        by_filters: >-
          {{ ansible_facts['gpufleet_topology'] | gpufleet.core.place_services(services, reserved_cpus='0,32')
             | gpufleet.core.service_units(services, container_runtime='docker') }}
        by_filters_placements: "{{ ansible_facts['gpufleet_topology'] | gpufleet.core.place_services(services, reserved_cpus='0,32') }}"

    - name: Plan again without the first service, from the plan read back as text
      gpufleet.core.service_plan:
        services: "{{ services[1:] }}"
        previous: "{{ planned.plan_json }}"
        container_runtime: docker
      register: replanned

    - name: Write the plan as the role does ("| string" for ansible-core 2.16), and as the role did before this action
      ansible.builtin.copy:
        content: "{{ item.content }}"
        dest: "{{ out }}.{{ item.name }}"
        mode: '0600'
      loop:
        - {name: action, content: "{{ planned.plan_json | string }}\n"}
        - {name: filters, content: "{{ by_filters.plan | to_nice_json(indent=2) }}\n"}
      loop_control:
        label: "{{ item.name }}"

    - name: Too many GPUs
      gpufleet.core.service_plan:
        services: [{name: big, gpus: 5, command: /bin/true}]
      register: too_many
      ignore_errors: true

    - name: A previous plan that is not JSON
      gpufleet.core.service_plan:
        services: "{{ services }}"
        previous: "{not json"
      register: not_json
      ignore_errors: true

    - name: Arguments of the wrong kind, and one it does not take
      gpufleet.core.service_plan:
        services: llm
        unit_prefix: [a]
        bogus: 1
      register: bad_arguments
      ignore_errors: true

    - name: Keep what happened
      ansible.builtin.copy:
        content: "{{ {'without_fact': without_fact, 'planned': planned, 'by_filters': by_filters,
                      'by_filters_placements': by_filters_placements, 'replanned': replanned,
                      'too_many': too_many, 'not_json': not_json, 'bad_arguments': bad_arguments} | to_json }}"
        dest: "{{ out }}"
        mode: '0600'
'''


def test_the_action_plans_as_the_filters_do(sim_host, tmp_path):
    roots = sim_host('reference-a100')
    (tmp_path / 'play.yml').write_text(PLAYBOOK)
    out = tmp_path / 'out.json'
    extra = {'services': SERVICES, 'out': str(out), 'ansible_python_interpreter': sys.executable,
             'roots': {'sysfs_root': roots['sysfs_root'], 'procfs_root': roots['procfs_root']}}
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=os.path.join(REPO, 'build', 'collections'), PYTHONPATH=SIM_DIR,
               ANSIBLE_LOCALHOST_WARNING='false', ANSIBLE_INVENTORY_UNPARSED_WARNING='false')
    ran = subprocess.run([os.path.join(os.path.dirname(sys.executable), 'ansible-playbook'), '-i', 'localhost,',
                          '-c', 'local', '-e', json.dumps(extra), str(tmp_path / 'play.yml')],
                         env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True,
                         check=False, timeout=300)
    assert ran.returncode == 0, ran.stdout
    got = json.loads(out.read_text())

    assert got['without_fact']['failed']
    assert 'no gpufleet_topology fact: run gpufleet.core.topology_facts first' in got['without_fact']['msg']

    planned = got['planned']
    assert planned['changed'] is False and not planned.get('failed')
    assert 'placements' not in planned  # each unit holds its own; the plan document holds them all
    assert [unit['plan'] for unit in planned['units']] == got['by_filters_placements']
    # Beyond the filters' units: each unit's devices as the device map names them (whole GPUs by UUID here) and its
    # placement sentence for the unit file; the map and the runtime files the role writes.
    added = [dict((key, unit.pop(key)) for key in ('devices', 'placement')) for unit in planned['units']]
    assert planned['units'] == got['by_filters']['units']
    assert [entry['devices'] for entry in added] == [unit['plan']['gpus'] for unit in planned['units']]
    assert [entry['placement'] for entry in added] == [unit['plan']['explanation'] for unit in planned['units']]
    device_map = json.loads(planned['device_map_json'])
    assert device_map == {'version': 1, 'units': dict(
        (unit['unit'], {'devices': unit['plan']['gpus'], 'container': unit['mode'] == 'container'})
        for unit in planned['units'])}
    for unit in planned['units']:
        assert 'CUDA_VISIBLE_DEVICES=%s\n' % ','.join(unit['plan']['gpus']) in planned['runtime_files'][unit['unit']]
        assert ('CDI_DEVICES=' in planned['runtime_files'][unit['unit']]) == (unit['mode'] == 'container')
    assert json.loads(planned['plan_json']) == got['by_filters']['plan']
    # The plan file is byte for byte what the role wrote before it planned with this action: no change on upgrade.
    written = (tmp_path / 'out.json.action').read_bytes()
    assert written == (tmp_path / 'out.json.filters').read_bytes() and written.endswith(b'}\n')
    llm, sdxl, batch = [unit['plan'] for unit in planned['units']]
    # The reference host: GPU0/1 on node 0, GPU2/3 on node 1; CPU 0 and 32 reserved.
    assert (llm['numa_node'], len(llm['gpus']), llm['cpulist']) == (0, 2, '1-8')
    assert sdxl['numa_node'] == 1 and sdxl['cpulist'] == '33-36'
    assert json.loads(planned['plan_json'])['services'][1]['container_runtime'] == 'docker'
    assert [u['user'] for u in planned['units']] == ['gpufleet-llm', 'gpufleet-sdxl', 'batch']

    # Removing llm moves nobody else.
    assert [unit['plan'] for unit in got['replanned']['units']] == [sdxl, batch]

    assert got['too_many']['failed']
    assert got['too_many']['msg'].startswith('gpufleet.core.service_plan: The services cannot be placed: service big:')
    assert 'needs 5 whole GPUs' in got['too_many']['msg']
    assert got['not_json']['failed']
    assert 'the previous plan is not JSON' in got['not_json']['msg'] and 'remove it' in got['not_json']['msg']
    bad = got['bad_arguments']
    assert bad['failed'] and bad['msg'] == (
        'gpufleet.core.service_plan: unsupported parameter bogus (it takes container_runtime, mps_daemons, previous, '
        'reserved_cpus, services, topology, unit_prefix, user_prefix); services must be the list of service specs, '
        'got a string; unit_prefix must be a string, got a list')
