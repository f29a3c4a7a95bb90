# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.core contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Controller-side access to the fleet model: reads each host's inventory values from Ansible's hostvars (the
gpufleet role's defaults under them) and hands them to module_utils/_fleet_inventory.py.

This is a private module: its API may change without notice.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import re

import yaml
from ansible.errors import AnsibleTemplateError
from jinja2 import Environment, TemplateSyntaxError, meta

from ansible_collections.gpufleet.core.plugins.module_utils import _fleet_inventory as fleet
from ansible_collections.gpufleet.core.plugins.module_utils import _fleet_messages as fleet_messages
from ansible_collections.gpufleet.core.plugins.module_utils import _fleet_rollout as rollout
from ansible_collections.gpufleet.core.plugins.module_utils import _hardware_class as hardware_class
from ansible_collections.gpufleet.core.plugins.module_utils import _stage_plan as stage_plan
from ansible_collections.gpufleet.core.plugins.module_utils._values import Unrendered

try:  # ansible-core 2.19 and later render only strings marked as trusted templates
    from ansible.template import trust_as_template
except ImportError:  # older ansible-core renders any string
    def trust_as_template(value):
        return value

COLLECTION = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
_DEFAULTS = {}
# "{{ name }}" and nothing else: a reference to one variable, such as the example's "{{ ansible_host }}".
_REFERENCE = re.compile(r'\{\{\s*([A-Za-z_][A-Za-z0-9_]*)\s*\}\}')
_TEMPLATE_MARKS = ('{{', '{%', '{#')
# Names a template reads that no inventory sets: Jinja's and Ansible's globals.
_TEMPLATE_GLOBALS = frozenset(('lookup', 'query', 'q', 'now', 'undef', 'range', 'dict', 'lipsum', 'cycler', 'joiner',
                               'namespace', 'omit', 'hostvars'))
# ansible-core's words for an undefined variable, where the template's own variables cannot be read.
_UNDEFINED = re.compile(r"'([A-Za-z_][A-Za-z0-9_]*)' is undefined")


def role_defaults(role='gpufleet'):
    """A role's defaults (its defaults/main.yml, read once per process), the gpufleet role's by default: what a host
    has where the inventory sets nothing."""
    if role not in _DEFAULTS:
        with open(os.path.join(COLLECTION, 'roles', role, 'defaults', 'main.yml')) as handle:
            _DEFAULTS[role] = yaml.safe_load(handle) or {}
    return _DEFAULTS[role]


def plain(value):
    """A value from hostvars as plain Python data (ansible-core's string, list and mapping types unwrapped)."""
    if isinstance(value, bool) or value is None:
        return value
    if isinstance(value, str):
        return str(value)
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        return float(value)
    if isinstance(value, dict) or hasattr(value, 'items'):
        return dict((plain(key), plain(item)) for key, item in value.items())
    if isinstance(value, (list, tuple)):
        return [plain(item) for item in value]
    return value


class _NoFacts(dict):
    """A fact cache that has no host: what a host's variables are from the inventory alone."""

    def get(self, key, default=None):
        return {}


def inventory_reader(hostvars):
    """A function from a host's name to its variables from the inventory alone, untemplated: hostvars' raw_get
    without the fact cache. A previous run's cached facts are tens of kilobytes a host, which each read merges and
    cleans: about 8 ms a host, 8 s for a 1,000-host fleet whose facts are cached (docs/fleet.md), and validate reads
    the inventory, not facts. None where this ansible-core's hostvars have no variable manager to read through.
    """
    manager, hosts = getattr(hostvars, '_variable_manager', None), getattr(hostvars, '_inventory', None)
    if manager is None or hosts is None or not hasattr(manager, '_fact_cache') or not hasattr(manager, '__dict__'):
        return None
    # The run's own variable manager, its fact cache aside; a copy of its attributes, so the run's is untouched
    # (copy.copy would go through its __getstate__, which drops the loader).
    factless = object.__new__(type(manager))
    factless.__dict__.update(manager.__dict__)
    factless._fact_cache = _NoFacts()

    def read(name):
        host = hosts.get_host(name)
        return None if host is None else factless.get_vars(host=host, include_hostvars=False)
    return read


