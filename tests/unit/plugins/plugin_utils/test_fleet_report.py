# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""The fleet report on the simulator's hosts: topology gathered by topology_facts' code, MIG layouts applied by the
mig module's code, services placed by the planner (tests/unit/report/fleet.py). The page is read back with
tests/unit/report/dom.py, and every count is compared with one taken from the facts and plans themselves."""

from __future__ import absolute_import, division, print_function

import copy
import json
import os
import subprocess
import sys

import pytest

from ansible_collections.gpufleet.core.plugins.plugin_utils._report.diff import change_count, diff_reports
from ansible_collections.gpufleet.core.plugins.plugin_utils._report.files import (
    HTML_NAME, JSON_NAME, PREVIOUS_NAME, plan_report, read_previous)
from ansible_collections.gpufleet.core.plugins.plugin_utils._report.hostvars import host_input
from ansible_collections.gpufleet.core.plugins.plugin_utils._report.model import FleetReportError, build_report
from ansible_collections.gpufleet.core.plugins.plugin_utils._report.page import render_html

from ...conftest import REPO
from ...report import dom
from ...report.fleet import lab_fleet, simulated_host

FAILED = {'hk1-a100-02': {'imagegen': 0.418}}


@pytest.fixture(scope='module')
def fleet(tmp_path_factory):
    return lab_fleet(tmp_path_factory.mktemp('fleet'), FAILED)


def page(hosts, previous=None, problem=None):
    data = build_report(copy.deepcopy(hosts), '2025-06-01T12:00:00Z')
    return data, render_html(data, diff_reports(previous, data, problem))


def expected_counts(host):
    """A host's counts from its inputs: the fact's nodes and GPUs, MIG-enabled GPUs' instances, the plan's services."""
    topology, services = host['topology'], host['plan']['services']
    return {'nodes': len(topology['numa_nodes']), 'gpus': len(topology['gpus']),
            'mig-instances': sum(len(gpu['mig']['gpu_instances']) for gpu in topology['gpus']
                                 if gpu['mig']['mode_current'] == 'enabled'),
            'mps-shares': len([entry for entry in services if entry['mps']]), 'services': len(services)}


def test_one_drawing_per_host_with_the_numbers_of_its_facts_and_plan(fleet):
    data, html = page(fleet)
    drawings = dom.drawings(dom.parse(html))
    assert sorted(drawings) == sorted(host['name'] for host in fleet)
    for host in fleet:
        svg = drawings[host['name']]
        found = dom.counts(svg)
        assert dict((key, found[key]) for key in expected_counts(host)) == expected_counts(host), host['name']
        assert dom.claimed(svg) == found
    # The hosts as the simulator describes them, by hand: reference-a100 with two 3g.40gb on GPUs 2 and 3, the DGX
    # with 8 GPUs and one across-node service, the H200's four instances and two MPS shares on one of them, the
    # quirky host's three nodes (one without CPUs) and its GPU of unknown node.
    by_name = dict((name, dom.counts(svg)) for name, svg in drawings.items())
    assert by_name['hk1-a100-01'] == {'nodes': 2, 'gpus': 4, 'mig-instances': 4, 'mps-shares': 0, 'services': 2,
                                      'cross-links': 0}
    assert by_name['hk2-h100-01'] == {'nodes': 2, 'gpus': 8, 'mig-instances': 2, 'mps-shares': 0, 'services': 3,
                                      'cross-links': 1}
    assert by_name['hk2-h200-01'] == {'nodes': 1, 'gpus': 1, 'mig-instances': 4, 'mps-shares': 2, 'services': 4,
                                      'cross-links': 0}
    assert by_name['hk2-cpu-01'] == {'nodes': 1, 'gpus': 0, 'mig-instances': 0, 'mps-shares': 0, 'services': 1,
                                     'cross-links': 0}
    assert by_name['lab-quirks-01']['nodes'] == 3
    quirks = drawings['lab-quirks-01']
    assert [g.attrs['data-node'] for g in quirks.find_all('g', 'numa-node')] == ['0', '2', '4', 'unknown']
    assert [g.attrs['data-cpus'] for g in quirks.find_all('g', 'numa-node')[:3]] == ['7', '7', '0']


def test_mig_slices_are_drawn_to_scale_on_seven_compute_and_eight_memory_slices(fleet):
    _data, html = page(fleet)
    svg = dom.drawings(dom.parse(html))['hk2-h200-01']
    gpu = svg.find_all('g', 'gpu')[0]
    slots = gpu.find_all('rect', 'slot')
    assert len(slots) == 7 + 8
    compute_slot = dom.box_of(slots[0])[2] + 1
    memory_slot = dom.box_of(slots[7])[2] + 1
    # The fact: 3g.71gb at memory 4 (4 memory slices), 2g.35gb at 0, 1g.18gb at 2 and 3.
    widths = dict((rect.all_text().split(' (')[0], round((dom.box_of(rect)[2] + 1) / memory_slot, 2))
                  for rect in gpu.find_all('rect', 'mig-memory'))
    assert widths == {'3g.71gb@4': 4.0, '2g.35gb@0': 2.0, '1g.18gb@2': 1.0, '1g.18gb@3': 1.0}
    compute = sorted(round((dom.box_of(rect)[2] + 1) / compute_slot, 2) for rect in gpu.find_all('rect', 'mig-instance'))
    assert compute == [1.0, 1.0, 2.0, 3.0]


def test_services_are_drawn_on_their_cpus_and_devices_coloured_by_their_audit(fleet):
    _data, html = page(fleet)
    drawings = dom.drawings(dom.parse(html))
    svg = drawings['hk1-a100-02']
    plan = dict((entry['name'], entry) for entry in fleet[1]['plan']['services'])
    for name in ('llm', 'imagegen'):
        cpus = [rect for rect in svg.find_all('rect', 'cpu') if rect.all_text().endswith(': ' + name)]
        assert sorted(int(rect.all_text().split(':')[0][4:]) for rect in cpus) == plan[name]['cpus']
    assert set(rect.classes()[1] for rect in svg.find_all('rect', 'cpu') if rect.all_text().endswith(': imagegen')) \
        == {'audit-fail'}
    services = dict((g.attrs['data-service'], g.attrs['data-audit']) for g in svg.find_all('g', 'service'))
    assert services == {'llm': 'pass', 'imagegen': 'fail'}
    # imagegen's MIG device is the first 3g.40gb of GPU 2, drawn in the failure colour; reserved CPUs 0 and 32.
    gpu2 = [g for g in svg.find_all('g', 'gpu') if g.attrs['data-index'] == '2'][0]
    assert [rect.classes() for rect in gpu2.find_all('rect', 'use')] == [['use', 'audit-fail']]
    assert sorted(rect.all_text() for rect in svg.find_all('rect', 'reserved')) == ['CPU 0: reserved', 'CPU 32: reserved']
    # The cross-node service of the DGX spans both node columns and is joined to both.
    train = [g for g in drawings['hk2-h100-01'].find_all('g', 'service') if g.attrs['data-service'] == 'train'][0]
    assert (train.attrs['data-cross-node'], train.attrs['data-nodes']) == ('true', '0-1')


def test_the_summary_counts_the_fleet(fleet):
    data, html = page(fleet)
    found = data['summary']
    assert found['hosts'] == 6
    assert found['by_dc'] == {'hk1': 2, 'hk2': 3, 'lab': 1}
    assert found['by_dc_class']['hk2'] == {'h100_sxm_8x': 1, 'h200_nvl_1x': 1, 'cpu_only': 1}
    assert found['gpus'] == sum(len(host['topology']['gpus']) for host in fleet)
    assert found['gpus_by_model']['NVIDIA A100 80GB PCIe'] == {'gpus': 8, 'mig_enabled': 4, 'mig_instances': 8,
                                                               'profiles': {'3g.40gb': 8}}
    # The CPU-only host has no driver.
    assert found['drivers'] == {'570.133.20': 4, '575.57.08': 1}
    assert found['hosts_without_gpus'] == ['hk2-cpu-01']
    assert [(item['host'], item['service']) for item in found['failed_audits']] == [('hk1-a100-02', 'imagegen')]
    assert found['services'] == sum(len(host['plan']['services']) for host in fleet)
    assert found['services_passed'] == found['services'] - 1
    heading = [h3 for h3 in dom.parse(html).find_all('h3') if h3.attrs.get('id') == 'failed-audits'][0]
    table = heading.parent.children[heading.parent.children.index(heading) + 1]
    assert [[cell.all_text() for cell in row.find_all('td')] for row in table.find_all('tr')][1:] == [
        ['hk1-a100-02', 'imagegen', '41.8%', '41.8% of pages on remote nodes (max 2.0%)']]


def test_nothing_overflows_its_box(fleet):
    _data, html = page(fleet)
    for name, svg in dom.drawings(dom.parse(html)).items():
        assert dom.geometry_problems(svg) == [], name
        assert svg.attrs['data-overflows'] == '0', name


def test_the_geometry_check_finds_an_overflow():
    svg = dom.drawings(dom.parse(
        '<svg class="topology" data-host="h" viewBox="0 0 100 50"><g class="gpu" data-box="10 10 30 20">'
        '<rect x="5" y="12" width="10" height="5"></rect></g><rect x="90" y="40" width="20" height="5"></rect>'
        '<text x="1" y="10" font-size="9">no length</text></svg>'))['h']
    problems = dom.geometry_problems(svg)
    assert len(problems) == 3
    assert 'outside its gpu box' in problems[0] and 'outside the viewBox' in problems[1] and 'no textLength' in problems[2]


def test_the_page_fetches_nothing(fleet):
    _data, html = page(fleet)
    assert dom.fetches(html) == [] and dom.fetching_elements(dom.parse(html)) == []
    bad = '<img src="x.png"><style>@import url(http://x)</style><p style="background:url(y)" onclick="f()">'
    assert dom.fetches(bad) == ['<img', '@import', 'http://', 'src=', 'url(']
    assert dom.fetching_elements(dom.parse(bad)) == [
        '<img>', 'src attribute on <img>', 'a fetch in <style>', "style='background:url(y)' on <p>",
        'onclick attribute on <p>']


def test_every_text_from_inventory_and_facts_is_escaped(fleet):
    host = copy.deepcopy(fleet[0])
    evil = '<script>alert(1)</script>'
    host.update(name='h<script>"', dc=evil, rack='r&<b>', failure={'stage': 'verify', 'task': evil, 'reason': '<img src=x>'})
    host['topology']['gpus'][0]['name'] = 'GPU <b>bold</b>'
    host['topology']['cpu']['model'] = '"><svg onload=alert(1)>'
    host['audit']['services'][0].update(passed=False, reasons=['<iframe src=x>'])
    _data, html = page([host])
    for raw in (evil, '<img', '<b>', '<svg onload', '<iframe', 'h<script>'):
        assert raw not in html
    assert '&lt;script&gt;alert(1)&lt;/script&gt;' in html and 'h&lt;script&gt;&quot;' in html
    assert dom.fetching_elements(dom.parse(html)) == []
    assert list(dom.drawings(dom.parse(html))) == ['h<script>"']


def damaged(host):
    """A host of the fleet whose fact the topology model reads but the report cannot draw all of: GPU0 on a node the
    fact lacks, the first MIG instance of GPU2 placed past the memory slices, and a service on a GPU it lacks."""
    host = copy.deepcopy(host)
    gpus = host['topology']['gpus']
    gpus[0]['numa_node'] = 9
    gpus[2]['mig']['gpu_instances'][0]['placement']['start'] = 7
    host['plan']['services'].append(dict(host['plan']['services'][0], name='gone', gpus=['GPU-gone']))
    return dict(host, name='odd')


def test_bad_input_still_renders_and_says_what_is_missing(fleet):
    refused_fact = copy.deepcopy(fleet[0]['topology'])
    refused_fact['numa_nodes'][0]['cpulist'] = '0-3,x'
    hosts = [
        {'name': 'before-facts', 'failure': {'stage': 'preflight', 'task': 'Gather the NUMA and GPU topology',
                                             'reason': 'unreachable'}},
        {'name': 'quarantined', 'quarantined': True, 'failure': 'Plan the MIG change: 3g.40gb x3 does not fit'},
        {'name': 'garbage', 'topology': 'not a fact', 'plan': '{not json', 'audit': 'x', 'reserved_cpus': 'abc'},
        damaged(fleet[0]),
        dict(copy.deepcopy(fleet[0]), name='refused-fact', topology=refused_fact,
             plan={'version': 1, 'services': [{'name': 's', 'cpus': [1]}, {'cpus': 3}]}),
        dict(copy.deepcopy(fleet[4]), name='no-audit', audit=None),
    ]
    data, html = page(hosts)
    models = dict((host['name'], host) for host in data['hosts'])
    assert models['before-facts']['status'] == 'failed'
    assert models['before-facts']['missing'][0].startswith('topology facts (the host failed before')
    assert models['quarantined']['status'] == 'quarantined'
    garbage = models['garbage']
    assert garbage['status'] == 'unknown' and garbage['missing'][0] == 'topology facts (the fact cannot be read; see below)'
    assert 'reserved_cpus is unusable' in garbage['problems'][0]
    assert "the topology must be ansible_facts['gpufleet_topology']" in garbage['problems'][1]
    assert garbage['problems'][2].startswith('the services plan is not JSON')
    # What the topology model reads is drawn; what cannot be drawn of it is named.
    odd = models['odd']
    assert odd['status'] == 'audit failed' and odd['failed_audits'] == ['gone'] and len(odd['topology']['gpus']) == 4
    assert [gpu['node'] for gpu in odd['topology']['gpus']] == [None, 0, 1, 1]
    assert any('GPU0 is on node 9, which the fact does not list' in problem for problem in odd['problems'])
    assert any('GPU2: MIG instance 3g.40gb has no usable placement' in problem for problem in odd['problems'])
    assert any('service gone uses GPU-gone' in problem for problem in odd['problems'])
    # What the topology model and the plan reader refuse is refused whole, in their words.
    refused = models['refused-fact']
    assert refused['status'] == 'unknown' and refused['topology'] is None and refused['services'] == []
    assert 'the topology has a NUMA node without an integer id and a CPU list' in refused['problems'][0]
    assert refused['problems'][1] == 'the services plan: services[1] has no name'
    assert models['no-audit']['missing'] == ['GPUs: none found (NVML: %s)' % fleet[4]['topology']['nvml']['reason'],
                                             'audit']
    assert models['no-audit']['services'][0]['audit']['state'] == 'none'
    drawings = dom.drawings(dom.parse(html))
    assert len(drawings) == len(hosts)
    assert dom.counts(drawings['before-facts'])['nodes'] == 0
    assert 'No topology facts' in drawings['before-facts'].all_text()
    assert dom.counts(drawings['odd'])['mig-instances'] == 3
    for name, svg in drawings.items():
        assert dom.geometry_problems(svg) == [], name
    assert html.count('class="missing"') >= 4
    summary = data['summary']
    assert [item['host'] for item in summary['failed_hosts']] == ['before-facts']
    assert [item['host'] for item in summary['quarantined_hosts']] == ['quarantined']
    assert [item['host'] for item in summary['unknown_hosts']] == ['garbage', 'refused-fact']


def test_a_fact_or_plan_of_another_version_is_refused_in_the_readers_words(fleet):
    future = copy.deepcopy(fleet[0])
    future['topology']['version'] = 99
    text_plan = dict(copy.deepcopy(fleet[0]), name='plan-text', plan=json.dumps(fleet[0]['plan']))
    hosts = [dict(future, name='fact-v99'), dict(copy.deepcopy(fleet[0]), name='plan-v2', plan={'version': 2}),
             text_plan, dict(copy.deepcopy(fleet[0]), name='plan-list', plan=fleet[0]['plan']['services'])]
    models = dict((host['name'], host) for host in build_report(hosts)['hosts'])
    assert models['fact-v99']['topology'] is None
    assert models['fact-v99']['problems'][0].startswith('the gpufleet_topology fact has layout version 99')
    assert 'gather it again with gpufleet.core.topology_facts' in models['fact-v99']['problems'][0]
    assert models['plan-v2']['missing'] == ['services plan']
    assert models['plan-v2']['problems'] == [
        'the services plan has version 2, but this release of gpufleet.core reads version 1; apply the '
        'gpufleet.core.gpu_services role of this release to write it again']
    # The plan file's text, and place_services' list, draw as the document does.
    document = models['plan-text']
    assert models['plan-list']['services'] == document['services'] and len(document['services']) == 2


@pytest.mark.parametrize('hosts, words', [
    ({'name': 'a'}, 'hosts must be a list'),
    ([{'name': 'a'}, {'dc': 'hk1'}], 'hosts entry 2 has no name'),
    ([{'name': 'a'}, {'name': 'a'}], 'host a is listed twice'),
    (['a'], 'hosts entry 1 has no name'),
])
def test_input_that_is_not_a_list_of_named_hosts_is_refused(hosts, words):
    with pytest.raises(FleetReportError) as refused:
        build_report(hosts)
    assert words in str(refused.value)


def test_previous_reports_that_cannot_be_used_say_why():
    assert read_previous(None, JSON_NAME)[1].startswith('there is no previous report')
    assert 'is not JSON' in read_previous('{"hosts": [', JSON_NAME)[1]
    assert 'not a fleet report' in read_previous('[1, 2]', JSON_NAME)[1]
    assert 'has version 7' in read_previous('{"version": 7, "hosts": []}', JSON_NAME)[1]
    assert 'without a name' in read_previous('{"version": 1, "hosts": [{}]}', JSON_NAME)[1]


def test_the_files_first_run_same_fleet_changed_fleet_and_corrupt_previous(fleet, tmp_path):
    first = plan_report(copy.deepcopy(fleet), 'T1', {})
    assert sorted(first['write']) == [HTML_NAME, JSON_NAME]
    assert first['changes']['previous']['found'] is False
    assert 'data-previous="missing"' in first['write'][HTML_NAME]
    on_disk = dict(first['write'], **{PREVIOUS_NAME: None})
    # The same fleet later: nothing to write, and the page keeps its time.
    again = plan_report(copy.deepcopy(fleet), 'T2', on_disk)
    assert again['write'] == {} and again['data']['generated_at'] == 'T1'
    # A changed fleet: one host gone, one new, another MIG layout and placement on one, an audit now failing.
    changed_hosts = [host for host in copy.deepcopy(fleet) if host['name'] != 'lab-quirks-01']
    changed_hosts[0] = simulated_host(tmp_path, 'reference-a100', 'hk1-a100-01',
                                      [{'name': 'llm', 'gpus': 1, 'cpus': 8},
                                       {'name': 'imagegen', 'gpus': {'mig_profile': '1g.10gb', 'count': 1}, 'cpus': 4}],
                                      mig_layouts=[{'gpus': [3], 'layout': ['1g.10gb'] * 7}], reserved_cpus='0,32',
                                      failing={'llm': 0.3}, labels={'dc': 'hk1', 'rack': 'hk1-a', 'class': 'a100_pcie_4x'})
    changed_hosts.append({'name': 'hk3-new-01', 'failure': 'unreachable'})
    third = plan_report(changed_hosts, 'T3', on_disk)
    assert sorted(third['write']) == [HTML_NAME, JSON_NAME, PREVIOUS_NAME]
    assert third['write'][PREVIOUS_NAME] == first['write'][JSON_NAME]
    changes = third['changes']
    assert (changes['hosts_added'], changes['hosts_removed']) == (['hk3-new-01'], ['lab-quirks-01'])
    assert [item['host'] for item in changes['layouts']] == ['hk1-a100-01']
    layout = changes['layouts'][0]
    assert 'GPU2 NVIDIA A100 80GB PCIe on node 1, MIG 3g.40gb@0 3g.40gb@4' in layout['removed']
    assert 'GPU3 NVIDIA A100 80GB PCIe on node 1, MIG ' + ' '.join('1g.10gb@%d' % slot for slot in range(7)) \
        in layout['added']
    assert sorted(item['service'] for item in changes['placements'] if item['host'] == 'hk1-a100-01') == ['imagegen', 'llm']
    assert changes['audits'] == [{'host': 'hk1-a100-01', 'service': 'llm', 'before': 'passed (0.4% remote)',
                                  'after': 'FAILED (30.0% remote)'}]
    assert changes['status'] == [{'host': 'hk1-a100-01', 'before': 'ok', 'after': 'audit failed'}]
    html = third['write'][HTML_NAME]
    assert 'data-changes="%d"' % change_count(changes) in html and 'Compared with the report of T1' in html
    # A corrupt report on disk: the page says so, and the corrupt file is kept as the previous one.
    corrupt = plan_report(copy.deepcopy(fleet), 'T4', {JSON_NAME: '{"version": 1, "hosts": [', HTML_NAME: None})
    assert corrupt['write'][PREVIOUS_NAME] == '{"version": 1, "hosts": ['
    assert 'is not JSON' in corrupt['changes']['previous']['problem']
    assert 'is not JSON' in corrupt['write'][HTML_NAME]


def test_a_limited_run_keeps_the_fleets_other_hosts_as_the_previous_report_found_them(fleet):
    names = [host['name'] for host in fleet]
    first = plan_report(copy.deepcopy(fleet), 'T1', {}, fleet=names)
    on_disk = dict(first['write'], **{PREVIOUS_NAME: None})
    # A run limited to one host, the others still in the inventory; one host no longer is.
    limited = [host for host in copy.deepcopy(fleet) if host['name'] == 'hk1-a100-01']
    second = plan_report(limited, 'T2', on_disk, fleet=[name for name in names if name != 'lab-quirks-01'])
    data = second['data']
    kept = sorted(name for name in names if name not in ('hk1-a100-01', 'lab-quirks-01'))
    assert [host['name'] for host in data['hosts']] == sorted(['hk1-a100-01'] + kept)
    assert [item['host'] for item in data['summary']['not_in_run']] == kept
    assert set(host.get('as_of') for host in data['hosts'] if host['name'] in kept) == {'T1'}
    assert 'as_of' not in [host for host in data['hosts'] if host['name'] == 'hk1-a100-01'][0]
    # Kept as found: hk1-a100-02's failed audit is still on the page, and only the host gone from the fleet changed.
    assert [item['host'] for item in data['summary']['failed_audits']] == ['hk1-a100-02']
    assert (second['changes']['hosts_removed'], change_count(second['changes'])) == (['lab-quirks-01'], 1)
    root = dom.parse(second['write'][HTML_NAME])
    articles = dict((article.attrs['data-host'], article) for article in root.find_all('article', 'host'))
    assert sorted(articles) == sorted(['hk1-a100-01'] + kept)
    assert sorted(name for name, article in articles.items() if article.attrs.get('data-as-of') == 'T1') == kept
    assert sorted(dom.drawings(root)) == sorted(articles)
    # The same limited run again writes nothing; a host kept twice keeps the time it was found.
    on_disk = {HTML_NAME: second['write'][HTML_NAME], JSON_NAME: second['write'][JSON_NAME],
               PREVIOUS_NAME: second['write'][PREVIOUS_NAME]}
    again = plan_report(copy.deepcopy(limited), 'T3', on_disk, fleet=names)
    assert again['write'] == {}
    other = [host for host in copy.deepcopy(fleet) if host['name'] == 'hk2-h100-01']
    third = plan_report(other, 'T4', on_disk, fleet=names)
    found = dict((host['name'], host.get('as_of')) for host in third['data']['hosts'])
    assert (found['hk1-a100-01'], found['hk1-a100-02'], found['hk2-h100-01']) == ('T2', 'T1', None)


def test_a_host_the_previous_report_cannot_draw_is_named_not_drawn(fleet):
    names = [host['name'] for host in fleet]
    first = plan_report(copy.deepcopy(fleet), 'T1', {}, fleet=names)
    old = json.loads(first['write'][JSON_NAME])
    broken = [host for host in old['hosts'] if host['name'] == 'hk2-h100-01'][0]
    broken['topology']['gpus'] = 'edited by hand'
    limited = [host for host in copy.deepcopy(fleet) if host['name'] == 'hk1-a100-01']
    second = plan_report(limited, 'T2', {JSON_NAME: json.dumps(old)}, fleet=names)
    assert 'hk2-h100-01' not in [host['name'] for host in second['data']['hosts']]
    assert [problem.split(' ')[0] for problem in second['data']['summary']['not_drawn']] == ['hk2-h100-01']
    assert 'cannot be drawn' in second['write'][HTML_NAME]


ACTION_PLAYBOOK = r'''
- name: What the run found on each host, as the report playbook's first play leaves it
  hosts: fleet
  gather_facts: false
  tasks:
    - name: The topology fact and the mark of a host read
      ansible.builtin.set_fact:
        gpufleet_topology: "{{ topologies[inventory_hostname] }}"
        _gpufleet_report_reached: true
        cacheable: true
      when: inventory_hostname in topologies

- name: The fleet_report action
  hosts: localhost
  gather_facts: false
  tasks:
    - name: Check mode writes nothing
      gpufleet.core.fleet_report: {dest: "{{ out }}/check", hosts: "{{ names }}"}
      check_mode: true
      register: checked
    - name: First report
      gpufleet.core.fleet_report: {dest: "{{ out }}/report", hosts: "{{ names }}", generated_at: T1}
      register: first
      diff: true
    - name: The same fleet again
      gpufleet.core.fleet_report: {dest: "{{ out }}/report", hosts: "{{ names }}"}
      register: again
    - name: One host less
      gpufleet.core.fleet_report: {dest: "{{ out }}/report", hosts: "{{ names[1:] }}"}
      register: third
    - name: The whole fleet, in another directory
      gpufleet.core.fleet_report: {dest: "{{ out }}/limited", hosts: "{{ names }}", fleet: "{{ names }}"}
    - name: A run limited to one host of the fleet
      gpufleet.core.fleet_report:
        dest: "{{ out }}/limited"
        hosts: "{{ names[1:2] }}"
        fleet: "{{ names }}"
      register: limited
    - name: A host lost before the report, and one quarantined
      gpufleet.core.fleet_report: {dest: "{{ out }}/lost", hosts: [hk3-lost-01, hk3-quarantined-01]}
      register: lost
    - name: Entries that are no host of the inventory
      gpufleet.core.fleet_report: {dest: "{{ out }}/bad", hosts: ['', {name: hk1}, nowhere]}
      register: unnamed
      ignore_errors: true
    - name: Results
      ansible.builtin.copy:
        dest: "{{ out }}/results.json"
        content: "{{ {'checked': checked, 'first': first, 'again': again, 'third': third, 'limited': limited,
                      'lost': lost, 'unnamed': unnamed} | to_json }}"
'''


def action_inventory(fleet):
    # The plan and the audit as the site playbook leaves them (the services stage's plan text, the verify stage's
    # audit); the class from the host's hardware-class group.
    hosts = dict((host['name'], {
        'gpufleet_dc': host['dc'], 'gpufleet_rack': host['rack'], 'gpu_services_reserved_cpus': host['reserved_cpus'],
        '__gpu_services_planned': {'plan_json': json.dumps(host['plan'])}, '__gpufleet_audit': host['audit'],
    }) for host in fleet)
    hosts['hk3-lost-01'] = {'_gpufleet_stage': 'partition'}
    hosts['hk3-quarantined-01'] = {'_gpufleet_report_reached': True, '_gpufleet_preflight_failure': {
        'stage': 'preflight', 'task': 'Check the host against its class', 'reason': '3 GPUs, its class promises 4'}}
    classes = sorted(set(host['class'] for host in fleet))
    children = dict((klass, {'hosts': dict((host['name'], None) for host in fleet if host['class'] == klass)})
                    for klass in classes)
    children['gpufleet_quarantine'] = {'hosts': {'hk3-quarantined-01': None}}
    return {'all': {
        'vars': {'gpufleet_class_groups': classes, 'ansible_connection': 'local',
                 'ansible_python_interpreter': sys.executable},
        'hosts': {'localhost': None},
        'children': {'fleet': {'hosts': hosts, 'children': children}}}}


def test_the_action_reads_the_hosts_writes_keeps_the_previous_and_changes_nothing_the_second_time(fleet, tmp_path):
    (tmp_path / 'play.yml').write_text(ACTION_PLAYBOOK)
    (tmp_path / 'inventory.yml').write_text(json.dumps(action_inventory(fleet[:4])))
    (tmp_path / 'vars.json').write_text(json.dumps({
        'names': [host['name'] for host in fleet[:4]], 'out': str(tmp_path),
        'topologies': dict((host['name'], host['topology']) for host in fleet[:4])}))
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=os.path.join(REPO, 'build', 'collections'),
               ANSIBLE_LOCALHOST_WARNING='false', ANSIBLE_INVENTORY_UNPARSED_WARNING='false')
    ran = subprocess.run([os.path.join(os.path.dirname(sys.executable), 'ansible-playbook'), '-i',
                          str(tmp_path / 'inventory.yml'), '-e', '@' + str(tmp_path / 'vars.json'),
                          str(tmp_path / 'play.yml')],
                         env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True,
                         check=False)
    assert ran.returncode == 0, ran.stdout
    results = json.loads((tmp_path / 'results.json').read_text())
    assert results['checked']['changed'] is True and not (tmp_path / 'check').exists()
    first = results['first']
    assert first['changed'] is True and first['hosts'] == 4 and first['failed_audits'] == ['hk1-a100-02/imagegen']
    assert first['previous'] is None and 'there is no previous report' in first['previous_problem']
    assert first['diff']['before'] == '' and json.loads(first['diff']['after'])['generated_at'] == 'T1'
    assert first['line'] == ('Fleet report: %s (written; 4 host(s); 0 change(s) since the previous report: %s; failed '
                             'audits: hk1-a100-02/imagegen)' % (first['html'], first['previous_problem']))
    # Read from hostvars, each host is what the same inputs give when handed over directly.
    report_dir = tmp_path / 'report'
    assert json.loads(first['diff']['after'])['hosts'] == build_report(copy.deepcopy(fleet[:4]))['hosts']
    assert (results['again']['changed'], results['again']['written']) == (False, [])
    assert results['again']['line'].startswith('Fleet report: %s (unchanged; 4 host(s); ' % first['html'])
    third = results['third']
    assert third['changed'] is True and third['changes'] == 1 and third['previous'].endswith(PREVIOUS_NAME)
    assert json.loads((report_dir / PREVIOUS_NAME).read_text())['generated_at'] == 'T1'
    assert len(json.loads((report_dir / JSON_NAME).read_text())['hosts']) == 3
    assert (report_dir / HTML_NAME).read_text().count('<svg class="topology"') == 3
    # Limited to fleet[1]: the three other hosts stay on the page.
    limited = results['limited']
    assert limited['changed'] is True and limited['changes'] == 0
    assert limited['hosts'] == 4 and limited['not_in_run'] == sorted(host['name'] for host in fleet[:4] if host is not fleet[1])
    assert '; not in this run: %s; ' % ', '.join(limited['not_in_run']) in limited['line']
    assert (tmp_path / 'limited' / HTML_NAME).read_text().count('<svg class="topology"') == 4
    # A host of the run that never reached the report failed in the stage it was in; the quarantine group counts.
    lost = results['lost']
    assert (lost['failed_hosts'], lost['quarantined_hosts']) == (['hk3-lost-01'], ['hk3-quarantined-01'])
    found = dict((host['name'], host) for host in json.loads((tmp_path / 'lost' / JSON_NAME).read_text())['hosts'])
    assert found['hk3-lost-01']['failure'] == ('lost or failed during the partition stage, so the report has only what '
                                               'was read before')
    assert found['hk3-quarantined-01']['failure'] == ('preflight stage (Check the host against its class): 3 GPUs, '
                                                      'its class promises 4')
    assert results['unnamed']['failed'] is True
    assert results['unnamed']['msg'] == (
        'gpufleet.core.fleet_report: hosts entry 1 is not a host name (hosts lists the inventory names of the hosts to '
        'draw); hosts entry 2 is not a host name (hosts lists the inventory names of the hosts to draw); host nowhere '
        'is not in the inventory; list the inventory names of the hosts to draw')
    assert not (tmp_path / 'bad').exists()


class Inventory:
    """What hostvars.py reads: each host's variables, and the groups."""

    def __init__(self, hostvars):
        self.hostvars, self.groups = hostvars, {}

    def value(self, host, name, default=None):
        return self.hostvars[host].get(name, default)

    def values(self, host, names):
        return dict((name, self.hostvars[host][name]) for name in names if name in self.hostvars[host])


