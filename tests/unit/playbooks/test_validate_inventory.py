# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""The validate stage against the mistakes operators make in an inventory: each case is a change to a copy of
examples/hk-fleet/inventory, run through gpufleet.core.validate with no host reachable (the ssh client is
/bin/false, so a connection attempt would fail the host as unreachable, and no packet leaves this machine).

A refused case must fail in validate with a message that names the host (or, for a fleet rule, every host
involved), the variable and the value as given; an accepted one must pass. Neither may show a traceback or an
ansible-core error. The runs go two at a time, each a fork of one Python that imported ansible-core once
(support/playbook_forks.py); to add a case, add a row.
"""

from __future__ import absolute_import, division, print_function

import copy
import glob
import json
import os
import subprocess
import sys

import pytest
import yaml

from ..conftest import REPO
from ..support.bad_input import assert_refused
from ..support.core_sample import rows_to_run
from ..support.playbook_forks import run_playbooks

EXAMPLE = os.path.join(REPO, 'examples', 'hk-fleet', 'inventory')
FLEET = 'group_vars/all/fleet.yml'
MIRRORS = 'group_vars/all/mirrors.yml'
MONITORING = 'group_vars/all/monitoring.yml'
SERVICES = 'group_vars/all/services.yml'
A100 = 'group_vars/a100_pcie_4x.yml'
H100 = 'group_vars/h100_sxm_8x.yml'
RACK_A = 'group_vars/hk1_rack_a.yml'


# -- edits to the copy ----------------------------------------------------------------------------------------------

def setvar(path, name, value):
    """Set a variable in a group_vars or host_vars file (created if missing)."""
    def edit(inventory):
        document = inventory.setdefault(path, {}) or {}
        document[name] = value
        inventory[path] = document
    return edit


def hostvar(host, name, value):
    return setvar('host_vars/%s.yml' % host, name, value)


def delvar(path, name):
    def edit(inventory):
        inventory[path].pop(name, None)
    return edit


def add_to_group(host, group, address=None):
    """Put a host into a group of hosts.yml (the group is created at the top level if missing)."""
    def edit(inventory):
        children = inventory['hosts.yml']['all']['children']
        group_doc = children.setdefault(group, {}) or {}
        children[group] = group_doc
        hosts = group_doc.setdefault('hosts', {}) or {}
        group_doc['hosts'] = hosts
        hosts[host] = {'ansible_host': address} if address else None
    return edit


def service(**changes):
    """The example's LLM service with its values written out, changed by CHANGES."""
    spec = {'name': 'llm', 'description': 'LLM inference', 'gpus': 2, 'cpus': 16,
            'command': '/opt/llm/bin/serve --port 8000'}
    spec.update(changes)
    return spec


def remove_from_group(host, group):
    def edit(inventory):
        inventory['hosts.yml']['all']['children'][group]['hosts'].pop(host)
    return edit


def rename_group(old, new):
    """The group's entry of hosts.yml under a new name (its references elsewhere, and group_vars, keep the old)."""
    def edit(inventory):
        children = inventory['hosts.yml']['all']['children']
        children[new] = children.pop(old)
    return edit


def child_of(child, parent):
    def edit(inventory):
        children = inventory['hosts.yml']['all']['children']
        parent_doc = children.setdefault(parent, {}) or {}
        children[parent] = parent_doc
        kids = parent_doc.setdefault('children', {}) or {}
        parent_doc['children'] = kids
        kids[child] = None
    return edit


def address_of(host, value):
    """The host's ansible_host in hosts.yml (the example's management address is its ansible_host)."""
    def edit(inventory):
        for group in inventory['hosts.yml']['all']['children'].values():
            hosts = (group or {}).get('hosts') or {}
            if hosts.get(host):
                hosts[host]['ansible_host'] = value
    return edit


# -- the table ------------------------------------------------------------------------------------------------------
# (id, edits, who the refusal names ('fleet' for a fleet rule), what the message must hold); accepted cases have
# who None. Host names: hk1-a100-01..04, hk2-h100-01/02, hk2-h200-01, hk2-cpu-01.

A1, A2, H1, H2, G1, C1 = 'hk1-a100-01', 'hk1-a100-02', 'hk2-h100-01', 'hk2-h100-02', 'hk2-h200-01', 'hk2-cpu-01'
NEW = 'hk1-a100-05'  # a host added to the example
GPU_HOSTS = ['hk1-a100-01', 'hk1-a100-02', 'hk1-a100-03', 'hk1-a100-04', 'hk2-h100-01', 'hk2-h100-02', 'hk2-h200-01']
MIRROR_WITHOUT_SCHEME = 'the mirror without its scheme'
NO_ADDRESS = 'a new host without its ansible_host'
WITH_IPV6 = ['10.20.0.0/16', '10.30.0.0/16', 'fd00:20::/64']  # the example's management networks and an IPv6 one

