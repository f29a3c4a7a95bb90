# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.core contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The value checkers of the roles that use the installed GPUs: partition (mps), services (gpu_services), the
watchdog (gpu_watchdog) and monitoring. _role_values.py is their entry; the rules are described there. Pure code.
This is a private module: its API may change without notice.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import difflib
import re

from ansible_collections.gpufleet.core.plugins.module_utils._mig_slots import is_device_name
from ansible_collections.gpufleet.core.plugins.module_utils._plan import is_service_name
from ansible_collections.gpufleet.core.plugins.module_utils._role_checker import (
    DCGM_FIELD, MISSING, RoleChecker, flow_style, full_match, strings_problem)
from ansible_collections.gpufleet.core.plugins.module_utils._service_specs import service_specs
from ansible_collections.gpufleet.core.plugins.module_utils._values import (
    boolean, decimal_number, describe, is_device_uuid, is_http_url, is_unit_name, is_unit_prefix, path_problem, percentage, shown,
    whole_number)

# systemd's RuntimeDirectory= and LogsDirectory= take these relative to /run and /var/log: plain parts only.
_PLAIN_PARTS = r'(?:/(?!\.\.?(?:/|\Z))[A-Za-z0-9_@:+.-]+)+'
_ENV_NAME = re.compile(r'[A-Za-z_][A-Za-z0-9_]*')
_MPS_DAEMON_KEYS = ('device', 'user', 'group', 'default_active_thread_percentage', 'default_pinned_mem_limit',
                    'pipe_directory', 'log_directory', 'clients')
_MPS_CLIENT_KEYS = ('name', 'user', 'active_thread_percentage', 'pinned_mem_limit')


def _percent_sign_hint(value):
    found = percentage(value)
    if found is not None and found[1]:
        return ' (write %s, without the %% sign)' % shown(int(found[0]) if found[0] == int(found[0]) else found[0])
    return ''


# -- mps -------------------------------------------------------------------------------------------------------------


def _root_problem(variable, value, root, example):
    if full_match(re.escape(root) + _PLAIN_PARTS, value):
        return None
    return ('%s is %s; give a plain directory under %s/, such as %s (no "..", ".", "//", trailing "/" or special '
            'characters): systemd creates it there' % (variable, describe(value), root, example))


def _thread_percentage_problem(where, value):
    if value is None:
        return None
    number = decimal_number(value) if not isinstance(value, str) or '%' not in value else None
    if number is not None and 1 <= number <= 100:
        return None
    found = percentage(value)
    hint = ''
    if found is not None and found[1]:
        plain = int(found[0]) if found[0] == int(found[0]) else found[0]
        hint = '; write %s, not %s' % (shown(plain), flow_style(value))
    return ('%s is %s: expected a number from 1 to 100, the share of the device\'s SMs a client may use (not a '
            'memory limit)%s' % (where, describe(value), hint))


def _device_uuid_problem(where, value):
    if is_device_uuid(value):
        return None
    return ('%s is %s; name the device by its GPU-... or MIG-... UUID as gpufleet_topology reports it (indices '
            'reorder)' % (where, describe(value)))


def _daemon_device_problem(where, value):
    """An MPS daemon's device: a device UUID, or a MIG device's slot, which a reboot keeps."""
    if is_device_name(value):
        return None
    return ('%s is %s; name a GPU by its GPU-... UUID and a MIG device by its slot GPU-UUID:PROFILE:START:ORDINAL '
            '(or its MIG-... UUID), as gpufleet_topology reports them (indices reorder)' % (where, describe(value)))


def _time_slicing_problem(variable, value):
    problem = strings_problem(variable, value, 'GPU or MIG device UUIDs', '"GPU-..."')
    if problem:
        return problem
    return next(filter(None, (_device_uuid_problem('%s[%d]' % (variable, position), item)
                              for position, item in enumerate(value))), None)


def _unknown_keys(where, item, known):
    problems = []
    for key in sorted(set(item) - set(known), key=str):
        near = difflib.get_close_matches(str(key), known, 1)
        problems.append('%s has the unknown key %s%s (known: %s)' % (
            where, key, '; did you mean %s?' % near[0] if near else '', ', '.join(known)))
    return problems


