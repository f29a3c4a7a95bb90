# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""Inventory.raw_value, the cheap read of one variable on every inventory host, against Ansible's own hostvars: for
every form a value can take it gives what the template engine gives, reading without the engine only where that is
exact, and through hostvars otherwise."""

from __future__ import absolute_import, division, print_function

import pytest

from ansible.inventory.manager import InventoryManager
from ansible.parsing.dataloader import DataLoader
from ansible.template import Templar
from ansible.vars.hostvars import HostVars
from ansible.utils.collection_loader import AnsibleCollectionConfig
from ansible.vars.manager import VariableManager

from ansible_collections.gpufleet.core.plugins.module_utils._values import Unrendered
from ansible_collections.gpufleet.core.plugins.plugin_utils._fleet_inventory import (
    Inventory, inventory_values, missing_variables)

try:
    from ansible.plugins.loader import init_plugin_loader
except ImportError:  # ansible-core before 2.15 loads its plugins on first use
    def init_plugin_loader():
        pass

NAME = 'gpufleet_management_address'
# host: (its variables in the inventory, the value the template engine gives, whether it is read without the engine)
FORMS = {
    'literal': ({NAME: '10.20.1.11'}, '10.20.1.11', True),
    'reference': ({'ansible_host': '10.20.1.12', NAME: '{{ ansible_host }}'}, '10.20.1.12', True),
    'tight-reference': ({'ansible_host': '10.20.1.13', NAME: '{{ansible_host}}'}, '10.20.1.13', True),
    'chain': ({'mgmt_ip': '10.20.1.14', 'mgmt': '{{ mgmt_ip }}', NAME: '{{ mgmt }}'}, '10.20.1.14', True),
    'expression': ({NAME: "{{ '10.20.1.' ~ 15 }}"}, '10.20.1.15', False),
    'filter': ({'ansible_host': '10.20.1.16', NAME: '{{ ansible_host | default("x") }}'}, '10.20.1.16', False),
    'text-around': ({'last': '17', NAME: '10.20.1.{{ last }}'}, '10.20.1.17', False),
    'reference-to-an-expression': ({'mgmt': "{{ '10.20.1.' ~ 18 }}", NAME: '{{ mgmt }}'}, '10.20.1.18', False),
    'magic-variable': ({NAME: '{{ inventory_hostname }}'}, 'magic-variable', None),
    'integer': ({NAME: 10}, 10, True),
    'list': ({NAME: ['10.20.1.20', '10.20.2.20']}, ['10.20.1.20', '10.20.2.20'], True),
    'list-with-a-template': ({'ansible_host': '10.20.1.21', NAME: ['{{ ansible_host }}']}, ['10.20.1.21'], False),
    'reference-to-a-list': ({'nets': ['10.20.1.0/24'], NAME: '{{ nets }}'}, ['10.20.1.0/24'], True),
    'not-set': ({}, '', True),
}
# Hosts whose value names a variable they do not have: (their variables, the template, what it needs).
UNRENDERED = {
    'no-ansible-host': ({NAME: '{{ ansible_host }}'}, '{{ ansible_host }}', ('ansible_host',)),
    'chain-to-nothing': ({'mgmt': '{{ mgmt_ip }}', NAME: '{{ mgmt }}'}, '{{ mgmt }}', ('mgmt_ip',)),
    'two-missing': ({NAME: "{{ lookup('env', 'NOPE') ~ net ~ '.' ~ last }}"},
                    "{{ lookup('env', 'NOPE') ~ net ~ '.' ~ last }}", ('last', 'net')),
}
# A host a previous run left facts of, in the fact cache: read from the inventory, not from the facts.
CACHED = 'cached-facts'
CACHED_VARIABLES = {'ansible_host': '10.20.1.19', NAME: '{{ ansible_host }}'}
CACHED_FACTS = {NAME: '10.99.0.1', 'ansible_hostname': 'cached-facts'}


@pytest.fixture(scope='module')
def inventory(tmp_path_factory):
    # The plugin loader installs ansible-core's collection finder for the whole process; it goes again after this
    # module, or the filter tests after it (in another order than by name) import gpufleet.core through it and fail
    # with "collection metadata was not loaded".
    finder_before = AnsibleCollectionConfig.collection_finder
    init_plugin_loader()
    yield _inventory(tmp_path_factory)
    if finder_before is None and AnsibleCollectionConfig.collection_finder is not None:
        type(AnsibleCollectionConfig.collection_finder)._remove()


def _inventory(tmp_path_factory):
    root = tmp_path_factory.mktemp('inventory')
    lines = ['[fleet]']
    for host, (variables, _value, _cheap) in list(FORMS.items()) + list(UNRENDERED.items()) + [
            (CACHED, (CACHED_VARIABLES, None, None))]:
        lines.append(host + ''.join(' %s=%s' % (name, _ini(value)) for name, value in variables.items()))
    (root / 'hosts.ini').write_text('\n'.join(lines) + '\n')
    loader = DataLoader()
    manager = InventoryManager(loader=loader, sources=[str(root / 'hosts.ini')])
    variables = VariableManager(loader=loader, inventory=manager)
    variables.set_host_facts(CACHED, CACHED_FACTS)
    hostvars = HostVars(inventory=manager, variable_manager=variables, loader=loader)
    hosts = list(FORMS) + list(UNRENDERED) + [CACHED]
    task_vars = {'hostvars': hostvars, 'groups': {'all': hosts, 'fleet': hosts}, 'ansible_play_hosts_all': hosts}
    return Inventory(task_vars, Templar(loader=loader))


def _ini(value):
    return repr(value) if isinstance(value, str) else '"%s"' % repr(value) if isinstance(value, list) else str(value)


class CountingInventory(Inventory):
    """Counts the reads that went through the template engine."""

    def __init__(self, inventory):
        self.__dict__.update(inventory.__dict__)
        self.engine_reads = []

    def value(self, host, name, default=None):
        self.engine_reads.append(host)
        return super(CountingInventory, self).value(host, name, default)


@pytest.mark.parametrize('host', sorted(FORMS))
def test_raw_value_is_what_the_template_engine_gives(inventory, host):
    _variables, expected, _cheap = FORMS[host]
    assert inventory.raw_value(host, NAME) == expected
    assert inventory.value(host, NAME) == expected


@pytest.mark.parametrize('host', sorted(host for host, form in FORMS.items() if form[2] is not None))
def test_only_the_exact_forms_skip_the_template_engine(inventory, host):
    counting = CountingInventory(inventory)
    counting.raw_value(host, NAME)
    assert counting.engine_reads == ([] if FORMS[host][2] else [host])


def test_raw_value_reads_the_inventory_not_a_previous_runs_cached_facts(inventory):
    # Through hostvars, the cached fact wins over the inventory (facts come later in Ansible's precedence) ...
    assert inventory.value(CACHED, NAME) == CACHED_FACTS[NAME]
    # ... validate reads the inventory: and without the facts, which cost milliseconds a host to merge.
    assert inventory.raw_value(CACHED, NAME) == CACHED_VARIABLES['ansible_host']
    # The run's own variable manager still has them.
    assert inventory.hostvars.raw_get(CACHED)[NAME] == CACHED_FACTS[NAME]


def test_inventory_values_are_what_the_template_engine_gives_and_leave_out_what_a_host_does_not_set(inventory):
    found = inventory_values(inventory.hostvars, list(FORMS) + [CACHED, 'not-in-the-inventory'], [NAME, 'nets'])
    assert sorted(found) == sorted(list(FORMS) + [CACHED])
    for host, (variables, expected, _cheap) in FORMS.items():
        assert found[host] == dict(({NAME: expected} if NAME in variables else {}),
                                   **({'nets': variables['nets']} if 'nets' in variables else {})), host
    # from the inventory, not the cached facts
    assert found[CACHED] == {NAME: CACHED_VARIABLES['ansible_host']}


def test_inventory_values_of_plain_mappings_read_them_as_they_are():
    # what the monitoring role passes on: values read once, standing for hostvars
    read = {'a': {NAME: '10.0.0.1', 'other': 1}, 'b': {}}
    assert inventory_values(read, ['a', 'b', 'c'], [NAME]) == {'a': {NAME: '10.0.0.1'}, 'b': {}}


@pytest.mark.parametrize('host', sorted(UNRENDERED))
def test_a_value_the_host_cannot_render_is_an_unrendered_naming_what_it_needs(inventory, host):
    _variables, template, missing = UNRENDERED[host]
    # ansible-core 2.19 and later raise on the undefined variable; older ones leave the template as written: both
    # give the template and the variables it needs, in turn, that the host does not have.
    for found in (inventory.value(host, NAME), inventory.raw_value(host, NAME)):
        assert isinstance(found, Unrendered), found
        assert (found.template, found.missing) == (template, missing)


def test_the_variables_a_template_needs_are_followed_through_the_variables_it_names():
    variables = {'a': '{{ b }}-{{ c }}', 'b': ['{{ d | default(e) }}'], 'c': 'x', 'inventory_hostname': 'h',
                 'f': '{% for item in g %}{{ item }}{% endfor %}', 'loop': '{{ a }}{{ loop }}'}
    assert missing_variables(variables, 'a') == ['d', 'e']
    assert missing_variables(variables, 'f') == ['g']
    assert missing_variables(variables, 'loop') == ['d', 'e']
    assert missing_variables(variables, 'c') == [] and missing_variables(variables, 'unset') == []
    assert missing_variables({'a': '{{ unclosed'}, 'a') == []