ACCEPTED = [
    ('the example as shipped', []),
    ('serial as a number', [setvar(FLEET, 'gpufleet_serial', 2), setvar(FLEET, 'gpufleet_batch_by', '')]),
    ('serial as a percentage', [setvar(FLEET, 'gpufleet_serial', '25%'), setvar(FLEET, 'gpufleet_batch_by', '')]),
    ('serial as a digit string', [setvar(FLEET, 'gpufleet_serial', '3'), setvar(FLEET, 'gpufleet_batch_by', '')]),
    ('serial as growing batches', [setvar(FLEET, 'gpufleet_serial', [1, '10%', '100%']),
                                   setvar(FLEET, 'gpufleet_batch_by', '')]),
    ('batches by data centre', [setvar(FLEET, 'gpufleet_batch_by', 'gpufleet_dc')]),
    ('max fail 100 without a canary', [setvar(FLEET, 'gpufleet_max_fail_percentage', 100),
                                       setvar(FLEET, 'gpufleet_canary', 0)]),
    ('a canary of two hosts, a soak of 0 and a required gate', [
        setvar(FLEET, 'gpufleet_canary', 2), setvar(FLEET, 'gpufleet_health_gate_soak', '0'),
        setvar(FLEET, 'gpufleet_health_gate_required', 'yes')]),
    ('max fail as a digit string', [setvar(FLEET, 'gpufleet_max_fail_percentage', '25')]),
    ('skip_failed policy', [setvar(FLEET, 'gpufleet_preflight_policy', 'skip_failed')]),
    ('a stage switched off with a yes', [setvar(FLEET, 'gpufleet_report_enabled', 'no')]),
    ('IPv6 management addresses', [setvar(FLEET, 'gpufleet_management_cidrs', WITH_IPV6),
                                   address_of(A1, 'fd00:20::11')]),
    ('an IPv6 address written in full', [setvar(FLEET, 'gpufleet_management_cidrs', WITH_IPV6),
                                         address_of(A1, 'fd00:0020:0000:0000:0000:0000:0000:0011')]),
    ('a watchdog cap of 2 hosts', [setvar(FLEET, 'gpufleet_watchdog_max_quarantined', 2)]),
    ('a watchdog cap of 0%', [setvar(FLEET, 'gpufleet_watchdog_max_quarantined', '0%')]),
    ("a site's own Prometheus for the cap", [setvar(FLEET, 'gpufleet_watchdog_prometheus_url',
                                                    'https://prom.hk1.example.net:9443')]),
    ('a new host in a rack and a class', [add_to_group('hk1-a100-05', 'a100_pcie_4x', '10.20.1.15'),
                                          add_to_group('hk1-a100-05', 'hk1_rack_a')]),
    ('no failure-domain groups declared', [setvar(FLEET, 'gpufleet_dc_groups', []),
                                           setvar(FLEET, 'gpufleet_rack_groups', [])]),
    ('the drivers stage without CUDA', [setvar(FLEET, 'gpufleet_drivers_roles', ['nvidia_driver', 'container_toolkit'])]),
    ('a class declared before its first host', [setvar(FLEET, 'gpufleet_class_groups',
                                                       ['a100_pcie_4x', 'h100_sxm_8x', 'h200_nvl_1x', 'cpu_only',
                                                        'l40s_4x'])]),
    ('a memory budget knob with an exception', [setvar(MONITORING, 'gpufleet_gpu_memory_budget_percent', 80),
                                                setvar(MONITORING, 'gpufleet_gpu_memory_budgets', {'imagegen': 90})]),
    ('remote fraction as a string', [setvar(FLEET, 'gpufleet_verify_max_remote_fraction', '0.05')]),
    # Quoted, as -e key=value and INI inventories give them: the playbook reads each switch as validate normalised it.
    ('quoted switches', [setvar(FLEET, 'gpufleet_partition_enabled', 'no'),
                         setvar(FLEET, 'gpufleet_verify_enabled', 'false'),
                         setvar(FLEET, 'gpufleet_monitoring_enabled', 'yes'),
                         setvar(FLEET, 'gpufleet_full_run', 'true'), setvar(FLEET, 'gpufleet_watchdog_enabled', 'off')]),
]

