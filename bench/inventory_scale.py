# SPDX-License-Identifier: GPL-3.0-or-later
"""Benchmark: adding one host to a 1,000-host inventory against adding it to a 1-host inventory.

One reference A100 lab host (tests/lab/lab.sh with a one-host table, as bench/fleet.py makes it) is the host being
added. Two inventories hold it: the lab's own (1 host), and the same with 999 more A100 hosts in the example fleet's
class and rack that exist only in the inventory (addresses in 10.214.0.0/16, each host's management address the
example's "{{ ansible_host }}"), each with cached facts as after any earlier run (the lab host's, copied); the run is
limited to the lab host, so they are never contacted. Both inventories get
the same extra variables (the management networks widened to 10.214.0.0/16) so they differ only in their hosts.

For each inventory, from a bare host (the lab made again, the fact cache emptied):
1. gpufleet.core.validate --limit <host>, several times (it contacts no host): the median wall and CPU time;
2. the site playbook --limit <host>: the add-one-host run, wall and controller CPU time (ansible-playbook, its workers
   and the ssh clients it waited for), and the tasks of the play recap.

usage: .venv/bin/python bench/inventory_scale.py [--hosts 1000] [--validate-runs 5] [--output FILE] [--keep-lab]
Ends with tests/lab/lab.sh down unless --keep-lab. The figures go into docs/benchmarks/fleet.md by hand.
"""

import argparse
import ipaddress
import os
import shutil
import statistics
import subprocess
import sys

import yaml

from fleet import EXAMPLE, INVENTORY, LAB_SH, REPO, ansible_core_version, loadavg, playbook_env, recap, run

WORK = os.path.join(REPO, 'build', 'bench-inventory')
HOST = 'bench-a100-01'
TABLE = '%s 10.213.7.101 dc_hk1 hk1_rack_a a100_pcie_4x reference-a100\n' % HOST
EXTRA = {'gpufleet_management_cidrs': ['10.213.7.0/24', '10.214.0.0/16']}
INVENTORY_ONLY = ipaddress.ip_network('10.214.0.0/16')


def lab_up():
    """The lab as one bare host; returns the path of its inventory."""
    table = os.path.join(WORK, 'hosts.table')
    with open(table, 'w') as handle:
        handle.write(TABLE)
    env = dict(os.environ, GPUFLEET_LAB_HOSTS=table)
    for step in ('down', 'up'):
        status, _wall, _cpu, _output = run(['bash', LAB_SH, step], os.path.join(WORK, 'lab-%s.log' % step), env=env)
        if status != 0:
            sys.exit('bench/inventory_scale.py: lab.sh %s failed; see %s/lab-%s.log' % (step, WORK, step))
    shutil.rmtree(os.path.join(EXAMPLE, '.cache'), ignore_errors=True)
    return INVENTORY


def widened(lab_inventory, hosts):
    """A copy of the lab's inventory with HOSTS - 1 inventory-only hosts beside the lab host."""
    target = os.path.join(WORK, 'inventory-%d' % hosts)
    shutil.rmtree(target, ignore_errors=True)
    shutil.copytree(lab_inventory, target)
    path = os.path.join(target, 'hosts.yml')
    with open(path) as handle:
        document = yaml.safe_load(handle)
    children = document['all']['children']
    a100 = children['fleet']['children']['gpu_hosts']['children']['a100_pcie_4x']
    rack = children['dc_hk1']['children']['hk1_rack_a']
    addresses = INVENTORY_ONLY.hosts()
    for index in range(hosts - 1):
        name = 'inv-a100-%04d' % (index + 1)
        a100['hosts'][name] = {'ansible_host': str(next(addresses))}
        rack['hosts'][name] = None
    with open(path, 'w') as handle:
        yaml.safe_dump(document, handle, default_flow_style=False)
    return target


def cache_facts_of_inventory_only_hosts(inventory, hosts, env):
    """Give each inventory-only host cached facts, as a fleet's hosts have after any run (the example's ansible.cfg
    keeps a jsonfile fact cache for a day): the lab host's, gathered here and copied; then the lab host's own are
    removed, so the run still meets it as a new host."""
    playbook('facts', inventory, 'gpufleet.core.facts', env)
    cache = os.path.join(EXAMPLE, '.cache', 'facts')
    own = [name for name in os.listdir(cache) if name.endswith(HOST)]
    if len(own) != 1:
        sys.exit('bench/inventory_scale.py: no fact file of %s in %s: %s' % (HOST, cache, os.listdir(cache)))
    prefix = own[0][:-len(HOST)]
    for index in range(hosts - 1):
        shutil.copyfile(os.path.join(cache, own[0]), os.path.join(cache, prefix + 'inv-a100-%04d' % (index + 1)))
    os.remove(os.path.join(cache, own[0]))


