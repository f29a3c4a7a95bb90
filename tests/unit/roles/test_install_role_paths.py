# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""The install roles' paths for systems the molecule containers are not (Ubuntu, arm64), by variables and templates.

Molecule converges them for real on Debian 12 x86_64, the one system this machine's mirror provides.
"""

from __future__ import absolute_import, division, print_function

import pytest

CUDA_REPO = 'https://developer.download.nvidia.com/compute/cuda/repos/'
# The roles that install from NVIDIA's CUDA repository, and their variables' prefix.
CUDA_REPO_ROLES = (('nvidia_driver', '_nvidia_driver'), ('cuda', '_cuda'), ('dcgm_exporter', '_dcgm_exporter'))


@pytest.mark.parametrize('system, architecture, path', [
    ('ubuntu2204', 'x86_64', 'ubuntu2204/x86_64'),
    ('ubuntu2204', 'aarch64', 'ubuntu2204/sbsa'),
    ('ubuntu2404', 'x86_64', 'ubuntu2404/x86_64'),
    ('ubuntu2404', 'aarch64', 'ubuntu2404/sbsa'),
    ('debian12', 'x86_64', 'debian12/x86_64'),
    ('debian12', 'aarch64', 'debian12/sbsa'),
])
def test_cuda_repository_paths(render, system, architecture, path):
    for role, prefix in CUDA_REPO_ROLES:
        role_vars = render(role, system, architecture)
        assert role_vars.value(prefix + '_repo_url') == CUDA_REPO + path
        assert role_vars.value(prefix + '_repo_key_url') == CUDA_REPO + path + '/3bf863cc.pub'


@pytest.mark.parametrize('system', ['ubuntu2204', 'ubuntu2404', 'debian12'])
@pytest.mark.parametrize('architecture', ['x86_64', 'aarch64'])
def test_the_three_roles_agree_on_the_cuda_repository_and_take_it_from_apt_pinned(render, system, architecture):
    urls = set()
    for role, prefix in CUDA_REPO_ROLES:
        role_vars = render(role, system, architecture)
        url = role_vars.value(prefix + '_repo_url')
        assert url == role_vars.value('_apt_pinned_cuda_repo_url')
        urls.add((url, role_vars.value(prefix + '_repo_key_url')))
    assert len(urls) == 1


def test_no_role_keeps_its_own_copy_of_the_cuda_repository_layout(render):
    for role, prefix in CUDA_REPO_ROLES:
        role_vars = render(role).templar.available_variables
        assert not [name for name in role_vars if name.startswith(prefix) and name.endswith(('_systems', '_arches', '_system'))]


@pytest.mark.parametrize('facts', [{'distribution_version': '20.04', 'distribution_major_version': '20'},
                                   {'architecture': 'ppc64le'}])
def test_a_system_nvidia_does_not_serve_is_unsupported_in_every_role(render, facts):
    for role, prefix in CUDA_REPO_ROLES:
        role_vars = render(role, 'ubuntu2204', facts=facts)
        assert 'unsupported' in role_vars.value(prefix + '_repo_url')
        supported = role_vars.value("_apt_pinned_cuda_system in _apt_pinned_cuda_repo_systems and "
                                    "ansible_facts['architecture'] in _apt_pinned_cuda_repo_arches")
        assert supported is False


def test_a_mirror_replaces_nvidias_repository(render):
    driver = render('nvidia_driver', 'ubuntu2204', nvidia_driver_repo_url='http://mirror.hk1.example.internal/cuda/ubuntu2204/x86_64')
    assert driver.value('_nvidia_driver_repo_url') == 'http://mirror.hk1.example.internal/cuda/ubuntu2204/x86_64'
    assert driver.value('_nvidia_driver_repo_key_url') == 'http://mirror.hk1.example.internal/cuda/ubuntu2204/x86_64/3bf863cc.pub'


@pytest.mark.parametrize('role, prefix', CUDA_REPO_ROLES)
def test_each_roles_own_mirror_and_key_win(render, role, prefix):
    mirror = 'http://mirror.hk1.example.internal/cuda/ubuntu2204/x86_64'
    role_vars = render(role, 'ubuntu2204', **{prefix[1:] + '_repo_url': mirror})
    assert role_vars.value(prefix + '_repo_url') == mirror
    assert role_vars.value(prefix + '_repo_key_url') == mirror + '/3bf863cc.pub'
    role_vars = render(role, 'ubuntu2204', **{prefix[1:] + '_repo_key_url': 'file:///srv/keys/cuda.pub'})
    assert role_vars.value(prefix + '_repo_url') == CUDA_REPO + 'ubuntu2204/x86_64'
    assert role_vars.value(prefix + '_repo_key_url') == 'file:///srv/keys/cuda.pub'


@pytest.mark.parametrize('architecture, debian_arch', [('x86_64', 'amd64'), ('aarch64', 'arm64')])
def test_container_toolkit_architecture_paths(render, architecture, debian_arch):
    toolkit = render('container_toolkit', 'ubuntu2404', architecture)
    assert toolkit.value("_container_toolkit_arch_map[ansible_facts['architecture']]") == debian_arch


@pytest.mark.parametrize('system, modules, packages, version', [
    ('ubuntu2204', 'open', ['nvidia-driver-570-open'], '570.133.20-0ubuntu1'),
    ('ubuntu2404', 'proprietary', ['nvidia-driver-570'], '570.133.20-0ubuntu1'),
    ('debian12', 'open', ['nvidia-driver', 'nvidia-kernel-open-dkms', 'nvidia-smi', 'nvidia-persistenced'], '570.133.20-1'),
    ('debian12', 'proprietary', ['nvidia-driver', 'nvidia-kernel-dkms', 'nvidia-smi', 'nvidia-persistenced'], '570.133.20-1'),
])
def test_driver_packages_per_system_and_module_flavour(render, system, modules, packages, version):
    driver = render('nvidia_driver', system, nvidia_driver_kernel_modules=modules)
    assert driver.value('_nvidia_driver_package_names') == packages
    assert driver.value('_nvidia_driver_package_version') == version


def test_driver_branch_names_the_packages_and_fabric_manager(render):
    driver = render('nvidia_driver', 'ubuntu2204', nvidia_driver_branch='580', nvidia_driver_version='580.95.05')
    assert driver.value('_nvidia_driver_package_names') == ['nvidia-driver-580-open']
    assert driver.value('_nvidia_driver_fabric_manager_packages') == ['nvidia-fabricmanager-580', 'libnvidia-nscq-580']
    assert driver.value('_nvidia_driver_package_version') == '580.95.05-0ubuntu1'


def test_an_explicit_package_version_and_list_win(render):
    driver = render('nvidia_driver', 'ubuntu2204', nvidia_driver_package_version='570.133.20-1ubuntu2',
                    nvidia_driver_packages=['nvidia-headless-570-server-open'])
    assert driver.value('_nvidia_driver_package_version') == '570.133.20-1ubuntu2'
    assert driver.value('_nvidia_driver_package_names') == ['nvidia-headless-570-server-open']


def test_module_signing_configuration(render):
    driver = render('nvidia_driver', 'ubuntu2204', nvidia_driver_module_signing_key='/var/lib/shim-signed/mok/MOK.priv',
                    nvidia_driver_module_signing_cert='/var/lib/shim-signed/mok/MOK.der')
    text = driver.template('module-signing.conf.j2')
    assert 'mok_signing_key="/var/lib/shim-signed/mok/MOK.priv"' in text
    assert 'mok_certificate="/var/lib/shim-signed/mok/MOK.der"' in text


def test_dcgm_packages_follow_the_cuda_major_and_mode(render):
    package_mode = render('dcgm_exporter', 'ubuntu2404', dcgm_exporter_cuda_major='13')
    assert package_mode.value('_dcgm_exporter_packages') == {
        'datacenter-gpu-manager-4-core': '1:4.2.3-1', 'datacenter-gpu-manager-4-cuda13': '1:4.2.3-1',
        'datacenter-gpu-manager-exporter': '4.1.3-1'}
    container_mode = render('dcgm_exporter', 'ubuntu2404', dcgm_exporter_mode='container')
    assert sorted(container_mode.value('_dcgm_exporter_packages')) == [
        'datacenter-gpu-manager-4-core', 'datacenter-gpu-manager-4-cuda12']


def exporter_unit(render, **overrides):
    # The address is chosen in preflight with the gpufleet.core.addresses_in filter, which molecule runs for real;
    # here it is given.
    overrides.setdefault('_dcgm_exporter_address', '10.20.0.11')
    return render('dcgm_exporter', 'ubuntu2204', **overrides).template('gpufleet-dcgm-exporter.service.j2')


def test_exporter_unit_in_package_mode(render):
    unit = exporter_unit(render, dcgm_exporter_tls_cert_file='/etc/ssl/hk1/exporter.crt',
                         dcgm_exporter_tls_key_file='/etc/ssl/hk1/exporter.key')
    assert 'ExecStart=/usr/bin/dcgm-exporter --address=10.20.0.11:9400 ' in unit
    assert '--collectors=/etc/gpufleet/dcgm-exporter/counters.csv' in unit
    assert '--web-config-file=/etc/gpufleet/dcgm-exporter/web-config.yml' in unit
    assert 'LoadCredential=tls.key:/etc/ssl/hk1/exporter.key' in unit
    assert 'User=gpufleet-dcgm-exporter' in unit and 'Requires=nvidia-dcgm.service' in unit
    assert 'podman' not in unit and '0.0.0.0' not in unit


def test_exporter_unit_in_container_mode_with_cdi_and_with_gpus(render):
    podman = exporter_unit(render, dcgm_exporter_mode='container', _dcgm_exporter_address='fd00:20::11')
    assert 'ExecStart=/usr/bin/podman run --rm --name=gpufleet-dcgm-exporter --network=host' in podman
    assert '--device=nvidia.com/gpu=all' in podman and '--gpus' not in podman
    assert '--address=[fd00:20::11]:9400' in podman
    assert '--volume=/etc/gpufleet/dcgm-exporter:/etc/gpufleet-dcgm-exporter:ro' in podman
    assert '--collectors=/etc/gpufleet-dcgm-exporter/counters.csv' in podman
    assert 'nvcr.io/nvidia/k8s/dcgm-exporter:4.2.3-4.1.3-ubuntu22.04 --address' in podman
    assert 'User=' not in podman
    docker = exporter_unit(render, dcgm_exporter_mode='container', dcgm_exporter_container_runtime='docker',
                           dcgm_exporter_container_gpus='gpus')
    assert 'ExecStart=/usr/bin/docker run ' in docker and '--gpus=all' in docker and 'nvidia.com/gpu' not in docker
    assert 'ExecStop=/usr/bin/docker stop --time=10 gpufleet-dcgm-exporter' in docker


def test_exporter_web_config_and_counters(render):
    role = render('dcgm_exporter', 'ubuntu2204', _dcgm_exporter_address='10.20.0.11', dcgm_exporter_mode='container',
                  dcgm_exporter_tls_cert_file='/etc/ssl/a.crt', dcgm_exporter_tls_key_file='/etc/ssl/a.key',
                  dcgm_exporter_basic_auth_users={'prometheus': '$2y$10$abcdefghijklmnopqrstuv'},
                  dcgm_exporter_counters=[{'field': 'DCGM_FI_DEV_GPU_UTIL', 'type': 'gauge', 'help': 'GPU utilization (in %).'}])
    web = role.template('web-config.yml.j2')
    assert 'cert_file: /etc/gpufleet-dcgm-exporter/tls.crt' in web
    assert '  prometheus: "$2y$10$abcdefghijklmnopqrstuv"' in web
    counters = role.template('counters.csv.j2')
    assert [line for line in counters.splitlines() if not line.startswith('#')] == [
        'DCGM_FI_DEV_GPU_UTIL, gauge, GPU utilization (in %).']


def test_cuda_profile_and_loader_paths(render):
    cuda = render('cuda', 'ubuntu2404', 'aarch64', cuda_default_release='12.6',
                  cuda_toolkits=[{'release': '12.6', 'version': '12.6.3-1'}])
    profile = cuda.template('cuda.sh.j2')
    assert '/usr/local/cuda/bin' in profile and 'points at CUDA 12.6' in profile
    assert '/usr/local/cuda/lib64' in cuda.template('cuda.conf.j2')
