# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""The stage plan (module_utils/_stage_plan.py): which stages a host goes through and the roles each runs there, and
what each receipt-kept stage is checked against. The rollout reads it and decides nothing (test_rollout_tags.py)."""

from __future__ import absolute_import, division, print_function

import pytest

from ansible_collections.gpufleet.core.plugins.module_utils import _fleet_inventory as fleet
from ansible_collections.gpufleet.core.plugins.module_utils import _stage_plan as plan
from ansible_collections.gpufleet.core.plugins.module_utils._errors import GpufleetError
from ansible_collections.gpufleet.core.plugins.module_utils._values import Unrendered

from ...support.topology import as_version_1, gpu, node, topology

SWITCHES = dict(('gpufleet_%s_enabled' % stage, True) for stage in plan.STAGES)
SERVICES = [{'name': 'llm', 'command': '/opt/llm/serve'}]
FULL = {'mig_layouts': [{'gpus': [0], 'profiles': ['3g.40gb']}], 'mps_daemons': [{'gpus': [1]}],
        'gpu_services_services': SERVICES}


def settings(**changes):
    return dict(dict(SWITCHES, gpufleet_drivers_roles=['nvidia_driver', 'container_toolkit', 'cuda']), **changes)


def names(stages):
    return [stage['name'] for stage in stages]


def test_a_gpu_host_with_layouts_daemons_and_services_goes_through_every_gpu_stage_with_every_role():
    stages = plan.host_stages(settings(), True, False, FULL)
    assert names(stages) == ['drivers', 'exporter', 'partition', 'services', 'verify', 'watchdog']
    assert plan.plan_roles(stages) == ['nvidia_driver', 'container_toolkit', 'cuda', 'dcgm_exporter', 'mig', 'mps',
                                       'gpu_services', 'gpu_watchdog']
    assert [stage['name'] for stage in stages if stage['receipt']] == list(plan.RECEIPT_STAGES)
    assert [stage['name'] for stage in stages if stage['stops_services']] == ['partition', 'services']


@pytest.mark.parametrize('given, roles', [
    ({}, []),  # nothing to partition: no partition stage
    ({'mig_layouts': []}, []),
    ({'mig_parted_config_file': '/etc/mig/config.yaml'}, ['mig']),
    ({'mps_daemons': [{'gpus': [0]}]}, ['mps']),
    # A value the host cannot render is its role's to report: the role is in the plan, so validate checks it.
    ({'mig_layouts': Unrendered('{{ hk_layout }}', ['hk_layout'])}, ['mig']),
])
def test_the_partition_stage_runs_the_roles_the_host_has_something_for(given, roles):
    stages = dict((stage['name'], stage) for stage in plan.host_stages(settings(), True, False, given))
    assert stages.get('partition', {'roles': []})['roles'] == roles


def test_a_host_without_services_gets_no_services_verify_or_watchdog_stage():
    assert names(plan.host_stages(settings(), True, False, {'gpu_services_services': []})) == ['drivers', 'exporter']


def test_a_cpu_monitoring_host_with_services_runs_services_verify_and_monitoring_only():
    stages = plan.host_stages(settings(), False, True, {'gpu_services_services': SERVICES})
    assert names(stages) == ['services', 'verify', 'monitoring']
    assert plan.plan_roles(stages) == ['gpu_services', 'monitoring']


@pytest.mark.parametrize('stage', plan.STAGES)
def test_each_stage_switch_takes_its_stage_and_only_it_out(stage):
    on = names(plan.host_stages(settings(), True, True, FULL))
    off = names(plan.host_stages(settings(**{'gpufleet_%s_enabled' % stage: False}), True, True, FULL))
    assert on == list(plan.STAGES) and off == [name for name in plan.STAGES if name != stage]


def test_the_drivers_stage_runs_the_drivers_roles_chosen_in_the_stage_order_and_none_is_no_stage():
    stages = plan.host_stages(settings(gpufleet_drivers_roles=['cuda', 'nvidia_driver']), True, False, {})
    assert stages[0]['roles'] == ['nvidia_driver', 'cuda']
    assert 'drivers' not in names(plan.host_stages(settings(gpufleet_drivers_roles=[]), True, False, {}))


def test_every_stage_switch_is_a_switch_validate_normalises_and_every_role_has_one_stage():
    assert set('gpufleet_%s_enabled' % stage for stage in plan.STAGES) <= set(fleet.STAGE_SWITCHES)
    roles = [role for stage in plan.STAGES for role in plan.STAGE_ROLES[stage]]
    assert len(roles) == len(set(roles)) and fleet.DRIVERS_ROLES == plan.STAGE_ROLES['drivers']
    assert set(plan.RECEIPT_STAGES) | set(plan.TOPOLOGY_STAGES) | set(plan.SERVICE_STAGES) <= set(plan.STAGES)


def _fact():
    return topology(nodes=[node(1, [2, 3, 6, 7]), node(0, [0, 1, 4, 5])],
                    gpus=[gpu(0, 'GPU-a', bus='17', node=0), gpu(1, 'GPU-b', bus='31', node=1)])


def test_the_receipt_check_gives_the_placing_stages_the_gpus_and_numa_nodes_of_the_topology_model():
    check = plan.receipt_check(plan.host_stages(settings(), True, False, FULL), _fact())
    assert check['order'] == list(plan.RECEIPT_STAGES)
    inputs = {'gpus': ['GPU-a', 'GPU-b'], 'numa_nodes': ['0-1,4-5', '2-3,6-7']}
    assert check['stages']['partition'] == {'roles': ['mig', 'mps'], 'inputs': inputs}
    assert check['stages']['services'] == {'roles': ['gpu_services'], 'inputs': inputs}
    assert check['stages']['drivers'] == {'roles': ['nvidia_driver', 'container_toolkit', 'cuda'], 'inputs': None}
    # The same host in the fact's first layout (cpus lists) has the same inputs.
    assert plan.receipt_check(plan.host_stages(settings(), True, False, FULL), as_version_1(_fact())) == check


def test_a_host_without_a_topology_or_a_placing_stage_has_no_topology_inputs():
    check = plan.receipt_check(plan.host_stages(settings(), False, True, {'gpu_services_services': SERVICES}), {})
    services = {'roles': ['gpu_services'], 'inputs': {'gpus': [], 'numa_nodes': []}}
    assert check == {'order': ['services'], 'stages': {'services': services}}
    # No stage that places work: the topology is not read at all.
    drivers = {'roles': ['nvidia_driver', 'container_toolkit', 'cuda'], 'inputs': None}
    assert plan.receipt_check(plan.host_stages(settings(), True, False, {}), {'bad': 1}) == {
        'order': ['drivers', 'exporter'],
        'stages': {'drivers': drivers, 'exporter': {'roles': ['dcgm_exporter'], 'inputs': None}}}


def test_a_topology_the_model_cannot_read_is_refused_with_the_fix():
    with pytest.raises(GpufleetError, match='topology_facts'):
        plan.receipt_check(plan.host_stages(settings(), True, False, FULL), {'bad': 1})
