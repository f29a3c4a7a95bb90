# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""The site playbook on the lab (tests/lab/), as a user runs it: examples/hk-fleet/site.yml with its ansible.cfg.

usage: .venv/bin/python tests/integration/lab_site.py [STEP...]   (tests/integration/lab_site.sh sets it up)

Steps, in order (each one starts from where the previous one left the lab):
  refused      one host's layout cannot fit its GPUs: the run stops in preflight naming it, and no host is changed
  quarantine   the same with gpufleet_preflight_policy=skip_failed: the others converge, that one is quarantined
  converge     the host that was quarantined, fixed, converges (the others did in the previous step)
  again        a second run of the whole fleet: changed=0 on every host, every audit passes
  rolling      a MIG change on the A100 group, one host at a time: a probe sees both hosts' services never down at once
  lost         a host's container stops during the partition stage of a run of its data centre: the run goes on
               within max_fail_percentage and names it; once it is back, a run limited to it (no fact cache)
               converges it
"""

from __future__ import print_function

import json
import os
import re
import subprocess
import sys
import sysconfig
import threading
import time

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), '..', '..'))
EXAMPLE = os.path.join(REPO, 'examples', 'hk-fleet')
LAB = os.path.join(REPO, 'build', 'lab')
INVENTORY = os.path.join(LAB, 'inventory')
HOSTS = ['hk1-a100-01', 'hk1-a100-02', 'hk2-h100-01', 'hk2-h200-01', 'hk2-cpu-01']
A100 = ['hk1-a100-01', 'hk1-a100-02']
BAD_HOST = 'hk1-a100-02'
# Three 3g.40gb on one A100 80GB: at most two fit.
BAD_LAYOUT = {'mig_layouts': [{'gpus': [2, 3], 'layout': ['3g.40gb', '3g.40gb', '3g.40gb']}]}
# Everything in one batch where a step does not test the batching: the two CPUs are the limit, not the hosts.
ONE_BATCH = {'gpufleet_batch_by': '', 'gpufleet_serial': '100%'}
SERVICES = ['gpufleet-svc-llm.service', 'gpufleet-svc-imagegen.service']


class Failed(Exception):
    pass


def check(condition, message, output=''):
    if not condition:
        raise Failed(message + ('\n--- output (last 6000 characters) ---\n' + output[-6000:] if output else ''))


def container(host):
    return 'gpufleet-lab-' + host


def on_host(host, command, check_rc=True):
    """Run a shell command on a lab host (through podman, not the SSH the tests are about)."""
    ran = subprocess.run(['podman', 'exec', container(host), 'sh', '-c', command], stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT, universal_newlines=True, check=False)
    if check_rc:
        check(ran.returncode == 0, '%s: %s failed: %s' % (host, command, ran.stdout))
    return ran.stdout


def site(extra=None, limit=None, tags=None, env=None, watch=None):
    """Run examples/hk-fleet/site.yml on the lab; returns (rc, output, recap {host: counts}, summary lines)."""
    command = [os.path.join(REPO, '.venv', 'bin', 'ansible-playbook'), '-i', INVENTORY, 'site.yml']
    if extra:
        command += ['-e', json.dumps(extra)]
    if limit:
        command += ['--limit', limit]
    if tags:
        command += ['--tags', tags]
    # The checkout as gpufleet.core, then the collections the ansible package bundles (as make site does).
    collections = os.pathsep.join([os.path.join(REPO, 'build', 'collections'), sysconfig.get_paths()['purelib']])
    environment = dict(os.environ, ANSIBLE_CONFIG=os.path.join(EXAMPLE, 'ansible.cfg'), ANSIBLE_FORCE_COLOR='0',
                       ANSIBLE_NOCOLOR='1', ANSIBLE_COLLECTIONS_PATH=collections, **(env or {}))
    started = time.time()
    process = subprocess.Popen(command, cwd=EXAMPLE, env=environment, stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, universal_newlines=True)
    lines = []
    for line in process.stdout:
        lines.append(line)
        if watch:
            watch(line)
    process.wait()
    output = ''.join(lines)
    recap = {}
    for match in re.finditer(r'^(\S+)\s+: ok=(\d+)\s+changed=(\d+)\s+unreachable=(\d+)\s+failed=(\d+)', output, re.M):
        recap[match.group(1)] = {'ok': int(match.group(2)), 'changed': int(match.group(3)),
                                 'unreachable': int(match.group(4)), 'failed': int(match.group(5))}
    summary = []
    if 'FLEET SUMMARY' in output:
        for line in output.split('FLEET SUMMARY', 1)[1].splitlines()[1:]:
            if not line.strip():
                break
            summary.append(line)
    print('lab_site: ansible-playbook %s: rc %d in %.0f s' % (' '.join(command[3:]), process.returncode,
                                                              time.time() - started))
    for line in summary:
        print('  ' + line)
    sys.stdout.flush()
    return process.returncode, output, recap, summary


def line_of(summary, host):
    found = [line for line in summary if line.startswith(host + ': ')]
    return found[0] if found else ''


def host_vars(host, values):
    directory = os.path.join(INVENTORY, 'host_vars')
    path = os.path.join(directory, host + '.yml')
    if values is None:
        if os.path.exists(path):
            os.remove(path)
        return
    if not os.path.isdir(directory):
        os.makedirs(directory)
    with open(path, 'w') as handle:
        json.dump(values, handle)  # JSON is YAML


def untouched(host):
    """Nothing the site playbook's changing stages write is on the host, and its GPUs are as they booted."""
    found = on_host(host, 'ls -d /etc/gpufleet /etc/apt/sources.list.d/nvidia-cuda.sources /etc/systemd/system/'
                          'gpufleet-svc-*.service 2>/dev/null; true')
    check(found.strip() == '', '%s was changed although preflight failed: %s' % (host, found))
    state = on_host(host, 'cat /var/lib/gpufleet-nvml-sim/state.json 2>/dev/null || echo {}')
    gpus = json.loads(state).get('gpus', {})
    check(all(gpu['mig_current'] == 0 and not gpu['gpu_instances'] for gpu in gpus.values()),
          '%s: its MIG state changed although preflight failed: %s' % (host, state))


