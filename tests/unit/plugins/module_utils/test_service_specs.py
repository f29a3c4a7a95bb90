# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""The one reader of gpu_services_services that needs no host: the specs with their defaults, and every problem
naming the service, the key, the value and the fix."""

from __future__ import absolute_import, division, print_function

import pytest

from ansible_collections.gpufleet.core.plugins.module_utils import _plan as plan
from ansible_collections.gpufleet.core.plugins.module_utils._service_specs import service_specs, takes_gpus

LLM = {'name': 'llm', 'gpus': 2, 'cpus': 16, 'command': '/opt/llm/bin/serve --port 8000'}


def test_a_spec_gets_every_default():
    specs, problems = service_specs([{'name': 'api', 'command': '/opt/api/bin/serve'}])
    assert problems == []
    assert specs == [{'name': 'api', 'gpus': 1, 'cpus': plan.DEFAULT_CPUS, 'memory_policy': 'bind',
                      'exclusive': True, 'node': None, 'allow_cross_numa': False, 'allow_cpu_overlap': False,
                      'mode': 'native', 'command': '/opt/api/bin/serve', 'image': '', 'container_args': [],
                      'user': 'gpufleet-api', 'environment': {}, 'description': '', 'read_write_paths': [],
                      'state': 'started'}]
    assert set(specs[0]) == set(plan.PLANNER_KEYS + plan.ROLE_KEYS)
    assert takes_gpus(specs[0])


@pytest.mark.parametrize('gpus, normalised, gpu', [
    (None, 1, True), ('2', 2, True), (0, 0, False), ('0', 0, False),
    (['GPU-1', 0], ['GPU-1', 0], True),
    ({'mig_profile': '1g.10gb'}, {'mig_profile': '1g.10gb', 'count': 1}, True),
    ({'mps': {'device': 'GPU-1', 'pinned_mem_limit': '20G'}}, {'mps': {'device': 'GPU-1', 'pinned_mem_limit': '20G'}},
     True),
])
def test_gpu_requests_are_normalised(gpus, normalised, gpu):
    specs, problems = service_specs([dict(LLM, gpus=gpus)])
    assert problems == []
    assert specs[0]['gpus'] == normalised and takes_gpus(specs[0]) is gpu


def test_an_mps_share_is_not_exclusive_by_default():
    specs, problems = service_specs([dict(LLM, gpus={'mps': {'device': 'GPU-1'}})])
    assert problems == [] and specs[0]['exclusive'] is False
    assert specs[0]['user'] is None  # the MPS daemon's user, which needs the host


def test_the_user_prefix_makes_the_default_user():
    specs, _problems = service_specs([LLM], 'svc-')
    assert specs[0]['user'] == 'svc-llm'


@pytest.mark.parametrize('services, words', [
    ([dict(LLM, name='my llm')], ['entry 1: name is the string "my llm"', 'lower-case letters']),
    ([dict(LLM, name='LLM')], ['name is the string "LLM"']),
    ([dict(LLM, name='llm\n')], ['name is the string "llm\\n"']),
    ([dict(LLM, name='a/b')], ['name is the string "a/b"']),
    ([dict(LLM, name='..')], ['name is the string ".."']),
    ([dict(LLM, name='a' * 300)], ['name is the string "aaaa', 'up to 63']),
    ([dict(LLM, name=None)], ['name is empty (null)']),
    ([LLM, dict(LLM, gpus=1)], ['entry 1: name is the string "llm", which entries 1 and 2 share',
                                'entry 2: name is the string "llm"']),
    ([dict(LLM, gpus={'mps': {'device': 'GPU-1', 'pinned_mem_limit': '20'}})],
     ['service llm: gpus.mps.pinned_mem_limit', "'20' has no unit", '20G', 'the string "20"']),
    ([dict(LLM, gpus={'mps': {'device': 'GPU-1', 'active_thread_percentage': 150}})],
     ['service llm: gpus.mps.active_thread_percentage is the integer 150', '1 to 100']),
    ([dict(LLM, gpus={'mps': {'device': 0}})], ['gpus.mps.device is the integer 0', 'GPU-... or MIG-... UUID']),
    # The device-name rule (_values.is_device_uuid), as everywhere else: the whole value, no legacy MIG path form.
    ([dict(LLM, gpus={'mps': {'device': 'GPU-1\n'}})], ['gpus.mps.device is the string "GPU-1\\n"']),
    ([dict(LLM, gpus={'mps': {'device': 'MIG-GPU-1/1/0'}})], ['gpus.mps.device is the string "MIG-GPU-1/1/0"']),
    ([dict(LLM, command='serve --port 8000')],
     ['service llm: command is the string "serve --port 8000"', 'absolute path']),
    ([dict(LLM, command='../bin/serve')], ['command is the string "../bin/serve"', 'absolute path']),
    ([dict(LLM, gpus=-1)], ['service llm: gpus is the integer -1', '0 (CPU-only) or more']),
    ([dict(LLM, gpus='two')], ['service llm: gpus is the string "two"', 'give a count']),
    ([dict(LLM, gpus=[])], ['gpus is the list []', 'gpus: 0']),
    ([dict(LLM, gpus=['GPU-1', 'GPU-1'])], ['GPU-1 listed twice']),
    ([dict(LLM, gpus={'mig_profile': '1g.10gb', 'count': 0})], ['the count of MIG devices']),
    ([dict(LLM, cpus=0)], ['service llm: cpus is the integer 0', "'all'"]),
    ([dict(LLM, memory_policy='strict')], ['service llm: memory_policy is the string "strict"', 'bind']),
    ([dict(LLM, exclusive='yes')], ['service llm: exclusive is the string "yes"', 'true or false']),
    ([dict(LLM, gpus={'mps': {'device': 'GPU-1'}}, exclusive=True)], ['always shared']),
    ([dict(LLM, node='first')], ['service llm: node is the string "first"']),
    ([dict(LLM, user='root')], ['service llm: a GPU service never runs as root']),
    ([dict(LLM, mode='container')], ['service llm: container mode needs image']),
    ([dict(LLM, gpu=2)], ['service llm: has gpu', 'takes only']),
    (['llm'], ['entry 1 is the string "llm"', 'mapping']),
    ({'name': 'llm'}, ['gpu_services_services is the mapping', 'list']),
])
def test_every_problem_names_the_service_the_key_the_value_and_the_fix(services, words):
    _specs, problems = service_specs(services)
    text = ' | '.join(problems)
    assert problems and all(word in text for word in words), text
    assert all(problem.startswith('gpu_services_services') for problem in problems), problems


def test_a_container_service_may_give_arguments_as_its_command():
    _specs, problems = service_specs([{'name': 'llm', 'mode': 'container', 'image': 'registry.example.com/llm:2',
                                       'command': '--port 8000'}])
    assert problems == []
