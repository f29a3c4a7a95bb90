# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""The gpu_watchdog role's rendered configuration is one the watchdog program accepts, and its units run it."""

from __future__ import absolute_import, division, print_function

import pytest

from ansible_collections.gpufleet.core.plugins.module_utils._helpers_main import COMMANDS
from ansible_collections.gpufleet.core.plugins.module_utils._plan import PLAN_FILE
from ansible_collections.gpufleet.core.plugins.module_utils._watchdog_config import DEFAULTS, WatchdogError, check_config

from ...roles.conftest import RoleRender


def rendered_config(**overrides):
    return RoleRender('gpu_watchdog', **overrides).value('_gpu_watchdog_config')


def test_the_defaults_render_a_configuration_the_program_accepts_with_numbers_as_numbers():
    config = check_config(rendered_config())
    assert sorted(config) == sorted(DEFAULTS)
    assert config['interval_sec'] == 30 and isinstance(config['interval_sec'], int)
    assert config['memory_budget_percent'] == 85 and config['dry_run'] is False
    # Without the gpu_services role's variable, the role's fallback (YAML cannot import Python) is the plan path.
    assert config['plan_file'] == PLAN_FILE == DEFAULTS['plan_file']
    assert config['state_file'] == '/var/lib/gpufleet-watchdog/state.json'
    assert config['reset_stop_units'] == ['gpufleet-dcgm-exporter.service']


def test_the_plan_and_mps_units_follow_the_gpu_services_role():
    config = rendered_config(gpu_services_plan_file='/srv/plan.json', gpu_services_mps_unit_prefix='mps@')
    assert (config['plan_file'], config['mps_unit_prefix']) == ('/srv/plan.json', 'mps@')


def test_a_bad_value_that_passed_the_role_would_still_be_refused_by_the_program():
    with pytest.raises(WatchdogError):
        check_config(rendered_config(gpu_watchdog_rate_limit_window_sec=10))


def test_the_units_run_the_bundles_watchdog_on_the_timer():
    role = RoleRender('gpu_watchdog', gpu_watchdog_environment={'PYTHONPATH': '/opt/sim'})
    service = role.template('gpufleet-watchdog.service.j2')
    assert 'ExecStart=/usr/bin/python3 /usr/local/lib/gpufleet/gpufleet-helpers.pyz watchdog ' \
        '/etc/gpufleet/watchdog.json' in service.splitlines()
    assert 'Environment="PYTHONPATH=/opt/sim"' in service.splitlines()
    assert 'Type=oneshot' in service.splitlines() and 'watchdog' in COMMANDS
    timer = role.template('gpufleet-watchdog.timer.j2')
    assert 'OnUnitActiveSec=30s' in timer.splitlines()
