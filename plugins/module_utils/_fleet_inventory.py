# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.core contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The fleet model: what the inventory says about each host and about the fleet, checked once, in Python.

A host's inventory values (management address and networks, data centre and rack, hardware class, expected GPUs),
the failure domains (each host in one rack group, each rack group in one data-centre group, each host in one
hardware-class group), the site playbook's rollout settings, the rollout's batches and the watchdog cap (both in
_fleet_rollout.py, re-exported here), and the monitoring targets. The validate stage, the preflight stage's rollout
plan and the monitoring role read them from here; templates only format text. Inputs are plain data (the adapter in
plugin_utils reads them from Ansible's hostvars). Pure code; a private module: its API may change without notice.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import fnmatch
import ipaddress

from ansible_collections.gpufleet.core.plugins.module_utils._fleet_rollout import ROLLOUT_SETTINGS, check_rollout_settings
from ansible_collections.gpufleet.core.plugins.module_utils._hardware_class import contract
from ansible_collections.gpufleet.core.plugins.module_utils._stage_plan import STAGE_ROLES
from ansible_collections.gpufleet.core.plugins.module_utils._values import (
    Unrendered, address, address_problem, and_list, boolean, boolean_problem, decimal_number, describe, label_problem,
    networks, networks_of, percentage, shown, unrendered_problem, url_problem)

PREFLIGHT_POLICIES = ('all_or_nothing', 'skip_failed')
DRIVERS_ROLES = STAGE_ROLES['drivers']
STAGE_SWITCHES = ('gpufleet_drivers_enabled', 'gpufleet_exporter_enabled', 'gpufleet_partition_enabled',
                  'gpufleet_services_enabled', 'gpufleet_verify_enabled', 'gpufleet_watchdog_enabled',
                  'gpufleet_monitoring_enabled', 'gpufleet_report_enabled')
# The run's switches. The playbook reads each as validate normalised it (its settings), so that the words -e and INI
# inventories give ("false", "no") switch as YAML's false does, not as a non-empty string, which Jinja takes as true.
SWITCHES = STAGE_SWITCHES + ('gpufleet_full_run',)
# The settings of the whole run: play keywords and fleet-wide switches, which must not differ between hosts.
FLEET_SETTINGS = ('gpufleet_gpu_memory_budget_percent', 'gpufleet_gpu_memory_budgets', 'gpufleet_gpu_group',
                  'gpufleet_required_groups', 'gpufleet_preflight_policy', 'gpufleet_drivers_roles',
                  'gpufleet_watchdog_max_quarantined', 'gpufleet_watchdog_prometheus_url', 'gpufleet_monitoring_group',
                  'gpufleet_class_groups', 'gpufleet_dc_groups', 'gpufleet_rack_groups',
                  'gpufleet_verify_max_remote_fraction') + SWITCHES + ROLLOUT_SETTINGS
# A host's own inventory values.
HOST_VALUES = ('gpufleet_management_address', 'gpufleet_management_cidrs', 'gpufleet_dc', 'gpufleet_rack',
               'gpufleet_expected_gpus', 'gpufleet_expected_numa')
# The thresholds several roles share, each one knob of the site playbook, handed down to the roles that use it:
# the role's variable -> the gpufleet variable it takes its value from.
HANDED_DOWN = {
    'gpu_watchdog_memory_budget_percent': 'gpufleet_gpu_memory_budget_percent',
    'gpu_watchdog_service_budgets': 'gpufleet_gpu_memory_budgets',
    'gpu_watchdog_max_remote_fraction': 'gpufleet_verify_max_remote_fraction',
    'monitoring_gpu_memory_budget_percent': 'gpufleet_gpu_memory_budget_percent',
    'monitoring_gpu_memory_budgets': 'gpufleet_gpu_memory_budgets',
    'monitoring_binding_max_remote_fraction': 'gpufleet_verify_max_remote_fraction',
}


def handed_down(settings):
    """The values the site playbook hands down to the roles (HANDED_DOWN), from the run's normalised settings; a whole
    number as an int, so that a role's text reads 85, not 85.0."""
    def plain(value):
        return int(value) if isinstance(value, float) and value.is_integer() else value
    return dict((name, plain(settings[knob])) for name, knob in HANDED_DOWN.items())


# -- the run's settings -----------------------------------------------------------------------------------------


def _group_list(variable, value, problems):
    """A list of group names or shell patterns (dc_*), as given; a string is one name."""
    if isinstance(value, str):
        value = [value] if value else []
    if not isinstance(value, list) or not all(isinstance(item, str) and item for item in value):
        problems.append('%s is %s; give a list of inventory group names or patterns, such as ["dc_*"]'
                        % (variable, describe(value)))
        return []
    return value


def check_settings(values, groups):
    """The run's settings, normalised ({name: value}), and the problems of those that are wrong.

    ``values`` maps each FLEET_SETTINGS name to its value (the role's defaults filled in); ``groups`` is the
    inventory's {group: [hosts]}.
    """
    problems = []
    settings = {}
    for name in SWITCHES:
        problem = boolean_problem(name, values[name])
        if problem:
            problems.append(problem)
        settings[name] = bool(boolean(values[name]))
    settings.update(check_rollout_settings(values, problems))
    policy = values['gpufleet_preflight_policy']
    if policy not in PREFLIGHT_POLICIES:
        problems.append('gpufleet_preflight_policy is %s; give all_or_nothing (no host is changed unless every host '
                        'passed preflight) or skip_failed (failed hosts are quarantined, the others go on)'
                        % describe(policy))
    settings['gpufleet_preflight_policy'] = policy
    roles = values['gpufleet_drivers_roles']
    if not isinstance(roles, list) or any(role not in DRIVERS_ROLES for role in roles):
        problems.append('gpufleet_drivers_roles is %s; give a list of %s, in the order they run'
                        % (describe(roles), ', '.join(DRIVERS_ROLES)))
    settings['gpufleet_drivers_roles'] = roles if isinstance(roles, list) else []
    for name in ('gpufleet_gpu_group', 'gpufleet_monitoring_group'):
        value = values[name]
        if not isinstance(value, str) or not value:
            problems.append('%s is %s; give the name of an inventory group' % (name, describe(value)))
        settings[name] = value if isinstance(value, str) else ''
    required = values['gpufleet_required_groups']
    if not isinstance(required, list) or not all(isinstance(item, str) for item in required):
        problems.append('gpufleet_required_groups is %s; give a list of group names, such as ["gpu_hosts"]'
                        % describe(required))
        required = []
    missing = [group for group in sorted(set(required + [settings['gpufleet_gpu_group']])) if group and group not in groups]
    if missing:
        problems.append('The inventory has no group %s: define %s (see examples/hk-fleet/inventory/hosts.yml), or '
                        'change gpufleet_required_groups or gpufleet_gpu_group'
                        % (', '.join(missing), 'it' if len(missing) == 1 else 'them'))
    settings['gpufleet_class_groups'] = _group_list('gpufleet_class_groups', values['gpufleet_class_groups'], problems)
    # A class may be declared before its first host; a data centre or a rack that matches no group is a typo.
    for name in ('gpufleet_dc_groups', 'gpufleet_rack_groups'):
        settings[name] = _group_list(name, values[name], problems)
        unmatched = [pattern for pattern in settings[name] if not fnmatch.filter(groups, pattern)]
        if unmatched:
            problems.append('%s names %s, which %s no inventory group; fix the name or add the group'
                            % (name, ', '.join(unmatched), 'matches' if len(unmatched) == 1 else 'match'))
            settings[name] = []
    cap = values['gpufleet_watchdog_max_quarantined']
    parsed = percentage(cap)
    if parsed is None or parsed[0] != int(parsed[0]) or parsed[0] < 0 or (parsed[1] and parsed[0] > 100) \
            or (not parsed[1] and isinstance(cap, str) and not cap.strip().isdigit()):
        problems.append('gpufleet_watchdog_max_quarantined is %s; give a number of hosts (0 for no cap) or a '
                        'percentage of the GPU hosts as a string, such as "10%%"' % describe(cap))
        settings['gpufleet_watchdog_max_quarantined'] = None
    else:
        settings['gpufleet_watchdog_max_quarantined'] = parsed
    problem = url_problem('gpufleet_watchdog_prometheus_url', values['gpufleet_watchdog_prometheus_url'],
                          allow_empty=True)
    if problem:
        problems.append(problem + " for the monitoring host's")
    settings['gpufleet_watchdog_prometheus_url'] = values['gpufleet_watchdog_prometheus_url'] if not problem else ''
    fraction = decimal_number(values['gpufleet_verify_max_remote_fraction'])
    if fraction is None or not 0 < fraction < 1:
        problems.append('gpufleet_verify_max_remote_fraction is %s; give a fraction above 0 and below 1, such as 0.02 '
                        '(2%% of pages on another NUMA node)' % describe(values['gpufleet_verify_max_remote_fraction']))
    settings['gpufleet_verify_max_remote_fraction'] = fraction
    budget = decimal_number(values['gpufleet_gpu_memory_budget_percent'])
    if budget is None or not 1 <= budget <= 100:
        problems.append('gpufleet_gpu_memory_budget_percent is %s; give a percentage of the GPU\'s memory from 1 to '
                        '100, without a %% sign, such as 85' % describe(values['gpufleet_gpu_memory_budget_percent']))
    settings['gpufleet_gpu_memory_budget_percent'] = budget
    budgets = values['gpufleet_gpu_memory_budgets']
    bad = [name for name, value in budgets.items() if decimal_number(value) is None
           or not 1 <= decimal_number(value) <= 100] if isinstance(budgets, dict) else None
    if bad is None or bad:
        problems.append('gpufleet_gpu_memory_budgets is %s; give a mapping of service name to a percentage from 1 to '
                        '100, such as {imagegen: 80}%s' % (describe(budgets), '' if bad is None else ' (%s %s not)' % (
                            ', '.join(map(str, bad)), 'is' if len(bad) == 1 else 'are')))
    settings['gpufleet_gpu_memory_budgets'] = budgets if isinstance(budgets, dict) and not bad else {}
    return settings, problems


def shadowed_knobs(given, settings_values):
    """A role's threshold set in the inventory to another value than the site playbook's one knob hands down: under
    site.yml the knob wins, so the role's value would silently not apply. ``given`` is the host's inventory values of
    HANDED_DOWN's role variables (only those it sets)."""
    found = []
    for name, value in sorted(given.items()):
        knob = HANDED_DOWN[name]
        if shown(value) != shown(settings_values[knob]):
            found.append('%s is %s, but the site playbook hands down %s (%s) to every role that uses it; set %s '
                         'instead, and remove %s' % (name, describe(value), knob, shown(settings_values[knob]), knob,
                                                     name))
    return found


def settings_that_differ(per_host):
    """Fleet settings whose value is not the same on every host: {name: {shown value: [hosts]}}.

    Play keywords (serial, max_fail_percentage) are read once for the whole run, so a value set for some hosts only
    would silently apply to all or none of them.
    """
    found = {}
    for name in FLEET_SETTINGS:
        seen = {}
        for host, values in per_host.items():
            if name in values:
                seen.setdefault(shown(values[name]), []).append(host)
        if len(seen) > 1:
            found[name] = dict((value, sorted(hosts)) for value, hosts in seen.items())
    return found


# -- hosts ------------------------------------------------------------------------------------------------------------


def groups_matching(groups_of_host, patterns):
    """The host's groups that the names or shell patterns (dc_*, a100_*) match, sorted: its data centres, racks or
    hardware classes. One is right; none or two are the inventory's mistake, which validate names."""
    patterns = [pattern for pattern in (patterns or []) if isinstance(pattern, str) and pattern]
    return sorted(group for group in groups_of_host or [] if isinstance(group, str)
                  and any(fnmatch.fnmatchcase(group, pattern) for pattern in patterns))


def hardware_class(groups_of_host, class_groups, model=''):
    """A host's hardware class, as targets and the report label it: its (first) hardware-class group, else ``model``
    (its expected GPU model)."""
    classes = groups_matching(groups_of_host, class_groups)
    if classes:
        return classes[0]
    return model if isinstance(model, str) else ''


def check_host(name, values, groups_of_host, settings):
    """One host's model ({address, networks, dc, rack, class, gpu, expected_gpus, ...}) and its problems."""
    problems = []
    given = values.get('gpufleet_management_address', '')
    problem = address_problem('gpufleet_management_address', given)
    ip = address(given)
    if problem:
        problems.append(problem)
    nets, problem = networks('gpufleet_management_cidrs', values.get('gpufleet_management_cidrs', []))
    if problem:
        problems.append(problem)
    elif ip is not None and not networks_of(ip, nets):
        problems.append('gpufleet_management_address %s is not inside gpufleet_management_cidrs (%s): fix the '
                        'address, or add its network' % (given, ', '.join(str(net) for net in nets)))
    gpu_group = settings['gpufleet_gpu_group']
    is_gpu = gpu_group in groups_of_host
    promise, found = contract(values.get('gpufleet_expected_gpus', {}), values.get('gpufleet_expected_numa', {}))
    problems.extend(found)
    count = promise['count']
    if found:
        pass
    elif is_gpu and count < 1:
        problems.append('the host is in %s but gpufleet_expected_gpus.count is %d: set gpufleet_expected_gpus (count '
                        'and model) in its hardware-class group\'s variables' % (gpu_group, count))
    elif not is_gpu and count > 0:
        problems.append('gpufleet_expected_gpus says %d GPUs but the host is not in the group %s: add it to a '
                        'hardware-class group under %s, or set the count to 0' % (count, gpu_group, gpu_group))
    labels = {}
    for key, what in (('dc', 'data centre'), ('rack', 'rack')):
        variable = 'gpufleet_' + key
        value = values.get(variable, '')
        domain_groups = settings['gpufleet_%s_groups' % key]
        problem = label_problem(variable, value, what)
        # Without domain groups the labels are optional, unless the rollout batches by them.
        if problem and (value not in ('', None) or domain_groups or settings['gpufleet_batch_by'] == variable):
            problems.append(problem)
        labels[key] = value if isinstance(value, str) else ''
        member_of = groups_matching(groups_of_host, domain_groups)
        if domain_groups and len(member_of) != 1:
            problems.append(
                'the host is in %s %s groups (%s)%s; a host is in exactly one %s: list it under one group that %s '
                'matches' % (len(member_of) or 'no', what, ', '.join(member_of) or 'none',
                             '' if member_of else ' matching %s' % ', '.join(domain_groups), what,
                             'gpufleet_%s_groups' % key))
        labels[key + '_group'] = member_of[0] if len(member_of) == 1 else ''
    classes = groups_matching(groups_of_host, settings['gpufleet_class_groups'])
    if settings['gpufleet_class_groups'] and len(classes) != 1:
        problems.append('the host is in %s hardware-class groups (%s); a host has exactly one hardware class: put it '
                        'in one of %s' % (len(classes) or 'no', ', '.join(classes) or 'none',
                                          ', '.join(settings['gpufleet_class_groups'])))
    batch_by = settings['gpufleet_batch_by']
    if batch_by and batch_by not in ('gpufleet_dc', 'gpufleet_rack'):
        value = values.get(batch_by, '')
        problem = label_problem(batch_by, value, 'failure domain')
        if problem:
            problems.append(problem + ' (gpufleet_batch_by is %s)' % batch_by)
    model_host = {
        'host': name,
        'address': str(ip) if ip is not None else '',
        'given_address': given if isinstance(given, str) else shown(given),
        'networks': [str(net) for net in nets],
        'dc': labels['dc'], 'rack': labels['rack'],
        'dc_group': labels['dc_group'], 'rack_group': labels['rack_group'],
        'hardware_class': classes[0] if len(classes) == 1 else '',
        'gpu': is_gpu,
        'expected_gpus': {'count': count, 'model': promise['model']},
        'promise': promise,
        'batch_domain': (values.get(batch_by, '') if batch_by else ''),
    }
    return model_host, ['%s: %s' % (name, problem) for problem in problems]


# -- the fleet --------------------------------------------------------------------------------------------------------


def _hosts_text(hosts):
    return and_list(sorted(hosts))


def shared_addresses(addresses):
    """{address: [hosts]} for management addresses more than one host has; IPv6 written two ways is one address."""
    seen = {}
    for host, given in addresses.items():
        ip = address(given)
        if ip is not None:
            seen.setdefault(str(ip), []).append(host)
    return dict((ip, sorted(hosts)) for ip, hosts in seen.items() if len(hosts) > 1)


def address_clashes(addresses):
    """Each host that shares its management address with another inventory host, to the problem naming them all."""
    found = {}
    for ip, hosts in sorted(shared_addresses(addresses).items()):
        problem = '%s have the same gpufleet_management_address %s; give each host its own address' % (
            _hosts_text(hosts), ip)
        for host in hosts:
            found.setdefault(host, []).append(problem)
    return found


def fleet_problems(models, settings, per_host_settings):
    """The problems of the fleet as a whole, no one host's: each names every host or group involved."""
    problems = []
    for name, seen in sorted(settings_that_differ(per_host_settings).items()):
        where = '; '.join('%s on %s' % (value, _hosts_text(hosts)) for value, hosts in sorted(seen.items()))
        problems.append('%s differs between hosts (%s); it applies to the whole run: set it once, in group_vars/all '
                        'or with -e' % (name, where))
    for key, what, parent in (('rack', 'rack', 'dc'), ('dc', 'data centre', None)):
        by_group, by_label = {}, {}
        for model in models.values():
            if model[key + '_group']:
                by_group.setdefault(model[key + '_group'], []).append(model)
            if model[key]:
                by_label.setdefault(model[key], set()).add(model[key + '_group'])
        for group, members in sorted(by_group.items()):
            labels = sorted(set(member[key] for member in members))
            if len(labels) > 1:
                problems.append('the %s group %s has hosts with different gpufleet_%s values (%s); set gpufleet_%s '
                                'once, in group_vars/%s.yml' % (what, group, key, ', '.join(
                                    '%s on %s' % (label or "''", _hosts_text([m['host'] for m in members
                                                                              if m[key] == label]))
                                    for label in labels), key, group))
            if parent:
                parents = sorted(set(member[parent + '_group'] for member in members if member[parent + '_group']))
                if len(parents) > 1:
                    problems.append('the rack group %s is in %d data-centre groups (%s); a rack is in exactly one data '
                                    'centre: list it under one of them' % (group, len(parents), ', '.join(parents)))
        for label, groups in sorted(by_label.items()):
            groups.discard('')
            if len(groups) > 1:
                problems.append('gpufleet_%s %s is set by %d groups (%s); give each %s group its own label'
                                % (key, label, len(groups), ', '.join(sorted(groups)), what))
    racks = {}
    for model in models.values():
        if model['rack'] and model['dc']:
            racks.setdefault(model['rack'], set()).add(model['dc'])
    for rack, dcs in sorted(racks.items()):
        if len(dcs) > 1:
            problems.append('rack %s is in %d data centres (%s); a rack is in exactly one: fix gpufleet_dc or '
                            'gpufleet_rack of its hosts (%s)' % (rack, len(dcs), ', '.join(sorted(dcs)), _hosts_text(
                                [m['host'] for m in models.values() if m['rack'] == rack])))
    return problems


def stranded_hosts(inventory_groups_of, run_hosts, settings):
    """Inventory hosts that sit in a failure-domain group but in no hardware-class group and outside the run's hosts:
    a misspelt class group leaves a host out of every stage, silently, unless it is named here."""
    patterns = settings['gpufleet_rack_groups'] + settings['gpufleet_dc_groups']
    if not patterns or not settings['gpufleet_class_groups']:
        return []
    found = []
    for host, groups_of_host in sorted(inventory_groups_of.items()):
        if host in run_hosts or groups_matching(groups_of_host, settings['gpufleet_class_groups']):
            continue
        domains = groups_matching(groups_of_host, patterns)
        if domains:
            others = sorted(set(groups_of_host) - set(domains) - set(['all', 'ungrouped']))
            found.append('%s is in %s but in no hardware-class group (%s), so no stage would run on it; it is in %s: '
                         'fix the class group\'s name in the inventory' % (
                             host, ', '.join(domains), ', '.join(settings['gpufleet_class_groups']),
                             ', '.join(others) or 'no other group'))
    return found


# -- the roles on a host ---------------------------------------------------------------------------------------------


def exporter_problem(listen, model):
    """Where dcgm-exporter would listen (dcgm_exporter_listen_address, else the management address) must be an
    address inside the host's management networks; never every address."""
    given = listen if listen not in ('', None) else model['given_address']
    ip = address(given)
    if ip is None or ip.is_unspecified:
        return ('dcgm_exporter_listen_address is %s; give the host\'s management address (an IP address alone), never '
                '0.0.0.0 or ::' % describe(given))
    if model['networks'] and not networks_of(ip, [ipaddress.ip_network(net) for net in model['networks']]):
        return ('dcgm-exporter would listen on %s, which is not inside gpufleet_management_cidrs (%s): set '
                'dcgm_exporter_listen_address to the host\'s management address' % (ip, ', '.join(model['networks'])))
    return None


def renderable(values, management_address):
    """(the values a role's checker can take, the problems of those the host cannot render): each Unrendered value is
    named with what it needs, unless that is no more than what the host's management address needs (the example's
    dcgm_exporter_listen_address, "{{ gpufleet_management_address }}"): check_host names the host's missing address
    once."""
    named = set(management_address.missing) if isinstance(management_address, Unrendered) else set()
    rendered, problems = {}, []
    for name, value in sorted(values.items()):
        if not isinstance(value, Unrendered):
            rendered[name] = value
        elif not value.missing or not set(value.missing) <= named:
            problems.append(unrendered_problem(name, value))
    return rendered, problems
