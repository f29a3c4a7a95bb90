# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""The plan path, the default unit names and the default GPU memory budget are Python's (_plan.py, _watchdog_config.py);
the YAML and the documentation that must repeat them (YAML cannot import Python) say the same."""

from __future__ import absolute_import, division, print_function

import os

import pytest
import yaml

from ansible_collections.gpufleet.core.plugins.module_utils import _plan
from ansible_collections.gpufleet.core.plugins.module_utils._watchdog_config import MEMORY_BUDGET_PERCENT
from ansible_collections.gpufleet.core.plugins.modules import numa_audit, service_plan

from .conftest import role_yaml

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), '..', '..', '..'))


# Each role default that repeats a Python constant, and the value it must have. A role's meta/argument_specs.yml
# repeats its defaults in turn, held equal by test_role_contracts.py.
ROLE_COPIES = [
    ('gpu_services', 'gpu_services_plan_file', _plan.PLAN_FILE),
    ('gpu_services', 'gpu_services_unit_prefix', _plan.UNIT_PREFIX),
    ('gpu_services', 'gpu_services_mps_unit_prefix', _plan.MPS_UNIT_PREFIX),
    ('gpu_watchdog', 'gpu_watchdog_plan_file', "{{ gpu_services_plan_file | default('%s') }}" % _plan.PLAN_FILE),
    ('gpu_watchdog', 'gpu_watchdog_mps_unit_prefix',
     "{{ gpu_services_mps_unit_prefix | default('%s') }}" % _plan.MPS_UNIT_PREFIX),
    ('mps', 'mps_unit_template', _plan.MPS_UNIT_PREFIX + '.service'),
    ('gpufleet', 'gpufleet_gpu_memory_budget_percent', MEMORY_BUDGET_PERCENT),
    ('gpu_watchdog', 'gpu_watchdog_memory_budget_percent', MEMORY_BUDGET_PERCENT),
    ('monitoring', 'monitoring_gpu_memory_budget_percent', MEMORY_BUDGET_PERCENT),
]


@pytest.mark.parametrize('role, variable, value', ROLE_COPIES, ids=[copy[1] for copy in ROLE_COPIES])
def test_a_role_default_that_repeats_a_constant_is_equal_to_it(role, variable, value):
    assert role_yaml(role, 'defaults/main.yml')[variable] == value


def test_the_modules_document_the_contract_s_defaults():
    assert yaml.safe_load(numa_audit.DOCUMENTATION)['options']['plan_file']['default'] == _plan.PLAN_FILE
    assert yaml.safe_load(service_plan.DOCUMENTATION)['options']['unit_prefix']['default'] == _plan.UNIT_PREFIX


def test_an_entry_without_a_unit_runs_as_the_default_unit():
    plan = _plan.read_plan({'version': _plan.PLAN_VERSION, 'services': [{'name': 'llm'}, {'name': 'tts', 'unit': 'x.service'}]})
    assert [entry.unit for entry in plan.entries] == ['gpufleet-svc-llm.service', 'x.service']
    assert _plan.unit_name('llm') == defaults_unit('llm')


def defaults_unit(name):
    return role_yaml('gpu_services', 'defaults/main.yml')['gpu_services_unit_prefix'] + name + '.service'


def test_the_report_playbook_looks_for_the_plan_where_the_role_writes_it():
    with open(os.path.join(REPO, 'playbooks', 'report.yml')) as handle:
        play = yaml.safe_load(handle)[0]
    assert play['vars']['_gpufleet_report_plan_file'] == "{{ gpu_services_plan_file | default('%s') }}" % _plan.PLAN_FILE
