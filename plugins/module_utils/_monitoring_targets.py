# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.core contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The monitoring role's model: each fleet host's Prometheus targets and labels, the problems that stop the role, a
host's hardware class, and the report of Prometheus's targets API.

Built from each host's inventory values only (never facts), so that a down host or --limit never changes the targets.
The address, network and label rules are _values' (``address``, ``networks``, ``networks_of``, ``label_problem``);
a shared address is _fleet_inventory's ``shared_addresses``. Templates only format what this returns. Inputs are plain
data (plugin_utils/_monitoring.py reads them from hostvars). Pure code; a private module: its API may change without
notice.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type


from ansible_collections.gpufleet.core.plugins.module_utils import _alert_pack as alert_pack
from ansible_collections.gpufleet.core.plugins.module_utils._fleet_inventory import (
    groups_matching, hardware_class, shared_addresses)
from ansible_collections.gpufleet.core.plugins.module_utils._service_specs import service_specs, takes_gpus
from ansible_collections.gpufleet.core.plugins.module_utils._values import (
    address, address_problem, and_list, decimal_number, describe, label_problem, networks, networks_of, shown, whole_number)
from ansible_collections.gpufleet.core.plugins.module_utils._watchdog_config import MEMORY_BUDGET_PERCENT

# A fleet host's variables the targets are made of: the host's name for it, and its value where the inventory sets
# nothing (the gpufleet role's defaults).
HOST_VARIABLES = {
    'gpufleet_management_address': '',
    'ansible_host': '',
    'gpufleet_management_cidrs': [],
    'gpufleet_dc': '',
    'gpufleet_rack': '',
    'gpufleet_expected_gpus': {},
    'gpufleet_class_groups': [],
    'gpu_services_services': [],
    'dcgm_exporter_listen_port': None,
    # None: the dcgm_exporter role's default list (the caller's role_counters).
    'dcgm_exporter_counters': None,
}
# The role's variables the targets depend on (the filter's settings argument), with the role's defaults.
SETTINGS = {
    'monitoring_fleet_group': 'fleet',
    'monitoring_gpu_group': 'gpu_hosts',
    'monitoring_class_groups': [],
    'monitoring_management_cidrs': [],
    'monitoring_dcgm_exporter_port': 9400,
    'monitoring_node_exporter_port': 9100,
    'monitoring_gpu_memory_budget_percent': MEMORY_BUDGET_PERCENT,
    'monitoring_gpu_memory_budgets': {},
    'monitoring_exporter_counters': [],
    'monitoring_missing_counters': 'fail',
}
PROMETHEUS_PORT = 9090


# -- a host's hardware class -------------------------------------------------------------------------------------


# -- targets -------------------------------------------------------------------------------------------------------


def _setting(settings, name):
    value = (settings or {}).get(name)
    return SETTINGS[name] if value is None else value


def _number(value, default=0):
    number = whole_number(value)
    return default if number is None else number


def _given_address(host, values):
    """(the target address as given, the variable it came from): gpufleet_management_address, else ansible_host,
    else the inventory name."""
    for name in ('gpufleet_management_address', 'ansible_host'):
        value = values.get(name)
        if value not in ('', None):
            return value, name
    return host, ''


def _label_text(value):
    return '' if value is None else value if isinstance(value, str) else shown(value)


def _memory_budget(services, settings):
    """The strictest GPU memory budget (percent) of the host's services that take GPUs, else the default."""
    default = decimal_number(_setting(settings, 'monitoring_gpu_memory_budget_percent'))
    default = 85.0 if default is None else default
    budgets = _setting(settings, 'monitoring_gpu_memory_budgets')
    budgets = budgets if isinstance(budgets, dict) else {}
    found = []
    for spec in service_specs(services)[0]:
        if not takes_gpus(spec):
            continue
        name = spec['name']
        budget = decimal_number(budgets[name]) if isinstance(name, str) and name in budgets else None
        found.append(default if budget is None else budget)
    return float(min(found)) if found else float(default)


def class_groups(values, settings):
    """(the hardware-class groups, the variable that gave them): monitoring_class_groups, else the host's
    gpufleet_class_groups."""
    mine = _setting(settings, 'monitoring_class_groups')
    if isinstance(mine, list) and mine:
        return mine, 'monitoring_class_groups'
    fleet = values.get('gpufleet_class_groups')
    return (fleet if isinstance(fleet, list) else []), 'gpufleet_class_groups'