def _mps_daemons_problems(variable, value):
    if not isinstance(value, (list, tuple)):
        return ['%s is %s; give a list of daemons, such as [{device: GPU-..., user: infer}], or []'
                % (variable, describe(value))]
    problems = []
    for position, daemon in enumerate(value):
        where = '%s[%d]' % (variable, position)
        if not isinstance(daemon, dict):
            problems.append('%s is %s; each daemon is a mapping such as {device: GPU-..., user: infer}'
                            % (where, describe(daemon)))
            continue
        problems.extend(_unknown_keys(where, daemon, _MPS_DAEMON_KEYS))
        problems.append('%s has no device; name it by its GPU-... UUID or its MIG slot GPU-UUID:PROFILE:START:ORDINAL, '
                        'such as {device: GPU-..., user: infer}' % where if 'device' not in daemon
                        else _daemon_device_problem('%s.device' % where, daemon['device']))
        problems.append(_thread_percentage_problem('%s.default_active_thread_percentage' % where,
                                                   daemon.get('default_active_thread_percentage')))
        clients = daemon.get('clients')
        if clients is None:
            continue
        if not isinstance(clients, (list, tuple)):
            problems.append('%s.clients is %s; give a list of clients, such as [{name: llm}]'
                            % (where, describe(clients)))
            continue
        for number, client in enumerate(clients):
            spot = '%s.clients[%d]' % (where, number)
            if not isinstance(client, dict):
                problems.append('%s is %s; each client is a mapping such as {name: llm}' % (spot, describe(client)))
                continue
            problems.extend(_unknown_keys(spot, client, _MPS_CLIENT_KEYS))
            problems.append(_thread_percentage_problem('%s.active_thread_percentage' % spot,
                                                       client.get('active_thread_percentage')))
    return [problem for problem in problems if problem]


def check_mps(values):
    check = RoleChecker(values)
    check.rule('mps_pipe_root', _root_problem, '/run', '/run/gpufleet-mps')
    check.rule('mps_log_root', _root_problem, '/var/log', '/var/log/gpufleet-mps')
    check.rules('mps_daemons', _mps_daemons_problems)
    check.rule('mps_time_slicing_devices', _time_slicing_problem)
    return check.problems


# -- gpu_watchdog ----------------------------------------------------------------------------------------------------
# The same rules as the watchdog's own check of its configuration (_watchdog.check_config), named by the role's
# variables. Several messages keep the form "name (value)" or "got value" with the value as JSON, which shows its type.


def _budget_problem(variable, value):
    number = decimal_number(value) if not isinstance(value, str) or '%' not in value else None
    if number is not None and 1 <= number <= 100:
        return None
    return '%s is %s; give a percentage from 1 to 100 as a plain number, such as 85%s' % (
        variable, describe(value), _percent_sign_hint(value))


def _count(variable, value, low, allowed, example):
    """A whole number, low or more: 'name (value) must be ...'."""
    number = whole_number(value)
    if number is not None and number >= low:
        return None
    hint = ''
    if isinstance(value, str) and re.fullmatch(r'\s*[0-9]+\s*[A-Za-z%]+\s*', value):
        hint = '; write %s, without a unit' % re.match(r'\s*([0-9]+)', value).group(1)
    return '%s (%s) must be %s, such as %s (it is %s)%s' % (
        variable, shown(value), allowed, example, describe(value), hint)


def _watchdog_path(variable, value, example):
    if path_problem(variable, value) is None:
        return None
    return '%s is %s; give an absolute path on one line, without .., spaces or a trailing /, such as %s (it is %s)' % (
        variable, shown(value), example, describe(value))


