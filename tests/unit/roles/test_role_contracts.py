# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""Every role documents every public variable in meta/argument_specs.yml, with the default defaults/main.yml has."""

from __future__ import absolute_import, division, print_function

import os

import pytest

from .conftest import ROLES, role_yaml

ALL_ROLES = sorted(name for name in os.listdir(ROLES) if os.path.isdir(os.path.join(ROLES, name, 'tasks')))


def test_the_roles_are_found():
    assert {'apt_pinned', 'container_toolkit', 'cuda', 'dcgm_exporter', 'mig', 'mps', 'nvidia_driver'} <= set(ALL_ROLES)


@pytest.mark.parametrize('role', ALL_ROLES)
def test_argument_specs_match_defaults(role):
    options = role_yaml(role, 'meta/argument_specs.yml')['argument_specs']['main']['options']
    defaults = role_yaml(role, 'defaults/main.yml')
    assert sorted(options) == sorted(defaults), 'documented but not defaulted, or the other way round'
    for name, spec in options.items():
        if spec.get('required'):
            continue
        assert 'default' in spec, '%s has no documented default' % name
        assert spec['default'] == defaults[name], '%s: argument_specs says %r, defaults/main.yml %r' % (
            name, spec['default'], defaults[name])


@pytest.mark.parametrize('role', ALL_ROLES)
def test_variables_are_prefixed(role):
    public = role_yaml(role, 'defaults/main.yml')
    internal = role_yaml(role, 'vars/main.yml')
    assert [name for name in public if not name.startswith(role + '_')] == []
    assert [name for name in internal if not name.startswith('_%s_' % role)] == []


@pytest.mark.parametrize('role', ALL_ROLES)
def test_every_vars_file_is_prefixed(role):
    # Files other roles load with include_vars (apt_pinned's cuda_repo.yml) keep the owning role's prefix.
    directory = os.path.join(ROLES, role, 'vars')
    for name in sorted(os.listdir(directory)) if os.path.isdir(directory) else []:
        variables = role_yaml(role, os.path.join('vars', name))
        assert [var for var in variables if not var.startswith('_%s_' % role)] == [], name


def test_nvidias_cuda_repository_is_written_in_one_place():
    found = []
    for root, _dirs, files in os.walk(ROLES):
        for name in files:
            path = os.path.join(root, name)
            with open(path) as handle:
                if 'developer.download.nvidia.com/compute/cuda/repos' in handle.read():
                    found.append(os.path.relpath(path, ROLES))
    assert found == [os.path.join('apt_pinned', 'vars', 'cuda_repo.yml')]