def step_refused():
    host_vars(BAD_HOST, BAD_LAYOUT)
    rc, output, recap, summary = site()
    check(rc != 0, 'a layout that cannot fit did not fail the run', output)
    check('Preflight failed on 1 of 5 host(s), so no host was changed: %s: ' % BAD_HOST in output,
          'the refusal does not name the host', output)
    check('3g.40gb allows at most 2 per GPU' in output, 'the refusal does not say why', output)
    check(line_of(summary, BAD_HOST).startswith(BAD_HOST + ': FAILED preflight, not changed: '),
          'the summary does not name the failed host', output)
    check(all('not changed (the run stopped before the rollout)' in line_of(summary, host)
              for host in HOSTS if host != BAD_HOST), 'the summary says another host changed', output)
    for host in HOSTS:
        untouched(host)


def step_quarantine():
    rc, output, recap, summary = site(dict(ONE_BATCH, gpufleet_preflight_policy='skip_failed'))
    check(rc == 0, 'skip_failed: the run failed', output)
    check(line_of(summary, BAD_HOST).startswith(BAD_HOST + ': QUARANTINED by preflight, not changed: '),
          'the bad host is not quarantined', output)
    for host in HOSTS:
        if host != BAD_HOST:
            check(line_of(summary, host).startswith(host + ': converged; audit passed'), '%s did not converge' % host,
                  output)
    untouched(BAD_HOST)
    host_vars(BAD_HOST, None)


def step_converge():
    # The quarantine step converged the others; the next step checks all five again.
    rc, output, recap, summary = site(ONE_BATCH, limit=BAD_HOST)
    check(rc == 0, 'the run of the host that was quarantined failed', output)
    check(summary == [line_of(summary, BAD_HOST), '1 host(s): 1 converged'], 'the host did not converge', output)
    check(line_of(summary, BAD_HOST).startswith(BAD_HOST + ': converged; audit passed: '), 'no passing audit', output)


def step_again():
    rc, output, recap, summary = site(ONE_BATCH)
    check(rc == 0 and summary[-1] == '5 host(s): 5 converged', 'the second run did not converge', output)
    for host in HOSTS:
        check(line_of(summary, host).startswith(host + ': converged; audit passed: '), '%s: no passing audit' % host,
              output)
    changed = dict((host, counts['changed']) for host, counts in recap.items() if host in HOSTS)
    check(sorted(changed) == sorted(HOSTS) and set(changed.values()) == {0},
          'the second run changed something: %s' % changed, output)


class Probe(threading.Thread):
    """Every 0.3 s: which A100 hosts have all their GPU services active."""

    def __init__(self):
        super(Probe, self).__init__()
        self.daemon = True
        self.stopping = False
        self.samples = []

    def run(self):
        while not self.stopping:
            down = [host for host in A100
                    if on_host(host, 'systemctl is-active %s' % ' '.join(SERVICES), check_rc=False).split()
                    != ['active'] * len(SERVICES)]
            self.samples.append((time.time(), down))
            time.sleep(0.3)


