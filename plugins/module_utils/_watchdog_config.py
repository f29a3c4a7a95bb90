# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.core contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The GPU watchdog's configuration: its settings and defaults, and the check of a configuration file.

Pure code. The gpu_watchdog role writes the file (its ``_gpu_watchdog_config``) and has it checked by
``gpufleet-helpers watchdog --check-config`` before it is written; each check reads it again. docs/gpu_watchdog.md.
This is a private module: its API may change without notice.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

from ansible_collections.gpufleet.core.plugins.module_utils._errors import GpufleetError
from ansible_collections.gpufleet.core.plugins.module_utils._plan import MPS_UNIT_PREFIX, PLAN_FILE, is_service_name
from ansible_collections.gpufleet.core.plugins.module_utils._values import is_path, is_unit_name, is_unit_prefix

CONFIG_VERSION = 1
# A service's GPU memory budget where none is set, in percent of its device's memory: the watchdog restarts a service
# above it and the alert pack's GpuMemoryOverBudget fires above it (_monitoring_targets). The gpufleet, gpu_watchdog and
# monitoring roles' defaults repeat it (YAML cannot import Python); tests/unit/roles/test_plan_contract.py keeps them
# equal.
MEMORY_BUDGET_PERCENT = 85

DEFAULTS = {
    'version': CONFIG_VERSION,
    'plan_file': PLAN_FILE,
    'state_file': '/var/lib/gpufleet-watchdog/state.json',
    'textfile_dir': '/var/lib/prometheus/node-exporter',
    'interval_sec': 30,
    'dry_run': False,
    'memory_budget_percent': MEMORY_BUDGET_PERCENT,
    'service_budgets': {},
    'restart_on_memory': True,
    'restart_on_xid': True,
    'restart_on_binding_drift': False,
    'quarantine': True,
    'allow_reset': False,
    'allow_reboot': False,
    'min_uptime_sec': 1800,
    'reboot_cooldown_sec': 21600,
    'rate_limit_restarts': 3,
    'rate_limit_window_sec': 3600,
    'max_remote_fraction': 0.02,
    'xid_event_wait_ms': 1000,
    'gpu_reset_command': ['nvidia-smi', '--gpu-reset', '-i'],
    'reset_stop_units': [],
    'mps_unit_prefix': MPS_UNIT_PREFIX,
    'mig_unit': 'gpufleet-mig.service',
    # The fleet-wide cap (the site playbook's gpufleet_watchdog_max_quarantined): at most this many hosts quarantined
    # at once, counted by the Prometheus that scrapes every host's watchdog metrics; 0 is no cap.
    'fleet_max_quarantined': 0,
    'fleet_prometheus_url': '',
}
# What the watchdog asks that Prometheus: how many hosts are quarantined now (the pack's job label is not assumed).
FLEET_QUARANTINED_QUERY = 'count(max by (host) (gpufleet_watchdog_quarantined == 1))'

_SWITCHES = ('dry_run', 'restart_on_memory', 'restart_on_xid', 'restart_on_binding_drift', 'quarantine', 'allow_reset',
             'allow_reboot')
_COUNTS_FROM_ONE = ('interval_sec', 'rate_limit_restarts', 'rate_limit_window_sec')
_COUNTS_FROM_ZERO = ('min_uptime_sec', 'reboot_cooldown_sec', 'xid_event_wait_ms', 'fleet_max_quarantined')
_PROMETHEUS_URL = re.compile(r'(https?://[^\s/?#]+(/[^\s?#]*[^/\s?#])?)?')


class WatchdogError(GpufleetError):
    """A configuration or state the watchdog cannot work with; the message names the setting and the fix."""


def _number(value, integer=True):
    kinds = (int,) if integer else (int, float)
    return isinstance(value, kinds) and not isinstance(value, bool)


def _budget_ok(value):
    return _number(value, integer=False) and 1 <= value <= 100