REFUSED = [
    # -- rollout keywords
    ('serial written in words', [setvar(FLEET, 'gpufleet_serial', 'one rack')],
     'fleet', ['gpufleet_serial', 'the string "one rack"', 'whole number of at least 1']),
    ('serial 0', [setvar(FLEET, 'gpufleet_serial', 0)], 'fleet', ['gpufleet_serial', 'the integer 0']),
    ('serial 0%', [setvar(FLEET, 'gpufleet_serial', '0%')], 'fleet', ['gpufleet_serial', '"0%"']),
    ('serial 150%', [setvar(FLEET, 'gpufleet_serial', '150%')], 'fleet', ['gpufleet_serial', '"150%"']),
    ('serial -1', [setvar(FLEET, 'gpufleet_serial', -1)], 'fleet', ['gpufleet_serial', 'the integer -1']),
    ('serial 2.5', [setvar(FLEET, 'gpufleet_serial', 2.5)], 'fleet', ['gpufleet_serial', 'the number 2.5']),
    ('serial as a boolean', [setvar(FLEET, 'gpufleet_serial', True)], 'fleet', ['gpufleet_serial', 'the boolean true']),
    ('serial list with a word', [setvar(FLEET, 'gpufleet_serial', [1, 'all'])], 'fleet',
     ['gpufleet_serial', 'the list [1, "all"]']),
    ('serial empty list', [setvar(FLEET, 'gpufleet_serial', [])], 'fleet', ['gpufleet_serial', 'the list []']),
    ('max fail 120', [setvar(FLEET, 'gpufleet_max_fail_percentage', 120)], 'fleet',
     ['gpufleet_max_fail_percentage', 'the integer 120', 'from 0 to 100']),
    ('max fail -5', [setvar(FLEET, 'gpufleet_max_fail_percentage', -5)], 'fleet',
     ['gpufleet_max_fail_percentage', 'the integer -5']),
    ('max fail with a percent sign', [setvar(FLEET, 'gpufleet_max_fail_percentage', '10%')], 'fleet',
     ['gpufleet_max_fail_percentage', 'the string "10%"']),
    ('max fail as a boolean', [setvar(FLEET, 'gpufleet_max_fail_percentage', False)], 'fleet',
     ['gpufleet_max_fail_percentage', 'the boolean false']),
    ('policy typo', [setvar(FLEET, 'gpufleet_preflight_policy', 'skip-failed')], 'fleet',
     ['gpufleet_preflight_policy', 'the string "skip-failed"', 'all_or_nothing', 'skip_failed']),
    ('policy as a boolean', [setvar(FLEET, 'gpufleet_preflight_policy', True)], 'fleet',
     ['gpufleet_preflight_policy', 'the boolean true']),
    ('batch by a sentence', [setvar(FLEET, 'gpufleet_batch_by', 'by rack')], 'fleet',
     ['gpufleet_batch_by', 'the string "by rack"']),
    ('batch by a list', [setvar(FLEET, 'gpufleet_batch_by', ['gpufleet_rack'])], 'fleet',
     ['gpufleet_batch_by', 'the list ["gpufleet_rack"]']),
    ('batch by a variable no host has', [setvar(FLEET, 'gpufleet_batch_by', 'hk_pod')], A1,
     ['hk_pod is not set', 'gpufleet_batch_by is hk_pod']),
    ('serial differs between groups', [setvar(A100, 'gpufleet_serial', 1), setvar(FLEET, 'gpufleet_batch_by', '')],
     'fleet', ['gpufleet_serial differs between hosts', A1, H1]),
    ('policy set for one class only', [setvar(H100, 'gpufleet_preflight_policy', 'skip_failed')], 'fleet',
     ['gpufleet_preflight_policy differs', H1, H2, 'group_vars/all']),
    ('a stage switch as a word', [setvar(FLEET, 'gpufleet_drivers_enabled', 'sometimes')], 'fleet',
     ['gpufleet_drivers_enabled', 'the string "sometimes"', 'true or false']),
    ('a stage switch as a number', [setvar(FLEET, 'gpufleet_exporter_enabled', 2)], 'fleet',
     ['gpufleet_exporter_enabled', 'the integer 2']),
    ('drivers roles with a typo', [setvar(FLEET, 'gpufleet_drivers_roles', ['nvidia-driver'])], 'fleet',
     ['gpufleet_drivers_roles', 'the list ["nvidia-driver"]', 'nvidia_driver']),
    ('drivers roles as a string', [setvar(FLEET, 'gpufleet_drivers_roles', 'nvidia_driver')], 'fleet',
     ['gpufleet_drivers_roles', 'the string "nvidia_driver"']),
    ('a canary of minus one', [setvar(FLEET, 'gpufleet_canary', -1)], 'fleet', ['gpufleet_canary', 'the integer -1']),
    ('max fail 100 with a canary', [setvar(FLEET, 'gpufleet_max_fail_percentage', 100)], 'fleet',
     ['gpufleet_max_fail_percentage is 100 with a canary', 'gpufleet_canary 1', 'set gpufleet_canary to 0']),
    ('a soak in minutes', [setvar(FLEET, 'gpufleet_health_gate_soak', '5m')], 'fleet',
     ['gpufleet_health_gate_soak', 'the string "5m"', 'whole number']),
    ('a required gate in words', [setvar(FLEET, 'gpufleet_health_gate_required', 'always')], 'fleet',
     ['gpufleet_health_gate_required', 'the string "always"', 'true']),
    ('a full run in words', [setvar(FLEET, 'gpufleet_full_run', 'always')], 'fleet',
     ['gpufleet_full_run is the string "always"; give true or false']),
    ('a quoted switch that is no boolean', [setvar(FLEET, 'gpufleet_partition_enabled', 'n')], 'fleet',
     ['gpufleet_partition_enabled is the string "n"; give true or false']),
    ('a switch as a list', [setvar(FLEET, 'gpufleet_services_enabled', ['no'])], 'fleet',
     ['gpufleet_services_enabled is the list ["no"]; give true or false']),
    ('a canary in words', [setvar(FLEET, 'gpufleet_canary', 'one')], 'fleet',
     ['gpufleet_canary is the string "one"', 'whole number (such as 1)']),
    ('a soak with a fraction', [setvar(FLEET, 'gpufleet_health_gate_soak', 60.5)], 'fleet',
     ['gpufleet_health_gate_soak is the number 60.5', 'whole number from 0 to 86400']),
    ('a memory budget in words', [setvar(MONITORING, 'gpufleet_gpu_memory_budget_percent', 'most')], 'fleet',
     ['gpufleet_gpu_memory_budget_percent is the string "most"', 'such as 85']),
    ('watchdog cap of 150%', [setvar(FLEET, 'gpufleet_watchdog_max_quarantined', '150%')], 'fleet',
     ['gpufleet_watchdog_max_quarantined', '"150%"']),
    ('watchdog cap of -1', [setvar(FLEET, 'gpufleet_watchdog_max_quarantined', -1)], 'fleet',
     ['gpufleet_watchdog_max_quarantined', 'the integer -1']),
    ('watchdog cap in words', [setvar(FLEET, 'gpufleet_watchdog_max_quarantined', 'ten')], 'fleet',
     ['gpufleet_watchdog_max_quarantined', 'the string "ten"']),
    ('watchdog Prometheus without a scheme', [setvar(FLEET, 'gpufleet_watchdog_prometheus_url', '10.30.3.41:9090')],
     'fleet', ['gpufleet_watchdog_prometheus_url', '"10.30.3.41:9090"', 'http(s) URL']),
    ('watchdog Prometheus with a trailing slash', [setvar(FLEET, 'gpufleet_watchdog_prometheus_url',
                                                          'http://10.30.3.41:9090/')],
     'fleet', ['gpufleet_watchdog_prometheus_url', 'no trailing slash']),
    ('remote fraction as a percentage', [setvar(FLEET, 'gpufleet_verify_max_remote_fraction', 2)], 'fleet',
     ['gpufleet_verify_max_remote_fraction', 'the integer 2', 'such as 0.02']),
    ('required group missing', [setvar(FLEET, 'gpufleet_required_groups', ['gpu_hosts', 'storage'])], 'fleet',
     ['no group storage', 'gpufleet_required_groups']),
    ('GPU group misspelt', [setvar(FLEET, 'gpufleet_gpu_group', 'gpu_host')], 'fleet',
     ['no group gpu_host', 'gpufleet_gpu_group']),
    # -- the shared thresholds: one knob each
    ('memory budget with a percent sign', [setvar(MONITORING, 'gpufleet_gpu_memory_budget_percent', '85%')], 'fleet',
     ['gpufleet_gpu_memory_budget_percent is the string "85%"', 'without a % sign, such as 85']),
    ('memory budget 0', [setvar(MONITORING, 'gpufleet_gpu_memory_budget_percent', 0)], 'fleet',
     ['gpufleet_gpu_memory_budget_percent is the integer 0', 'from 1 to 100']),
    ('per-service budgets as a list', [setvar(MONITORING, 'gpufleet_gpu_memory_budgets', [{'imagegen': 80}])], 'fleet',
     ['gpufleet_gpu_memory_budgets is the list [{"imagegen": 80}]']),
    ('per-service budget of 150', [setvar(MONITORING, 'gpufleet_gpu_memory_budgets', {'imagegen': 150})], 'fleet',
     ['gpufleet_gpu_memory_budgets is the mapping {"imagegen": 150}', '(imagegen is not)']),
    ("the watchdog's own budget beside the knob", [setvar(A100, 'gpu_watchdog_memory_budget_percent', 80)], A1,
     ['gpu_watchdog_memory_budget_percent is the integer 80', 'hands down gpufleet_gpu_memory_budget_percent (85)']),
    # Set in group_vars/all, every host has it: named once, with the monitoring host among them.
    ("the alert's own remote fraction beside the knob", [setvar(MONITORING, 'monitoring_binding_max_remote_fraction',
                                                                0.05)], A1,
     ['8 hosts (', C1, 'monitoring_binding_max_remote_fraction is the number 0.05',
      'gpufleet_verify_max_remote_fraction (0.02)']),
    # -- addresses and networks
    ('address is a word', [address_of(A1, 'hk1-a100-01.mgmt')], A1,
     ['gpufleet_management_address', 'the string "hk1-a100-01.mgmt"', 'not an IP address']),
    ('address with a prefix', [address_of(A1, '10.20.1.11/24')], A1,
     ['gpufleet_management_address', '"10.20.1.11/24"', 'give the address alone']),
    ('IPv6 address in brackets', [setvar(FLEET, 'gpufleet_management_cidrs', WITH_IPV6),
                                  address_of(A1, '[fd00:20::11]')], A1,
     ['gpufleet_management_address', '"[fd00:20::11]"', 'without brackets']),
    ('address outside the networks', [address_of(A1, '192.168.7.11')], A1,
     ['gpufleet_management_address 192.168.7.11', 'not inside gpufleet_management_cidrs', '10.20.0.0/16']),
    ('address is the network address', [setvar(FLEET, 'gpufleet_management_cidrs', ['10.20.1.0/24', '10.30.0.0/16']),
                                        address_of(A1, '10.20.1.0')], A1,
     ['gpufleet_management_address 10.20.1.0', 'not inside']),
    ('address not set', [hostvar(A1, 'gpufleet_management_address', '')], A1,
     ['gpufleet_management_address is not set']),
    ('address as an integer', [hostvar(A1, 'gpufleet_management_address', 10)], A1,
     ['gpufleet_management_address', 'the integer 10']),
    # The example's management address is "{{ ansible_host }}": one message, not the template engine's error.
    (NO_ADDRESS, [add_to_group(NEW, 'a100_pcie_4x'), add_to_group(NEW, 'hk1_rack_a')], NEW,
     ['gpufleet_management_address is the template "{{ ansible_host }}", which needs ansible_host, not set for this '
      'host: set ansible_host for the host in the inventory, or gpufleet_management_address in its host_vars']),
    # One value in group_vars, the same problem on every GPU host, once per role that reads it: named once.
    (MIRROR_WITHOUT_SCHEME, [setvar(MIRRORS, 'hk_mirror', 'mirror.hk.example.net')], A1,
     ['7 hosts (%s and %s) have the same 8 problems, named here once: ' % (', '.join(GPU_HOSTS[:-1]), GPU_HOSTS[-1]),
      'gpufleet.core.nvidia_driver: nvidia_driver_repo_url is the string "mirror.hk.example.net/nvidia/cuda/repos/',
      'which has no scheme', 'gpufleet.core.cuda: cuda_repo_url', 'gpufleet.core.container_toolkit: ',
      'gpufleet.core.dcgm_exporter: ']),
    # The gpu_services role's default for its MPS daemons is "{{ mps_daemons | default([]) }}": named once, as mps's.
    ('MPS daemons from a variable the host lacks', [hostvar(H1, 'mps_daemons', '{{ hk_h100_daemons }}')], H1,
     ['gpufleet.core.mps: mps_daemons is the template "{{ hk_h100_daemons }}", which needs hk_h100_daemons']),
    ('a mirror variable misspelt in a template', [setvar(MIRRORS, 'nvidia_driver_repo_url',
                                                         '{{ hk_mirorr }}/nvidia/cuda/repos/ubuntu2204/x86_64')], A1,
     ['gpufleet.core.nvidia_driver: nvidia_driver_repo_url is the template "{{ hk_mirorr }}/nvidia/cuda/repos/',
      'which needs hk_mirorr, not set for this host; set hk_mirorr for the host']),
    ('networks as a comma string', [setvar(FLEET, 'gpufleet_management_cidrs', '10.20.0.0/16,10.30.0.0/16')], A1,
     ['gpufleet_management_cidrs', 'the string "10.20.0.0/16,10.30.0.0/16"', 'must be a list',
      '["10.20.0.0/16", "10.30.0.0/16"]']),
    ('networks empty', [setvar(FLEET, 'gpufleet_management_cidrs', [])], A1, ['gpufleet_management_cidrs is empty']),
    ('network with host bits', [setvar(FLEET, 'gpufleet_management_cidrs', ['10.20.1.5/16', '10.30.0.0/16'])], A1,
     ['gpufleet_management_cidrs', '"10.20.1.5/16"', 'the network is 10.20.0.0/16']),
    ('network without a prefix', [setvar(FLEET, 'gpufleet_management_cidrs', ['10.20.0.0', '10.30.0.0/16'])], A1,
     ['gpufleet_management_cidrs', '"10.20.0.0"', 'CIDR form']),
    ('network as a word', [setvar(FLEET, 'gpufleet_management_cidrs', ['mgmt'])], A1,
     ['gpufleet_management_cidrs', '"mgmt"']),
    ('networks as a mapping', [setvar(FLEET, 'gpufleet_management_cidrs', {'hk1': '10.20.0.0/16'})], A1,
     ['gpufleet_management_cidrs', 'the mapping']),
    ('two hosts with one address', [address_of(A2, '10.20.1.11')], A2,
     [A1, 'the same gpufleet_management_address 10.20.1.11']),
    # Every inventory host's address is read without the template engine where that is exact (a literal, a
    # reference to one variable, in turn) and through it otherwise: both ways find the clash.
    ('one address through a chain of references', [hostvar(A2, 'hk_mgmt_ip', '10.20.1.11'),
                                                   hostvar(A2, 'hk_mgmt', '{{ hk_mgmt_ip }}'),
                                                   hostvar(A2, 'gpufleet_management_address', '{{ hk_mgmt }}')],
     A2, [A1, 'the same gpufleet_management_address 10.20.1.11']),
    ('one address as an expression', [hostvar(A2, 'gpufleet_management_address', "{{ '10.20.1.' ~ 11 }}")],
     A2, [A1, 'the same gpufleet_management_address 10.20.1.11']),
    ('one IPv6 address written two ways', [setvar(FLEET, 'gpufleet_management_cidrs', WITH_IPV6),
                                           address_of(A1, 'fd00:20::11'), address_of(A2, 'fd00:20:0:0::11')],
     A2, [A1, 'the same gpufleet_management_address fd00:20::11']),
    ('a host outside the run with the address of one inside', [add_to_group('bastion-01', 'ungrouped', '10.20.1.11')],
     A1, ['bastion-01', '10.20.1.11']),
    ('exporter listening on every address', [setvar(MONITORING, 'dcgm_exporter_listen_address', '0.0.0.0')], A1,
     ['dcgm_exporter_listen_address is the string "0.0.0.0"', 'never 0.0.0.0']),
    ('exporter listening outside the management networks', [hostvar(A1, 'dcgm_exporter_listen_address', '192.168.1.11')],
     A1, ['dcgm-exporter would listen on 192.168.1.11', 'not inside gpufleet_management_cidrs']),
    # -- devices by UUID: an index names another device after a reorder
    ('an MPS daemon on a GPU index', [hostvar(H1, 'mps_daemons', [{'device': 0, 'user': 'infer'}])], H1,
     ['mps_daemons[0].device is the integer 0', 'name a GPU by its GPU-... UUID and a MIG device by its slot', 'indices reorder']),
    ('a time-sliced GPU by index', [hostvar(H1, 'mps_time_slicing_devices', ['1']),
                                    hostvar(H1, 'mps_daemons', [{'device': 'GPU-1', 'user': 'infer'}])], H1,
     ['mps_time_slicing_devices[0] is the string "1"', 'UUID']),
    # -- failure domains
    ('rack label as an integer', [setvar(RACK_A, 'gpufleet_rack', 2)], A1,
     ['gpufleet_rack is the integer 2', 'give a string']),
    ('rack label with a space', [setvar(RACK_A, 'gpufleet_rack', 'hk1 a')], A1,
     ['gpufleet_rack', 'the string "hk1 a"']),
    ('rack label empty', [setvar(RACK_A, 'gpufleet_rack', '')], A1, ['gpufleet_rack is not set']),
    ('dc label as a list', [setvar('group_vars/dc_hk1.yml', 'gpufleet_dc', ['hk1'])], A1,
     ['gpufleet_dc is the list ["hk1"]']),
    ('a host in two racks', [add_to_group(A1, 'hk2_rack_b')], A1,
     ['2 rack groups', 'hk1_rack_a', 'hk2_rack_b']),
    ('a host in no rack', [remove_from_group(A1, 'hk1_rack_a')], A1, ['no rack groups']),
    ('a rack under two data centres', [child_of('hk2_rack_c', 'dc_hk1')], C1,
     ['2 data centre groups', 'dc_hk1', 'dc_hk2']),
    ('two racks with one label', [setvar('group_vars/hk2_rack_b.yml', 'gpufleet_rack', 'hk2-c')], 'fleet',
     ['gpufleet_rack hk2-c is set by 2 groups', 'hk2_rack_b', 'hk2_rack_c']),
    ('one rack label in two data centres', [setvar('group_vars/hk2_rack_b.yml', 'gpufleet_rack', 'hk1-a')], 'fleet',
     ['rack hk1-a is in 2 data centres', 'hk1, hk2']),
    ('a rack whose hosts differ', [hostvar(A2, 'gpufleet_rack', 'hk1-b')], 'fleet',
     ['the rack group hk1_rack_a has hosts with different gpufleet_rack values', A2]),
    ('rack groups pattern that matches nothing', [setvar(FLEET, 'gpufleet_rack_groups', ['rack_*'])], 'fleet',
     ['gpufleet_rack_groups names rack_*', 'matches no inventory group']),
    ('rack groups as a mapping', [setvar(FLEET, 'gpufleet_rack_groups', {'hk1': 'hk1_rack_a'})], 'fleet',
     ['gpufleet_rack_groups', 'the mapping']),
    # -- hardware classes
    ('a host in two classes', [add_to_group(A1, 'h100_sxm_8x')], A1,
     ['2 hardware-class groups', 'a100_pcie_4x', 'h100_sxm_8x']),
    ('a misspelt class group', [rename_group('h200_nvl_1x', 'h200_nvl_1')], 'fleet',
     [G1, 'in no hardware-class group', 'h200_nvl_1']),
    ('a GPU host in no class', [remove_from_group(A1, 'a100_pcie_4x'), add_to_group(A1, 'gpu_hosts', '10.20.1.11')],
     A1, ['no hardware-class groups']),
    ('class list with a typo', [setvar(FLEET, 'gpufleet_class_groups', ['a100_pcie_4xx', 'h100_sxm_8x', 'h200_nvl_1x',
                                                                        'cpu_only'])],
     A1, ['no hardware-class groups', 'a100_pcie_4xx']),
    ('data-centre groups as a string that matches nothing', [setvar(FLEET, 'gpufleet_dc_groups', 'datacentre_*')],
     'fleet', ['gpufleet_dc_groups names datacentre_*']),
    ('a GPU class without a GPU count', [setvar(A100, 'gpufleet_expected_gpus', {'model': 'NVIDIA A100 80GB PCIe'})],
     A1, ['gpufleet_expected_gpus.count is 0']),
    ('a GPU count as a word', [setvar(A100, 'gpufleet_expected_gpus', {'count': 'four', 'model': 'NVIDIA A100'})], A1,
     ['gpufleet_expected_gpus.count is the string "four"']),
    ('expected GPUs as a number', [setvar(A100, 'gpufleet_expected_gpus', 4)], A1,
     ['gpufleet_expected_gpus is the integer 4', 'count: 4']),
    ('expected GPUs with a misspelt key', [setvar(A100, 'gpufleet_expected_gpus', {'count': 4, 'modle': 'A100'})], A1,
     ['gpufleet_expected_gpus has modle']),
    ('GPUs promised on a CPU host', [setvar('group_vars/cpu_only.yml', 'gpufleet_expected_gpus',
                                            {'count': 2, 'model': ''})], C1,
     ['gpufleet_expected_gpus says 2 GPUs', 'not in the group gpu_hosts']),
    # -- hardware classes as contracts: the services and MIG layouts against what the class promises
    ('three 3g.40gb on one A100', [setvar(A100, 'mig_layouts', [{'gpus': [2], 'layout': ['3g.40gb'] * 3}])], A1,
     ['mig_layouts entry 1', '3g.40gb allows at most 2 per GPU', 'The nearest layout that fits']),
    ('an H200 profile on the A100 class', [setvar(A100, 'hk_imagegen_gpus', {'mig_profile': '3g.71gb', 'count': 1})],
     A1, ['MIG device(s) of profile 3g.71gb', 'imagegen', 'none (they create 3g.40gb x4)']),
    ('an H200 profile in an A100 layout', [setvar(A100, 'mig_layouts', [{'gpus': [2, 3], 'layout': ['3g.71gb']}])],
     A1, ['offers no MIG profile 3g.71gb', 'NVIDIA A100 80GB PCIe']),
    ('a numeric profile id in a layout', [setvar(A100, 'mig_layouts', [{'gpus': [2], 'layout': [19]}])], A1,
     ['profile id 19 means 1g.10gb', 'NVIDIA A100 80GB PCIe']),
    ('a layout for a GPU the class does not have', [setvar(A100, 'mig_layouts', [{'gpus': [4], 'layout': ['7g.80gb']}])],
     A1, ['mig_layouts entry 1 selects GPU 4', 'promises 4 GPU(s) (0-3)']),
    ('one GPU given two layouts', [setvar(A100, 'mig_layouts', [{'gpus': [2, 3], 'layout': ['7g.80gb']},
                                                                {'gpus': [3], 'layout': ['3g.40gb']}])], A1,
     ['mig_layouts entry 2: GPU 3 is already given a layout by entry 1']),
    ('an LLM on more GPUs than a node has', [setvar(A100, 'hk_llm_gpus', 3)], A1,
     ['service llm asks for 3 whole GPUs on one NUMA node', 'no node of the class has more than 2']),
    ('more whole GPUs than the MIG layouts leave', [setvar(H100, 'mig_layouts', [{'gpus': [3, 4, 5, 6, 7],
                                                                                  'layout': ['3g.40gb', '3g.40gb']}]),
                                                    setvar(H100, 'hk_llm_gpus', 4),
                                                    setvar(H100, 'hk_gateway_cpus', 4)], H1,
     ['the services ask for 4 whole GPUs', 'llm 4']),
    ('a service with more CPUs than a node', [setvar(A100, 'hk_llm_cpus', 80)], A1,
     ['service llm asks for 80 CPUs', '64 CPUs per node']),
    ('a NUMA promise that does not add up', [setvar(A100, 'gpufleet_expected_numa',
                                                    {'nodes': 2, 'gpus_per_node': {0: 2, 1: 1}})], A1,
     ['gpufleet_expected_numa.gpus_per_node {0: 2, 1: 1} adds up to 3 GPUs', 'count is 4']),
    ('a NUMA promise as a list', [setvar(A100, 'gpufleet_expected_numa', [2, 64])], A1,
     ['gpufleet_expected_numa is the list [2, 64]']),
    ('a NUMA promise with a typo', [setvar(A100, 'gpufleet_expected_numa', {'node': 2})], A1,
     ['gpufleet_expected_numa has node']),
    ('a GPU on a node past the promise', [setvar(A100, 'gpufleet_expected_numa',
                                                 {'nodes': 2, 'gpus_per_node': {0: 2, 2: 2}})], A1,
     ['names a node past the 2 nodes']),
    # -- gpu_services_services: every rule that needs no host, in validate (_service_specs)
    ('a service name with a space', [hostvar(A1, 'gpu_services_services', [service(name='my llm')])], A1,
     ['gpu_services_services entry 1: name is the string "my llm"', 'lower-case letters']),
    ('a service name in capitals', [hostvar(A1, 'gpu_services_services', [service(name='LLM')])], A1,
     ['gpu_services_services entry 1: name is the string "LLM"']),
    ('a service name ending in a newline', [hostvar(A1, 'gpu_services_services', [service(name='llm\n')])], A1,
     ['gpu_services_services entry 1: name is the string "llm\\n"']),
    ('a service name with a slash', [hostvar(A1, 'gpu_services_services', [service(name='llm/v2')])], A1,
     ['gpu_services_services entry 1: name is the string "llm/v2"']),
    ('a service named ..', [hostvar(A1, 'gpu_services_services', [service(name='..')])], A1,
     ['gpu_services_services entry 1: name is the string ".."']),
    ('a service name of 300 characters', [hostvar(A1, 'gpu_services_services', [service(name='l' * 300)])], A1,
     ['gpu_services_services entry 1: name is the string "llll', 'up to 63']),
    ('two services with one name', [hostvar(A1, 'gpu_services_services', [service(), service(gpus=1)])], A1,
     ['gpu_services_services entry 1: name is the string "llm", which entries 1 and 2 share']),
    ('an MPS pinned-memory limit without a unit',
     [hostvar(A1, 'gpu_services_services',
              [service(gpus={'mps': {'device': 'GPU-3c1a-0001', 'pinned_mem_limit': '20'}})])],
     A1, ['gpu_services_services: service llm: gpus.mps.pinned_mem_limit', 'the string "20"', 'has no unit']),
    ('a native command that is not an absolute path',
     [hostvar(A1, 'gpu_services_services', [service(command='serve --port 8000')])], A1,
     ['gpu_services_services: service llm: command is the string "serve --port 8000"', 'absolute path']),
]