def step_rolling():
    # From two 3g.40gb on GPU 2 and 3 to a 3g.40gb and three 1g.10gb on GPU 3 only: each host's imagegen moves.
    layout = {'mig_layouts': [{'gpus': [2], 'layout': ['3g.40gb', '3g.40gb']},
                              {'gpus': [3], 'layout': ['3g.40gb', '1g.10gb', '1g.10gb', '1g.10gb']}]}
    probe = Probe()
    probe.start()
    try:
        rc, output, recap, summary = site(dict(layout, gpufleet_serial=1, gpufleet_batch_by=''),
                                          limit='a100_pcie_4x', tags='partition,services,verify')
    finally:
        probe.stopping = True
        probe.join()
    check(rc == 0, 'the rolling MIG change failed', output)
    check(all(line_of(summary, host).startswith(host + ': converged; audit passed') for host in A100),
          'an A100 host did not converge after the change', output)
    both = [stamp for stamp, down in probe.samples if len(down) == len(A100)]
    some = [stamp for stamp, down in probe.samples if down]
    print('lab_site: rolling: %d probes, %d with a host down, %d with both down'
          % (len(probe.samples), len(some), len(both)))
    check(len(probe.samples) > 20, 'the probe ran too few times to tell')
    check(some, 'the probe never saw a host down: the layout change did not stop the services')
    check(not both, 'both A100 hosts had their services down at once (%d probes)' % len(both))
    for host in A100:
        state = json.loads(on_host(host, 'cat /var/lib/gpufleet-nvml-sim/state.json'))
        profiles = sorted(sorted(gi['profile_id'] for gi in gpu['gpu_instances']) for gpu in state['gpus'].values())
        # Profile ids on an A100 80GB: 9 is 3g.40gb, 19 is 1g.10gb.
        check(profiles == [[], [], [9, 9], [9, 19, 19, 19]], '%s: the new layout is not in place: %s' % (host, profiles))
    # The next step's full run puts the example's layout back.


def step_lost():
    lost = 'hk2-h100-01'
    stopped = []

    def watch(line):
        if not stopped and line.startswith('TASK [Enter the partition stage]'):
            stopped.append(subprocess.run(['podman', 'stop', '-t', '0', container(lost)], stdout=subprocess.PIPE,
                                          stderr=subprocess.STDOUT, check=False).returncode)

    # The data centre hk2 (three hosts, one batch): one lost host is 33% of it, within a limit of 34%.
    rc, output, recap, summary = site(dict(ONE_BATCH, gpufleet_max_fail_percentage=34), limit='dc_hk2', watch=watch)
    check(stopped == [0], 'the container was not stopped during the partition stage', output)
    check(rc != 0, 'a lost host did not fail the run', output)
    check(line_of(summary, lost).startswith(lost + ': UNREACHABLE during the partition stage: '),
          'the summary does not name the lost host and its stage', output)
    for host in ('hk2-h200-01', 'hk2-cpu-01'):
        check(line_of(summary, host).startswith(host + ': converged'), '%s did not go on' % host, output)
    # Back (a reboot: its simulated GPUs lost their instances), then a run limited to it, with no fact cache.
    subprocess.run([os.path.join(REPO, 'tests', 'lab', 'lab.sh'), 'up'], check=True, stdout=subprocess.PIPE)
    rc, output, recap, summary = site(ONE_BATCH, limit=lost, env={'ANSIBLE_CACHE_PLUGIN': 'memory'})
    check(rc == 0, 'the host that came back did not converge', output)
    check(summary == [line_of(summary, lost), '1 host(s): 1 converged'], 'the limited run touched other hosts', output)
    check(recap.get(lost, {}).get('changed', 0) > 0, 'the host that came back had nothing to redo', output)


STEPS = ['refused', 'quarantine', 'converge', 'again', 'rolling', 'lost']


def main(argv):
    steps = argv[1:] or STEPS
    unknown = [step for step in steps if step not in STEPS]
    if unknown:
        sys.exit('lab_site: unknown step %s (steps: %s)' % (', '.join(unknown), ', '.join(STEPS)))
    timings = []
    for step in steps:
        started = time.time()
        try:
            globals()['step_' + step]()
        except Failed as failure:
            print('lab_site: %s FAILED: %s' % (step, failure))
            return 1
        finally:
            timings.append('%s %.0fs' % (step, time.time() - started))
            print('lab_site: ' + ', '.join(timings))
    print('lab_site: every step passed')
    return 0


if __name__ == '__main__':
    sys.exit(main(sys.argv))
