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
