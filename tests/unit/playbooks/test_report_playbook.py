# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""The report stage as the site playbook runs it (after validate and preflight, on simulated hosts on this machine),
with and without --limit: a limit that leaves localhost out must not stop the report, and the fleet's other hosts
stay on the page."""

from __future__ import absolute_import, division, print_function

import glob
import json
import os
import re
import subprocess
import sys

from ..conftest import REPO
from .test_site_stages import HOSTS, fleet

PLAYBOOK = r'''
- name: Validate
  ansible.builtin.import_playbook: gpufleet.core.fleet.validate

- name: Preflight
  ansible.builtin.import_playbook: gpufleet.core.fleet.preflight

- name: Report
  ansible.builtin.import_playbook: gpufleet.core.report
'''


def run(tmp_path, inventory, reports, limit=None):
    (tmp_path / 'play.yml').write_text(PLAYBOOK)
    bundled = glob.glob(os.path.join(REPO, '.venv', 'lib', 'python3*', 'site-packages'))
    env = dict(os.environ, ANSIBLE_LOCALHOST_WARNING='false', ANSIBLE_FORCE_COLOR='0', ANSIBLE_NOCOLOR='1',
               ANSIBLE_COLLECTIONS_PATH=os.pathsep.join([os.path.join(REPO, 'build', 'collections')] + bundled))
    command = [os.path.join(os.path.dirname(sys.executable), 'ansible-playbook'), '-i', inventory,
               '-e', json.dumps({'gpufleet_report_dir': str(reports)}), str(tmp_path / 'play.yml')]
    if limit:
        command += ['--limit', limit]
    return subprocess.run(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True,
                          check=False, timeout=600)


def test_the_report_stage_writes_the_page_and_a_limited_run_keeps_the_other_hosts(tmp_path):
    inventory, reports = fleet(tmp_path), tmp_path / 'reports'
    ran = run(tmp_path, inventory, reports)
    assert ran.returncode == 0, ran.stdout[-6000:]
    page = str(reports / 'fleet-report.html')
    assert re.search(r'Fleet report: %s \(written; 3 host\(s\); 0 change\(s\) since the previous report: there is no previous '
                     r'report' % re.escape(page), ran.stdout), ran.stdout[-3000:]
    data = json.loads((reports / 'fleet-report.json').read_text())
    assert sorted(host['name'] for host in data['hosts']) == sorted(HOSTS)
    # Preflight gathered the topology: every host is drawn with its GPUs (the simulator's), none is "not in this run".
    gpus = dict((host['name'], len(host['topology']['gpus'])) for host in data['hosts'])
    assert gpus == {'hk1-a100-01': 4, 'hk1-a100-02': 4, 'hk2-cpu-01': 0}
    # Each host's class is its hardware-class group: monitoring_class_groups is empty, so gpufleet_class_groups.
    classes = dict((host['name'], host['class']) for host in data['hosts'])
    assert classes == {'hk1-a100-01': 'a100_pcie_4x', 'hk1-a100-02': 'a100_pcie_4x', 'hk2-cpu-01': 'cpu_only'}
    assert data['summary']['not_in_run'] == []

    limited = run(tmp_path, inventory, reports, limit='hk1-a100-01')
    assert limited.returncode == 0, limited.stdout[-6000:]
    assert re.search(r'Fleet report: %s \(written; 3 host\(s\); not in this run: hk1-a100-02, hk2-cpu-01; 0 change\(s\)'
                     % re.escape(page), limited.stdout), limited.stdout[-3000:]
    data = json.loads((reports / 'fleet-report.json').read_text())
    assert sorted(host['name'] for host in data['hosts']) == sorted(HOSTS)
    assert [item['host'] for item in data['summary']['not_in_run']] == ['hk1-a100-02', 'hk2-cpu-01']
    # The same run again finds the report as it is, writes nothing, and counts no change for the host it ran for.
    again = run(tmp_path, inventory, reports, limit='hk1-a100-01')
    assert again.returncode == 0, again.stdout[-6000:]
    assert 'Fleet report: %s (unchanged; 3 host(s); not in this run: ' % page in again.stdout, again.stdout[-3000:]
    assert re.search(r'TASK \[Write the report[^\n]*\n(?:[^\n]*\n)?ok: \[hk1-a100-01 -> localhost\]', again.stdout), \
        again.stdout[-3000:]
