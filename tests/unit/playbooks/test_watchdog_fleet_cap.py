# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""The site playbook's fleet cap for the watchdog: gpufleet_watchdog_max_quarantined as a number of hosts, and the
Prometheus that counts them, as the rollout's watchdog stage hands them to gpu_watchdog (roles/gpufleet/vars)."""

from __future__ import absolute_import, division, print_function

import glob
import json
import os
import subprocess
import sys

from ..conftest import REPO

INVENTORY = {'all': {'children': {
    'gpu_hosts': {'hosts': dict(('g%d' % n, {}) for n in range(1, 5))},
    'cpu_only': {'hosts': {'c1': {'gpufleet_management_address': '10.30.3.41'},
                           'c2': {'gpufleet_management_address': 'fd00:30::41'}}},
    'monitoring': {'hosts': {'c1': {}}},
    'monitoring6': {'hosts': {'c2': {}}}}}}
# Each case: the site variables it sets, and what the watchdog stage must hand over.
CASES = [
    ({'gpufleet_watchdog_max_quarantined': '10%'}, 1, 'http://10.30.3.41:9090'),  # 0.4 host rounds up
    ({'gpufleet_watchdog_max_quarantined': '50%'}, 2, 'http://10.30.3.41:9090'),
    ({'gpufleet_watchdog_max_quarantined': '100%'}, 4, 'http://10.30.3.41:9090'),
    ({'gpufleet_watchdog_max_quarantined': 3}, 3, 'http://10.30.3.41:9090'),
    ({'gpufleet_watchdog_max_quarantined': '0%'}, 0, 'http://10.30.3.41:9090'),
    ({'gpufleet_watchdog_max_quarantined': 0}, 0, 'http://10.30.3.41:9090'),
    ({'gpufleet_monitoring_group': 'monitoring6'}, 1, 'http://[fd00:30::41]:9090'),
    ({'gpufleet_watchdog_prometheus_url': 'https://prom.hk1:9443'}, 1, 'https://prom.hk1:9443'),
    ({'gpufleet_monitoring_enabled': False}, 1, ''),
    ({'gpufleet_monitoring_group': 'nowhere'}, 1, ''),
]
PLAYBOOK = r'''
- name: What the watchdog stage hands to gpu_watchdog, case by case
  hosts: g1
  gather_facts: false
  tasks:
    - name: Load the site role's variables
      ansible.builtin.import_role:
        name: gpufleet.core.gpufleet
        tasks_from: stage_failed.yml
      when: false

    - name: Evaluate each case
      ansible.builtin.set_fact:
        handed: "{{ handed | default([]) + [{'cap': _gpufleet_watchdog_cap | int, 'url': _gpufleet_watchdog_prometheus_url}] }}"
      vars:
        gpufleet_watchdog_max_quarantined: "{{ item.gpufleet_watchdog_max_quarantined | default('10%') }}"
        gpufleet_watchdog_prometheus_url: "{{ item.gpufleet_watchdog_prometheus_url | default('') }}"
        gpufleet_monitoring_enabled: "{{ item.gpufleet_monitoring_enabled | default(true) }}"
        gpufleet_monitoring_group: "{{ item.gpufleet_monitoring_group | default('monitoring') }}"
      loop: "{{ cases }}"

    - name: Write them
      ansible.builtin.copy:
        content: "{{ handed | to_json }}"
        dest: "{{ out }}"
        mode: "0644"
      delegate_to: localhost
'''


def test_the_cap_is_a_count_or_a_share_of_the_gpu_hosts_and_the_prometheus_the_monitoring_hosts(tmp_path):
    (tmp_path / 'hosts.json').write_text(json.dumps(INVENTORY))
    (tmp_path / 'play.yml').write_text(PLAYBOOK)
    bundled = glob.glob(os.path.join(REPO, '.venv', 'lib', 'python3*', 'site-packages'))  # ansible.utils
    env = dict(os.environ, ANSIBLE_LOCALHOST_WARNING='false', ANSIBLE_NOCOLOR='1',
               ANSIBLE_COLLECTIONS_PATH=os.pathsep.join([os.path.join(REPO, 'build', 'collections')] + bundled))
    out = tmp_path / 'out.json'
    ran = subprocess.run([os.path.join(os.path.dirname(sys.executable), 'ansible-playbook'), '-i',
                          str(tmp_path / 'hosts.json'), '-c', 'local', '-e',
                          json.dumps({'out': str(out), 'cases': [case[0] for case in CASES]}),
                          str(tmp_path / 'play.yml')],
                         env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True,
                         check=False, timeout=300)
    assert ran.returncode == 0, ran.stdout[-4000:]
    assert json.loads(out.read_text()) == [{'cap': cap, 'url': url} for _set, cap, url in CASES]
