# SPDX-License-Identifier: GPL-3.0-or-later
"""Benchmark: the site playbook on 1, 4 and 16 lab hosts: first run, no-change re-run and full run, against the floor.

For each size the lab (tests/lab/lab.sh, docs/lab.md) is made again from nothing with that many reference A100 hosts
(2x 4 GPUs, the example fleet's a100_pcie_4x class; half in data centre hk1's rack hk1_rack_a, half in hk2's
hk2_rack_b), the fact cache is emptied, and then, as `make site` runs it (examples/hk-fleet, its ansible.cfg):
1. the first run of examples/hk-fleet/site.yml: bare hosts to converged, audited hosts;
2. the no-change re-run, which must report changed=0 on every host: each stage whose receipt shows the host
   converged is skipped (docs/drift.md);
3. the full run, `-e gpufleet_full_run=true`: every stage checked as a re-run did before receipts, which must report
   changed=0 on every host too;
4. the floor: a playbook of as many tasks per host as the full run ran, on the same hosts with the same ansible.cfg,
   that do nothing: the full run's `ok` count as ansible.builtin.ping (a module run on the host, as each of the
   run's tasks that reached the host is) and its `skipped` count as tasks skipped by `when: false`;
5. the drift check on each host (the helper bundle's drift command, as gpufleet-drift.timer runs it), 5 times: its
   CPU time on the host and its wall time.
For each run: wall time, the controller's CPU time (user + system of ansible-playbook, its workers and the ssh
clients it waited for), and the tasks per host from the play recap. The machine's load is recorded before and after.

The lab's hosts are containers on this machine: their services, sshd and the modules they run share its CPUs with
the controller, so the wall times include the hosts' work; the CPU time is the controller's alone.

usage: .venv/bin/python bench/fleet.py [--sizes 1 4 16] [--output docs/benchmarks/fleet.md] [--keep-lab]
Ends with tests/lab/lab.sh down unless --keep-lab (the next `make site` makes the usual lab again).
"""

import argparse
import datetime
import json
import os
import platform
import re
import resource
import shutil
import statistics
import subprocess
import sys
import time

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), '..'))
EXAMPLE = os.path.join(REPO, 'examples', 'hk-fleet')
LAB_SH = os.path.join(REPO, 'tests', 'lab', 'lab.sh')
WORK = os.path.join(REPO, 'build', 'bench-fleet')
INVENTORY = os.path.join(REPO, 'build', 'lab', 'inventory')
RECAP = re.compile(r'^(?P<host>\S+)\s+:\s+ok=(?P<ok>\d+)\s+changed=(?P<changed>\d+)\s+unreachable=(?P<unreachable>\d+)'
                   r'\s+failed=(?P<failed>\d+)\s+skipped=(?P<skipped>\d+)\s+rescued=(?P<rescued>\d+)'
                   r'\s+ignored=(?P<ignored>\d+)\s*$')


def hosts_table(size):
    """SIZE reference A100 hosts, the first half (rounded up) in hk1's rack, the rest in hk2's."""
    lines = []
    for i in range(size):
        first_half = i < (size + 1) // 2
        lines.append('bench-a100-%02d 10.213.7.%d %s %s a100_pcie_4x reference-a100'
                     % (i + 1, 101 + i, 'dc_hk1' if first_half else 'dc_hk2',
                        'hk1_rack_a' if first_half else 'hk2_rack_b'))
    return '\n'.join(lines) + '\n'


def floor_playbook(ok, skipped):
    tasks = ['    - name: No-op %d\n      ansible.builtin.ping:\n' % i for i in range(ok)]
    tasks += ['    - name: Skipped %d\n      ansible.builtin.ping:\n      when: false\n' % i for i in range(skipped)]
    return ('---\n- name: The floor, as many no-op tasks per host as the re-run ran\n  hosts: fleet\n'
            '  gather_facts: false\n  tasks:\n' + ''.join(tasks))


