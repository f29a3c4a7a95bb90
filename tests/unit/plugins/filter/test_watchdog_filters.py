# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""The gpu_watchdog role's plan check (the watchdog_plan_problems filter): the plan read by the plan's one reader,
refused with the variable and the fix."""

from __future__ import absolute_import, division, print_function

import base64
import json

import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.gpufleet.core.plugins.filter.watchdog import FilterModule

PLAN_FILE = '/etc/gpufleet/placement.json'
problems = FilterModule().filters()['watchdog_plan_problems']


def slurped(text):
    return base64.b64encode(text if isinstance(text, bytes) else text.encode('utf-8')).decode('ascii')


def plan(*names, **document):
    return slurped(json.dumps(dict({'version': 1, 'services': [{'name': name} for name in names]}, **document)))


def test_a_plan_with_budgets_for_its_services_has_no_problem():
    assert problems(plan('llm', 'imagegen'), PLAN_FILE, {'imagegen': 80}) == []
    assert problems(plan(), PLAN_FILE, {}) == []


def test_a_budget_for_a_service_the_plan_does_not_place_is_refused_with_what_it_places():
    found = problems(plan('llm', 'imagegen'), PLAN_FILE, {'image-gen': 80, 'llm': 90})
    assert found == ['gpu_watchdog_service_budgets names image-gen, which /etc/gpufleet/placement.json does not place '
                     '(it places: llm, imagegen); fix the name or remove the entry.']
    assert 'it places: no service' in problems(plan(), PLAN_FILE, {'llm': 90})[0]


@pytest.mark.parametrize('text, words', [
    ('{"version": 1, "services": [', ['is not JSON']),
    ('[]', ['is not a placement plan']),
    ('{"version": 1}', ['has no "services" list']),
    ('{"version": 1, "services": [{"gpus": [0]}]}', ['services[0] has no name']),
    ('{"version": 2, "services": []}', ['has version 2', 'reads version 1', 'gpu_services role of this release']),
    (b'\xff\xfe{}', ['is not JSON']),  # not UTF-8
])
def test_a_file_the_watchdog_cannot_read_as_a_plan_is_refused_naming_the_variable_and_the_fix(text, words):
    found = problems(slurped(text), PLAN_FILE, {'llm': 90})
    assert len(found) == 1
    for word in ['gpu_watchdog_plan_file /etc/gpufleet/placement.json', 'gpu_services_plan_file'] + words:
        assert word in found[0]


@pytest.mark.parametrize('args', [
    (None, PLAN_FILE, {}),
    (plan('llm'), None, {}),
    (plan('llm'), PLAN_FILE, ['llm']),
    ('not base64!', PLAN_FILE, {}),
])
def test_a_wrong_call_is_an_error_that_names_the_filter(args):
    with pytest.raises(AnsibleFilterError, match='gpufleet.core.watchdog_plan_problems'):
        problems(*args)
