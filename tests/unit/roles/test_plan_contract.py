# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""The plan path and the default unit name are _plan.py's; the YAML and the documentation that must repeat them
(YAML cannot import Python) say the same."""

from __future__ import absolute_import, division, print_function

import os

import yaml

from ansible_collections.gpufleet.core.plugins.module_utils import _plan
from ansible_collections.gpufleet.core.plugins.modules import numa_audit, service_plan

from .conftest import role_yaml

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), '..', '..', '..'))


def test_the_gpu_services_role_writes_the_plan_where_the_readers_look():
    defaults = role_yaml('gpu_services', 'defaults/main.yml')
    assert defaults['gpu_services_plan_file'] == _plan.PLAN_FILE
    assert defaults['gpu_services_unit_prefix'] == _plan.UNIT_PREFIX


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