def _cidrs(values, settings):
    """(the networks a host's address must lie in, as given; the variable that gave them)."""
    mine = _setting(settings, 'monitoring_management_cidrs')
    if isinstance(mine, list) and mine:
        return mine, 'monitoring_management_cidrs'
    return values.get('gpufleet_management_cidrs', []), 'gpufleet_management_cidrs'


def _usable_in(ip, cidr):
    """Whether the address is usable in the network written as cidr (False for anything that is no network)."""
    found, _problem = networks('', [cidr])
    return bool(ip is not None and found and networks_of(ip, found))


def _check(host, values, groups_of_host, gpu_hosts, settings, check_networks=True):
    """One fleet host's target entry and its problems. ``values`` is None for a name the inventory lacks;
    ``check_networks`` False leaves out the check of its address against networks that are already refused."""
    known = values is not None
    values = dict(HOST_VARIABLES, **(values or {}))
    for name, default in HOST_VARIABLES.items():
        if values[name] is None:
            values[name] = default
    problems = []
    given, source = _given_address(host, values)
    ip = address(given)
    cidrs, cidrs_variable = _cidrs(values, settings)
    nets, cidr_problem = networks(cidrs_variable, cidrs) if cidrs != [] else ([], None)
    inside = [cidr for cidr in (cidrs if isinstance(cidrs, list) else []) if _usable_in(ip, cidr)]
    classes_from, classes_variable = class_groups(values, settings)
    classes = groups_matching(groups_of_host, classes_from)
    expected = values['gpufleet_expected_gpus'] if isinstance(values['gpufleet_expected_gpus'], dict) else {}
    model = expected.get('model') or ''
    dcgm_port = values['dcgm_exporter_listen_port']
    dcgm_port = _number(_setting(settings, 'monitoring_dcgm_exporter_port') if dcgm_port in ('', None) else dcgm_port)
    target_address = str(ip) if ip is not None else ''
    entry = {
        'host': host,
        'known': known,
        'address': target_address,
        'given_address': given if isinstance(given, str) else shown(given),
        'cidrs': cidrs,
        'inside': inside,
        'target_address': ('[%s]' % target_address) if ip is not None and ip.version == 6 else target_address,
        'dc': _label_text(values['gpufleet_dc']),
        'rack': _label_text(values['gpufleet_rack']),
        'classes': classes,
        'gpu_class': hardware_class(groups_of_host, classes_from, model if isinstance(model, str) else shown(model))
        or 'none',
        'expected_gpus': _number(expected.get('count', 0)),
        'gpu': host in gpu_hosts,
        'dcgm_port': dcgm_port,
        'node_port': _number(_setting(settings, 'monitoring_node_exporter_port')),
        'memory_budget_percent': _memory_budget(values['gpu_services_services'], settings),
    }
    if not known:
        problems.append('%s (in monitoring_fleet_hosts) is not a host of the inventory: add it there or remove it from '
                        'the list.' % host)
        return entry, problems
    if ip is None:
        problem = address_problem(source or 'gpufleet_management_address', '' if not source else given)
        problems.append('%s: its target address %s (gpufleet_management_address, else ansible_host) is not an IP '
                        'address: %s%s.' % (host, shown(entry['given_address']), problem, '' if source in (
                            '', 'gpufleet_management_address') else ', or set gpufleet_management_address to the '
                            'address its exporters listen on'))
    elif not check_networks:
        pass
    elif cidr_problem:
        problems.append('%s: %s, to check its target address %s against.' % (host, cidr_problem, target_address))
    elif not nets:
        problems.append('%s: no management networks to check its address %s against; set gpufleet_management_cidrs '
                        '(or monitoring_management_cidrs).' % (host, target_address))
    elif not inside:
        within = [str(net) for net in nets if ip in net]
        problems.append('%s: its target address %s (%s) is outside its management networks %s (%s)%s; fix the address '
                        'or %s.' % (host, target_address, source or 'the inventory name', ', '.join(map(str, cidrs)),
                                    cidrs_variable, ': it is the network or broadcast address of %s' % ', '.join(within)
                                    if within else '', cidrs_variable))
    for key, what in (('dc', 'data centre'), ('rack', 'rack')):
        problem = label_problem('gpufleet_' + key, values['gpufleet_' + key], what)
        if problem:
            problems.append('%s: %s; it is the %s label of its targets.' % (host, problem, key))
    if len(classes) > 1:
        problems.append('%s is in %d groups of %s (%s); a host has one hardware class.' % (
            host, len(classes), classes_variable, ', '.join(classes)))
    if entry['gpu'] and entry['expected_gpus'] < 1:
        problems.append('%s is in %s but gpufleet_expected_gpus.count is %s; set it in its hardware class\'s group '
                        'variables, so that a missing GPU is noticed.' % (
                            host, _setting(settings, 'monitoring_gpu_group'),
                            entry['expected_gpus'] if 'count' in expected else 'not set'))
    if not 1 <= dcgm_port <= 65535:
        problems.append('%s: dcgm_exporter_listen_port is %s, which is not a port; give 1-65535, such as 9400.' % (
            host, describe(values['dcgm_exporter_listen_port'] if values['dcgm_exporter_listen_port'] not in ('', None)
                           else _setting(settings, 'monitoring_dcgm_exporter_port'))))
    return entry, problems