ACCEPTED += [
    ('a layout by GPU UUID in host_vars', [hostvar(A1, 'mig_layouts', [{'gpus': ['GPU-3c1a-0002'],
                                                                        'layout': ['3g.40gb', '3g.40gb']}])]),
    ('a layout by product name', [setvar(H100, 'mig_layouts', [{'gpus': 'NVIDIA H100 80GB HBM3',
                                                                'layout': ['1g.10gb'] * 7}]),
                                  setvar(H100, 'hk_llm_gpus', {'mig_profile': '1g.10gb', 'count': 2}),
                                  setvar(H100, 'hk_imagegen_gpus', {'mig_profile': '1g.10gb', 'count': 1})]),
    ('a class that promises no NUMA shape', [setvar(A100, 'gpufleet_expected_numa', {})]),
    ('an A100 split in seven', [setvar(A100, 'mig_layouts', [{'gpus': [2, 3], 'layout': ['1g.10gb'] * 7}]),
                                hostvar('hk1-a100-03', 'mig_layouts', [{'gpus': [2], 'layout': ['1g.10gb'] * 7}]),
                                setvar(A100, 'hk_imagegen_gpus', {'mig_profile': '1g.10gb', 'count': 2})]),
]


# -- running ----------------------------------------------------------------------------------------------------------

