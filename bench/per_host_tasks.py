# SPDX-License-Identifier: GPL-3.0-or-later
"""Benchmark: what two per-host tasks cost against Ansible's own floor, measured side by side in one playbook.

1. The gpu_services role's planning step (gpufleet.core.service_plan: 16 services on the simulated 8x H100 host,
   its gpufleet_topology fact gathered for real) against a no-op task (ansible.builtin.set_fact of a constant), and
   against the step it replaced (place_services and service_units filters in set_fact), on --hosts inventory
   hosts. The tasks are interleaved, --rounds times each; a task's cost per host is its wall time (first host's
   start to last host's end, forks 5) divided by the hosts.
2. gpufleet.core.topology_facts against ansible.builtin.ping, on the simulated reference A100 host and the 8x H100
   host (--fact-hosts inventory hosts each), interleaved the same way.

Every host is this machine (connection local), so the figures include the module start-up that the local
connection pays; the simulator stands in for NVML. The machine's load average is recorded before and after.

usage: .venv/bin/python bench/per_host_tasks.py [--hosts 50] [--rounds 9] [--output docs/benchmarks/per_host_tasks.md]
"""

import argparse
import datetime
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile

from nvml_simulator import installed_simulator, simulated_host  # bench/, the script's own directory

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), '..'))
HOSTS = {'a100': 'reference-a100', 'h100': 'dgx-h100'}
# 16 services as in bench/placement.py: one shareable GPU and 2 to 12 CPUs each.
SERVICES = [{'name': 'svc%02d' % i, 'gpus': 1, 'exclusive': False, 'cpus': [2, 4, 6, 8, 12][i % 5],
             'command': '/usr/bin/serve'} for i in range(16)]


def seconds(stamp):
    return datetime.datetime.strptime(stamp, '%Y-%m-%dT%H:%M:%S.%fZ').timestamp()


def inventory(work, hosts, fact_hosts):
    groups = {'plan': {'hosts': {}}}
    for n in range(hosts):
        groups['plan']['hosts']['plan%03d' % n] = {'sim': 'h100'}
    for kind in HOSTS:
        groups['facts_' + kind] = {'hosts': dict(('%s%03d' % (kind, n), {'sim': kind}) for n in range(fact_hosts))}
    common = {'ansible_connection': 'local', 'ansible_python_interpreter': sys.executable}
    installed = installed_simulator(work)
    sims = {}
    for kind, name in HOSTS.items():
        root, env = simulated_host(work, name, installed)
        sims[kind] = {'root': root, 'env': env}
    return {'all': {'children': groups, 'vars': dict(common, sims=sims, bench_services=SERVICES)}}