def _watchdog_numbers(check):
    counts = (('gpu_watchdog_interval_sec', 1, 'a whole number of seconds, 1 or more', 30),
              ('gpu_watchdog_rate_limit_restarts', 1, 'a whole number, 1 or more', 3),
              ('gpu_watchdog_rate_limit_window_sec', 1, 'a whole number of seconds, 1 or more', 3600),
              ('gpu_watchdog_min_uptime_sec', 0, 'a whole number of seconds, 0 or more', 1800),
              ('gpu_watchdog_reboot_cooldown_sec', 0, 'a whole number of seconds, 0 or more', 21600),
              ('gpu_watchdog_xid_event_wait_ms', 0, 'a whole number of milliseconds, 0 or more', 1000))
    good = {}
    for name, low, allowed, example in counts:
        if name in check.values:
            problem = _count(name, check.values[name], low, allowed, example)
            check.add(problem)
            if not problem:
                good[name] = whole_number(check.values[name])
    interval = good.get('gpu_watchdog_interval_sec')
    window = good.get('gpu_watchdog_rate_limit_window_sec')
    if interval is not None and window is not None and window < interval:
        check.add('gpu_watchdog_rate_limit_window_sec (%d) must be at least the check interval gpu_watchdog_interval_sec '
                  '(%d): a window shorter than the interval never holds two restarts, so the limit would never stop a '
                  'restart loop. Lengthen the window, such as to %d' % (window, interval, max(interval, 3600)))
    wait = good.get('gpu_watchdog_xid_event_wait_ms')
    if interval is not None and wait is not None and wait >= interval * 1000:
        check.add('gpu_watchdog_xid_event_wait_ms (%d) must be shorter than the interval gpu_watchdog_interval_sec '
                  '(%d s, %d ms), such as 1000: each check listens that long for Xid events' % (
                      wait, interval, interval * 1000))
    fraction = check.get('gpu_watchdog_max_remote_fraction')
    if fraction is not MISSING:
        number = decimal_number(fraction) if not isinstance(fraction, str) or '%' not in fraction else None
        if number is None or not 0 <= number <= 1:
            check.add('gpu_watchdog_max_remote_fraction (%s) must be a fraction from 0 to 1, such as 0.02 for 2%% '
                      '(it is %s)' % (shown(fraction), describe(fraction)))


def _environment_problems(variable, value):
    if not isinstance(value, dict):
        return ['%s must be a mapping of variable names to values, such as {LD_LIBRARY_PATH: /opt/nvidia/lib} (got %s, '
                '%s)' % (variable, shown(value), describe(value))]
    problems = []
    for name, item in sorted(value.items(), key=lambda pair: str(pair[0])):
        if not (isinstance(name, str) and _ENV_NAME.fullmatch(name)):
            problems.append('%s has the name %s; a variable name is letters, digits and _, not starting with a '
                            'digit, such as LD_LIBRARY_PATH' % (variable, describe(name)))
        if isinstance(item, bool) or not isinstance(item, (str, int, float)) or re.search(r'[\n\r"\\]', str(item)):
            # Each becomes Environment="NAME=value" in the unit: a line break, quote or backslash would end or bend it.
            problems.append('%s[%s] is %s; give one-line values without quotes or backslashes, such as '
                            '{LD_LIBRARY_PATH: /opt/nvidia/lib}' % (variable, shown(name), describe(item)))
    return problems


def check_gpu_watchdog(values):
    check = RoleChecker(values)
    check.rule('gpu_watchdog_memory_budget_percent', _budget_problem)
    budgets = check.get('gpu_watchdog_service_budgets')
    if budgets is not MISSING:
        if not isinstance(budgets, dict):
            check.add('gpu_watchdog_service_budgets is %s; give a mapping of service name to percentage, such as '
                      '{imagegen: 80}, or {}' % describe(budgets))
        else:
            for name, budget in sorted(budgets.items(), key=lambda pair: str(pair[0])):
                if not is_service_name(name):
                    check.add('gpu_watchdog_service_budgets has the name %s, which is not a service name of the plan '
                              '(such as imagegen)' % describe(name))
                check.add(_budget_problem('gpu_watchdog_service_budgets[%s]' % shown(name), budget))
    _watchdog_numbers(check)
    for name, example in (('gpu_watchdog_plan_file', '/etc/gpufleet/placement.json'),
                          ('gpu_watchdog_config_dir', '/etc/gpufleet'),
                          ('gpu_watchdog_state_dir', '/var/lib/gpufleet-watchdog'),
                          ('gpu_watchdog_textfile_dir', '/var/lib/prometheus/node-exporter'),
                          ('gpu_watchdog_install_dir', '/usr/local/lib/gpufleet'),
                          ('gpu_watchdog_python_interpreter', '/usr/bin/python3')):
        check.rule(name, _watchdog_path, example)
    units = check.get('gpu_watchdog_reset_stop_units')
    if units is not MISSING and (not isinstance(units, (list, tuple))
                                 or not all(is_unit_name(u, ('service',)) for u in units)):
        check.add('gpu_watchdog_reset_stop_units must be a list of .service units, such as '
                  '[gpufleet-dcgm-exporter.service], or [] (got %s, %s)' % (shown(units), describe(units)))
    mig_unit = check.get('gpu_watchdog_mig_unit')
    if mig_unit is not MISSING and not (mig_unit == '' or is_unit_name(mig_unit, ('service',))):
        check.add("gpu_watchdog_mig_unit is %s; give a .service unit such as gpufleet-mig.service, or ''"
                  % describe(mig_unit))
    prefix = check.get('gpu_watchdog_mps_unit_prefix')
    if prefix is not MISSING and not is_unit_prefix(prefix):
        check.add('gpu_watchdog_mps_unit_prefix is %s; give a unit name prefix such as gpufleet-mps@ (letters, '
                  'digits, _ . @ -)' % describe(prefix))
    command = check.get('gpu_watchdog_gpu_reset_command')
    if command is not MISSING and (not isinstance(command, (list, tuple)) or not command or not all(
            isinstance(word, str) and word and not re.search(r'\s', word) for word in command)):
        # The command runs without a shell: a space inside one word is part of that word, not a separator.
        check.add('gpu_watchdog_gpu_reset_command must be a non-empty list of words, one argument each, such as '
                  "[nvidia-smi, --gpu-reset, -i]; the GPU's UUID is appended and it runs without a shell (got %s, %s)"
                  % (shown(command), describe(command)))
    check.rules('gpu_watchdog_environment', _environment_problems)
    cap = check.get('gpu_watchdog_fleet_max_quarantined')
    if cap is not MISSING and (whole_number(cap) is None or whole_number(cap) < 0):
        check.add('gpu_watchdog_fleet_max_quarantined must be a whole number of hosts, 0 for no cap, such as 2 (got %s, '
                  '%s)' % (shown(cap), describe(cap)))
    url = check.get('gpu_watchdog_fleet_prometheus_url')
    if url is not MISSING and not (url == '' or is_http_url(url)):
        check.add("give gpu_watchdog_fleet_prometheus_url an http(s) URL with no trailing slash, such as "
                  "http://10.20.3.41:9090, or '' (got %s, %s)" % (shown(url), describe(url)))
    return check.problems


