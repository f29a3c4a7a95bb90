# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""place_services through the filter plugin: the contract the gpu_services role reads, and errors as AnsibleFilterError."""

from __future__ import absolute_import, division, print_function

import json
import os

import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.gpufleet.core.plugins.filter.placement import FilterModule
from ansible_collections.gpufleet.core.plugins.module_utils._plan import MEMORY_POLICIES, SERVICE_NAME_PATTERN

from ...conftest import REPO
from ...support.topology import gpu, node, topology

PLACE = FilterModule().filters()['place_services']

# Node 0: CPUs 0-3 (SMT siblings 0,2 and 1,3); node 1: CPUs 4-7 (4,6 and 5,7).
TOPOLOGY = topology(nodes=[node(0, [0, 1, 2, 3]), node(1, [4, 5, 6, 7])],
                    gpus=[gpu(0, 'GPU-b', 'B1', 1, name='X'), gpu(1, 'GPU-a', '17', 0, name='X')],
                    smt_siblings=['0,2', '1,3', '4,6', '5,7'])


def test_the_contract():
    plan = PLACE(TOPOLOGY, [{'name': 'llm', 'cpus': 2, 'image': 'registry/llm:1', 'environment': {'A': '1'}},
                            {'name': 'emb', 'gpus': {'mps': {'active_thread_percentage': 25}}, 'cpus': 1}],
                 reserved_cpus='0,2', mps_daemons=[{'device': 'GPU-b', 'user': 'infer'}])
    llm, emb = plan
    # Node 0 loses its reserved core: node 1 has more free cores, but GPU-b is MPS's, so llm takes GPU-a on node 0.
    assert llm == {
        'name': 'llm', 'gpus': ['GPU-a'], 'gpu_uuids': ['GPU-a'], 'numa_node': 0, 'cpus': [1, 3], 'cpulist': '1,3',
        'mems': [0], 'memlist': '0', 'memory_policy': 'bind', 'exclusive': True, 'mps': None,
        'environment': {'CUDA_VISIBLE_DEVICES': 'GPU-a', 'CUDA_DEVICE_ORDER': 'PCI_BUS_ID'},
        'explanation': llm['explanation'],
    }
    assert 'GPU-a (bus 00000000:17:00.0)' in llm['explanation'] and 'node 0' in llm['explanation']
    assert emb['environment'] == {
        'CUDA_VISIBLE_DEVICES': 'GPU-b', 'CUDA_DEVICE_ORDER': 'PCI_BUS_ID',
        'CUDA_MPS_PIPE_DIRECTORY': '/run/gpufleet-mps/GPU-b', 'CUDA_MPS_ACTIVE_THREAD_PERCENTAGE': '25'}
    assert emb['mps']['user'] == 'infer' and (emb['numa_node'], emb['cpus']) == (1, [4, 6])
    # What the role writes to /etc/gpufleet/placement.json and reads back as previous.
    assert PLACE(TOPOLOGY, [{'name': 'emb', 'gpus': {'mps': {'active_thread_percentage': 25}}, 'cpus': 1}],
                 reserved_cpus=[0, 2], previous=json.loads(json.dumps(plan)),
                 mps_daemons=[{'device': 'GPU-b', 'user': 'infer'}]) == [emb]


@pytest.mark.parametrize('args, words', [
    (({'not': 'a topology'}, []), "the input must be ansible_facts['gpufleet_topology']"),
    ((TOPOLOGY, [{'name': 'a', 'gpus': 3}]), 'service a: needs 3 whole GPUs (exclusive)'),
    ((TOPOLOGY, 'a'), 'services must be a list'),
    ((TOPOLOGY, [{'name': 'a', 'cpus': 2}], '0-'), 'malformed CPU list'),
    ((TOPOLOGY, [{'name': 'a', 'gpus': {'mps': {}}}], None, None, [{'device': 'GPU-zzz', 'user': 'u'}]),
     'mps_daemons: The MPS plan cannot work'),
])
def test_errors_are_filter_errors_that_name_the_filter(args, words):
    with pytest.raises(AnsibleFilterError) as caught:
        PLACE(*args)
    assert str(caught.value).startswith('gpufleet.core.place_services: ')
    assert words in str(caught.value)


UNITS = FilterModule().filters()['service_units']