def check_config(raw):
    """The configuration with defaults filled in, or WatchdogError naming every bad setting and its fix."""
    if not isinstance(raw, dict):
        raise WatchdogError('the watchdog configuration must be a JSON object (write it with the '
                            'gpufleet.core.gpu_watchdog role)')
    unknown = sorted(set(raw) - set(DEFAULTS))
    config = dict(DEFAULTS)
    config.update(raw)
    problems = []
    if unknown:
        problems.append('unknown settings %s (this release knows %s)' % (', '.join(unknown), ', '.join(sorted(DEFAULTS))))
    if config['version'] != CONFIG_VERSION:
        problems.append('version is %r; this release reads %d (apply the gpu_watchdog role of this release)'
                        % (config['version'], CONFIG_VERSION))
    problems.extend(_form_problems(config))
    if not problems and config['rate_limit_window_sec'] < config['interval_sec']:
        problems.append('rate_limit_window_sec (%d) is shorter than the check interval interval_sec (%d): the rate '
                        'limit would never see two restarts; make the window at least the interval'
                        % (config['rate_limit_window_sec'], config['interval_sec']))
    problems.extend(_budget_problems(config))
    problems.extend(_action_problems(config))
    if problems:
        raise WatchdogError('The watchdog configuration cannot be used: ' + '; '.join(problems))
    return config


def _form_problems(config):
    """Paths, switches, counts and the Prometheus URL."""
    problems = []
    for key in ('plan_file', 'state_file', 'textfile_dir'):
        if not is_path(config[key]):
            problems.append('%s must be an absolute path without .., spaces or a trailing / (got %r)' % (key, config[key]))
    for key in _SWITCHES:
        if not isinstance(config[key], bool):
            problems.append('%s must be true or false (got %r)' % (key, config[key]))
    for key in _COUNTS_FROM_ONE:
        if not _number(config[key]) or config[key] < 1:
            problems.append('%s must be a whole number of at least 1 (got %r)' % (key, config[key]))
    for key in _COUNTS_FROM_ZERO:
        if not _number(config[key]) or config[key] < 0:
            problems.append('%s must be a whole number, 0 or more (got %r)' % (key, config[key]))
    url = config['fleet_prometheus_url']
    if not isinstance(url, str) or not _PROMETHEUS_URL.fullmatch(url):
        problems.append("fleet_prometheus_url must be an http(s) URL without a trailing slash, or '' (got %r)" % (url,))
    return problems


def _budget_problems(config):
    """The memory budgets and the binding's remote fraction."""
    problems = []
    if not _budget_ok(config['memory_budget_percent']):
        problems.append('memory_budget_percent must be a percentage from 1 to 100 (got %r)'
                        % (config['memory_budget_percent'],))
    budgets = config['service_budgets']
    if not isinstance(budgets, dict):
        problems.append('service_budgets must map service names to percentages (got %r)' % (budgets,))
    else:
        for name, value in sorted(budgets.items()):
            if not is_service_name(name) or not _budget_ok(value):
                problems.append('service_budgets[%r] must be a service name with a percentage from 1 to 100 (got %r)'
                                % (name, value))
    if not _number(config['max_remote_fraction'], integer=False) or not 0 <= config['max_remote_fraction'] <= 1:
        problems.append('max_remote_fraction must be a number from 0 to 1 (got %r)' % (config['max_remote_fraction'],))
    return problems


def _action_problems(config):
    """What a reset runs and stops, and the units it knows."""
    problems = []
    command = config['gpu_reset_command']
    if not isinstance(command, list) or not command or not all(isinstance(w, str) and w for w in command):
        problems.append('gpu_reset_command must be a non-empty list of words; the GPU UUID is appended (got %r)'
                        % (command,))
    units = config['reset_stop_units']
    if not isinstance(units, list) or not all(is_unit_name(u, ('service',)) for u in units):
        problems.append('reset_stop_units must be a list of .service units (got %r)' % (units,))
    if not is_unit_prefix(config['mps_unit_prefix']):
        problems.append('mps_unit_prefix must be a unit name prefix (got %r)' % (config['mps_unit_prefix'],))
    if not isinstance(config['mig_unit'], str) or not (config['mig_unit'] == '' or is_unit_name(config['mig_unit'], ('service',))):
        problems.append("mig_unit must be a .service unit or '' (got %r)" % (config['mig_unit'],))
    return problems


def check_budgets_name_services(config, plan):
    """Names in service_budgets that are not services of the plan (a typo would silently keep the default)."""
    names = set(plan.names())
    return sorted(name for name in config['service_budgets'] if name not in names)
