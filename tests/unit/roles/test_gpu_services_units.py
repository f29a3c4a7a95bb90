# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""The gpu_services unit template, rendered by Ansible for native and container services, podman and docker,
and systemd with and without NUMAPolicy=; scored by systemd-analyze security (systemd 250 or newer, as on the
test bed's Debian 12).

Molecule loads and runs these units in a systemd container, and the numa-vm stage runs a podman one on a real
two-node kernel; these tests cover the variants those cannot (docker, systemd older than 243).
"""

from __future__ import absolute_import, division, print_function

import os
import re
import shutil
import subprocess

import pytest
import yaml

from ansible_collections.gpufleet.core.plugins.module_utils._plan import (
    CONTAINER_RUNTIMES,
    MEMORY_POLICIES,
    MODES,
    PLAN_FILE,
    PLANNER_KEYS,
    ROLE_KEYS,
    STATES,
    service_units,
)

from ansible_collections.gpufleet.core.plugins.module_utils._device_env import DEVICE_MAP, RUNTIME_DIR

from .conftest import ROLES

GPU1 = 'GPU-6e756d61-766d-4000-8000-000000000001'
PLAN = {
    'name': 'llm', 'gpus': [GPU1], 'gpu_uuids': [GPU1], 'numa_node': 1, 'cpus': [2, 3], 'cpulist': '2-3',
    'mems': [1], 'memlist': '1', 'memory_policy': 'bind', 'exclusive': True, 'mps': None,
    'environment': {'CUDA_VISIBLE_DEVICES': GPU1, 'CUDA_DEVICE_ORDER': 'PCI_BUS_ID'},
    'explanation': 'llm: GPU 1 on node 1; CPUs 2-3',
}
FACTS = {'getent_passwd': {'gpufleet-llm': ['x', '998', '997', '', '/nonexistent', '/usr/sbin/nologin']}}
# What the service_plan action returns beside the units (read through the topology model).
PLANNED = {'gpu_device_nodes': ['/dev/nvidia0', '/dev/nvidia1']}


def unit_text(render, mode, runtime='podman', systemd=252, spec=None, plan=None, item_extra=None):
    spec = dict(spec or {}, name='llm', mode=mode)
    if mode == 'native':
        spec.setdefault('command', '/usr/bin/serve --port 8000')
    else:
        spec.setdefault('image', 'registry.example.com/llm:2.1')
        spec.setdefault('command', '--port 8000')
        spec.setdefault('container_args', ['--publish=127.0.0.1:8000:8000'])
    item = {'name': 'llm', 'stem': 'gpufleet-svc-llm', 'unit': 'gpufleet-svc-llm.service', 'mode': mode, 'state': 'started',
            'user': 'gpufleet-llm', 'dedicated_user': True, 'mps_user': None, 'placed_name': 'llm',
            'spec': spec, 'plan': dict(PLAN, **(plan or {}))}
    item.update(item_extra or {})
    role = render('gpu_services', facts=FACTS, item=item, __gpu_services_planned=PLANNED, gpu_services_container_runtime=runtime,
                  gpu_services_services=[spec], _gpu_services_systemd_version=systemd,
                  _gpu_services_numa_directives=systemd >= 243)
    return role.template('gpufleet-svc.service.j2')


def directives(text):
    return [line for line in text.splitlines() if line and not line.startswith(('#', '['))]


def exec_start(text):
    return [line for line in directives(text) if line.startswith('ExecStart=')][0]


def test_podman_unit_is_an_unprivileged_client_of_the_api_socket(render):
    text = unit_text(render, 'container', 'podman')
    lines = directives(text)
    assert exec_start(text) == (
        'ExecStart=/usr/bin/podman --remote --url=unix:///run/gpufleet-podman/podman.sock run --rm --name=gpufleet-svc-llm '
        '$CDI_DEVICES --cpuset-cpus=2-3 --cpuset-mems=1 --user=998:997 --cap-drop=ALL '
        '--security-opt=no-new-privileges --env=CUDA_DEVICE_ORDER=PCI_BUS_ID '
        '--env=CUDA_VISIBLE_DEVICES=${CUDA_VISIBLE_DEVICES} '
        '--publish=127.0.0.1:8000:8000 registry.example.com/llm:2.1 --port 8000')
    # The devices come from the runtime file that gpufleet-devices.service writes at boot: no UUID in the unit.
    assert GPU1 not in '\n'.join(lines)
    for line in ('EnvironmentFile=/run/gpufleet/devices/%n.env', 'Requires=gpufleet-devices.service',
                 'User=gpufleet-llm', 'SupplementaryGroups=gpufleet-podman', 'PrivateNetwork=yes',
                 'RestrictAddressFamilies=AF_UNIX', 'PrivateDevices=yes', 'CapabilityBoundingSet=',
                 'ExecStop=/usr/bin/podman --remote --url=unix:///run/gpufleet-podman/podman.sock stop --time=30 gpufleet-svc-llm',
                 'ExecStartPre=-/usr/bin/podman --remote --url=unix:///run/gpufleet-podman/podman.sock rm --force gpufleet-svc-llm'):
        assert line in lines
    # No privilege of its own: never root, no delegation, no numactl around the client.
    assert not [line for line in lines if line.startswith(('Delegate=', 'CPUAffinity=', 'NUMAPolicy=', 'MemoryPolicy='))]
    assert 'numactl' not in '\n'.join(lines)


def test_docker_unit_uses_docker_socket_group_and_gpus_by_uuid(render):
    text = unit_text(render, 'container', 'docker', spec={'environment': {'MODEL': 'llama 3'}})
    assert exec_start(text).startswith(
        'ExecStart=/usr/bin/docker --host=unix:///run/docker.sock run --rm --name=gpufleet-svc-llm '
        '"--gpus=\\"device=${CUDA_VISIBLE_DEVICES}\\"" --cpuset-cpus=2-3 --cpuset-mems=1 --user=998:997 ')
    assert ' --env=CUDA_VISIBLE_DEVICES=${CUDA_VISIBLE_DEVICES} ' in exec_start(text)
    cpu_only = unit_text(render, 'container', 'docker', plan={'gpus': [], 'gpu_uuids': []})
    assert '--gpus' not in exec_start(cpu_only)
    assert '"--env=MODEL=llama 3"' in exec_start(text)
    assert 'SupplementaryGroups=docker' in directives(text)


def test_preferred_memory_leaves_the_container_free_to_spill(render):
    plan_text = unit_text(render, 'container', 'podman')
    text = unit_text(render, 'container', 'podman', plan={'memory_policy': 'preferred'})
    assert '--cpuset-mems=1' in exec_start(plan_text) and '--cpuset-mems' not in exec_start(text)


def test_native_unit_binds_with_numa_directives_and_falls_back_to_numactl_before_243(render):
    lines = directives(unit_text(render, 'native'))
    assert {'CPUAffinity=2-3', 'NUMAPolicy=bind', 'NUMAMask=1', 'ExecStart=/usr/bin/serve --port 8000',
            'DevicePolicy=closed', 'DeviceAllow=/dev/nvidia1 rw', 'User=gpufleet-llm',
            'EnvironmentFile=/run/gpufleet/devices/%n.env', 'Requires=gpufleet-devices.service',
            'Environment="CUDA_DEVICE_ORDER=PCI_BUS_ID"'} <= set(lines)
    assert not [line for line in lines if 'CUDA_VISIBLE_DEVICES' in line]
    assert 'After=network-online.target gpufleet-gpu.target gpufleet-devices.service' in lines
    old = unit_text(render, 'native', systemd=237)
    assert not [line for line in directives(old) if line.startswith(('NUMAPolicy=', 'NUMAMask='))]
    assert exec_start(old) == ('ExecStart=/usr/bin/numactl --physcpubind=2-3 --membind=1 -- '
                               '/usr/bin/serve --port 8000')
    assert 'CPUAffinity=2-3' in directives(old)


def offline_exposure(text, tmp_path):
    """systemd-analyze security --offline's overall exposure of a unit file."""
    analyze = shutil.which('systemd-analyze')
    assert analyze, 'these tests need systemd-analyze (systemd 250 or newer), as on the Debian 12 test bed'
    path = tmp_path / 'gpufleet-svc-llm.service'
    path.write_text(text)
    result = subprocess.run([analyze, 'security', '--offline=true', '--no-pager', str(path)],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True, check=False)
    match = re.search(r'Overall exposure level for \S+: (\d+\.\d+)', result.stdout)
    assert match, result.stdout
    return float(match.group(1))


@pytest.mark.parametrize('mode, runtime', [('native', 'podman'), ('container', 'podman'), ('container', 'docker')])
def test_every_unit_scores_5_or_less(render, tmp_path, mode, runtime):
    score = offline_exposure(unit_text(render, mode, runtime), tmp_path)
    assert score <= 5.0, '%s/%s unit scores %.1f' % (mode, runtime, score)


# The plan contract (_plan) and the role agree: the units the filter joins are what the template reads, and the
# argument specs' choices (YAML cannot import Python) are _plan's lists.


def test_service_units_builds_the_unit_the_template_reads():
    spec = {'name': 'llm', 'mode': 'container', 'image': 'registry.example.com/llm:2.1', 'command': '--port 8000'}
    joined = service_units([PLAN], [spec], 'gpufleet-svc-', 'gpufleet-', 'podman')
    assert joined['units'] == [{
        'name': 'llm', 'stem': 'gpufleet-svc-llm', 'unit': 'gpufleet-svc-llm.service', 'mode': 'container',
        'state': 'started', 'user': 'gpufleet-llm', 'dedicated_user': True, 'mps_user': None, 'placed_name': 'llm',
        'spec': spec, 'plan': PLAN}]
    assert joined['plan'] == {'version': 1, 'services': [dict(PLAN, unit='gpufleet-svc-llm.service',
                                                              container='gpufleet-svc-llm', container_runtime='podman')]}


def argument_spec():
    with open(os.path.join(ROLES, 'gpu_services', 'meta', 'argument_specs.yml')) as handle:
        return yaml.safe_load(handle)['argument_specs']['main']['options']


def test_argument_spec_choices_and_keys_are_the_plan_contracts():
    options = argument_spec()
    service = options['gpu_services_services']['options']
    assert tuple(service['memory_policy']['choices']) == MEMORY_POLICIES
    assert tuple(service['mode']['choices']) == MODES
    assert tuple(service['state']['choices']) == STATES
    assert tuple(options['gpu_services_container_runtime']['choices']) == CONTAINER_RUNTIMES
    assert sorted(service) == sorted(PLANNER_KEYS + ROLE_KEYS)
    assert options['gpu_services_plan_file']['default'] == PLAN_FILE


def test_the_plan_is_joined_in_python_not_in_jinja_loops():
    for name in os.listdir(os.path.join(ROLES, 'gpu_services', 'tasks')):
        with open(os.path.join(ROLES, 'gpu_services', 'tasks', name)) as handle:
            text = handle.read()
        assert '{%- for' not in text and '{% for' not in text, name


@pytest.mark.parametrize('policy', MEMORY_POLICIES)
def test_every_memory_policy_of_the_contract_renders_with_and_without_numa_directives(render, policy):
    # The unit template maps each policy to NUMAPolicy= and to numactl's option: a new policy needs both.
    assert '\nNUMAPolicy=%s\n' % policy in unit_text(render, 'native', plan={'memory_policy': policy})
    assert ' --physcpubind=2-3 --' in unit_text(render, 'native', systemd=239, plan={'memory_policy': policy})


def test_a_mig_device_is_named_by_its_slot_in_the_unit_and_the_role_agrees_with_device_env(render):
    """The unit's comments name a MIG device by its slot (the action's 'devices' and 'placement'), so the unit file
    stays the same when the boot unit makes the device again with a new UUID; the role's paths are _device_env's."""
    mig = 'MIG-6e756d61-766d-4000-8000-0000000000aa'
    slot = GPU1 + ':3g.40gb:4:0'
    item_plan = {'gpus': [mig], 'explanation': '%s (3g.40gb on %s), exclusive' % (mig, GPU1)}
    native_unit = {'unit': 'gpufleet-svc-llm.service', 'mode': 'native', 'plan': {'gpus': [mig]}}
    # (_gpu_services_podman_socket is the service_specs filter's reading, which this Templar has no plugins for.)
    role = render('gpu_services', facts=FACTS, gpu_services_services=[{'name': 'llm'}],
                  __gpu_services_planned={'units': [native_unit]}, _gpu_services_podman_socket=False)
    text = unit_text(render, 'native', plan=item_plan, item_extra={
        'devices': [slot], 'placement': 'MIG slot %s (3g.40gb on %s), exclusive' % (slot, GPU1)})
    assert mig not in text and '# Placement: MIG slot %s (3g.40gb on %s), exclusive' % (slot, GPU1) in text
    assert '# CUDA_VISIBLE_DEVICES: the UUIDs of %s now.' % slot in text
    assert (role.value('_gpu_services_device_map'), role.value('_gpu_services_runtime_dir')) == (DEVICE_MAP, RUNTIME_DIR)
    boot = role.template('gpufleet-devices.service.j2')
    assert directives(boot) == [
        'Description=Resolve the GPU services\' devices to the devices present (gpufleet.core)',
        'After=gpufleet-mig.service', 'Before=gpufleet-gpu.target', 'Type=oneshot', 'RemainAfterExit=yes',
        'ExecStart=/usr/bin/python3 /usr/local/lib/gpufleet/gpufleet-helpers.pyz devices %s %s'
        % (DEVICE_MAP, RUNTIME_DIR), 'WantedBy=multi-user.target', 'RequiredBy=gpufleet-gpu.target']
    # A container on a GPU through podman: the CDI spec of the devices made at this boot, before the runtime files.
    container = dict(native_unit, mode='container')
    spec = {'name': 'llm', 'mode': 'container', 'image': 'registry.example.com/llm:2.1'}
    with_container = render('gpu_services', facts=FACTS, gpu_services_services=[spec], _gpu_services_podman_socket=True,
                            __gpu_services_planned={'units': [container]}).template('gpufleet-devices.service.j2')
    assert [line for line in directives(with_container) if line.startswith('ExecStart')] == [
        'ExecStartPre=/usr/bin/nvidia-ctk cdi generate --output=/var/run/cdi/nvidia.yaml',
        'ExecStart=/usr/bin/python3 /usr/local/lib/gpufleet/gpufleet-helpers.pyz devices %s %s' % (DEVICE_MAP, RUNTIME_DIR)]
    for values in ({'gpu_services_cdi_spec': ''}, {'_gpu_services_podman_socket': False},
                   {'__gpu_services_planned': {'units': [dict(container, plan={'gpus': []})]}}):
        options = dict({'__gpu_services_planned': {'units': [container]}, '_gpu_services_podman_socket': True}, **values)
        text = render('gpu_services', facts=FACTS, gpu_services_services=[spec], **options).template(
            'gpufleet-devices.service.j2')
        assert 'nvidia-ctk' not in text, values
