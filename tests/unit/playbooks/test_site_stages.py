# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""The site playbook's validate and preflight stages on a small fleet of simulated hosts, with the example fleet's
group variables (examples/hk-fleet/inventory/group_vars, linked, not copied).

Each host is this machine reached with the local connection, through a Python interpreter wrapper that points the
NVML simulator at the host's own description (tests/lab/describe_host.py: a lab host's GPUs on this machine's
CPUs). Only the two read-only stages are imported, so nothing here can change this machine; the rollout is tested
on the lab (tests/lab/).
"""

from __future__ import absolute_import, division, print_function

import json
import os
import subprocess
import sys

import yaml

from ..conftest import HOSTS_DIR, REPO, SIM_DIR

EXAMPLE = os.path.join(REPO, 'examples', 'hk-fleet', 'inventory')
HOSTS = {
    # host: (class group, rack group, description, management address)
    'hk1-a100-01': ('a100_pcie_4x', 'hk1_rack_a', 'reference-a100', '10.20.1.11'),
    'hk1-a100-02': ('a100_pcie_4x', 'hk1_rack_a', 'reference-a100', '10.20.1.12'),
    'hk2-cpu-01': ('cpu_only', 'hk2_rack_c', 'cpu-only', '10.30.3.41'),
}
# This machine has two CPUs, as the lab does: one each for the two services, nothing reserved.
SMALL_HOST = {'hk_services_share_cores': True, 'hk_llm_cpus': 1, 'hk_imagegen_cpus': 1, 'hk_gateway_cpus': 1,
              'gpu_services_reserved_cpus': ''}

PLAYBOOK = r'''
- name: Validate
  ansible.builtin.import_playbook: gpufleet.core.fleet.validate

- name: Preflight
  ansible.builtin.import_playbook: gpufleet.core.fleet.preflight

- name: Keep what the stages decided
  hosts: localhost
  gather_facts: false
  tasks:
    - name: Write it
      ansible.builtin.copy:
        content: "{{ {'preflight': hostvars['localhost']['_gpufleet_preflight'], 'rollout': hostvars['localhost']['_gpufleet_rollout'],
                      'quarantine': groups['gpufleet_quarantine'] | default([])} | to_json }}"
        dest: "{{ out }}"
        mode: '0600'
'''


def _describe(tmp_path, host, source):
    described = subprocess.run([sys.executable, os.path.join(REPO, 'tests', 'lab', 'describe_host.py'),
                                os.path.join(HOSTS_DIR, source + '.json'), host], check=True,
                               stdout=subprocess.PIPE, universal_newlines=True).stdout
    path = tmp_path / (host + '.json')
    path.write_text(described)
    return str(path)


def fleet(tmp_path, host_vars=None, extra_groups=None):
    """An inventory directory: the example's group variables (linked), these hosts, and per-host variables."""
    inventory = tmp_path / 'inventory'
    (inventory / 'group_vars' / 'all').mkdir(parents=True)
    for name in os.listdir(os.path.join(EXAMPLE, 'group_vars')):
        if name != 'all':
            os.symlink(os.path.join(EXAMPLE, 'group_vars', name), str(inventory / 'group_vars' / name))
    for name in os.listdir(os.path.join(EXAMPLE, 'group_vars', 'all')):
        os.symlink(os.path.join(EXAMPLE, 'group_vars', 'all', name), str(inventory / 'group_vars' / 'all' / name))
    (inventory / 'group_vars' / 'all' / 'zz-test.yml').write_text(yaml.safe_dump(dict(
        SMALL_HOST, ansible_connection='local', ansible_become=False)))
    groups = {'fleet': {'children': {'gpu_hosts': {'children': {'a100_pcie_4x': {}, 'h100_sxm_8x': {}}},
                                     'cpu_only': {}}}}
    members = {}
    for host, (klass, rack, source, address) in HOSTS.items():
        wrapper = tmp_path / ('python-' + host)
        wrapper.write_text('#!/bin/sh\nexport PYTHONPATH=%s GPUFLEET_NVML_SIM_HOST=%s GPUFLEET_NVML_SIM_STATE=%s\n'
                           'exec %s "$@"\n' % (SIM_DIR, _describe(tmp_path, host, source),
                                               tmp_path / (host + '-state.json'), sys.executable))
        wrapper.chmod(0o755)
        for group in (klass, rack, 'dc_' + rack.split('_', 1)[0]):  # the example's failure-domain groups
            members.setdefault(group, {'hosts': {}})['hosts'][host] = None
        # On this machine's CPUs, a host keeps its class's GPU promise but not its NUMA shape.
        members[klass]['hosts'][host] = {'ansible_host': address, 'ansible_python_interpreter': str(wrapper),
                                         'gpufleet_expected_numa': {}}
    for group, hosts in (extra_groups or {}).items():
        members[group] = {'hosts': dict((host, None) for host in hosts)}
    document = {'all': {'children': dict(groups, **members)}}
    (inventory / 'hosts.yml').write_text(yaml.safe_dump(document))
    (inventory / 'host_vars').mkdir()
    for host, values in (host_vars or {}).items():
        (inventory / 'host_vars' / (host + '.yml')).write_text(yaml.safe_dump(values))
    return str(inventory)