def _load(root):
    found = {}
    for folder, _dirs, files in os.walk(root):
        for name in files:
            if name.endswith('.yml'):
                path = os.path.join(folder, name)
                with open(path) as handle:
                    found[os.path.relpath(path, root)] = yaml.safe_load(handle)
    return found


PRISTINE = _load(EXAMPLE)
PLAYBOOK = '- name: Validate\n  ansible.builtin.import_playbook: gpufleet.core.validate\n'


def _write(inventory, root):
    for path, document in inventory.items():
        target = os.path.join(root, path)
        if not os.path.isdir(os.path.dirname(target)):
            os.makedirs(os.path.dirname(target))
        with open(target, 'w') as handle:
            yaml.safe_dump(document, handle, default_flow_style=False)


def _write_case(root, edits):
    """The case's inventory and the playbook, written under root."""
    inventory = copy.deepcopy(PRISTINE)
    for edit in edits:
        edit(inventory)
    _write(inventory, os.path.join(root, 'inventory'))
    with open(os.path.join(root, 'play.yml'), 'w') as handle:
        handle.write(PLAYBOOK)


def _environment():
    # The json stdout callback is ansible.posix's: it comes from the `ansible` package in .venv, which .venv-oldest
    # (ansible-core alone) borrows. The playbook itself needs gpufleet.core alone.
    bundled = glob.glob(os.path.join(REPO, '.venv', 'lib', 'python3*', 'site-packages'))
    env = dict(os.environ, ANSIBLE_STDOUT_CALLBACK='json', ANSIBLE_LOCALHOST_WARNING='false', ANSIBLE_NOCOLOR='1',
               ANSIBLE_SSH_EXECUTABLE='/bin/false', ANSIBLE_HOST_KEY_CHECKING='false', ANSIBLE_RETRY_FILES_ENABLED='0',
               ANSIBLE_COLLECTIONS_PATH=os.pathsep.join([os.path.join(REPO, 'build', 'collections')] + bundled))
    env.pop('ANSIBLE_CONFIG', None)
    return env


