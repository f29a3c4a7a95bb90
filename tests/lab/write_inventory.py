# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""Write the lab's Ansible inventory (tests/lab/lab.sh up; docs/lab.md).

usage: python3 write_inventory.py REPO LAB_DIR SUBNET HOSTS_TABLE

HOSTS_TABLE has one host a line: name, address, data-centre group, rack group, class group, simulator source.
Writes LAB_DIR/inventory/hosts.yml (the hosts, their groups and connection variables; the first host without GPUs
is the monitoring group, as in the example fleet) and
LAB_DIR/inventory/group_vars/: a link to each entry of the example fleet's group_vars
(REPO/examples/hk-fleet/inventory/group_vars) but `all`, which is a directory of links to the example's all/*.yml
plus zz-lab.yml, the lab's overrides (read last, so they win over the example's `all` files). Warns when a
child group's file of the example sets a variable zz-lab.yml overrides: a child group wins over `all`.
"""

from __future__ import absolute_import, division, print_function

import json
import os
import shutil
import sys

EXAMPLE_GROUP_VARS = os.path.join('examples', 'hk-fleet', 'inventory', 'group_vars')
# Class groups that have GPUs; the rest of the fleet is cpu_only.
GPU_CLASSES = ('a100_pcie_4x', 'h100_sxm_8x', 'h200_nvl_1x')
REPOS = '/srv/gpufleet-repos'


def read_table(path):
    hosts = []
    with open(path) as handle:
        for line in handle:
            fields = line.split()
            if fields and not fields[0].startswith('#'):
                name, address, dc, rack, klass, source = fields
                hosts.append({'name': name, 'address': address, 'dc': dc, 'rack': rack, 'class': klass,
                              'source': source})
    return hosts


def quote(value):
    return json.dumps(value)  # a JSON string is a YAML string


def host_vars(host, lab_dir, indent):
    """A host's address, connection and NUMA promise: host variables, so that no group's file (the example's
    all/fleet.yml sets ansible_user, its class files gpufleet_expected_numa) can win over them."""
    ssh = os.path.join(lab_dir, 'ssh')
    pad = ' ' * indent
    return ['%s%s:' % (pad, host['name']),
            '%s  ansible_host: %s' % (pad, host['address']),
            '%s  gpufleet_management_address: %s' % (pad, host['address']),
            '%s  ansible_user: root' % pad,
            '%s  ansible_ssh_private_key_file: %s' % (pad, quote(os.path.join(ssh, 'id_ed25519'))),
            '%s  ansible_ssh_common_args: %s' % (pad, quote('-o UserKnownHostsFile=%s -o StrictHostKeyChecking=yes'
                                                            % os.path.join(ssh, 'known_hosts'))),
            '%s  ansible_python_interpreter: /usr/bin/python3' % pad,
            # A lab host is a container on this small machine: it keeps its class's GPU promise, not its NUMA shape.
            '%s  gpufleet_expected_numa: {}' % pad]


def hosts_yml(hosts, lab_dir):
    out = ['---',
           '# The lab fleet (tests/lab/lab.sh up writes this file; docs/lab.md): systemd containers on this machine,',
           '# reached over SSH at their own addresses on the lab network, as a real fleet is. Each host\'s SSH key is',
           '# in known_hosts, read by lab.sh from the container itself, so host keys are checked strictly.',
           'all:',
           '  children:',
           '    fleet:',
           '      children:',
           '        gpu_hosts:',
           '          children:']
    for klass in GPU_CLASSES:
        out.append('            %s:' % klass)
        out.append('              hosts:')
        for host in [h for h in hosts if h['class'] == klass]:
            out.extend(host_vars(host, lab_dir, 16))
    out.extend(['        cpu_only:', '          hosts:'])
    for host in [h for h in hosts if h['class'] not in GPU_CLASSES]:
        out.extend(host_vars(host, lab_dir, 12))
    for dc in sorted(set(h['dc'] for h in hosts)):
        out.extend(['    %s:' % dc, '      children:'])
        for rack in sorted(set(h['rack'] for h in hosts if h['dc'] == dc)):
            out.extend(['        %s:' % rack, '          hosts:'])
            out.extend('            %s: {}' % h['name'] for h in hosts if h['rack'] == rack)
    # As in the example fleet, the first host without GPUs runs Prometheus (the site's monitoring stage).
    cpu_only = [h for h in hosts if h['class'] not in GPU_CLASSES]
    if cpu_only:
        out.extend(['    monitoring:', '      hosts:', '        %s: {}' % cpu_only[0]['name']])
    return '\n'.join(out) + '\n'


def zz_lab_yml(repo_json, subnet):
    arch = repo_json['architecture']
    mirror = REPOS + '/mirror-a'
    key = 'file://%s/gpgkey' % mirror
    fingerprint = quote(repo_json['good_fingerprint'])
    return '\n'.join([
        '---',
        '# The lab\'s overrides of the example fleet\'s group variables (tests/lab/lab.sh up writes this file;',
        '# docs/lab.md). Read after the example\'s group_vars/all/*.yml, so these win over them.',
        '# Every package comes from the stand-in repositories of tests/apt_repo/build.py, built in build/lab/aptrepos',
        '# and mounted read-only at %s in every host: no traffic leaves this machine.' % REPOS,
        '',
        '# The driver packages: NVIDIA\'s CUDA repository layout (a flat repository per architecture).',
        'nvidia_driver_repo_url: file:%s/deb/%s' % (mirror, arch),
        '# The stand-in repositories\' signing key, generated when build/lab/aptrepos was built.',
        'nvidia_driver_repo_key_url: %s' % key,
        '# That key\'s fingerprint instead of NVIDIA\'s: the roles refuse a key they do not pin.',
        'nvidia_driver_key_fingerprints: [%s]' % fingerprint,
        '# A version the stand-in repository has (%s).' % ', '.join(repo_json['driver_versions']),
        'nvidia_driver_version: "570.133.20"',
        '# Containers share this machine\'s kernel, which has no nvidia module: modprobe has nothing to load. The',
        '# stand-in module package "loads" itself when none is (its postinst), and each boot loads the installed one',
        '# (tests/lab/host/usr/local/lib/gpufleet-lab/nvidia-module): the version loaded is in this file, where a real',
        '# kernel has /sys/module/nvidia/version, so that a driver upgrade reboots the host as on a real one.',
        'nvidia_driver_load_module: false',
        'nvidia_driver_loaded_version_file: /run/gpufleet-lab/nvidia-module-version',
        '',
        '# CUDA toolkits from the same repository (cuda-toolkit-12-6 12.6.3-1 and cuda-toolkit-12-8 12.8.1-1).',
        'cuda_repo_url: file:%s/deb/%s' % (mirror, arch),
        '# The same stand-in key, and its fingerprint pinned.',
        'cuda_repo_key_url: %s' % key,
        'cuda_key_fingerprints: [%s]' % fingerprint,
        '',
        '# The Container Toolkit: NVIDIA\'s libnvidia-container layout, the role appends the architecture. From the',
        '# second mirror: NVIDIA serves it from another URL than the CUDA repository, and apt refuses one URL',
        '# listed twice with two keyrings.',
        'container_toolkit_repo_base_url: file:%s/mirror-b/deb' % REPOS,
        '# The same stand-in key, and its fingerprint pinned.',
        'container_toolkit_repo_key_url: file://%s/mirror-b/gpgkey' % REPOS,
        'container_toolkit_key_fingerprints: [%s]' % fingerprint,
        '# A version the stand-in repository has (%s).' % ', '.join(repo_json['versions']),
        'container_toolkit_version: "1.17.4-1"',
        '',
        '# DCGM and dcgm-exporter from the same repository (DCGM %s; exporter %s).'
        % (', '.join(repo_json['dcgm_versions']), ', '.join(repo_json['exporter_versions'])),
        'dcgm_exporter_repo_url: file:%s/deb/%s' % (mirror, arch),
        '# The same stand-in key, and its fingerprint pinned.',
        'dcgm_exporter_repo_key_url: %s' % key,
        'dcgm_exporter_key_fingerprints: [%s]' % fingerprint,
        '',
        '# The lab network: every host\'s gpufleet_management_address is in it.',
        'gpufleet_management_cidrs: [%s]' % subnet,
        '',
        '# A lab host has this machine\'s CPUs (two, one core here): each service gets one CPU, the services',
        '# share the core, and no CPU is held back for housekeeping.',
        'hk_services_share_cores: true',
        'hk_llm_cpus: 1',
        'hk_imagegen_cpus: 1',
        'hk_gateway_cpus: 1',
        'gpu_services_reserved_cpus: ""',
        '# The stand-in service (tests/lab/host/usr/local/lib/gpufleet-lab/serve): it opens its GPUs as a CUDA',
        '# process does, so NVML lists it on them, and writes every page of the memory it is given.',
        'hk_llm_command: /usr/bin/python3 /usr/local/lib/gpufleet-lab/serve 64',
        'hk_imagegen_command: /usr/bin/python3 /usr/local/lib/gpufleet-lab/serve 32',
        'hk_gateway_command: /usr/bin/python3 /usr/local/lib/gpufleet-lab/serve 16',
        '# It starts in well under a second: a restarted one that is still up after 2 s stayed up (the example: 5 s).',
        'gpu_services_restart_settle_sec: 2',
        '',
        '# Prometheus on the monitoring host scrapes and evaluates every 5 s, so that a test sees a target up or an',
        '# alert firing in seconds (30 s in the example fleet).',
        'monitoring_scrape_interval: 5s',
        'monitoring_evaluation_interval: 5s',
        '# The health gate after each batch waits a few seconds, not a minute, before it asks that Prometheus.',
        'gpufleet_health_gate_soak: 3',
        '# The drift check runs when step drift runs it (not on its timer, which could meet a run half way and fire',
        '# GpuHostDrifted into an upgrade\'s health gate), and its alert fires at the first evaluation.',
        'gpu_watchdog_drift_interval_sec: 3600',
        'monitoring_drift_for: 0s',
    ]) + '\n'


def top_level_keys(path):
    try:
        import yaml  # the venv's PyYAML (ansible-core needs it); only for the warning
    except ImportError:
        return set()
    files = []
    if os.path.isdir(path):
        for root, _dirs, names in os.walk(path):
            files.extend(os.path.join(root, name) for name in names)
    else:
        files = [path]
    keys = set()
    for name in files:
        # Someone else's file: what cannot be read is for its own run to report.
        try:
            with open(name) as handle:
                data = yaml.safe_load(handle)
        except (IOError, OSError, UnicodeDecodeError, yaml.YAMLError):
            continue
        if isinstance(data, dict):
            keys.update(data)
    return keys


def write_group_vars(repo, inventory, zz_lab):
    example = os.path.join(repo, EXAMPLE_GROUP_VARS)
    group_vars = os.path.join(inventory, 'group_vars')
    if os.path.lexists(group_vars):
        shutil.rmtree(group_vars)
    os.makedirs(os.path.join(group_vars, 'all'))
    entries = sorted(os.listdir(example)) if os.path.isdir(example) else []
    overridden = set(line.split(':', 1)[0] for line in zz_lab.splitlines()
                     if line and line[0].isalpha() and ':' in line)
    warnings = []
    for entry in entries:
        source = os.path.join(example, entry)
        stem = entry.rsplit('.', 1)[0] if entry.endswith(('.yml', '.yaml', '.json')) else entry
        if stem == 'all' and os.path.isdir(source):
            for name in sorted(os.listdir(source)):
                if not name.endswith(('.yml', '.yaml')) or name == 'zz-lab.yml':
                    continue
                os.symlink(os.path.relpath(os.path.join(source, name), os.path.join(group_vars, 'all')),
                           os.path.join(group_vars, 'all', name))
                if name > 'zz-lab.yml' and top_level_keys(os.path.join(source, name)) & overridden:
                    warnings.append('group_vars/all/%s sorts after zz-lab.yml and wins over it' % name)
        elif stem == 'all':
            # An all.yml file: read first, as a file of the all/ directory.
            os.symlink(os.path.relpath(source, os.path.join(group_vars, 'all')),
                       os.path.join(group_vars, 'all', '00-' + entry))
        else:
            os.symlink(os.path.relpath(source, group_vars), os.path.join(group_vars, entry))
            shadowing = sorted(top_level_keys(source) & overridden)
            if shadowing:
                warnings.append('group_vars/%s sets %s, which wins over the lab\'s zz-lab.yml (a child group wins '
                                'over all)' % (entry, ', '.join(shadowing)))
    with open(os.path.join(group_vars, 'all', 'zz-lab.yml'), 'w') as handle:
        handle.write(zz_lab)
    if not entries:
        warnings.append('%s does not exist: the inventory has only the lab\'s own variables' % EXAMPLE_GROUP_VARS)
    return warnings


def main(argv):
    if len(argv) != 5:
        sys.exit(__doc__.strip().splitlines()[2])
    repo, lab_dir, subnet, table = os.path.abspath(argv[1]), os.path.abspath(argv[2]), argv[3], argv[4]
    with open(os.path.join(lab_dir, 'aptrepos', 'repo.json')) as handle:
        repo_json = json.load(handle)
    inventory = os.path.join(lab_dir, 'inventory')
    if not os.path.isdir(inventory):
        os.makedirs(inventory)
    hosts = read_table(table)
    tmp = os.path.join(inventory, '.hosts.yml.tmp')
    with open(tmp, 'w') as handle:
        handle.write(hosts_yml(hosts, lab_dir))
    os.rename(tmp, os.path.join(inventory, 'hosts.yml'))
    for warning in write_group_vars(repo, inventory, zz_lab_yml(repo_json, subnet)):
        sys.stderr.write('lab.sh: warning: %s\n' % warning)


if __name__ == '__main__':
    main(sys.argv)