NOT_EXACT = object()


def _has_template(value):
    if isinstance(value, str):
        return any(mark in value for mark in _TEMPLATE_MARKS)
    if isinstance(value, dict) or hasattr(value, 'items'):
        return any(_has_template(key) or _has_template(item) for key, item in value.items())
    if isinstance(value, (list, tuple)):
        return any(_has_template(item) for item in value)
    return False


def _template_texts(value):
    """Every string with a template in a value, however deep."""
    if isinstance(value, str):
        return [value] if any(mark in value for mark in _TEMPLATE_MARKS) else []
    if isinstance(value, dict) or hasattr(value, 'items'):
        return [text for key, item in value.items() for text in _template_texts(key) + _template_texts(item)]
    if isinstance(value, (list, tuple)):
        return [text for item in value for text in _template_texts(item)]
    return []


def missing_variables(variables, name):
    """The variables that the template of ``name`` needs, in turn through the variables it names, which ``variables``
    (a host's untemplated variables: an inventory_reader's) lack, sorted: ["ansible_host"] for the example's
    "{{ ansible_host }}" on a host listed without its ansible_host."""
    missing, seen, pending = set(), set(), [name]
    while pending:
        current = pending.pop()
        if current in seen or current not in variables:
            continue
        seen.add(current)
        for text in _template_texts(variables[current]):
            try:
                used = meta.find_undeclared_variables(Environment().parse(text))
            except TemplateSyntaxError:
                continue
            pending.extend(other for other in used - _TEMPLATE_GLOBALS if other in variables)
            missing.update(other for other in used - _TEMPLATE_GLOBALS if other not in variables)
    return sorted(missing)


def exact_value(variables, name, default=None):
    """A variable's value in untemplated variables (an inventory_reader's), as the template engine would give it,
    where that needs no engine: a value with no template anywhere in it as it is, a reference to one variable
    ("{{ ansible_host }}") as that variable's value, in turn. NOT_EXACT for anything else; default where the variable
    is not set."""
    given, seen = (variables[name] if name in variables else default), set()
    while isinstance(given, str):
        reference = _REFERENCE.fullmatch(given.strip())
        if reference is None:
            break
        if reference.group(1) not in variables or reference.group(1) in seen:
            return NOT_EXACT
        seen.add(reference.group(1))
        given = variables[reference.group(1)]
    return NOT_EXACT if _has_template(given) else plain(given)


def inventory_values(hostvars, hosts, names):
    """{host: {name: value}} of the given variables each host sets (in the inventory or as extra variables), read as
    Validate reads them: from the inventory alone (no fact cache), without the template engine where exact_value
    is, through hostvars[host] for the rest. Hosts hostvars does not know are left out."""
    read = inventory_reader(hostvars)
    found = {}
    for host in hosts:
        if host not in hostvars:
            continue
        variables = read(host) if read else None
        if not isinstance(variables, dict) and not hasattr(variables, 'items'):
            known = hostvars[host]
            found[host] = dict((name, plain(known[name])) for name in names if name in known)
            continue
        values, known = {}, None
        for name in names:
            if name not in variables:
                continue
            value = exact_value(variables, name)
            if value is NOT_EXACT:
                known = hostvars[host] if known is None else known
                value = plain(known[name])
            values[name] = value
        found[host] = values
    return found