def playbook(name, inventory, playbook_name, env):
    log = os.path.join(WORK, '%s.log' % name)
    extra = os.path.join(WORK, 'extra.yml')
    with open(extra, 'w') as handle:
        yaml.safe_dump(EXTRA, handle)
    command = [os.path.join(REPO, '.venv', 'bin', 'ansible-playbook'), '-i', inventory, playbook_name,
               '--limit', HOST, '-e', '@' + extra]
    status, wall, cpu, output = run(command, log, env=env, cwd=EXAMPLE)
    hosts = recap(output)
    if status != 0 or list(hosts) != [HOST] or hosts[HOST]['failed'] or hosts[HOST]['unreachable']:
        sys.exit('bench/inventory_scale.py: %s did not succeed (exit %d); see %s' % (name, status, log))
    return {'wall': wall, 'cpu': cpu, 'tasks': hosts[HOST]}


def measure(label, inventory, validate_runs, env):
    print('%s:' % label, flush=True)
    checks = [playbook('%s-validate-%d' % (label, index), inventory, 'gpufleet.core.validate', env)
              for index in range(validate_runs)]
    validate = {'wall': statistics.median(c['wall'] for c in checks), 'cpu': statistics.median(c['cpu'] for c in checks)}
    print('  validate  %6.2f s wall %6.2f s CPU (median of %d)' % (validate['wall'], validate['cpu'], validate_runs),
          flush=True)
    site = playbook('%s-site' % label, inventory, os.path.join(EXAMPLE, 'site.yml'), env)
    print('  site      %6.1f s wall %6.1f s CPU, ok %d changed %d skipped %d'
          % (site['wall'], site['cpu'], site['tasks']['ok'], site['tasks']['changed'], site['tasks']['skipped']),
          flush=True)
    return {'validate': validate, 'site': site, 'load': loadavg()}


def report(hosts, validate_runs, small, large):
    lines = ['| inventory | run (--limit %s) | wall time | controller CPU time | tasks (ok / changed / skipped) |' % HOST,
             '| --- | --- | ---: | ---: | ---: |']
    for label, result in (('1 host', small), ('%d hosts' % hosts, large)):
        lines.append('| %s | validate (median of %d) | %.2f s | %.2f s | |'
                     % (label, validate_runs, result['validate']['wall'], result['validate']['cpu']))
        tasks = result['site']['tasks']
        lines.append('| %s | site, first run on the bare host | %.1f s | %.1f s | %d / %d / %d |'
                     % (label, result['site']['wall'], result['site']['cpu'], tasks['ok'], tasks['changed'],
                        tasks['skipped']))
    lines += ['', 'Ratios, %d hosts over 1 host: validate %.2fx wall, %.2fx CPU; the site run %.2fx wall, %.2fx CPU.'
              % (hosts, large['validate']['wall'] / small['validate']['wall'],
                 large['validate']['cpu'] / small['validate']['cpu'], large['site']['wall'] / small['site']['wall'],
                 large['site']['cpu'] / small['site']['cpu']),
              '', 'ansible-core %s, %d CPUs; load average after the 1-host runs %s, after the %d-host runs %s.'
              % (ansible_core_version(), os.cpu_count(), small['load'], hosts, large['load'])]
    return '\n'.join(lines) + '\n'


def main():
    parser = argparse.ArgumentParser(description=__doc__.split('\n', 1)[0])
    parser.add_argument('--hosts', type=int, default=1000, help='the large inventory\'s hosts, the lab host included')
    parser.add_argument('--validate-runs', type=int, default=5)
    parser.add_argument('--output', default=os.path.join(WORK, 'inventory_scale.md'))
    parser.add_argument('--keep-lab', action='store_true')
    args = parser.parse_args()
    if not 2 <= args.hosts <= 60000:
        parser.error('--hosts: from 2 to 60000 (the inventory-only hosts take addresses in %s)' % INVENTORY_ONLY)
    os.makedirs(WORK, exist_ok=True)
    subprocess.check_call([os.path.join(REPO, 'tests', 'testbed', 'venv.sh'), 'site'], cwd=REPO)
    subprocess.check_call([os.path.join(REPO, 'tests', 'testbed', 'link-collection.sh')], cwd=REPO)
    env = playbook_env()
    try:
        # The large inventory first: a cold machine's first ansible-playbook would otherwise favour it.
        large_inventory = widened(lab_up(), args.hosts)
        cache_facts_of_inventory_only_hosts(large_inventory, args.hosts, env)
        large = measure('%d hosts' % args.hosts, large_inventory, args.validate_runs, env)
        lab_inventory = lab_up()
        small = measure('1 host', widened(lab_inventory, 1), args.validate_runs, env)
    finally:
        if not args.keep_lab:
            subprocess.call(['bash', LAB_SH, 'down'], stdout=subprocess.DEVNULL)
    text = report(args.hosts, args.validate_runs, small, large)
    with open(args.output, 'w') as handle:
        handle.write(text)
    print(text)


if __name__ == '__main__':
    main()