def _argv(root, limit=None):
    return [os.path.join(os.path.dirname(sys.executable), 'ansible-playbook'), '-i', os.path.join(root, 'inventory'),
            os.path.join(root, 'play.yml')] + (['--limit', limit] if limit else [])


def _outcome(returncode, stdout, stderr):
    """(return code, [(host, task, message)], output) of one run."""
    failures = []
    try:
        report = json.loads(stdout[stdout.index('{'):])
    except ValueError:
        report = {'plays': []}
    for play in report.get('plays', []):
        for task in play.get('tasks', []):
            for host, result in task.get('hosts', {}).items():
                if result.get('failed') or result.get('unreachable'):
                    failures.append((host, task['task']['name'].split(' : ')[-1], str(result.get('msg', ''))))
    return returncode, failures, stdout + stderr


def run_case(root, edits, limit=None):
    """The case's inventory written under root and validated (on the hosts of ``limit``, else on every host) by
    ansible-playbook: (return code, [(host, task, message)], output)."""
    _write_case(root, edits)
    ran = subprocess.run(_argv(root, limit), cwd=root, env=_environment(), stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, universal_newlines=True, check=False, timeout=300)
    return _outcome(ran.returncode, ran.stdout, ran.stderr)


def run_cases(roots, cases):
    """Each case of CASES ((id, edits)) validated under ROOTS[id], two at a time, each run a fork of one Python that
    imported ansible-core once (support/playbook_forks.py): {id: run_case's triple}."""
    runs = []
    for case_id, edits in cases:
        root = roots[case_id]
        _write_case(root, edits)
        runs.append({'argv': _argv(root), 'cwd': root, 'stdout': os.path.join(root, 'stdout'),
                     'stderr': os.path.join(root, 'stderr')})
    rcs = run_playbooks(runs, _environment(), parallel=2)
    found = {}
    for (case_id, _edits), run, returncode in zip(cases, runs, rcs):
        with open(run['stdout']) as out, open(run['stderr']) as err:
            found[case_id] = _outcome(returncode, out.read(), err.read())
    return found