def playbook(rounds):
    gather = {'name': 'Gather the fact (not timed)', 'gpufleet.core.topology_facts': {
        'sysfs_root': '{{ sims[sim].root }}/sys', 'procfs_root': '{{ sims[sim].root }}/proc'}}
    timed_plan = []
    for r in range(rounds):
        timed_plan += [
            {'name': 'noop %d' % r, 'ansible.builtin.set_fact': {'bench_noop': True}},
            {'name': 'pass services %d' % r, 'ansible.builtin.set_fact': {'bench_passed': '{{ bench_services }}'}},
            {'name': 'service_plan %d' % r, 'gpufleet.core.service_plan': {
                'services': '{{ bench_services }}', 'reserved_cpus': '0,112'}},
            {'name': 'filters %d' % r, 'ansible.builtin.set_fact': {'bench_filters': (
                "{{ ansible_facts['gpufleet_topology'] | gpufleet.core.place_services(bench_services, "
                "reserved_cpus='0,112') | gpufleet.core.service_units(bench_services) }}")}},
        ]
    timed_facts = []
    for r in range(rounds):
        timed_facts += [
            {'name': 'ping %d' % r, 'ansible.builtin.ping': {}},
            {'name': 'topology_facts %d' % r, 'gpufleet.core.topology_facts': {
                'sysfs_root': '{{ sims[sim].root }}/sys', 'procfs_root': '{{ sims[sim].root }}/proc'}},
        ]
    plays = [{'name': 'Plan', 'hosts': 'plan', 'gather_facts': False, 'environment': '{{ sims[sim].env }}',
              'tasks': [gather] + timed_plan}]
    for kind in HOSTS:
        plays.append({'name': 'Facts %s' % kind, 'hosts': 'facts_' + kind, 'gather_facts': False,
                      'environment': '{{ sims[sim].env }}', 'tasks': timed_facts})
    return plays


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--hosts', type=int, default=50)
    parser.add_argument('--fact-hosts', type=int, default=20)
    parser.add_argument('--rounds', type=int, default=9)
    parser.add_argument('--output')
    args = parser.parse_args()

    work = tempfile.mkdtemp(prefix='gpufleet-bench-')
    with open(os.path.join(work, 'inventory.json'), 'w') as handle:
        json.dump(inventory(work, args.hosts, args.fact_hosts), handle)
    with open(os.path.join(work, 'play.yml'), 'w') as handle:
        json.dump(playbook(args.rounds), handle)  # JSON is YAML
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=os.path.join(REPO, 'build', 'collections'),
               ANSIBLE_STDOUT_CALLBACK='ansible.posix.json', ANSIBLE_HOST_KEY_CHECKING='false')
    load_before = os.getloadavg()
    started = datetime.datetime.now()
    out = subprocess.check_output([os.path.join(os.path.dirname(sys.executable), 'ansible-playbook'),
                                   '-i', os.path.join(work, 'inventory.json'), os.path.join(work, 'play.yml')],
                                  env=env)
    load_after = os.getloadavg()
    per_host = {}
    for play in json.loads(out)['plays']:
        hosts = len(play['tasks'][-1]['hosts'])
        for task in play['tasks']:
            kind = task['task']['name'].rsplit(' ', 1)[0]
            failed = [h for h, r in task['hosts'].items() if r.get('failed')]
            if failed:
                raise SystemExit('%s failed on %s: %s' % (task['task']['name'], failed[0],
                                                          task['hosts'][failed[0]].get('msg')))
            duration = task['task']['duration']
            per_host.setdefault((play['play']['name'], kind), []).append(
                (seconds(duration['end']) - seconds(duration['start'])) / hosts)
    median = dict((key, statistics.median(values)) for key, values in per_host.items())

    def ms(play, kind):
        return 1000 * median[(play, kind)]

    def paired(play, kind, floor):
        """The median over the rounds of the task's time over its floor task's in the same round: each pair ran
        back to back, so a change of load between rounds moves both."""
        return statistics.median([a / b for a, b in zip(per_host[(play, kind)], per_host[(play, floor)])])

    def judged(play, kind, floor, target):
        """The ratio of the medians and the paired ratio, and 'met' only when both are within the target."""
        of_medians, of_pairs = median[(play, kind)] / median[(play, floor)], paired(play, kind, floor)
        met = of_medians <= target and of_pairs <= target
        verdict = 'met' if met else 'NOT met'
        return met, '**%.2f**, paired %.2f (target: at most %s: %s)' % (of_medians, of_pairs, target, verdict)

    plan_met, plan_text = judged('Plan', 'service_plan', 'noop', 1.2)
    old_ratio = median[('Plan', 'filters')] / median[('Plan', 'noop')]
    lines = [
        '# Benchmark: per-host tasks against Ansible\'s floor',
        '',
        'Made by `.venv/bin/python bench/per_host_tasks.py --hosts %d --fact-hosts %d --rounds %d` (%s), '
        'ansible-core %s, Python %s, %d CPUs; load average %.1f before and %.1f after the run (%s).'
        % (args.hosts, args.fact_hosts, args.rounds, started.date().isoformat(), ansible_version(),
           platform.python_version(), os.cpu_count(), load_before[0], load_after[0], describe_load(load_before[0])),
        '',
        '## Planning a host\'s services (the gpu_services role\'s step), %d hosts' % args.hosts,
        '',
        '| task | median time per host | against the no-op |',
        '| --- | --- | --- |',
        '| no-op (`ansible.builtin.set_fact` of a constant) | %.1f ms | 1.00 |' % ms('Plan', 'noop'),
        '| `ansible.builtin.set_fact` of the 16 services (what passing them to any task costs) | %.1f ms | %.2f |'
        % (ms('Plan', 'pass services'), median[('Plan', 'pass services')] / median[('Plan', 'noop')]),
        '| **`gpufleet.core.service_plan`**, 16 services on the 8x H100 host | %.1f ms | %s |'
        % (ms('Plan', 'service_plan'), plan_text),
        '| the step it replaced: `place_services` and `service_units` filters in `set_fact` | %.1f ms | %.2f |'
        % (ms('Plan', 'filters'), old_ratio),
        '',
    ]
    facts_met = []
    lines += ['## `topology_facts` against `ping`, %d hosts of each kind' % args.fact_hosts, '',
              '| host | `ping` per host | `topology_facts` per host | ratio |', '| --- | --- | --- | --- |']
    for kind, name in HOSTS.items():
        play = 'Facts %s' % kind
        met, text = judged(play, 'topology_facts', 'ping', 1.1)
        facts_met.append(met)
        lines.append('| `%s` | %.1f ms | %.1f ms | %s |' % (name, ms(play, 'ping'), ms(play, 'topology_facts'), text))
    lines += [
        '',
        'How it was measured: one playbook; in each play the timed tasks alternate (%d rounds), and each figure is '
        'the median over the rounds of a task\'s wall time (its first host\'s start to its last host\'s end, as '
        'the `ansible.posix.json` callback reports it, 5 forks) divided by its hosts. A ratio is given twice: the '
        'ratio of the two medians, and the paired ratio, the median over the rounds of the task\'s time over the time '
        'of the task it alternates with in that round (run back to back, so a change of load between rounds moves '
        'both); a target is met only when both are within it. Every host is this machine '
        'over the `local` connection, so a module task\'s floor includes starting Python on it; `topology_facts` '
        'read the rendered sysfs and procfs trees of `tests/nvml_sim/hosts` and the NVML simulator, so its NVML '
        'calls cost what the simulator costs, not what the driver costs; the simulator is a copy with its bytecode '
        'compiled, as an installed nvidia-ml-py is, so that compiling it is not counted.' % args.rounds,
        '',
        'Per-round figures (ms per host): %s.' % '; '.join(
            '%s %s: %s' % (play, kind, ', '.join('%.1f' % (1000 * v) for v in values))
            for (play, kind), values in sorted(per_host.items())),
        '',
    ]
    text = '\n'.join(lines)
    print(text)
    if args.output:
        with open(args.output, 'w') as handle:
            handle.write(text)
    return 0 if plan_met and all(facts_met) else 1


def ansible_version():
    from ansible.release import __version__
    return __version__


def describe_load(load):
    cpus = os.cpu_count() or 1
    return 'an idle machine' if load < 0.5 else ('a busy machine' if load > cpus else 'a lightly loaded machine')


if __name__ == '__main__':
    sys.exit(main())
