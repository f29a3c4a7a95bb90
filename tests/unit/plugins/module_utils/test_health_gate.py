# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""The rollout's health gate: the batch's hosts, the PromQL it asks, the verdict, and Prometheus's HTTP API."""

from __future__ import absolute_import, division, print_function

import json
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer
from urllib.parse import parse_qs, urlsplit

import pytest

from ansible_collections.gpufleet.core.plugins.module_utils import _health_gate as gate
from ansible_collections.gpufleet.core.plugins.module_utils._prometheus import PrometheusError, one_of, query

ROLLOUT = ['hk1-a100-01', 'hk1-a100-02', 'hk2-h100-01', 'hk2-cpu-01']


def alert(name, host, **labels):
    return {'metric': dict({'__name__': 'ALERTS', 'alertname': name, 'alertstate': 'firing', 'host': host,
                            'pack': 'gpufleet', 'severity': 'critical'}, **labels), 'value': [1733300000, '1']}


def test_the_batch_is_the_hosts_that_entered_the_rollout_since_the_last_gate():
    entered = {'hk1-a100-01', 'hk1-a100-02', 'hk2-h100-01'}
    assert gate.batch_hosts(ROLLOUT, [], {'hk1-a100-01'}) == ['hk1-a100-01']
    assert gate.batch_hosts(ROLLOUT, ['hk1-a100-01'], entered) == ['hk1-a100-02', 'hk2-h100-01']


def test_the_query_matches_exactly_the_batch_s_hosts_and_leaves_info_alerts_out():
    query_text = gate.alerts_query(['hk1-a100-01', 'gpu.example.net'])
    assert query_text == ('ALERTS{alertstate="firing", pack="gpufleet", severity!="info", '
                          'host=~"hk1-a100-01|gpu\\\\.example\\\\.net"}')
    assert one_of(['a+b', 'c(d)']) == 'a\\+b|c\\(d\\)'


def test_each_firing_alert_is_named_once_with_its_host_and_where():
    result = [alert('GpuFallenOffBus', 'hk1-a100-01', gpu='2', UUID='GPU-1', xid='79'),
              alert('GpuFallenOffBus', 'hk1-a100-01', gpu='2', UUID='GPU-1', xid='79'),
              alert('GpuExporterDown', 'hk1-a100-02'), {'metric': 'garbage'}]
    assert gate.firing_alerts(result) == ['GpuExporterDown on hk1-a100-02',
                                          'GpuFallenOffBus on hk1-a100-01 (gpu 2, UUID GPU-1, xid 79)']


@pytest.mark.parametrize('kwargs, passed, words', [
    ({'firing': []}, True, 'Health gate after batch 2 (h1, h2): passed: no alert of the pack firing for its hosts '
                           'after a 60 s soak'),
    ({'firing': ['GpuFallenOffBus on h1 (gpu 2)']}, False,
     'Health gate after batch 2 (h1, h2): STOPPED the rollout: GpuFallenOffBus on h1 (gpu 2) firing. No later batch '
     'was changed'),
    ({'firing': [], 'canary': True, 'failed': ['h2']}, False,
     'Health gate after batch 2, the canary (h1, h2): STOPPED the rollout: the canary h2 failed.'),
    ({'problem': 'Prometheus at http://p:9090 did not answer: timed out'}, True,
     'Health gate after batch 2 (h1, h2): not checked: Prometheus at http://p:9090 did not answer: timed out'),
    ({'problem': 'no monitoring host', 'required': True}, False,
     'STOPPED the rollout: its health could not be asked (no monitoring host) and gpufleet_health_gate_required is '
     'true.'),
])
def test_the_verdict_says_why_the_rollout_goes_on_or_stops(kwargs, passed, words):
    arguments = dict({'canary': False, 'failed': [], 'soak': 60}, **kwargs)
    found = gate.verdict(2, ['h1', 'h2'], **arguments)
    assert found['passed'] is passed and words in found['line'], found['line']
    assert found['checked'] is (kwargs.get('firing') is not None)


class _Prometheus(BaseHTTPRequestHandler):
    answers = {}

    def do_GET(self):  # noqa: N802 (http.server's name)
        expression = parse_qs(urlsplit(self.path).query)['query'][0]
        status, body = self.answers.get(expression, (200, {'status': 'success', 'data': {'resultType': 'vector', 'result': []}}))
        self.send_response(status)
        self.end_headers()
        self.wfile.write(body.encode() if isinstance(body, str) else json.dumps(body).encode())

    def log_message(self, *args):
        pass


@pytest.fixture
def prometheus():
    server = HTTPServer(('127.0.0.1', 0), _Prometheus)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield 'http://127.0.0.1:%d' % server.server_address[1], _Prometheus.answers
    server.shutdown()
    _Prometheus.answers.clear()


def test_a_query_returns_the_result_vector_and_refuses_what_is_not_one(prometheus):
    url, answers = prometheus
    answers['up'] = (200, {'status': 'success', 'data': {'result': [alert('GpuExporterDown', 'h1')]}})
    answers['bad'] = (400, {'status': 'error', 'error': 'parse error at char 3'})
    answers['html'] = (200, '<html>a proxy</html>')
    assert query(url + '/', 'up')[0]['metric']['host'] == 'h1'
    assert query(url, 'nothing') == []
    with pytest.raises(PrometheusError, match=r'Prometheus at http://127\.0\.0\.1:\d+ answered parse error at char 3'):
        query(url, 'bad')
    with pytest.raises(PrometheusError, match='did not answer'):
        query(url, 'html')


def test_a_prometheus_that_is_not_there_did_not_answer():
    with pytest.raises(PrometheusError, match=r'Prometheus at http://127\.0\.0\.1:9 did not answer'):
        query('http://127.0.0.1:9', 'up', timeout=2)
