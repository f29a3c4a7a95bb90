# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""gpufleet.core.health_gate in a real playbook, against a stand-in Prometheus on 127.0.0.1: the batch read from
hostvars, a firing alert and a failed canary stop it, no Prometheus is "not checked" unless required."""

from __future__ import absolute_import, division, print_function

import json
import os
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer
from urllib.parse import parse_qs, urlsplit

import pytest

from ...conftest import REPO

PLAYBOOK = r'''
- name: A batch of two (h1, h2) after the canary h0; h2 failed
  hosts: h0,h1,h2,h3
  gather_facts: false
  tasks:
    - name: Enter a stage
      ansible.builtin.set_fact:
        _gpufleet_stage: drivers
      when: inventory_hostname != 'h3'

    - name: Fail h2 in a stage
      ansible.builtin.set_fact:
        _gpufleet_failure: {stage: drivers, task: x, reason: y}
      when: inventory_hostname == 'h2'

    - name: The gate with an alert firing for h1
      gpufleet.core.health_gate:
        prometheus_url: "{{ prometheus }}"
        rollout_hosts: [h0, h1, h2, h3]
        canary: [h0]
        gated: [{batch: 1, hosts: [h0]}]
        soak: 0
      register: firing
      run_once: true
      delegate_to: localhost
      ignore_errors: true

    - name: Every host that entered, no alert (the canary is not the whole batch, so it is no canary batch)
      gpufleet.core.health_gate:
        prometheus_url: "{{ quiet }}"
        rollout_hosts: [h0, h1, h2, h3]
        canary: [h0]
        soak: 1
      register: canary
      run_once: true
      delegate_to: localhost

    - name: A canary with a failed host
      gpufleet.core.health_gate:
        rollout_hosts: [h0, h1, h2, h3]
        canary: [h0, h1, h2]
        gated: [{batch: 1, hosts: [h0]}]
      register: failed_canary
      run_once: true
      delegate_to: localhost
      ignore_errors: true

    - name: No Prometheus
      gpufleet.core.health_gate:
        rollout_hosts: [h0, h1, h2, h3]
      register: unchecked
      run_once: true
      delegate_to: localhost

    - name: No Prometheus, but required
      gpufleet.core.health_gate:
        prometheus_url: http://127.0.0.1:9
        rollout_hosts: [h0, h1, h2, h3]
        required: true
        soak: 30
      register: required
      run_once: true
      delegate_to: localhost
      ignore_errors: true

    - name: Keep what happened
      ansible.builtin.copy:
        content: "{{ {'firing': firing, 'canary': canary, 'failed_canary': failed_canary, 'unchecked': unchecked,
                      'required': required} | to_json }}"
        dest: "{{ out }}"
        mode: '0600'
      run_once: true
      delegate_to: localhost
'''


class _Prometheus(BaseHTTPRequestHandler):
    alerts = []
    queries = []

    def do_GET(self):  # noqa: N802 (http.server's name)
        expression = parse_qs(urlsplit(self.path).query)['query'][0]
        self.queries.append(expression)
        result = self.alerts if expression.startswith('ALERTS') else [{'metric': {}, 'value': [0, '1']}]
        self.send_response(200)
        self.end_headers()
        self.wfile.write(json.dumps({'status': 'success', 'data': {'resultType': 'vector', 'result': result}}).encode())

    def log_message(self, *args):
        pass


class _Quiet(_Prometheus):
    alerts = []
    queries = []


@pytest.fixture
def servers():
    started = []
    for handler in (_Prometheus, _Quiet):
        server = HTTPServer(('127.0.0.1', 0), handler)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        started.append(server)
    _Prometheus.alerts = [{'metric': {'alertname': 'GpuFallenOffBus', 'host': 'h1', 'gpu': '2', 'pack': 'gpufleet'},
                           'value': [0, '1']}]
    yield ['http://127.0.0.1:%d' % server.server_address[1] for server in started]
    for server in started:
        server.shutdown()


def test_the_gate_reads_the_batch_and_stops_on_an_alert_or_a_failed_canary(tmp_path, servers):
    (tmp_path / 'play.yml').write_text(PLAYBOOK)
    (tmp_path / 'hosts').write_text('h0\nh1\nh2\nh3\n[all:vars]\nansible_connection=local\n')
    out = tmp_path / 'out.json'
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=os.path.join(REPO, 'build', 'collections'),
               ANSIBLE_LOCALHOST_WARNING='false')
    ran = subprocess.run([os.path.join(os.path.dirname(sys.executable), 'ansible-playbook'), '-i', str(tmp_path / 'hosts'),
                          '-e', json.dumps({'out': str(out), 'prometheus': servers[0], 'quiet': servers[1],
                                            'ansible_python_interpreter': sys.executable}),
                          str(tmp_path / 'play.yml')], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                         universal_newlines=True, check=False, timeout=300)
    assert ran.returncode == 0, ran.stdout
    got = json.loads(out.read_text())
    firing = got['firing']
    assert firing['failed'] and firing['gate']['hosts'] == ['h1', 'h2'] and firing['gate']['batch'] == 2
    assert firing['msg'] == ('Health gate after batch 2 (h1, h2): STOPPED the rollout: GpuFallenOffBus on h1 (gpu 2) '
                             'firing. No later batch was changed; fix the hosts (or roll back, docs/upgrades.md) and run '
                             'again.')
    # Only the batch's hosts were asked about, h3 (not entered) and h0 (gated before) left out.
    assert [query for query in _Prometheus.queries if query.startswith('ALERTS')] == [
        'ALERTS{alertstate="firing", pack="gpufleet", severity!="info", host=~"h1|h2"}']
    canary = got['canary']
    assert not canary.get('failed') and canary['gate']['line'] == (
        'Health gate after batch 1 (h0, h1, h2): passed: no alert of the pack firing for its hosts after a '
        '1 s soak')
    assert got['failed_canary']['failed'] and 'STOPPED the rollout: the canary h2 failed' in got['failed_canary']['msg']
    unchecked = got['unchecked']
    assert not unchecked.get('failed') and not unchecked['gate']['checked'] and unchecked['msg'].endswith(
        'not checked: no monitoring host (gpufleet_monitoring_group has none in the inventory) and no '
        'gpufleet_watchdog_prometheus_url')
    required = got['required']
    assert required['failed'] and 'Prometheus at http://127.0.0.1:9 did not answer' in required['msg'] \
        and 'gpufleet_health_gate_required is true' in required['msg']
