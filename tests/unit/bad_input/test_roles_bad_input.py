# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""Bad input for the install and services roles' preflights: gpu_services, dcgm_exporter, cuda, nvidia_driver and
container_toolkit (issue 12).

One table per role, a list of plain tuples (id, the case's variables, names the message must hold); every case of a
role runs in ONE check-mode ansible-playbook run (roles.run_role_cases), and each is asserted with
support.bad_input.assert_refused. The preflights read this machine's facts; the roles' repository URLs are set to a
mirror so that the distribution check does not decide the cases. To add a case, add a row.
"""

from __future__ import absolute_import, division, print_function

import json
import os
import subprocess
import sys

import pytest

from ..support.bad_input import assert_refused
from .roles import COLLECTIONS, run_role_cases

MIRROR = 'http://mirror.invalid/cuda'
# What a role would change first on this machine: apt sources, pins and keyrings, units, the plan.
WATCHED = ('/etc/apt/sources.list.d', '/etc/apt/preferences.d', '/usr/share/keyrings', '/etc/systemd/system',
           '/etc/gpufleet')

GPU_SERVICES_CASES = [
    ('plan file with a trailing line break', {'gpu_services_plan_file': '/etc/gpufleet/placement.json\n'},
     ['gpu_services_plan_file', '/etc/gpufleet/placement.json']),
    ('plan file climbing out with ..', {'gpu_services_plan_file': '/etc/gpufleet/../../tmp/placement.json'},
     ['gpu_services_plan_file', '/etc/gpufleet/../../tmp/placement.json', 'without ..']),
    ('unit prefix with a trailing line break', {'gpu_services_unit_prefix': 'gpufleet-svc-\n'},
     ['gpu_services_unit_prefix', 'gpufleet-svc-']),
    ('user prefix with a shell character', {'gpu_services_user_prefix': 'gpu;'}, ['gpu_services_user_prefix', 'gpu;']),
    ('reserved CPUs as a list', {'gpu_services_reserved_cpus': [0, 1]}, ['gpu_services_reserved_cpus', '[0, 1]']),
    ('reserved CPUs with a trailing line break', {'gpu_services_reserved_cpus': '0-1\n'},
     ['gpu_services_reserved_cpus', '0-1']),
    ('numactl command with a second line', {'gpu_services_numactl_command': '/usr/bin/numactl\n/bin/sh'},
     ['gpu_services_numactl_command']),
    ('a device entry that smuggles a second line', {'gpu_services_device_allow': ['/dev/nvidiactl\nDeviceAllow=/dev/sda']},
     ['gpu_services_device_allow']),
    ('services as a dict', {'gpu_services_services': {'web': {'gpus': 1}}}, ['gpu_services_services must be a list']),
    ('MPS daemons as a dict', {'gpu_services_mps_daemons': {'device': 0}}, ['gpu_services_mps_daemons a list']),
    # The services' rules that need no host: the same checker as validate's (_service_specs).
    ('a native command that is not an absolute path',
     {'gpu_services_services': [{'name': 'llm', 'gpus': 0, 'command': 'serve --port 8000'}]},
     ['gpu_services_services: service llm: command is the string "serve --port 8000"', 'absolute path']),
    ('an MPS pinned-memory limit without a unit',
     {'gpu_services_services': [{'name': 'llm', 'command': '/opt/llm/bin/serve',
                                 'gpus': {'mps': {'device': 'GPU-1', 'pinned_mem_limit': '20'}}}]},
     ['gpu_services_services: service llm: gpus.mps.pinned_mem_limit', 'has no unit']),
    ('two services with one name',
     {'gpu_services_services': [{'name': 'web', 'gpus': 0, 'command': '/opt/web/bin/serve'},
                                {'name': 'web', 'gpus': 0, 'command': '/opt/web/bin/serve'}]},
     ['gpu_services_services entry 1: name is the string "web", which entries 1 and 2 share']),
]

DCGM_EXPORTER_CASES = [
    ('management networks as a string', {'dcgm_exporter_management_cidrs': '10.20.0.0/24'},
     ['dcgm_exporter_management_cidrs', "is the string '10.20.0.0/24'", "['10.20.0.0/24']"]),
    ('management network with host bits set', {'dcgm_exporter_management_cidrs': ['10.20.0.5/24']},
     ["'10.20.0.5/24' has host bits set", 'the network is 10.20.0.0/24']),
    ('IPv6 management network with host bits set', {'dcgm_exporter_management_cidrs': ['FD00::5/64']},
     ["'FD00::5/64' has host bits set", 'fd00::/64']),
    ('management network that is a word', {'dcgm_exporter_management_cidrs': ['10.20.0.0/24', 'lan']},
     ["'lan' is not a network"]),
    ('no management network', {'dcgm_exporter_management_cidrs': []}, ['dcgm_exporter_management_cidrs']),
    ('management networks as a mapping', {'dcgm_exporter_management_cidrs': {'10.20.0.0/24': 'lan'}},
     ['dcgm_exporter_management_cidrs', "{'10.20.0.0/24': 'lan'}"]),
    ('listen address with a prefix length', {'dcgm_exporter_management_cidrs': ['10.20.0.0/24'],
                                             'dcgm_exporter_listen_address': '10.20.0.5/24'},
     ['dcgm_exporter_listen_address 10.20.0.5/24', 'is a network']),
    ('listen address on every address', {'dcgm_exporter_management_cidrs': ['0.0.0.0/0'],
                                         'dcgm_exporter_listen_address': '0.0.0.0'},
     ['dcgm_exporter_listen_address 0.0.0.0', 'never 0.0.0.0']),
    ('exporter version with a trailing line break', {'dcgm_exporter_version': '4.1.3-1\n'},
     ['4.1.3-1', 'exact Debian versions']),
    ('CUDA major with a trailing line break', {'dcgm_exporter_cuda_major': '12\n'}, ['exact Debian versions']),
]

CUDA_CASES = [
    ('default release written as a number', {'cuda_default_release': 12.8},
     ['cuda_default_release is the number 12.8', 'quote it']),
    ('a toolkit release written as a number', {'cuda_toolkits': [{'release': 12.8, 'version': '12.8.1-1'}]},
     ['release 12.8 written as a number', 'quote it']),
    ('toolkits as a dict', {'cuda_toolkits': {'release': '12.8', 'version': '12.8.1-1'}},
     ['cuda_toolkits must be a list']),
    ('a release with a trailing line break',
     {'cuda_toolkits': [{'release': '12.8\n', 'version': '12.8.1-1'}], 'cuda_default_release': '12.8\n'},
     ['cuda_default_release', '12.8']),
    ('a default release not among the toolkits', {'cuda_default_release': '12.9'}, ['cuda_default_release', '12.9']),
]

NVIDIA_DRIVER_CASES = [
    ('branch with a trailing line break', {'nvidia_driver_branch': '570\n', 'nvidia_driver_version': '570.133.20'},
     ['nvidia_driver_branch', '570']),
    ('version of another branch', {'nvidia_driver_version': '580.95.05'}, ['nvidia_driver_version', '580.95.05']),
    ('version with a trailing line break', {'nvidia_driver_version': '570.133.20\n'},
     ['nvidia_driver_version', '570.133.20']),
    ('loaded-version file as a relative path', {'nvidia_driver_loaded_version_file': 'sys/module/nvidia/version'},
     ['nvidia_driver_loaded_version_file', 'sys/module/nvidia/version', 'absolute path']),
]

CONTAINER_TOOLKIT_CASES = [
    ('version with a trailing line break', {'container_toolkit_version': '1.17.4-1\n'},
     ['container_toolkit_version', '1.17.4-1']),
    ('version without a Debian revision', {'container_toolkit_version': '1.17.4'},
     ['container_toolkit_version', '1.17.4']),
]

# role -> (its cases, the variables every case of it gets)
ROLES = {
    'gpu_services': (GPU_SERVICES_CASES, {}),
    'dcgm_exporter': (DCGM_EXPORTER_CASES, {'dcgm_exporter_repo_url': MIRROR,
                                            'dcgm_exporter_management_cidrs': ['10.20.0.0/24']}),
    'cuda': (CUDA_CASES, {'cuda_repo_url': MIRROR}),
    'nvidia_driver': (NVIDIA_DRIVER_CASES, {'nvidia_driver_repo_url': MIRROR}),
    'container_toolkit': (CONTAINER_TOOLKIT_CASES, {}),
}


def watched():
    """The names and modification times of what the roles would change first; equal before and after a refusal."""
    found = {}
    for folder in WATCHED:
        if os.path.isdir(folder):
            found[folder] = sorted((name, os.lstat(os.path.join(folder, name)).st_mtime) for name in os.listdir(folder))
    return found


@pytest.fixture(scope='module')
def role_outcomes(tmp_path_factory):
    """Each role's cases in one check-mode run of its preflight: {role: (outcomes, before, after)}."""
    found = {}
    for role, (cases, common) in sorted(ROLES.items()):
        workdir = tmp_path_factory.mktemp('%s-cases' % role)
        before = watched()
        outcomes = run_role_cases(role, 'preflight.yml', [(case[0], case[1]) for case in cases], workdir,
                                  common_vars=common)
        found[role] = (outcomes, before, watched())
    return found


ALL_CASES = [(role, case[0], case[2]) for role, (cases, _common) in sorted(ROLES.items()) for case in cases]


@pytest.mark.parametrize('role, case_id, names', [
    pytest.param(*case, id='%s: %s' % case[:2])
    for case in ALL_CASES])
def test_role_preflight_refuses(role_outcomes, role, case_id, names):
    outcomes, before, after = role_outcomes[role]
    outcome = outcomes[case_id]
    assert_refused(outcome['failed'] and not outcome.get('changed'), outcome['message'], names, before, after)


def test_the_table_is_big_enough_and_ids_unique():
    assert len(ALL_CASES) >= 10
    assert len(set(case[:2] for case in ALL_CASES)) == len(ALL_CASES)


def test_the_exporter_listen_address_is_compared_as_an_address(tmp_path):
    """Upper case and long forms of the host's IPv6 address are that address; it is written in its canonical form."""
    given = ['fd00::5', 'FD00::5', 'fd00:0:0:0:0:0:0:5', 'FD00:0000::0005']
    hosts = dict(('form%d' % position, {'ansible_connection': 'local', 'ansible_python_interpreter': sys.executable,
                                        'dcgm_exporter_listen_address': address})
                 for position, address in enumerate(given))
    (tmp_path / 'inventory.json').write_text(json.dumps({'all': {'hosts': hosts}}))
    facts = {'distribution': 'Ubuntu', 'distribution_version': '22.04', 'distribution_major_version': '22',
             'distribution_release': 'jammy', 'architecture': 'x86_64', 'all_ipv4_addresses': ['192.0.2.9'],
             'all_ipv6_addresses': ['fd00::5', 'fe80::1']}
    tasks = [
        {'name': 'The host has fd00::5', 'ansible.builtin.set_fact': {'ansible_facts': facts}},
        {'name': 'Preflight', 'ansible.builtin.include_role': {
            'name': 'gpufleet.core.dcgm_exporter', 'tasks_from': 'preflight', 'public': True}},
        {'name': 'The address as the exporter gets it', 'ansible.builtin.assert': {
            'that': ["_dcgm_exporter_listen == '[fd00::5]:9400'"], 'fail_msg': 'got {{ _dcgm_exporter_listen }}'}},
    ]
    play = {'name': 'Listen address forms', 'hosts': 'all', 'gather_facts': False, 'tasks': tasks,
            'vars': {'dcgm_exporter_repo_url': MIRROR, 'dcgm_exporter_management_cidrs': ['FD00::/64']}}
    (tmp_path / 'play.yml').write_text(json.dumps([play]))
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=COLLECTIONS, ANSIBLE_HOME=str(tmp_path / 'home'),
               ANSIBLE_LOCAL_TEMP=str(tmp_path / 'tmp'), ANSIBLE_REMOTE_TEMP=str(tmp_path / 'tmp'), ANSIBLE_NOCOLOR='1',
               ANSIBLE_RETRY_FILES_ENABLED='false', ANSIBLE_FORKS='4')
    ran = subprocess.run([os.path.join(os.path.dirname(sys.executable), 'ansible-playbook'), '-i',
                          str(tmp_path / 'inventory.json'), '--check', str(tmp_path / 'play.yml')], env=env,
                         cwd=str(tmp_path), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True,
                         timeout=600, check=False)
    assert ran.returncode == 0, ran.stdout
    assert ran.stdout.count('failed=0') == len(given), ran.stdout