class Inventory:
    """The inventory as the run sees it: every host's variables through hostvars, and the groups."""

    def __init__(self, task_vars, templar):
        self.hostvars = task_vars['hostvars']
        self.groups = dict((name, list(hosts)) for name, hosts in task_vars['groups'].items())
        self.run_hosts = list(task_vars.get('ansible_play_hosts_all') or [])
        self.templar = templar
        self._groups_of = None
        self._variables = {}
        self._read_inventory = inventory_reader(self.hostvars)

    def variables_of(self, host):
        """The host's variables, as hostvars gives them (templated when read). Kept per host: each hostvars[host]
        gathers the host's variables anew, cached facts included, which costs milliseconds a time."""
        if host not in self._variables:
            self._variables[host] = self.hostvars[host]
        return self._variables[host]

    def value(self, host, name, default=None):
        """The host's value of a variable, else the gpufleet role's default, else ``default``; an Unrendered where the
        host cannot render its template (it names a variable the host does not have)."""
        variables = self.variables_of(host)
        if name not in variables:
            return plain(role_defaults().get(name, default))
        try:
            found = plain(variables[name])
        except AnsibleTemplateError as error:  # ansible-core 2.19 and later: an undefined variable raises
            return self._unrendered(host, name, error)
        if _template_texts(found):  # before 2.19 a template that names an undefined variable is left as written
            unrendered = self._unrendered(host, name, '')
            return unrendered if unrendered.missing else found
        return found

    def _unrendered(self, host, name, error):
        raw = self._read_inventory(host) if self._read_inventory else None
        if isinstance(raw, dict) or hasattr(raw, 'items'):
            template, missing = (plain(raw[name]) if name in raw else ''), missing_variables(raw, name)
        else:
            template, missing = '', []
        words = ' '.join(str(getattr(error, 'message', '') or error).split())
        return Unrendered(template, missing or _UNDEFINED.findall(words)[:1], words)

    def raw_value(self, host, name):
        """The host's value of a variable as the template engine would give it, read without the engine where that
        is exact (exact_value), else through hostvars; from the inventory alone (inventory_reader). For reading one
        variable of every inventory host: the engine costs about a millisecond a host, which a 1,000-host inventory
        pays on every run (docs/fleet.md)."""
        variables = self._read_inventory(host) if self._read_inventory else None
        if not isinstance(variables, dict) and not hasattr(variables, 'items'):
            return self.value(host, name)
        found = exact_value(variables, name, role_defaults().get(name))
        return self.value(host, name) if found is NOT_EXACT else found

    def values(self, host, names):
        return dict((name, self.value(host, name)) for name in names)

    def render(self, host, text):
        """A role default that is a template (such as "{{ mps_daemons | default([]) }}"), as the host would get it:
        rendered with the host's values of the variables it names (hostvars' own mapping is no template context)."""
        known, variables = self.variables_of(host), {}
        for name in meta.find_undeclared_variables(Environment().parse(text)):
            found = self.value(host, name) if name in known else None
            # One the host cannot render is named as its own role's value; the default's default() stands in.
            if name in known and not isinstance(found, Unrendered):
                variables[name] = found
        if hasattr(self.templar, 'copy_with_new_env'):
            return plain(self.templar.copy_with_new_env(available_variables=variables).template(trust_as_template(text)))
        saved = self.templar.available_variables
        self.templar.available_variables = variables
        try:
            return plain(self.templar.template(text))
        finally:
            self.templar.available_variables = saved

    def groups_of(self):
        """{host: [its groups]} for every inventory host."""
        if self._groups_of is None:
            found = {}
            for group, hosts in self.groups.items():
                for host in hosts:
                    found.setdefault(host, []).append(group)
            self._groups_of = found
        return self._groups_of