def run_stages(tmp_path, inventory, extra=None):
    (tmp_path / 'play.yml').write_text(PLAYBOOK)
    out = tmp_path / 'out.json'
    # The stages need gpufleet.core alone (ansible.builtin is ansible-core's), as in .venv-oldest.
    env = dict(os.environ, ANSIBLE_LOCALHOST_WARNING='false', ANSIBLE_FORCE_COLOR='0', ANSIBLE_NOCOLOR='1',
               ANSIBLE_COLLECTIONS_PATH=os.path.join(REPO, 'build', 'collections'))
    command = [os.path.join(os.path.dirname(sys.executable), 'ansible-playbook'), '-i', inventory,
               '-e', json.dumps(dict({'out': str(out)}, **(extra or {}))), str(tmp_path / 'play.yml')]
    ran = subprocess.run(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                         universal_newlines=True, check=False, timeout=600)
    kept = json.loads(out.read_text()) if out.exists() else None
    return ran, kept


def test_the_example_fleet_passes_validate_and_preflight_and_rolls_out_one_rack_at_a_time(tmp_path):
    ran, kept = run_stages(tmp_path, fleet(tmp_path))
    assert ran.returncode == 0, ran.stdout[-6000:]
    assert kept['preflight']['failures'] == {}
    assert sorted(kept['preflight']['run_hosts']) == sorted(HOSTS)
    # gpufleet_batch_by: gpufleet_rack in the example: one rack per batch, racks in the order of their names.
    assert kept['rollout']['batch_by'] == 'gpufleet_rack'
    assert kept['rollout']['hosts'] == ['hk1-a100-01', 'hk1-a100-02', 'hk2-cpu-01']
    # The first host is the canary (gpufleet_canary: 1), a batch of its own; then what is left of each rack.
    assert kept['rollout']['serial'] == [1, 1, 1] and kept['rollout']['canary'] == ['hk1-a100-01']
    assert kept['quarantine'] == []


def test_switches_given_as_words_switch_the_stages_off(tmp_path):
    # As -e key=value and INI inventories give them: validate accepts the words, and preflight reads the switches as
    # validate normalised them (a string "no" would be a true string in a condition, or refused by ansible-core 2.19).
    words = {'gpufleet_partition_enabled': 'no', 'gpufleet_services_enabled': 'false', 'gpufleet_full_run': 'no'}
    ran, kept = run_stages(tmp_path, fleet(tmp_path), extra=words)
    assert ran.returncode == 0, ran.stdout[-6000:]
    assert kept['preflight']['failures'] == {}
    # The A100 class declares a MIG layout and services: with the partition and services stages off, neither is planned.
    assert 'gpufleet.core.mig : ' not in ran.stdout, ran.stdout[-6000:]
    assert 'skipping: [hk1-a100-01]' in ran.stdout.split('Place the services on the GPUs')[1].split('TASK [')[0]