def run(command, log, env=None, cwd=REPO):
    """Run COMMAND, its output to LOG; returns (exit status, wall s, children's CPU s, output)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.monotonic()
    with open(log, 'w') as handle:
        status = subprocess.call(command, stdout=handle, stderr=subprocess.STDOUT, env=env, cwd=cwd)
    wall = time.monotonic() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    with open(log) as handle:
        return status, wall, cpu, handle.read()


def recap(output):
    hosts = {}
    for line in output.splitlines():
        match = RECAP.match(line)
        if match:
            hosts[match.group('host')] = dict((k, int(v)) for k, v in match.groupdict().items() if k != 'host')
    return hosts


def playbook_env():
    purelib = subprocess.check_output([os.path.join(REPO, '.venv', 'bin', 'python'), '-c',
                                       'import sysconfig; print(sysconfig.get_paths()["purelib"])'],
                                      universal_newlines=True).strip()
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH='%s:%s' % (os.path.join(REPO, 'build', 'collections'), purelib),
               ANSIBLE_FORCE_COLOR='0', ANSIBLE_NOCOLOR='1', ANSIBLE_CONFIG=os.path.join(EXAMPLE, 'ansible.cfg'))
    env.pop('GPUFLEET_LAB_HOSTS', None)
    return env


def timed_playbook(name, playbook, size, env, extra=()):
    log = os.path.join(WORK, '%d-%s.log' % (size, name))
    command = [os.path.join(REPO, '.venv', 'bin', 'ansible-playbook'), '-i', INVENTORY, playbook] + list(extra)
    status, wall, cpu, output = run(command, log, env=env, cwd=EXAMPLE)
    hosts = recap(output)
    if status != 0 or len(hosts) != size or any(h['failed'] or h['unreachable'] for h in hosts.values()):
        sys.exit('bench/fleet.py: the %s run on %d hosts did not succeed everywhere (exit %d); see %s'
                 % (name, size, status, log))
    print('  %-9s %7.1f s wall %7.1f s CPU, per host ok %s skipped %s changed %s'
          % (name, wall, cpu, sorted(set(h['ok'] for h in hosts.values())),
             sorted(set(h['skipped'] for h in hosts.values())), sum(h['changed'] for h in hosts.values())),
          flush=True)
    return {'wall': wall, 'cpu': cpu, 'hosts': hosts}


def median_of(hosts, key):
    return int(statistics.median(h[key] for h in hosts.values()))


def measure(size, env):
    started, load_before = datetime.datetime.now().strftime('%Y-%m-%d %H:%M'), loadavg()
    print('%d host(s):' % size, flush=True)
    table = os.path.join(WORK, 'hosts-%d.table' % size)
    with open(table, 'w') as handle:
        handle.write(hosts_table(size))
    lab_env = dict(os.environ, GPUFLEET_LAB_HOSTS=table)
    for step in ('down', 'up'):
        status, wall, _cpu, _output = run(['bash', LAB_SH, step], os.path.join(WORK, '%d-lab-%s.log' % (size, step)),
                                          env=lab_env)
        if status != 0:
            sys.exit('bench/fleet.py: lab.sh %s failed; see %s/%d-lab-%s.log' % (step, WORK, size, step))
    print('  lab up   %7.1f s (not part of the figures)' % wall, flush=True)
    shutil.rmtree(os.path.join(EXAMPLE, '.cache'), ignore_errors=True)  # a first run has no cached facts
    site = os.path.join(EXAMPLE, 'site.yml')
    first = timed_playbook('first', site, size, env)
    again = timed_playbook('again', site, size, env)
    full = timed_playbook('full', site, size, env, ['-e', '{"gpufleet_full_run": true}'])
    for name, measured in (('re-run', again), ('full run', full)):
        changed = sum(h['changed'] for h in measured['hosts'].values())
        if changed:
            sys.exit('bench/fleet.py: the %s on %d hosts changed %d things; it must change nothing'
                     % (name, size, changed))
    ok, skipped = median_of(full['hosts'], 'ok'), median_of(full['hosts'], 'skipped')
    floor_yml = os.path.join(WORK, 'floor-%d.yml' % size)
    with open(floor_yml, 'w') as handle:
        handle.write(floor_playbook(ok, skipped))
    floor = timed_playbook('floor', floor_yml, size, env)
    drift = drift_check_cost(size)
    result = {'size': size, 'first': first, 'again': again, 'full': full, 'floor': floor, 'ok': ok,
              'skipped': skipped, 'drift': drift, 'started': started, 'load_before': load_before,
              'load_after': loadavg()}
    with open(os.path.join(WORK, 'result-%d.json' % size), 'w') as handle:
        json.dump(result, handle, indent=1)
    return result


# On a lab host: the drift command as gpufleet-drift.timer runs it, its CPU time (user + system of it and its
# children: dpkg-query, systemctl, the MPS control client) and wall time, printed as one JSON line.
DRIFT_PROBE = (
    'import json, resource, subprocess, time\n'
    'started = time.monotonic()\n'
    'status = subprocess.call(["/usr/bin/python3", "/usr/local/lib/gpufleet/gpufleet-helpers.pyz", "drift"],'
    ' stdout=subprocess.DEVNULL)\n'
    'usage = resource.getrusage(resource.RUSAGE_CHILDREN)\n'
    'print(json.dumps({"status": status, "wall": time.monotonic() - started,'
    ' "cpu": usage.ru_utime + usage.ru_stime}))\n')


def drift_check_cost(size, times=5):
    """The drift check on every host, TIMES each: the median CPU and wall seconds per check, over all hosts."""
    samples = []
    for i in range(size):
        for _time in range(times):
            out = subprocess.check_output(['podman', 'exec', 'gpufleet-lab-bench-a100-%02d' % (i + 1), 'python3', '-c',
                                           DRIFT_PROBE], universal_newlines=True)
            sample = json.loads(out.strip().splitlines()[-1])
            if sample['status'] != 0:
                sys.exit('bench/fleet.py: the drift check on bench-a100-%02d exited %d: a converged host must have no '
                         'drift' % (i + 1, sample['status']))
            samples.append(sample)
    cost = {'cpu': statistics.median(s['cpu'] for s in samples), 'wall': statistics.median(s['wall'] for s in samples),
            'checks': len(samples)}
    print('  drift    %7.3f s CPU %7.3f s wall per check on the host (median of %d)'
          % (cost['cpu'], cost['wall'], cost['checks']), flush=True)
    return cost


def loadavg():
    return ', '.join('%.2f' % x for x in os.getloadavg())


def report(results):
    out = ['# Benchmark: the site playbook on the lab, first run, no-change re-run and full run against the floor', '',
           'Made by `.venv/bin/python bench/fleet.py --sizes %s` on this development machine: %d CPUs, Python %s '
           '(controller), ansible-core %s; every host a reference A100 lab host (2 NUMA nodes, 4 simulated A100 80GB, '
           'the LLM and image services of examples/hk-fleet). The lab\'s containers run on the same machine as the '
           'controller.'
           % (' '.join(str(r['size']) for r in results), os.cpu_count(), platform.python_version(),
              ansible_core_version()), '',
           '| hosts | run | wall time | controller CPU time | CPU per host | tasks per host (ok / skipped) | '
           'changed | CPU / full run | CPU / floor |',
           '| ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |']
    for r in results:
        for name, label in (('first', 'first run'), ('again', 'no-change re-run'),
                            ('full', 'full run (gpufleet_full_run)'), ('floor', 'floor')):
            m = r[name]
            hosts = m['hosts']
            ratios = ('' if name in ('full', 'floor') else '%.2fx' % (m['cpu'] / r['full']['cpu']),
                      '' if name == 'floor' else '%.2fx' % (m['cpu'] / r['floor']['cpu']))
            out.append('| %d | %s | %.1f s | %.1f s | %.2f s | %d / %d | %d | %s | %s |'
                       % (r['size'], label, m['wall'], m['cpu'], m['cpu'] / r['size'], median_of(hosts, 'ok'),
                          median_of(hosts, 'skipped'), sum(h['changed'] for h in hosts.values()), ratios[0],
                          ratios[1]))
    out += ['', 'The drift check on a converged host (the helper bundle\'s drift command, as gpufleet-drift.timer '
            'runs it), its CPU time on the host and its wall time, the median of %s checks:' % ', '.join(
                str(r['drift']['checks']) for r in results), '']
    out += ['- %d host(s): %.3f s CPU, %.3f s wall per check.' % (r['size'], r['drift']['cpu'], r['drift']['wall'])
            for r in results]
    out += ['', 'When each size was measured, and the load average (1, 5, 15 min) before and after its runs:', '']
    out += ['- %d host(s): %s, load %s before, %s after.' % (r['size'], r['started'], r['load_before'], r['load_after'])
            for r in results]
    return '\n'.join(out) + '\n'


def ansible_core_version():
    return subprocess.check_output([os.path.join(REPO, '.venv', 'bin', 'python'), '-c',
                                    'import ansible.release; print(ansible.release.__version__)'],
                                   universal_newlines=True).strip()


def main():
    parser = argparse.ArgumentParser(description=__doc__.split('\n', 1)[0])
    parser.add_argument('--sizes', type=int, nargs='+', default=[1, 4, 16])
    parser.add_argument('--output', default=os.path.join(REPO, 'build', 'bench-fleet', 'fleet.md'),
                        help='where the Markdown table goes (docs/benchmarks/fleet.md keeps the published one)')
    parser.add_argument('--keep-lab', action='store_true')
    parser.add_argument('--report', action='store_true',
                        help='measure nothing: write the page from the results the sizes\' last runs saved')
    args = parser.parse_args()
    if any(size < 1 or size > 150 for size in args.sizes):
        parser.error('--sizes: each from 1 to 150 (the lab network has addresses 10.213.7.101 to .250 for it)')
    os.makedirs(WORK, exist_ok=True)
    if args.report:
        results = []
        for size in args.sizes:
            with open(os.path.join(WORK, 'result-%d.json' % size)) as handle:
                results.append(json.load(handle))
        write(args.output, report(results))
        return
    # The venv make site uses, and the collection linked where ANSIBLE_COLLECTIONS_PATH finds it.
    subprocess.check_call([os.path.join(REPO, 'tests', 'testbed', 'venv.sh'), 'site'], cwd=REPO)
    subprocess.check_call([os.path.join(REPO, 'tests', 'testbed', 'link-collection.sh')], cwd=REPO)
    env = playbook_env()
    results = []
    try:
        for size in args.sizes:
            results.append(measure(size, env))
    finally:
        if not args.keep_lab:
            subprocess.call(['bash', LAB_SH, 'down'], stdout=subprocess.DEVNULL)
    write(args.output, report(results))


def write(path, text):
    with open(path, 'w') as handle:
        handle.write(text)
    print(text)


if __name__ == '__main__':
    main()