def check(inventory, role_problems=None):
    """The validate stage's verdict: {'hosts': {host: [problems]}, 'messages': {host: what its failure says, a problem
    several hosts share named once (_fleet_messages)}, 'fleet': [the problems that are no run host's],
    'fleet_all': [every fleet-wide problem, shared addresses included], 'settings', 'models', 'stages': {host: its
    stage plan (_stage_plan.host_stages)}, 'roles': {host: the roles of its plan}, 'handed_down': {role variable:
    value} (_fleet_inventory.handed_down), 'watchdog': {'cap', 'prometheus_url'}}.

    ``role_problems(role, host)`` returns the problems of one role's variables on one host (None: not checked).
    """
    run_hosts = inventory.run_hosts
    groups_of = inventory.groups_of()
    per_host_settings = dict((host, inventory.values(host, fleet.FLEET_SETTINGS)) for host in run_hosts)
    first = per_host_settings[run_hosts[0]] if run_hosts else dict(
        (name, role_defaults().get(name)) for name in fleet.FLEET_SETTINGS)
    settings, setting_problems = fleet.check_settings(first, inventory.groups)
    problems, models, roles, stages = {}, {}, {}, {}
    batch_by = settings['gpufleet_batch_by']
    names = fleet.HOST_VALUES + ((batch_by,) if batch_by else ())
    monitoring = inventory.groups.get(settings['gpufleet_monitoring_group'], [])
    for host in run_hosts:
        model, found = fleet.check_host(host, inventory.values(host, names), groups_of.get(host, []), settings)
        models[host] = model
        stages[host] = stage_plan.host_stages(settings, model['gpu'], host in monitoring, dict(
            (name, inventory.value(host, name)) for name in stage_plan.PLAN_VALUES)) if not setting_problems else []
        roles[host] = stage_plan.plan_roles(stages[host])
        if not found and ('gpu_services' in roles[host] or 'mig' in roles[host]):
            # The class's promise against what its services and MIG layouts ask for (a mig-parted file is read on
            # the host, by the mig module).
            check_mig = 'mig' in roles[host] and not inventory.value(host, 'mig_parted_config_file', '')
            services = inventory.value(host, 'gpu_services_services', []) if 'gpu_services' in roles[host] else []
            layouts = inventory.value(host, 'mig_layouts', []) if check_mig else []
            # One the host cannot render is its role's problem (below).
            if not isinstance(services, Unrendered) and not isinstance(layouts, Unrendered):
                found.extend('%s: %s' % (host, problem) for problem in hardware_class.plan_problems(
                    model['promise'], services, layouts, check_mig))
        if 'dcgm_exporter' in roles[host] and model['address']:
            problem = fleet.exporter_problem(inventory.value(host, 'dcgm_exporter_listen_address', ''), model)
            if problem:
                found.append('%s: %s' % (host, problem))
        given = dict((name, inventory.value(host, name)) for name in fleet.HANDED_DOWN if name in inventory.variables_of(host))
        found.extend('%s: %s' % (host, problem) for problem in fleet.shadowed_knobs(given, per_host_settings[host]))
        for role in roles[host]:
            found.extend('%s: %s' % (host, problem) for problem in (role_problems(role, host) if role_problems else []))
        problems[host] = found
    # A shared address is each of its hosts' problem (a host outside the run shares it with one inside), and the
    # fleet's: the summary lists it once.
    addresses = dict((host, inventory.raw_value(host, 'gpufleet_management_address'))
                     for host in inventory.groups.get('all', []))
    clashes = fleet.address_clashes(addresses)
    clashing = dict((host, ['%s: %s' % (host, problem) for problem in clashes[host]])
                    for host in run_hosts if host in clashes)
    # A problem several hosts share is named once (a shared address names its hosts itself).
    messages = fleet_messages.host_messages(problems, clashing)
    for host, found in clashing.items():
        problems[host].extend(found)
    general = setting_problems + fleet.fleet_problems(models, settings, per_host_settings)
    general += fleet.stranded_hosts(groups_of, set(run_hosts), settings)
    shared = sorted(set(problem for found in clashes.values() for problem in found))
    outcome = {'hosts': problems, 'messages': messages, 'fleet': general, 'fleet_all': shared + general,
               'settings': settings, 'models': models, 'roles': roles, 'stages': stages,
               'handed_down': fleet.handed_down(settings) if not setting_problems else {}}
    if not setting_problems:
        monitoring_host = monitoring[0] if settings['gpufleet_monitoring_enabled'] and monitoring else ''
        # Its management address, else its ansible_host, else its name; one it cannot render (its own problem) is none.
        given = [inventory.value(monitoring_host, name, '') for name in ('gpufleet_management_address', 'ansible_host')
                 ] if monitoring_host else []
        outcome['watchdog'] = {
            'cap': rollout.watchdog_cap(settings, len(inventory.groups.get(settings['gpufleet_gpu_group'], []))),
            'prometheus_url': rollout.watchdog_prometheus_url(settings, monitoring_host, next(
                (address for address in given if isinstance(address, str) and address), monitoring_host)),
        }
    return outcome
