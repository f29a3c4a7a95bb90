# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""Bad input for placement: place_services and service_units specs (issue 12).

Each table is a list of plain tuples (id, input, names the message must hold); each runner is one parametrized test
asserting with support.bad_input.assert_refused. To add a case, add a row. Values that ``-e`` passes as strings are
accepted where they are unambiguous numbers: those are checked here too, against the plan of the same spec in numbers.
"""

from __future__ import absolute_import, division, print_function

import copy

import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.gpufleet.core.plugins.filter.placement import FilterModule
from ansible_collections.gpufleet.core.plugins.plugin_utils._placement import ServicePlanError, plan_services

from ..support.bad_input import assert_refused
from ..support.topology import A100, A100_PROFILES, gpu, mig_instance, node, topology

GPU_A = 'GPU-00000000-0000-4000-8000-00000000000a'
GPU_B = 'GPU-00000000-0000-4000-8000-00000000000b'
GPU_M = 'GPU-00000000-0000-4000-8000-00000000000c'
MIG_1 = 'MIG-00000000-0000-4000-8000-000000000001'
FACT = topology(nodes=[node(0, range(0, 8)), node(1, range(8, 16)), node(2, [])],
                gpus=[gpu(0, GPU_A, bus='17', node=0), gpu(1, GPU_B, bus='B1', node=1),
                      gpu(2, GPU_M, bus='C1', node=1, instances=[mig_instance('1g.10gb', [MIG_1], start=0)])],
                mig_profiles=A100_PROFILES)
DAEMONS = [{'device': GPU_B, 'user': 'infer', 'default_active_thread_percentage': 50, 'clients': []}]
FILTERS = FilterModule().filters()


def web(**keys):
    return dict({'name': 'web', 'gpus': 1}, **keys)


# (id, place_services keyword arguments besides the topology, names)
PLACE_CASES = [
    ('a name with a trailing newline', {'services': [web(name='web\n')]}, ["'web\\n'", 'name']),
    ('a name that is not a string', {'services': [web(name=7)]}, ['name 7']),
    ('a name with a path in it', {'services': [web(name='../etc')]}, ["'../etc'"]),
    ('node given as a word from -e', {'services': [web(node='one')]}, ["node is 'one'", 'expected a number']),
    ('node given as a float string', {'services': [web(node='1.0')]}, ["'1.0'", 'expected a number']),
    ('node that the host lacks', {'services': [web(node='7')]}, ['node 7', 'nodes: 0, 1, 2']),
    ('node that has no CPUs', {'services': [web(node=2)]}, ['node 2 has no CPUs']),
    ('cpus given as a word from -e', {'services': [web(cpus='four')]}, ["cpus is 'four'", 'expected a number']),
    ('cpus with a unit', {'services': [web(cpus='4c')]}, ["'4c'", 'expected a number']),
    ('cpus zero', {'services': [web(cpus='0')]}, ['cpus must be', 'got 0']),
    ('cpus a boolean', {'services': [web(cpus=True)]}, ['cpus must be', 'got True']),
    ('cpus a list', {'services': [web(cpus=[0, 1])]}, ['cpus must be', '[0, 1]']),
    ('gpus a word', {'services': [web(gpus='two')]}, ["got 'two'", 'gpus must be']),
    ('gpus a negative string', {'services': [web(gpus='-1')]}, ['gpus must be 0', '-1']),
    ('gpus a dict of nothing known', {'services': [web(gpus={'count': 2})]}, ["{'count': 2}", 'gpus must be']),
    ('gpus holds None', {'services': [web(gpus=[None])]}, ['None', 'no GPU or MIG device']),
    ('gpus holds a dict', {'services': [web(gpus=[{'uuid': GPU_A}])]}, [GPU_A, 'no GPU or MIG device']),
    ('gpus names an index the host lacks', {'services': [web(gpus=['9'])]}, ['no GPU index 9']),
    ('gpus names three indices the host lacks', {'services': [web(gpus=['7', 8, '9'])]},
     ['there are no GPU indices 7, 8 and 9 on this host']),
    ('gpus names a GPU in MIG mode and twice the same GPU', {'services': [web(gpus=[2, GPU_A, 0, 'GPU-x', 'GPU-y'])]},
     [GPU_M + ' is in MIG mode', GPU_A + ' is listed twice', "no GPU or MIG devices 'GPU-x' and 'GPU-y'"]),
    ('gpus names a UUID with a trailing newline', {'services': [web(gpus=[GPU_A + '\n'])]}, [GPU_A]),
    ('a MIG count that is a word', {'services': [web(gpus={'mig_profile': '1g.10gb', 'count': 'two'})]},
     ["count of MIG devices is 'two'", 'expected a number']),
    ('an MPS percentage with a percent sign', {'services': [web(gpus={'mps': {'active_thread_percentage': '50%'}})],
                                               'mps_daemons': DAEMONS},
     ["active_thread_percentage is '50%'", 'expected a number']),
    ('an MPS percentage above 100 as a string', {'services': [web(gpus={'mps': {'active_thread_percentage': '150'}})],
                                                 'mps_daemons': DAEMONS}, ['active_thread_percentage', '150']),
    ('exclusive a string', {'services': [web(exclusive='yes')]}, ['exclusive', "'yes'"]),
    ('memory_policy unknown', {'services': [web(memory_policy='strict')]}, ['memory_policy', "'strict'"]),
    ('services a dict where a list is expected', {'services': {'web': {'gpus': 1}}}, ['services must be a list']),
    ('a service that is a string', {'services': ['web']}, ["got 'web'", 'a service must be a dict']),
    ('reserved_cpus a dict', {'services': [web()], 'reserved_cpus': {'cpus': '0'}}, ['reserved_cpus', "{'cpus': '0'}"]),
    ('reserved_cpus holds None', {'services': [web()], 'reserved_cpus': [0, None]}, ['reserved_cpus', '[0, None]']),
    ('reserved_cpus malformed', {'services': [web()], 'reserved_cpus': '0-x'}, ['reserved_cpus', "'0-x'"]),
    # Issue 29: a CPU the host does not have reserves nothing; the message names it, the host's CPUs and the fix.
    ('reserved_cpus naming a CPU the host lacks', {'services': [web()], 'reserved_cpus': '0,500'},
     ['reserved_cpus names CPU 500, which this host does not have', "the host's online CPUs: 0-15",
      'fix reserved_cpus (gpu_services_reserved_cpus)']),
    ('reserved_cpus as a list naming CPUs the host lacks', {'services': [web()], 'reserved_cpus': [1, 16, 17, 99]},
     ['CPUs 16-17,99, which this host does not have', 'online CPUs: 0-15']),
    ('reserved_cpus naming offline CPUs', {'services': [web()], 'reserved_cpus': '0,20-21', 'topology': dict(
        FACT, cpu=dict(FACT['cpu'], offline_cpulist='16-31'))},
     ['CPUs 20-21, which are offline', 'online CPUs: 0-15', 'gpu_services_reserved_cpus', 'bring the offline ones online']),
    ('a topology with None among a node\'s CPUs', {'services': [web()], 'topology': dict(FACT, numa_nodes=[
        {'id': 0, 'cpus': [0, None]}])}, ["'cpus': [0, None]", 'gather it again']),
    ('previous a string', {'services': [web()], 'previous': 'placement.json'}, ['previous', 'str']),
    ('previous entry without its keys', {'services': [web()], 'previous': [{'name': 'web'}]},
     ['previous entry 1', 'numa_node']),
]


@pytest.mark.parametrize('arguments, names', [case[1:] for case in PLACE_CASES], ids=[case[0] for case in PLACE_CASES])
def test_place_services_refuses(arguments, names):
    arguments = dict(arguments)
    fact = arguments.pop('topology', FACT)
    before = copy.deepcopy((fact, arguments))
    with pytest.raises(AnsibleFilterError) as failed:
        FILTERS['place_services'](fact, **arguments)
    assert_refused(True, str(failed.value), names, before, (fact, arguments))


# (id, spec with -e strings, the same spec in numbers)
FROM_EXTRA_VARS = [
    ('node and cpus as strings', web(node='1', cpus='4'), web(node=1, cpus=4)),
    ('a GPU count as a string', web(gpus='1'), web(gpus=1)),
    ('a MIG count as a string', web(gpus={'mig_profile': '1g.10gb', 'count': '1'}),
     web(gpus={'mig_profile': '1g.10gb', 'count': 1})),
    ('an MPS percentage as a string', web(gpus={'mps': {'active_thread_percentage': '25'}}),
     web(gpus={'mps': {'active_thread_percentage': 25}})),
]


@pytest.mark.parametrize('given, meant', [case[1:] for case in FROM_EXTRA_VARS], ids=[case[0] for case in FROM_EXTRA_VARS])
def test_unambiguous_numbers_from_extra_vars_plan_as_numbers(given, meant):
    daemons = DAEMONS if 'mps' in str(given) else None
    assert FILTERS['place_services'](FACT, [given], mps_daemons=daemons) == \
        FILTERS['place_services'](FACT, [meant], mps_daemons=daemons)


PLAN = FILTERS['place_services'](FACT, [web()])


def svc(**keys):
    return web(**dict({'command': '/usr/bin/serve'}, **keys))


# (id, (plan, services), names)
UNIT_CASES = [
    ('a user with a shell command', (PLAN, [svc(user='a;rm -rf /')]), ['user', 'a;rm -rf /']),
    ('a user with a trailing newline', (PLAN, [svc(user='svc\n')]), ['user', 'svc']),
    ('a user that is root', (PLAN, [svc(user='root')]), ["user 'root'", 'never runs as root']),
    ('read_write_paths a string', (PLAN, [svc(read_write_paths='/srv/data')]), ['read_write_paths', '/srv/data']),
    ('read_write_paths climbing with ..', (PLAN, [svc(read_write_paths=['/srv/../etc'])]),
     ['read_write_paths', '/srv/../etc']),
    ('read_write_paths relative', (PLAN, [svc(read_write_paths=['data'])]), ['read_write_paths', "'data'"]),
    ('read_write_paths holds None', (PLAN, [svc(read_write_paths=[None])]), ['read_write_paths', 'None']),
    ('environment a list', (PLAN, [svc(environment=['A=1'])]), ['environment']),
    ('environment setting the planner\'s variable', (PLAN, [svc(environment={'CUDA_VISIBLE_DEVICES': '0'})]),
     ['CUDA_VISIBLE_DEVICES']),
    ('a command of two lines', (PLAN, [svc(command='serve\nrm -rf /')]), ['command is one line']),
    ('an unknown mode', (PLAN, [svc(mode='docker')]), ["'docker'", 'mode']),
    ('the plan a dict', ({'web': PLAN[0]}, [svc(command='/bin/true')]), ['the plan must be place_services']),
    ('a plan entry that is a string', (['web'], [svc(command='/bin/true')]), ['plan entry 1', "'web'"]),
    ('services a dict', (PLAN, {'web': {}}), ['gpu_services_services must be a list']),
]


@pytest.mark.parametrize('arguments, names', [case[1:] for case in UNIT_CASES], ids=[case[0] for case in UNIT_CASES])
def test_service_units_refuses(arguments, names):
    plan, services = arguments
    before = copy.deepcopy(arguments)
    with pytest.raises(AnsibleFilterError) as failed:
        FILTERS['service_units'](plan, services)
    assert_refused(True, str(failed.value), names, before, arguments)


def test_reserved_cpus_the_host_lacks_are_refused_by_the_gpu_services_role_s_planner_too():
    # The gpu_services role (and the gpufleet preflight) plan through the service_plan action, which calls this.
    before = copy.deepcopy(FACT)
    with pytest.raises(ServicePlanError) as failed:
        plan_services(FACT, [svc()], reserved_cpus='0,500')
    assert_refused(True, str(failed.value), ['CPU 500, which this host does not have', 'online CPUs: 0-15',
                                             'fix reserved_cpus (gpu_services_reserved_cpus)'], before, FACT)


def test_the_tables_are_big_enough_and_ids_unique():
    ids = [case[0] for table in (PLACE_CASES, UNIT_CASES) for case in table]
    assert len(ids) == len(set(ids))
    assert len(ids) >= 30
    assert A100 in FACT['mig_profiles']