def test_every_bad_host_is_reported_by_validate_and_no_host_is_even_read(tmp_path):
    inventory = fleet(tmp_path, host_vars={
        'hk1-a100-02': {'gpufleet_management_address': '192.168.9.9', 'mig_reset_strategy': 'rest'},
        'hk2-cpu-01': {'gpufleet_management_address': '10.20.1.11', 'gpufleet_expected_gpus': {'count': 2, 'model': ''}},
    })
    ran, kept = run_stages(tmp_path, inventory)
    assert ran.returncode != 0 and kept is None
    text = ran.stdout
    assert ('hk1-a100-02: gpufleet_management_address 192.168.9.9 is not inside gpufleet_management_cidrs '
            '(10.20.0.0/16, 10.30.0.0/16): fix the address, or add its network') in text
    assert ('gpufleet.core.mig: value of mig_reset_strategy must be one of: reset, reboot, none, got: rest '
            '(see ansible-doc -t role gpufleet.core.mig)') in text
    assert ('hk2-cpu-01: gpufleet_expected_gpus says 2 GPUs but the host is not in the group gpu_hosts') in text
    # The duplicate address is found across the whole inventory, although hk2-cpu-01 had already failed.
    assert 'hk1-a100-01 and hk2-cpu-01 have the same gpufleet_management_address 10.20.1.11' in text
    # Validate needs no connection: preflight, the first stage that reads a host, never started.
    assert 'Preflight every host' not in text


def test_a_missing_group_and_a_missing_failure_domain_are_named(tmp_path):
    ran, kept = run_stages(tmp_path, fleet(tmp_path), extra={'gpufleet_required_groups': ['gpu_hosts', 'monitoring']})
    assert ran.returncode != 0 and kept is None
    assert 'The inventory has no group monitoring: define it (see examples/hk-fleet/inventory/hosts.yml)' in ran.stdout

    ran, kept = run_stages(tmp_path, fleet(tmp_path / 'again'), extra={'gpufleet_batch_by': 'gpufleet_row'})
    assert ran.returncode != 0 and kept is None
    # The same problem on every host: named once, with every host (ansible-core prints a failure's message once or
    # twice); each host fails.
    once = ('3 hosts (hk1-a100-01, hk1-a100-02 and hk2-cpu-01) have the same problem, named here once: gpufleet_row is '
            "not set; set it to the host's failure domain")
    assert ran.stdout.count('gpufleet_row is not set') == ran.stdout.count(once) > 0, ran.stdout[-6000:]
    assert '(gpufleet_batch_by is gpufleet_row)' in ran.stdout
    assert all("%s: the same problem as 2 other hosts, named in full in hk1-a100-01's message" % host in ran.stdout
               for host in ('hk1-a100-02', 'hk2-cpu-01'))


def test_one_bad_host_stops_the_run_before_any_host_is_read(tmp_path):
    ran, kept = run_stages(tmp_path, fleet(tmp_path, host_vars={'hk2-cpu-01': {'gpufleet_management_address': '10.30.3.41/24'}}))
    assert ran.returncode != 0 and kept is None
    # ansible-core before 2.19 prints the message as JSON, its quotes escaped.
    assert ('hk2-cpu-01: gpufleet_management_address is the string "10.30.3.41/24", a network (with a prefix '
            'length); give the address alone, such as 10.30.3.41') in ran.stdout.replace('\\"', '"')
    assert ('Validation failed on 1 host(s): hk2-cpu-01. Nothing was changed on any host; fix the values named above '
            'and run again.') in ran.stdout
    assert 'Preflight every host' not in ran.stdout


BAD_PREFLIGHT = {
    # What only the host can tell (validate checks layouts and services against the class): a class that promises
    # four NUMA nodes (a BIOS with Sub-NUMA Clustering on differs the other way), and a layout for a GPU UUID the
    # host does not have.
    'hk1-a100-02': {'gpufleet_expected_numa': {'nodes': 4}},
    'hk1-a100-01': {'mig_layouts': [{'gpus': ['GPU-00000000-dead-beef-0000-000000000000'], 'layout': ['7g.80gb']}]},
}


def test_preflight_stops_every_host_when_one_fails_and_names_each_reason(tmp_path):
    ran, kept = run_stages(tmp_path, fleet(tmp_path, host_vars=BAD_PREFLIGHT))
    assert ran.returncode != 0 and kept is None
    text = ran.stdout
    assert 'Preflight failed on 2 of 3 host(s), so no host was changed: ' in text
    assert ('hk1-a100-02: The host has the GPUs and the NUMA shape its hardware class promises: the class promises 4 NUMA node(s) '
            'with CPUs and the host has ') in text
    assert 'hk1-a100-01: Apply the declared MIG layout: ' in text
    assert "no GPU matches 'GPU-00000000-dead-beef-0000-000000000000'" in text
    assert 'set gpufleet_preflight_policy to skip_failed' in text