def test_the_plan_document_is_taken_back_as_previous():
    services = [{'name': 'llm', 'cpus': 2, 'command': '/usr/bin/serve'},
                {'name': 'emb', 'cpus': 1, 'mode': 'container', 'image': 'registry/emb:1'}]
    plan = PLACE(TOPOLOGY, services)
    document = UNITS(plan, services, container_runtime='docker')['plan']
    assert document['version'] == 1 and [e['unit'] for e in document['services']] == [
        'gpufleet-svc-llm.service', 'gpufleet-svc-emb.service']
    assert ('container' not in document['services'][0], document['services'][1]['container'],
            document['services'][1]['container_runtime']) == (True, 'gpufleet-svc-emb', 'docker')
    # Read back from the file: llm keeps its place though emb is gone and a newcomer comes first.
    again = PLACE(TOPOLOGY, [{'name': 'new', 'cpus': 2}, services[0]], previous=json.loads(json.dumps(document)))
    assert again[1] == plan[0]
    # A document of another version (or none) is not reused: the services are placed afresh, as without one.
    fresh = PLACE(TOPOLOGY, [{'name': 'new', 'cpus': 2}, services[0]])
    assert PLACE(TOPOLOGY, [{'name': 'new', 'cpus': 2}, services[0]], previous=dict(document, version=2)) == fresh


def test_service_units_reports_every_problem_of_the_role_keys_at_once():
    services = [{'name': 'a', 'command': '/bin/a', 'colour': 'red'}, {'name': 'b'},
                {'name': 'c', 'mode': 'container'}, {'name': 'd', 'command': '/bin/d', 'user': 'root'},
                {'name': 'e', 'command': '/bin/e', 'environment': {'CUDA_VISIBLE_DEVICES': '0'}},
                {'name': 'f', 'command': '/bin/f', 'read_write_paths': ['relative']},
                {'name': 'g' * 30, 'command': '/bin/g'}]
    with pytest.raises(AnsibleFilterError) as caught:
        UNITS([], services)
    text = str(caught.value)
    assert text.startswith('gpufleet.core.service_units: The services cannot be written: ')
    for words in ['entry a: give it a unique name', 'unknown here: colour', 'Service b: native mode needs command',
                  'Service c: container mode needs image', 'Service d: a GPU service never runs as root',
                  'Service e: environment may not set CUDA_VISIBLE_DEVICES', 'Service f: read_write_paths are absolute',
                  "the dedicated user 'gpufleet-%s' is longer than 32 characters: set user" % ('g' * 30)]:
        assert words in text


def test_an_mps_share_runs_as_its_daemons_user():
    services = [{'name': 'emb', 'gpus': {'mps': {}}, 'cpus': 1, 'command': '/bin/emb'}]
    plan = PLACE(TOPOLOGY, services, mps_daemons=[{'device': 'GPU-b', 'user': 'infer'}])
    unit = UNITS(plan, services)['units'][0]
    assert (unit['user'], unit['mps_user'], unit['dedicated_user']) == ('infer', 'infer', False)
    with pytest.raises(AnsibleFilterError) as caught:
        UNITS(plan, [dict(services[0], user='other')])
    assert "whose server serves one user id: run it as the daemon's user infer (got other)" in str(caught.value)
    with pytest.raises(AnsibleFilterError) as caught:
        UNITS(plan, [dict(services[0], name='emb2')])
    assert 'the planner returned emb in its place' in str(caught.value)


def test_the_filters_docs_state_the_plan_contracts_name_rule_and_policies():
    # YAML docs cannot import Python: they must say what _plan says.
    with open(os.path.join(REPO, 'plugins', 'filter', 'place_services.yml')) as handle:
        text = ' '.join(handle.read().split())
    assert 'C(^%s$)' % SERVICE_NAME_PATTERN in text
    assert all('C(%s)' % policy in text for policy in MEMORY_POLICIES)


SPECS = FilterModule().filters()['service_specs']


def test_service_specs_gives_every_key_with_the_readers_defaults():
    specs = SPECS([{'name': 'llm', 'command': '/opt/llm/serve'},
                   {'name': 'web', 'gpus': 0, 'mode': 'container', 'image': 'registry.example.com/web:1'}], 'svc-')
    assert [(spec['name'], spec['gpus'], spec['cpus'], spec['mode'], spec['user']) for spec in specs] == [
        ('llm', 1, 4, 'native', 'svc-llm'), ('web', 0, 4, 'container', 'svc-web')]


def test_service_specs_refuses_a_spec_with_a_problem_naming_it():
    with pytest.raises(AnsibleFilterError) as caught:
        SPECS([{'name': 'LLM', 'command': '/opt/llm/serve'}])
    assert str(caught.value).startswith('gpufleet.core.service_specs: gpu_services_services entry 1: name is the string "LLM"; give a name of lower-case')