# -- gpu_services ----------------------------------------------------------------------------------------------------


_CPULIST = re.compile(r'(?:[0-9]+(?:-[0-9]+)?(?:,[0-9]+(?:-[0-9]+)?)*)?')
_USER_PREFIX = re.compile(r'[a-z_][a-z0-9_.-]*')
_DEVICE = re.compile(r'(?:/dev/|char-|block-)\S+')


def check_gpu_services(values):
    """The role's own settings, and each service's rules that need no host (_service_specs)."""
    check = RoleChecker(values)
    services, users = check.get('gpu_services_services'), check.get('gpu_services_user_prefix')
    if isinstance(services, list):
        check.add(*service_specs(services, users)[1])  # a user prefix that is not a string: the default
    for name in ('gpu_services_services', 'gpu_services_mps_daemons', 'gpu_services_device_allow'):
        value = check.get(name)
        if value is not MISSING and not isinstance(value, (list, tuple)):
            check.add('%s must be a list (it is %s); give %s a list%s' % (
                name, describe(value), name, ', such as [{name: llm, gpus: 2}]' if name == 'gpu_services_services'
                else ''))
    check.rule('gpu_services_plan_file', path_problem, example='/etc/gpufleet/placement.json')
    check.rule('gpu_services_numactl_command', path_problem, example='/usr/bin/numactl')
    check.rule('gpu_services_container_command', path_problem, allow_empty=True, example='/usr/bin/podman')
    prefix = check.get('gpu_services_unit_prefix')
    # A service's unit is the prefix, its name and .service; an '@' would make it a template's instance.
    if prefix is not MISSING and not (is_unit_prefix(prefix) and '@' not in prefix):
        check.add('gpu_services_unit_prefix is %s; give a unit name prefix of letters, digits, _ . and -, such as '
                  'gpufleet-svc-' % describe(prefix))
    prefix = check.get('gpu_services_mps_unit_prefix')
    if prefix is not MISSING and not is_unit_prefix(prefix):
        check.add('gpu_services_mps_unit_prefix is %s; give the MPS daemons\' unit name prefix, such as gpufleet-mps@'
                  % describe(prefix))
    target = check.get('gpu_services_gpu_target')
    if target is not MISSING and not is_unit_name(target, ('target',)):
        check.add('gpu_services_gpu_target is %s; give a .target unit, such as gpufleet-gpu.target' % describe(target))
    users = check.get('gpu_services_user_prefix')
    if users is not MISSING and not (isinstance(users, str) and _USER_PREFIX.fullmatch(users)):
        check.add('gpu_services_user_prefix is %s; give a user name prefix (lower-case letters, digits, _ . -), such '
                  'as gpufleet-' % describe(users))
    reserved = check.get('gpu_services_reserved_cpus')
    if reserved is not MISSING and not (isinstance(reserved, str) and _CPULIST.fullmatch(reserved)):
        check.add("gpu_services_reserved_cpus is %s; give a kernel CPU list as a string, such as \"0,32\" or "
                  "\"0-1,32-33\", or ''" % describe(reserved))
    devices = check.get('gpu_services_device_allow')
    if isinstance(devices, (list, tuple)):
        bad = [device for device in devices if not (isinstance(device, str) and _DEVICE.fullmatch(device))]
        if bad:
            check.add('gpu_services_device_allow has %s; give device paths under /dev/ or char-/block- groups, such '
                      'as /dev/nvidia-caps or char-nvidia-caps' % ', '.join(shown(device) for device in bad))
    return check.problems