def test_skip_failed_quarantines_the_failed_hosts_and_rolls_out_to_the_others(tmp_path):
    host_vars = dict(BAD_PREFLIGHT, **{
        'hk1-a100-01': {'gpufleet_expected_gpus': {'count': 8, 'model': 'NVIDIA H100 80GB HBM3'}}})
    ran, kept = run_stages(tmp_path, fleet(tmp_path, host_vars=host_vars),
                           extra={'gpufleet_preflight_policy': 'skip_failed'})
    assert ran.returncode == 0, ran.stdout[-6000:]
    assert sorted(kept['quarantine']) == ['hk1-a100-01', 'hk1-a100-02']
    assert kept['rollout']['hosts'] == ['hk2-cpu-01'] and kept['rollout']['serial'] == [1]
    failures = kept['preflight']['failures']
    assert failures['hk1-a100-01'].startswith('The host has the GPUs and the NUMA shape its hardware class promises: ')
    assert ('gpufleet_expected_gpus promises 8 x NVIDIA H100 80GB HBM3, but the host has 4 (NVIDIA A100 80GB PCIe, '
            'NVIDIA A100 80GB PCIe, NVIDIA A100 80GB PCIe, NVIDIA A100 80GB PCIe)') in failures['hk1-a100-01']
    assert 'the class promises 4 NUMA node(s)' in failures['hk1-a100-02']


def test_the_monitoring_host_is_checked_with_the_others_before_any_host_is_changed(tmp_path):
    # The example fleet's monitoring group: its host runs gpufleet.core.monitoring, whose variables validate checks
    # against the role's argument spec, and whose preflight runs in the site playbook's preflight, with every host's.
    # Its targets are labelled with each host's data centre: the hosts are in the example's dc groups.
    groups = {'monitoring': ['hk2-cpu-01'], 'dc_hk1': ['hk1-a100-01', 'hk1-a100-02'], 'dc_hk2': ['hk2-cpu-01']}
    ran, kept = run_stages(tmp_path, fleet(tmp_path, extra_groups=groups,
                                           host_vars={'hk2-cpu-01': {'monitoring_install_prometheus': 'perhaps'}}))
    assert ran.returncode != 0 and kept is None
    assert 'gpufleet.core.monitoring: ' in ran.stdout and 'monitoring_install_prometheus' in ran.stdout
    assert 'Preflight every host' not in ran.stdout

    # A value the role's checker refuses stops the run in validate; what only the host can tell, in preflight.
    ran, kept = run_stages(tmp_path / 'range', fleet(tmp_path / 'range', extra_groups=groups,
                                                     host_vars={'hk2-cpu-01': {'monitoring_gpu_temperature_celsius': 20}}))
    assert ran.returncode != 0 and kept is None
    assert 'monitoring_gpu_temperature_celsius is 20: give a GPU temperature from 30 to 120' in ran.stdout
    assert 'Preflight every host' not in ran.stdout

    own = {'monitoring_install_prometheus': False, 'monitoring_promtool': '/nonexistent/bin/promtool'}
    ran, kept = run_stages(tmp_path / 'host', fleet(tmp_path / 'host', extra_groups=groups, host_vars={'hk2-cpu-01': own}))
    assert ran.returncode != 0 and kept is None
    assert 'Preflight failed on 1 of 3 host(s), so no host was changed: ' in ran.stdout
    assert '/nonexistent/bin/promtool is missing: install promtool' in ran.stdout

    ran, kept = run_stages(tmp_path / 'good', fleet(tmp_path / 'good', extra_groups=groups))
    assert ran.returncode == 0, ran.stdout[-6000:]
    assert kept['preflight']['failures'] == {} and 'hk2-cpu-01' in kept['rollout']['hosts']


def test_the_watchdog_stage_is_validated_on_gpu_hosts_when_it_is_on(tmp_path):
    bad = {'hk1-a100-01': {'gpu_watchdog_dry_run': 'sometimes'}}
    # On (the default), a bad watchdog variable stops the run in validate.
    ran, kept = run_stages(tmp_path, fleet(tmp_path, host_vars=bad))
    assert ran.returncode != 0 and kept is None
    assert 'gpufleet.core.gpu_watchdog: ' in ran.stdout and 'gpu_watchdog_dry_run' in ran.stdout
    # Off, the watchdog's variables are not the run's concern.
    ran, kept = run_stages(tmp_path / 'off', fleet(tmp_path / 'off', host_vars=bad),
                           extra={'gpufleet_watchdog_enabled': False})
    assert ran.returncode == 0, ran.stdout[-6000:]