# The rows this run asks (all of them, but on the oldest ansible-core: tests/unit/support/core_sample.py).
RUN_ACCEPTED, RUN_REFUSED = rows_to_run(ACCEPTED, REFUSED, always=[NO_ADDRESS, MIRROR_WITHOUT_SCHEME])


@pytest.fixture(scope='module')
def outcomes(request, tmp_path_factory):
    # Only the rows whose tests this session runs (-k selects some): each row is one ansible-playbook run.
    selected = set(item.callspec.params['case_id'] for item in request.session.items
                   if item.module is request.module and 'case_id' in getattr(getattr(item, 'callspec', None), 'params', {}))
    cases = [(case[0], case[1]) for case in RUN_ACCEPTED + RUN_REFUSED if case[0] in selected]
    roots = dict((case_id, str(tmp_path_factory.mktemp('case'))) for case_id, _edits in cases)
    return run_cases(roots, cases)


def _no_crash(output):
    assert 'Traceback (most recent call last)' not in output, output[-4000:]
    assert 'ERROR!' not in output and 'An unhandled exception' not in output, output[-4000:]
    assert '"unreachable": true' not in output, 'a host was contacted: ' + output[-4000:]


@pytest.mark.parametrize('case_id', [case[0] for case in RUN_ACCEPTED])
def test_validate_accepts(outcomes, case_id):
    rc, failures, output = outcomes[case_id]
    _no_crash(output)
    assert rc == 0 and not failures, failures or output[-4000:]