def test_drift_is_read_from_the_runs_check_else_the_reports_and_listed_on_the_page(fleet):
    unit = 'unit gpufleet-svc-llm.service: enabled, active -> enabled, inactive'
    inventory = Inventory({
        # The site's check at the start of its rollout: services drifted; drivers has no receipt yet (not drift).
        'site': {'__gpufleet_receipts': {'stages': {
            'services': {'current': False, 'recorded': True, 'drift': [unit]},
            'drivers': {'current': False, 'recorded': False, 'drift': ['no receipt: ...']},
            'exporter': {'current': False, 'recorded': True, 'inputs_changed': True, 'drift': []}}},
            '__gpufleet_report_receipts': {'stages': {'watchdog': {'error': 'not this one'}}}},
        # The report's own check, with a receipt it cannot read.
        'alone': {'__gpufleet_report_receipts': {'stages': {'partition': {'error': 'x.json is not JSON'}}}},
        'none': {},
    })
    assert host_input(inventory, 'site')['drift'] == {'services': [unit]}
    assert host_input(inventory, 'alone')['drift'] == {'partition': ['receipt unreadable: x.json is not JSON']}
    assert host_input(inventory, 'none')['drift'] == {}
    hosts = [dict(copy.deepcopy(fleet[0]), drift={'services': [unit], 'drivers': ['hold x: held -> not held']}),
             dict(copy.deepcopy(fleet[1]), drift={}), dict(copy.deepcopy(fleet[2]), drift='garbage')]
    data, html = page(hosts)
    models = dict((host['name'], host) for host in data['hosts'])
    assert models[fleet[0]['name']]['drift'] == [{'stage': 'drivers', 'items': ['hold x: held -> not held']},
                                                 {'stage': 'services', 'items': [unit]}]
    assert 'drift' not in models[fleet[1]['name']]
    assert 'the drift found is not {stage: [items]}' in models[fleet[2]['name']]['problems'][-1]
    assert [(item['host'], item['stage']) for item in data['summary']['drifted_hosts']] == [
        (fleet[0]['name'], 'drivers'), (fleet[0]['name'], 'services')]
    heading = [h3 for h3 in dom.parse(html).find_all('h3') if h3.attrs.get('id') == 'drift'][0]
    table = heading.parent.children[heading.parent.children.index(heading) + 1]
    assert [[cell.all_text() for cell in row.find_all('td')] for row in table.find_all('tr')][1:] == [
        [fleet[0]['name'], 'drivers', 'hold x: held -> not held'], [fleet[0]['name'], 'services', unit]]
    assert html.count('data-drift="services"') == 1
    assert '<td>hosts drifted</td><td>1</td>' in html
    # A fleet without drift gives the report it gave before drift was kept: no section, no count, no key.
    data, html = page(fleet[1:2])
    assert 'id="drift"' not in html and 'hosts drifted' not in html and 'drifted_hosts' not in data['summary']