def _groups_of(groups):
    found = {}
    for group, members in (groups or {}).items():
        for host in members or []:
            found.setdefault(host, []).append(group)
    return found


def _checked(hosts, host_values, groups, settings, check_networks=True):
    groups = groups or {}
    gpu_hosts = set(groups.get(_setting(settings, 'monitoring_gpu_group')) or [])
    groups_of = _groups_of(groups)
    return [_check(host, host_values.get(host), groups_of.get(host, []), gpu_hosts, settings, check_networks)
            for host in hosts]


def targets(hosts, host_values, groups, settings):
    """One entry per fleet host, in the order of ``hosts``: host, known, address, given_address, cidrs, inside,
    target_address, dc, rack, classes, gpu_class, expected_gpus, gpu, dcgm_port, node_port, memory_budget_percent.

    ``host_values`` maps each inventory host to its variables (HOST_VARIABLES; absent: the default); a host missing
    from it is not in the inventory. ``groups`` is the inventory's groups, ``settings`` the role's variables (SETTINGS).
    """
    return [entry for entry, _problems in _checked(hosts, host_values, groups, settings)]


def settings_problems(settings):
    """The problems of the role's own variables that the targets read: monitoring_management_cidrs."""
    cidrs = _setting(settings, 'monitoring_management_cidrs')
    if cidrs == []:
        return []
    _nets, problem = networks('monitoring_management_cidrs', cidrs)
    if problem is None:
        return []
    bad = [item for item in cidrs if not networks('', [item])[0]] if isinstance(cidrs, list) else []
    return ['monitoring_management_cidrs must be a list of networks, such as ["10.20.0.0/24", "fd00::/64"], or [] to '
            'check each host against its own gpufleet_management_cidrs (got %s%s): %s.' % (
                shown(cidrs), '; not a network: %s' % ', '.join(shown(item) for item in bad) if bad else '', problem)]


def counter_problems(hosts, host_values, groups, settings, role_counters=None):
    """The metrics of the GPU alert pack (module_utils/_alert_pack.py) that the fleet's GPU hosts' exporters do not
    serve, one sentence per set of hosts that lack the same fields, naming the hosts, the fields, the alerts they blind
    and the fix.

    The counters are monitoring_exporter_counters where a site runs its own exporter (one list for every GPU host),
    else each GPU host's dcgm_exporter_counters from the inventory, else ``role_counters`` (the dcgm_exporter role's
    default list; None leaves such hosts unchecked). A list that is no list is its own checker's to refuse."""
    gpu_hosts = set((groups or {}).get(_setting(settings, 'monitoring_gpu_group')) or [])
    scraped = []
    for host in hosts:
        if host in gpu_hosts and host in host_values and host not in scraped:
            scraped.append(host)
    if not scraped:
        return []
    own = _setting(settings, 'monitoring_exporter_counters')
    if isinstance(own, (list, tuple)) and own:
        missing = alert_pack.missing_counters(own, own_exporter=True)
        return [alert_pack.describe_missing(scraped, missing, 'monitoring_exporter_counters', own_exporter=True)] \
            if missing else []
    by_gap = {}
    for host in scraped:
        given = (host_values.get(host) or {}).get('dcgm_exporter_counters')
        counters, variable = (role_counters, "dcgm_exporter_counters (the dcgm_exporter role's default)") \
            if given is None else (given, 'dcgm_exporter_counters')
        missing = alert_pack.missing_counters(counters) if counters is not None else []
        if missing:
            key = (variable, tuple(item['field'] for item in missing))
            by_gap.setdefault(key, (variable, missing, []))[2].append(host)
    return [alert_pack.describe_missing(found_hosts, missing, variable)
            for variable, missing, found_hosts in by_gap.values()]