@pytest.mark.parametrize('case_id, who, names', [(case[0], case[2], case[3]) for case in RUN_REFUSED])
def test_validate_refuses(outcomes, case_id, who, names):
    rc, failures, output = outcomes[case_id]
    _no_crash(output)
    if who == 'fleet':
        found = [message for _host, task, message in failures if task.startswith('Stop here unless the fleet')]
    else:
        found = [message for host, task, message in failures if host == who and task == 'Every value of this host is valid']
        names = [who] + list(names)
    assert_refused(rc != 0 and bool(found), ' | '.join(found) or repr(failures), names)


@pytest.mark.parametrize('case_id', [NO_ADDRESS])
def test_a_host_without_its_address_has_one_problem(outcomes, case_id):
    # Its dcgm_exporter_listen_address, "{{ gpufleet_management_address }}", needs the same ansible_host: not named
    # again.
    _rc, failures, _output = outcomes[case_id]
    found = [message for host, task, message in failures if host == NEW and task == 'Every value of this host is valid']
    assert len(found) == 1 and found[0].count('%s: ' % NEW) == 1 and 'dcgm_exporter' not in found[0], found


@pytest.mark.parametrize('case_id', [MIRROR_WITHOUT_SCHEME])
def test_a_problem_many_hosts_share_is_named_once_and_each_host_fails(outcomes, case_id):
    _rc, failures, output = outcomes[case_id]
    found = dict((host, message) for host, task, message in failures if task == 'Every value of this host is valid')
    assert sorted(found) == sorted(GPU_HOSTS), failures
    told = ' '.join(found.values())
    assert told.count('nvidia_driver_repo_url is the string') == 1 and told.count(GPU_HOSTS[-1]) == 2, told
    assert all(found[host] == "%s: the same 8 problems as 6 other hosts, named in full in %s's message" % (host, A1)
               for host in GPU_HOSTS[1:]), found
    # Every host's problems in full are still the verdict's, which the summary lists.
    assert output.count('nvidia_driver_repo_url is the string') >= len(GPU_HOSTS)


def test_the_table_is_big_enough_and_ids_unique():
    ids = [case[0] for case in ACCEPTED + REFUSED]
    assert len(set(ids)) == len(ids)
    assert len(REFUSED) >= 60 and len(ACCEPTED) + len(REFUSED) >= 80


def test_a_host_added_and_run_alone_is_refused_for_the_address_of_a_host_outside_the_run(tmp_path):
    new = 'hk1-a100-05'
    rc, failures, output = run_case(str(tmp_path), [add_to_group(new, 'a100_pcie_4x', '10.20.1.12'),
                                                    add_to_group(new, 'hk1_rack_a')], limit=new)
    _no_crash(output)
    found = [message for host, task, message in failures if host == new and task == 'Every value of this host is valid']
    assert_refused(rc != 0 and bool(found), ' | '.join(found) or repr(failures),
                   [new, A2, 'the same gpufleet_management_address 10.20.1.12'])
    assert set(host for host, _task, _message in failures) == {new}, failures