# -- monitoring ------------------------------------------------------------------------------------------------------


_DURATION = re.compile(r'[0-9]+(?:ms|s|m|h)')
_HOST_PORT = re.compile(r'[A-Za-z0-9_.:\[\]-]+:[0-9]+')
# The role's own scrape jobs (roles/monitoring/vars/main.yml): the pack's alerts select on their names.
MONITORING_JOBS = ('gpufleet_dcgm_exporter', 'gpufleet_node_exporter', 'prometheus')


def _as_text(value):
    return value if isinstance(value, str) else shown(value)


def _in_range(check, name, low, high, words, example, low_open=False, high_open=False):
    value = check.get(name)
    if value is MISSING:
        return
    number = decimal_number(value)
    if number is None or (number <= low if low_open else number < low) or (number >= high if high_open else number > high):
        check.add('%s is %s: %s, such as %s (it is %s)' % (name, _as_text(value), words, example, describe(value)))


def check_monitoring(values):
    """The monitoring role's settings; the fleet hosts' targets are the monitoring_problems filter's."""
    check = RoleChecker(values)
    _in_range(check, 'monitoring_gpu_memory_budget_percent', 1, 100, 'a GPU memory budget is a percentage from 1 to 100',
              85)
    budgets = check.get('monitoring_gpu_memory_budgets')
    if budgets is not MISSING and not isinstance(budgets, dict):
        check.add('monitoring_gpu_memory_budgets is %s: make it a mapping of service name to percentage, such as '
                  '{imagegen: 80} (it is %s)' % (shown(budgets), describe(budgets)))
    elif budgets is not MISSING:
        bad = [name for name, value in budgets.items() if decimal_number(value) is None
               or not 1 <= decimal_number(value) <= 100]
        if bad:
            check.add('monitoring_gpu_memory_budgets: %s must be percentages from 1 to 100, keyed by service name (got '
                      '%s)' % (', '.join(map(str, bad)), shown(budgets)))
    _in_range(check, 'monitoring_gpu_temperature_celsius', 30, 120, 'give a GPU temperature from 30 to 120 (C)', 85)
    _in_range(check, 'monitoring_gpu_power_percent', 1, 200,
              'give a share of the enforced power limit from 1 to 200 (%)', 100)
    _in_range(check, 'monitoring_binding_max_remote_fraction', 0, 1, 'give a fraction above 0 and below 1', 0.02,
              low_open=True, high_open=True)
    intervals = [check.get(name) for name in ('monitoring_scrape_interval', 'monitoring_evaluation_interval')]
    if any(value is not MISSING and not (isinstance(value, str) and _DURATION.fullmatch(value)) for value in intervals):
        check.add('monitoring_scrape_interval and monitoring_evaluation_interval are Prometheus durations with a unit, '
                  'such as 30s or 1m (got %s and %s)' % tuple(shown(value) for value in intervals))
    drift_for = check.get('monitoring_drift_for')
    if drift_for is not MISSING and not (isinstance(drift_for, str) and _DURATION.fullmatch(drift_for)):
        check.add('monitoring_drift_for is a Prometheus duration with a unit, such as 15m or 0s (got %s)'
                  % shown(drift_for))
    for name, example in (('monitoring_dcgm_exporter_port', 9400), ('monitoring_node_exporter_port', 9100)):
        value = check.get(name)
        if value is not MISSING and not (whole_number(value) is not None and 1 <= whole_number(value) <= 65535):
            check.add('%s (%s) is a port number, 1-65535, such as %d (it is %s)'
                      % (name, shown(value), example, describe(value)))
    managers = check.get('monitoring_alertmanagers')
    if managers is not MISSING and (not isinstance(managers, (list, tuple)) or not all(
            isinstance(item, str) and _HOST_PORT.fullmatch(item) for item in managers)):
        check.add("monitoring_alertmanagers must be a list of host:port entries, such as ['am1.example.com:9093', "
                  "'[fd00::9]:9093'] (got %s)" % shown(managers))
    for name in ('monitoring_config_file', 'monitoring_rules_dir', 'monitoring_file_sd_dir',
                 'monitoring_scrape_config_file', 'monitoring_promtool'):
        check.rule(name, path_problem, example='/etc/prometheus/rules.d')
    service = check.get('monitoring_prometheus_service')
    if service is not MISSING and not (service == '' or is_unit_name(service) or is_unit_prefix(service)):
        check.add("monitoring_prometheus_service is %s: give a unit name such as prometheus, or '' to reload nothing"
                  % shown(service))
    if check.has('monitoring_install_prometheus', 'monitoring_scrape_config_file', 'monitoring_config_file') \
            and boolean(check.get('monitoring_install_prometheus')) is False \
            and check.get('monitoring_scrape_config_file') == check.get('monitoring_config_file'):
        check.add("With monitoring_install_prometheus false, monitoring_scrape_config_file (%s) must not be your "
                  "Prometheus's main configuration monitoring_config_file: the role would overwrite it with its "
                  "snippet; give the snippet its own file, such as /etc/prometheus/gpufleet-scrape.yml"
                  % check.get('monitoring_scrape_config_file'))
    api = check.get('monitoring_api_url')
    if api is not MISSING and not (api == '' or is_http_url(api)):
        check.add("monitoring_api_url is %s: give an http(s)://host:port URL with no trailing slash, or '' to ask "
                  "nothing" % shown(api))
    report = check.get('monitoring_report_url')
    if report is not MISSING and not (report == '' or (isinstance(report, str) and re.fullmatch(r'https?://\S+', report))):
        check.add("monitoring_report_url is %s: give an http(s):// URL, or '' for the monitoring host's address"
                  % shown(report))
    wait = check.get('monitoring_report_wait_sec')
    if wait is not MISSING and not (whole_number(wait) is not None and 0 <= whole_number(wait) <= 3600):
        check.add('monitoring_report_wait_sec %s: give a wait of 0 to 3600 seconds (it is %s)' % (shown(wait),
                                                                                                  describe(wait)))
    groups = check.get('monitoring_extra_rule_groups')
    if groups is not MISSING and (not isinstance(groups, (list, tuple)) or not all(
            isinstance(item, dict) and 'name' in item and 'rules' in item for item in groups)):
        check.add('monitoring_extra_rule_groups must be a list of rule groups, each a mapping with a name and rules '
                  '(got %s)' % shown(groups))
    jobs = check.get('monitoring_extra_scrape_configs')
    if jobs is not MISSING and (not isinstance(jobs, (list, tuple)) or not all(
            isinstance(item, dict) and 'job_name' in item and item['job_name'] not in MONITORING_JOBS for item in jobs)):
        check.add('monitoring_extra_scrape_configs must be a list of scrape jobs, each a mapping with a job_name other '
                  'than %s, whose alerts select on them (got %s)' % (', '.join(MONITORING_JOBS), shown(jobs)))
    check.rule('monitoring_exporter_counters', _exporter_counters_problem)
    return check.problems


def _exporter_counters_problem(variable, value):
    """The DCGM field names a site's own exporter serves (whether the alert pack's are among them is the
    monitoring_problems filter's, with the GPU hosts it names)."""
    example = 'DCGM_FI_DEV_GPU_TEMP, DCGM_EXP_XID_ERRORS_COUNT'
    problem = strings_problem(variable, value, 'DCGM field names', example)
    if problem:
        return problem
    bad = [item for item in value if not DCGM_FIELD.fullmatch(item)]
    if bad:
        return ("%s has %s; each entry is a DCGM field name, the first column of your exporter's counters CSV, such "
                "as [%s], or leave it empty ([]) to check each GPU host's dcgm_exporter_counters"
                % (variable, ', '.join(describe(item) for item in bad), example))
    return None