def unplaced_budgets(hosts, host_values, settings):
    """A per-service memory budget for a name no fleet host's services have would never apply: [its problem] or []."""
    budgets = _setting(settings, 'monitoring_gpu_memory_budgets')
    placed = []  # in the order the fleet's hosts place them
    for host in hosts:
        specs = service_specs((host_values.get(host) or {}).get('gpu_services_services') or [])[0]
        placed.extend(spec['name'] for spec in specs if isinstance(spec['name'], str) and spec['name'] not in placed)
    unplaced = [str(name) for name in budgets if str(name) not in placed] if isinstance(budgets, dict) else []
    if not unplaced:
        return []
    return ['monitoring_gpu_memory_budgets names %s, which no fleet host\'s gpu_services_services places (they place: '
            '%s); a budget for another name would never apply. Fix the name or remove the entry.'
            % (', '.join(unplaced), ', '.join(placed) or 'no service')]


def problems(hosts, host_values, groups, settings, role_counters=None):
    """Every problem with the fleet's targets, one sentence each, naming the host, the variable and the fix: the
    role's networks, each host's address, networks, labels, class and GPU count, addresses two hosts share, budgets
    for services no host places, and (unless monitoring_missing_counters is warn) the alert pack's metrics the GPU hosts' exporters lack
    (counter_problems)."""
    found = settings_problems(settings)
    networks_refused = bool(found)
    if not hosts:
        found.append('No host to scrape: the group monitoring_fleet_group (%s) is empty or missing; set '
                     'monitoring_fleet_group to the fleet\'s group or list the hosts in monitoring_fleet_hosts.'
                     % _setting(settings, 'monitoring_fleet_group'))
    # With the role's networks refused, no host's address is checked against them.
    checked = _checked(hosts, host_values, groups, settings, check_networks=not networks_refused)
    for _entry, host_problems in checked:
        found.extend(host_problems)
    addresses = dict((entry['host'], entry['address']) for entry, _problems in checked if entry['address'])
    for ip, sharing in sorted(shared_addresses(addresses).items()):
        found.append('%s have the same target address %s; give each host its own gpufleet_management_address.' % (
            and_list(sharing), ip))
    found.extend(unplaced_budgets(hosts, host_values, settings))
    if _setting(settings, 'monitoring_missing_counters') != 'warn':
        found.extend('%s Where the exporter cannot change, set monitoring_missing_counters: warn to go on '
                     'regardless.' % problem
                     for problem in counter_problems(hosts, host_values, groups, settings, role_counters))
    return found


# -- the report ----------------------------------------------------------------------------------------------------


def prometheus_url(report_url, host_address):
    """Where the run says Prometheus is: monitoring_report_url, else http://ADDRESS:9090/ (IPv6 in brackets)."""
    if report_url:
        return report_url
    ip = address(host_address)
    where = ('[%s]' % ip if ip.version == 6 else str(ip)) if ip is not None else host_address
    return 'http://%s:%d/' % (where, PROMETHEUS_PORT)


def report(answer, url, api_url):
    """What the run reports about Prometheus, from its targets API's answer (the uri task's result): url, answered,
    targets, up, down (job instance: error, one per target not up) and the line the site's summary prints."""
    answer = answer if isinstance(answer, dict) else {}
    answered = answer.get('status') == 200
    data = (answer.get('json') or {}).get('data') if answered and isinstance(answer.get('json'), dict) else None
    targets = [target for target in ((data or {}).get('activeTargets') or []) if isinstance(target, dict)]
    up = [target for target in targets if target.get('health') == 'up']
    down = ['%s %s: %s' % ((target.get('labels') or {}).get('job'), (target.get('labels') or {}).get('instance'),
                           target.get('lastError') or target.get('health')) for target in targets if target not in up]
    jobs = sorted(set(str((target.get('labels') or {}).get('job')) for target in targets))
    by_job = ['%s %d/%d' % (job, sum(1 for target in up if str((target.get('labels') or {}).get('job')) == job),
                            sum(1 for target in targets if str((target.get('labels') or {}).get('job')) == job))
              for job in jobs]
    if answered:
        line = 'Prometheus at %s: %d of %d targets up (%s)%s' % (url, len(up), len(targets), ', '.join(by_job),
                                                                 '; down: ' + '; '.join(down) if down else '')
    else:
        line = 'Prometheus at %s: its API (%s) does not answer: %s' % (url, api_url, answer.get('msg') or 'not asked')
    return {'url': url, 'answered': answered, 'targets': len(targets), 'up': len(up), 'down': down, 'line': line}
