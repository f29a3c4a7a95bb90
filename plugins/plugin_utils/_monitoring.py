# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.core contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Controller-side access to the monitoring model (module_utils/_monitoring_targets.py): reads each fleet host's
variables from Ansible's hostvars as plain data (from the inventory alone, as validate reads them: _fleet_inventory's
inventory_values), and turns bad arguments into AnsibleFilterError. A GPU host that sets
no dcgm_exporter_counters serves the dcgm_exporter role's default list, read from that role's defaults/main.yml (the
one place the list is written).

This is a private module: its API may change without notice.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible.errors import AnsibleFilterError

from ansible_collections.gpufleet.core.plugins.module_utils import _fleet_inventory as fleet
from ansible_collections.gpufleet.core.plugins.module_utils import _monitoring_targets as monitoring
from ansible_collections.gpufleet.core.plugins.plugin_utils._fleet_inventory import inventory_values, plain, role_defaults


def _arguments(name, hosts, hostvars, groups, settings):
    if isinstance(hosts, str) or not isinstance(hosts, (list, tuple)) or not hasattr(hostvars, '__getitem__') \
            or not hasattr(groups, 'items') or not hasattr(settings, 'items'):
        raise AnsibleFilterError(
            'gpufleet.core.%s: give the fleet hosts (a list of inventory names) as input, and hostvars, groups and the '
            "role's settings as arguments, such as _monitoring_hosts | gpufleet.core.%s(hostvars, groups, "
            '_monitoring_target_settings)' % (name, name))
    hosts = [str(host) for host in hosts]
    settings = plain(settings)
    groups = plain(groups)
    values = inventory_values(hostvars, hosts, list(monitoring.HOST_VARIABLES))
    return hosts, values, groups, settings


def monitoring_host_values(hosts, hostvars):
    """{host: {variable: value}} of the variables the targets read (monitoring.HOST_VARIABLES), for each fleet host
    that is an inventory host: read once, it stands for hostvars in the other filters."""
    if isinstance(hosts, str) or not isinstance(hosts, (list, tuple)) or not hasattr(hostvars, '__getitem__'):
        raise AnsibleFilterError('gpufleet.core.monitoring_host_values: give the fleet hosts (a list of inventory '
                                 'names) as input and hostvars as argument, such as _monitoring_hosts | '
                                 'gpufleet.core.monitoring_host_values(hostvars)')
    return inventory_values(hostvars, [str(host) for host in hosts], list(monitoring.HOST_VARIABLES))


def monitoring_targets(hosts, hostvars, groups, settings):
    return monitoring.targets(*_arguments('monitoring_targets', hosts, hostvars, groups, settings))


def _role_counters():
    """The counters the dcgm_exporter role serves on a host that sets none."""
    return role_defaults('dcgm_exporter').get('dcgm_exporter_counters')


def monitoring_problems(hosts, hostvars, groups, settings):
    return monitoring.problems(*_arguments('monitoring_problems', hosts, hostvars, groups, settings),
                               role_counters=_role_counters())


def monitoring_counter_problems(hosts, hostvars, groups, settings):
    return monitoring.counter_problems(*_arguments('monitoring_counter_problems', hosts, hostvars, groups, settings),
                                       role_counters=_role_counters())


def hardware_class(groups_of_host, class_groups, model=''):
    if isinstance(groups_of_host, str) or not isinstance(groups_of_host, (list, tuple)) \
            or isinstance(class_groups, str) or not isinstance(class_groups, (list, tuple)):
        raise AnsibleFilterError('gpufleet.core.hardware_class: give the host\'s groups (group_names) as input and the '
                                 'hardware-class groups as a list, such as group_names | '
                                 'gpufleet.core.hardware_class(gpufleet_class_groups, gpufleet_expected_gpus.model)')
    return fleet.hardware_class(plain(groups_of_host), plain(class_groups), plain(model))


def monitoring_report(answer, api_url, report_url, host_address):
    return monitoring.report(plain(answer), monitoring.prometheus_url(plain(report_url), plain(host_address)), plain(api_url))
