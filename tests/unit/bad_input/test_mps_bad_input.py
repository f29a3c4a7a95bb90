# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""Bad input for MPS and compute modes: the mps and compute_mode modules, the mps_plan and mps_client_env filters
and the mps role's preflight (issue 12).

One table per runner, of plain tuples (id, input, names the message must hold), and one parametrized test each,
asserting with support.bad_input.assert_refused: the run fails, no traceback, the message names the input, and
nothing changed (the daemon's settings, the simulator's NVML mutation counter, the filter's input, the files the
role would manage). To add a case, add a row.
"""

from __future__ import absolute_import, division, print_function

import copy
import os

import pytest

import simctl
from ansible_collections.gpufleet.core.plugins.modules import compute_mode, mps
from ansible_collections.gpufleet.core.plugins.plugin_utils._mps import mps_client_env, mps_plan
from ansible.errors import AnsibleFilterError

from ..conftest import ModuleFail
from ..support.bad_input import assert_refused, snapshot
from ..support.sim import HOSTS_DIR, MPS_CONTROL, SIM_DIR, gpu_uuid, load_host, mps_control_daemon
from ..support.topology import A100_PROFILES, gpu, mig_instance, node, topology
from .roles import run_role_cases

# -- the mps module, against the control daemon's test double (it sees one device, 0) ------------------------------

MPS_CASES = [
    ('percentage is a word', {'default_active_thread_percentage': 'fifty'},
     ['default_active_thread_percentage', 'expected a number', "'fifty'"]),
    ('percentage is a boolean', {'default_active_thread_percentage': True}, ['expected a number', 'True']),
    ('percentage is zero', {'default_active_thread_percentage': 0}, ['default_active_thread_percentage', '1..100']),
    ('percentage from -e is above 100', {'default_active_thread_percentage': '150'}, ['1..100', '150']),
    ('percentage is a list', {'default_active_thread_percentage': [50]}, ['expected a number', '[50]']),
    ('memory limit has no unit', {'default_pinned_mem_limit': 20480},
     ['default_pinned_mem_limit[0]', '20480', 'has no unit']),
    ('memory limit is negative', {'default_pinned_mem_limit': '-1G'}, ["'-1G'", 'negative']),
    ('memory limit rounds down to zero', {'default_pinned_mem_limit': '512K'}, ["'512K'", 'rounds down to 0 MiB']),
    ('memory limit is spelt out', {'default_pinned_mem_limit': '20 gigabytes'},
     ["'20 gigabytes'", 'is not a memory size']),
    ('memory limit names a device by a made-up name', {'default_pinned_mem_limit': {'gpu0': '20G'}},
     ["'gpu0'", 'not a device']),
    ('memory limit per device is a list', {'default_pinned_mem_limit': {'0': ['20G']}},
     ['default_pinned_mem_limit[0]', "['20G']"]),
    ('memory limit for a device the daemon does not see', {'default_pinned_mem_limit': {'4': '1G'}},
     ['set_default_device_pinned_mem_limit 4 1G', 'Invalid device 4']),
    ('state is misspelt', {'state': 'presnt'}, ['state', 'presnt']),
]


def _daemon_settings(send):
    return [send(command) for command in ('get_default_active_thread_percentage',
                                          'get_default_device_pinned_mem_limit 0',
                                          'get_default_device_pinned_mem_limit 4')]


@pytest.mark.parametrize('options, names', [case[1:] for case in MPS_CASES], ids=[case[0] for case in MPS_CASES])
def test_mps_module_refuses(run_module, tmp_path, options, names):
    with mps_control_daemon(tmp_path) as daemon:
        before = _daemon_settings(daemon['send'])
        try:
            result = run_module(mps, dict(options, pipe_directory=daemon['pipe'], control_command=MPS_CONTROL))
            failed, message = False, repr(result)
        except ModuleFail as refused:
            failed, message = not refused.result.get('changed'), refused.result['msg']
        assert_refused(failed, message, names, before, _daemon_settings(daemon['send']))


# -- the compute_mode module, against the NVML simulator -----------------------------------------------------------

A100_GPU0 = 'GPU-5c6f7a2e-1b3d-4e8f-9a0b-1c2d3e4f5a60'
A100_MIG = 'MIG-1a2b3c4d-5e6f-5a7b-8c9d-0e1f2a3b4c01'

# (id, simulated host: a name or (model, count, settings), module arguments, names)
COMPUTE_MODE_CASES = [
    ('a MIG device instead of its GPU', 'reference-a100', {'gpus': [A100_MIG], 'mode': 'exclusive_process'},
     [A100_MIG, 'MIG devices have no compute mode of their own']),
    ('a GPU the host does not have', 'reference-a100', {'gpus': ['GPU-nope'], 'mode': 'default'},
     ['GPU-nope', 'no GPU']),
    ('one unknown GPU among known ones changes none', 'reference-a100',
     {'gpus': [A100_GPU0, 'GPU-nope'], 'mode': 'prohibited'}, ['GPU-nope']),
    ('exclusive_thread, which NVML retired', 'reference-a100', {'gpus': [A100_GPU0], 'mode': 'exclusive_thread'},
     ['mode', 'exclusive_thread']),
    ('exclusive process on a GPU in MIG mode', 'single-h200',
     {'gpus': ['GPU-0d2f4b6a-8c0e-4a1c-b3d5-e7f9a1b3c5d7'], 'mode': 'exclusive_process'},
     ['GPU-0d2f4b6a-8c0e-4a1c-b3d5-e7f9a1b3c5d7', 'is in MIG mode']),
    ('exclusive process on three GPUs in MIG mode, one named twice', ('A100-80GB-PCIe', 3, {'mig_mode': 1}),
     {'gpus': [gpu_uuid(0), gpu_uuid(1), gpu_uuid(2), gpu_uuid(1)], 'mode': 'exclusive_process'},
     ['%s, %s, %s are in MIG mode' % (gpu_uuid(0), gpu_uuid(1), gpu_uuid(2))]),
    ('gpus given as an index', 'reference-a100', {'gpus': ['0'], 'mode': 'default'},
     ['no GPU 0 on this host', 'Name GPUs by UUID']),
]


@pytest.mark.parametrize('host, options, names', [case[1:] for case in COMPUTE_MODE_CASES],
                         ids=[case[0] for case in COMPUTE_MODE_CASES])
def test_compute_mode_module_refuses(run_module, sim_hosts, host, options, names):
    if isinstance(host, str):
        served = sim_hosts.named(host)
    else:
        model, count, settings = host
        served = sim_hosts.with_gpus(model, count, **settings)
    before = simctl.mutations(served['state_file'])
    try:
        result = run_module(compute_mode, options)
        failed, message = False, repr(result)
    except ModuleFail as refused:
        failed, message = not refused.result.get('changed'), refused.result['msg']
        # A GPU shared by a refusal is named once.
        for uuid in set(gpu for gpu in options['gpus'] if gpu.startswith(('GPU-', 'MIG-'))):
            assert message.count(uuid) <= 1, message
    assert_refused(failed, message, names, before, simctl.mutations(served['state_file']))


# -- the mps_plan and mps_client_env filters -----------------------------------------------------------------------

GPU0 = 'GPU-aaaaaaaa-0000-4000-8000-000000000000'
GPU1 = 'GPU-aaaaaaaa-0000-4000-8000-000000000001'
MIG_A = 'MIG-bbbbbbbb-0000-5000-8000-00000000000a'
TOPOLOGY = topology(nodes=[node(0, range(8))],
                    gpus=[gpu(0, GPU0), gpu(1, GPU1, instances=[mig_instance('1g.10gb', [MIG_A])])],
                    mig_profiles=A100_PROFILES)


def daemon(**changes):
    return dict({'device': GPU0, 'user': 'infer'}, **changes)


# (id, filter arguments after the topology, names)
PLAN_CASES = [
    ('the module\'s plural spelling of the memory limit', [[daemon(default_pinned_mem_limits='20G')]],
     ['default_pinned_mem_limits', 'did you mean default_pinned_mem_limit?']),
    ('a client\'s misspelt memory limit', [[daemon(clients=[{'name': 'a', 'pinned_mem_limt': '2G'}])]],
     ['client a', 'pinned_mem_limt', 'did you mean pinned_mem_limit?']),
    ('a client above its daemon\'s thread percentage',
     [[daemon(default_active_thread_percentage=40, clients=[{'name': 'llm', 'active_thread_percentage': 60}])]],
     ['client llm', 'active_thread_percentage 60', "daemon's default 40", 'can only lower']),
    ('a client above its daemon\'s memory limit',
     [[daemon(default_pinned_mem_limit='20G', clients=[{'name': 'llm', 'pinned_mem_limit': '40G'}])]],
     ['client llm', 'pinned_mem_limit 40G', 'default_pinned_mem_limit 20G', 'can only lower']),
    ('a memory limit larger than the MIG device', [[daemon(device=MIG_A, default_pinned_mem_limit='10G')]],
     [MIG_A, "'10G'", 'more than the device has (9728 MiB)']),
    ('a memory limit without a unit', [[daemon(default_pinned_mem_limit='20480')]],
     ['default_pinned_mem_limit', "'20480'", 'has no unit']),
    ('a memory limit of zero', [[daemon(default_pinned_mem_limit='0G')]], ["'0G'", 'rounds down to 0 MiB']),
    ('a negative client memory limit', [[daemon(clients=[{'name': 'a', 'pinned_mem_limit': '-2G'}])]],
     ['client a', "'-2G'", 'negative']),
    ('a percentage that is a word', [[daemon(default_active_thread_percentage='half')]],
     ['default_active_thread_percentage', 'expected a number', "'half'"]),
    ('a percentage that is a boolean', [[daemon(clients=[{'name': 'a', 'active_thread_percentage': True}])]],
     ['client a', 'expected a number', 'True']),
    ('a daemon user with a shell command', [[daemon(user='a;rm -rf /')]],
     ["'a;rm -rf /'", 'not a plain user or group name']),
    ('a daemon user with a trailing newline', [[daemon(user='infer\n')]], ["'infer\\n'", 'not a plain user']),
    ('a daemon group with a space', [[daemon(group='gpu users')]], ['group', "'gpu users'"]),
    ('a pipe directory with ..', [[daemon(pipe_directory='/run/mps/../../etc')]],
     ['pipe_directory', "'/run/mps/../../etc'", 'not a plain absolute directory']),
    ('a relative log directory', [[daemon(log_directory='logs/mps')]], ['log_directory', "'logs/mps'"]),
    ('a pipe root with a trailing newline', [[daemon()], '/run/gpufleet-mps\n'],
     ['pipe_root', "'/run/gpufleet-mps\\n'"]),
    ('daemons as a mapping', [{'GPU0': daemon()}], ['daemons must be a list']),
    ('a daemon that is a string', [[GPU0]], ['MPS daemon 1', repr(GPU0)]),
    ('clients as a mapping', [[daemon(clients={'name': 'a'})]], ['clients must be a list']),
    ('a device named by its index', [[daemon(device=0)]], ['MPS daemon 1 (0)', 'no GPU or MIG device']),
]


@pytest.mark.parametrize('args, names', [case[1:] for case in PLAN_CASES], ids=[case[0] for case in PLAN_CASES])
def test_mps_plan_filter_refuses(args, names):
    before = copy.deepcopy(args)
    with pytest.raises(AnsibleFilterError) as refused:
        mps_plan(TOPOLOGY, *args)
    assert_refused(True, str(refused.value), ['gpufleet.core.mps_plan'] + names, before, args)


PLANNED = mps_plan(TOPOLOGY, [daemon(clients=[{'name': 'llm'}])])

# (id, filter input, device, client, names)
CLIENT_ENV_CASES = [
    ('the daemons before mps_plan', [daemon(clients=[{'name': 'llm'}])], GPU0, 'llm', ['the list gpufleet.core.mps_plan returns']),
    ('a client the daemon does not list', PLANNED, GPU0, 'zzz', ['no client zzz', 'clients: llm']),
    ('a device no daemon serves', PLANNED, GPU1, 'llm', ['no MPS daemon serves %s' % GPU1]),
    ('the device as an index', PLANNED, 0, 'llm', ['device and client are strings', 'got 0']),
    ('a mapping instead of the list', {'GPU0': PLANNED}, GPU0, 'llm', ['the list gpufleet.core.mps_plan returns']),
]


@pytest.mark.parametrize('daemons, device, client, names', [case[1:] for case in CLIENT_ENV_CASES],
                         ids=[case[0] for case in CLIENT_ENV_CASES])
def test_mps_client_env_filter_refuses(daemons, device, client, names):
    before = copy.deepcopy(daemons)
    with pytest.raises(AnsibleFilterError) as refused:
        mps_client_env(daemons, device, client)
    assert_refused(True, str(refused.value), ['gpufleet.core.mps_client_env'] + names, before, daemons)


# -- the mps role's preflight: one ansible-playbook run, one localhost alias per case -------------------------------

LAB = load_host('mps-lab')
LAB_GPU = [g['uuid'] for g in LAB['gpus'] if not g.get('mig_mode')][0]


def role_daemon(**changes):
    return dict({'device': LAB_GPU, 'user': 'gpufleet-infer'}, **changes)


# (id, the case's variables, names)
ROLE_CASES = [
    ('daemon user with a shell command', {'mps_daemons': [role_daemon(user='a;rm -rf /')]},
     ["'a;rm -rf /'", 'not a plain user or group name']),
    ('daemon group with a shell command', {'mps_daemons': [role_daemon(group='wheel;id')]}, ["'wheel;id'"]),
    ('pipe root with ..', {'mps_pipe_root': '/run/../etc'}, ['mps_pipe_root', '/run/../etc']),
    ('pipe root with a trailing newline', {'mps_pipe_root': '/run/gpufleet-mps\n'},
     ['mps_pipe_root', '"/run/gpufleet-mps\\n"']),
    ('pipe root outside /run', {'mps_pipe_root': '/tmp/mps'}, ['mps_pipe_root', '/tmp/mps']),
    ('log root with ..', {'mps_log_root': '/var/log/../../etc'}, ['mps_log_root', '/var/log/../../etc']),
    ('the module\'s spelling of the memory limit', {'mps_daemons': [role_daemon(default_pinned_mem_limits='20G')]},
     ['default_pinned_mem_limits', 'did you mean default_pinned_mem_limit?']),
    ('a percentage from -e that is not a number', {'mps_daemons': [role_daemon(default_active_thread_percentage='40%')]},
     ['default_active_thread_percentage', 'expected a number', "'40%'"]),
    ('a client above its daemon\'s memory limit',
     {'mps_daemons': [role_daemon(default_pinned_mem_limit='20G', clients=[{'name': 'llm', 'pinned_mem_limit': '40G'}])]},
     ['client llm', 'can only lower']),
    ('a memory limit without a unit', {'mps_daemons': [role_daemon(default_pinned_mem_limit='20480')]},
     ["'20480'", 'has no unit']),
]


@pytest.fixture(scope='module')
def role_outcomes(tmp_path_factory):
    """Every ROLE_CASES case in one check-mode run of the role's preflight, and what it touched."""
    workdir = tmp_path_factory.mktemp('mps-role-cases')
    config_dir = workdir / 'etc-gpufleet-mps'
    config_dir.mkdir()
    (config_dir / 'GPU-old.env').write_text('# a daemon set up before\n')
    state = str(workdir / 'nvml-state.json')
    common = {'mps_config_dir': str(config_dir), 'mps_environment': {
        'PYTHONPATH': SIM_DIR, 'GPUFLEET_NVML_SIM_HOST': os.path.join(HOSTS_DIR, 'mps-lab.json'),
        'GPUFLEET_NVML_SIM_STATE': state}}
    before = (snapshot(config_dir), simctl.mutations(state))
    run_dir = workdir / 'run'
    run_dir.mkdir()
    outcomes = run_role_cases('mps', 'preflight.yml', [(case[0], case[1]) for case in ROLE_CASES], run_dir,
                              common_vars=common)
    return outcomes, before, (snapshot(config_dir), simctl.mutations(state))


@pytest.mark.parametrize('case_id, names', [(case[0], case[2]) for case in ROLE_CASES],
                         ids=[case[0] for case in ROLE_CASES])
def test_mps_role_preflight_refuses(role_outcomes, case_id, names):
    outcomes, before, after = role_outcomes
    outcome = outcomes[case_id]
    assert_refused(outcome['failed'] and not outcome.get('changed'), outcome['message'], names, before, after)
