# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""The site playbook on the lab (tests/lab/), as a user runs it: examples/hk-fleet/site.yml with its ansible.cfg.

usage: .venv/bin/python tests/integration/lab_site.py [STEP...]   (tests/integration/lab_site.sh sets it up)

Steps, in order (each one starts from where the previous one left the lab; each step's time is printed):
  refused      one host's layout cannot fit its GPUs: the run stops in preflight naming it, and no host is changed
  quarantine   the same with gpufleet_preflight_policy=skip_failed: the others converge, that one is quarantined
  again        the whole fleet once more, the quarantined host fixed: it converges, every other host reports
               changed=0 (a second run changes nothing), every audit passes, and the summary ends with Prometheus's
               address and every target up
  reboot       hk1-a100-01 (with an MPS daemon on a MIG slot) reboots outside any run, twice: its MIG instances come
               back with new UUIDs, then with the same; each time its services and the daemon serve again on the
               devices in their slots within 60 s of the boot, the unit files are as they were, the audit of the last
               run's plan passes, the drift check finds no stage drifted, and then no alert fires for it; a third
               reboot without one of its GPUs reaches no GPU target and starts nothing, GpusMissing names the host
               and the watchdog quarantines the GPU; a fourth, with the GPU back, serves again
  rolling      a MIG change on the A100 group, one host at a time: a probe sees both hosts' services never down at once;
               the new layout then goes into the inventory (host_vars), so that later runs keep it
  lost         a host's container stops during the partition stage of a run of its data centre (its partition
               receipt removed, so that it goes through that stage): the run goes on within max_fail_percentage and
               names it; once it is back (its MIG instances gone), a run limited to it (no fact cache) finds the
               drift and converges it
  monitoring   the monitoring host's Prometheus (hk2-cpu-01) scrapes every host's exporters through the targets the
               site generated from the inventory: every target up with its labels, every alert of the pack loaded
  report       a service's binding broken by hand, then the report playbook alone: the page shows that audit failed and
               the change since make site's report, draws each host's GPUs, MIG instances and services as the host has
               them, and passes the Chromium checks (tests/integration/report_chromium.py)
  upgrade_fault
               the fleet's driver from 570.133.20 to 570.148.08, a canary host first, with a fault on the canary
               during its health gate's soak (a GPU's row remapping fails): the canary alone is drained, upgraded and
               rebooted, the run stops after its batch naming the host and the alert, and no other host is touched;
               the fault is then cleared
  upgrade      the same run again, resumed: the canary's batch changes nothing and passes its gate, then the other
               three hosts in one batch: each is drained and rebooted once into the new module, its MIG layout and
               services come back and its audit passes, a probe never sees hosts of two batches out at once; a second
               run on that version changes nothing, and the new version goes into the inventory (the downgrade path
               is molecule's nvidia_driver scenario)
  faults       faults injected on single hosts, handled by the watchdog as docs/gpu_watchdog.md's table says: one
               service over its GPU memory budget is restarted alone, until the rate limit holds it; a GPU falls off
               the bus (Xid 79): quarantined once, never in a loop, and the pack's alert fires in Prometheus, where
               the watchdog's metrics are; no other service, host or GPU is touched
  drift        an MPS daemon added on hk2-h100-01, then six drifts by hand there (a unit file edited, a package hold
               removed, daemon.json changed, a MIG instance destroyed, an MPS limit changed, a service stopped): the
               drift check names each on its stage, gpufleet_drift and GpuHostDrifted reach Prometheus, and a site
               run of that host and a converged one names each drift in its check, goes through the stages from the
               first that drifted there and through none on the other, and corrects each (docs/drift.md)

The upgrade steps come before faults: faults' Xid 79 keeps GpuFallenOffBus firing for up to 10 minutes (5 minutes of
dcgm-exporter's Xid window, then the rule's max_over_time), which a health gate would rightly count against the host.
For the same reason upgrade_fault's fault is a failed row remap, whose alert fires and resolves within seconds.
"""

from __future__ import print_function

import json
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import threading
import time
import urllib.parse
import urllib.request

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), '..', '..'))
# The checkout as ansible_collections.gpufleet.core (tests/integration/lab_site.sh links it), for its CPU-list parser,
# the stage plan's receipt-kept stages and, in step report, report_chromium's imports.
sys.path.insert(0, os.path.join(REPO, 'build', 'collections'))

from ansible_collections.gpufleet.core.plugins.module_utils._cpulist import parse_cpulist  # noqa: E402
from ansible_collections.gpufleet.core.plugins.module_utils._stage_plan import RECEIPT_STAGES  # noqa: E402

EXAMPLE = os.path.join(REPO, 'examples', 'hk-fleet')
LAB = os.path.join(REPO, 'build', 'lab')
INVENTORY = os.path.join(LAB, 'inventory')
HOSTS = ['hk1-a100-01', 'hk1-a100-02', 'hk2-h100-01', 'hk2-h200-01', 'hk2-cpu-01']
A100 = ['hk1-a100-01', 'hk1-a100-02']
BAD_HOST = 'hk1-a100-02'
# Three 3g.40gb on one A100 80GB: at most two fit, which validate knows from the class, before any host is read.
BAD_LAYOUT = {'mig_layouts': [{'gpus': [2, 3], 'layout': ['3g.40gb', '3g.40gb', '3g.40gb']}]}
# A host that differs from its class's NUMA shape (as one with Sub-NUMA Clustering on would): only preflight, which
# reads the host, can tell.
BAD_SHAPE = {'gpufleet_expected_numa': {'nodes': 4}}
# Everything in one batch, with no canary, where a step does not test the batching: the two CPUs are the limit, not
# the hosts.
ONE_BATCH = {'gpufleet_batch_by': '', 'gpufleet_serial': '100%', 'gpufleet_canary': 0}
SERVICES = ['gpufleet-svc-llm.service', 'gpufleet-svc-imagegen.service']
# The monitoring host (the first host without GPUs, as in the example fleet) and its Prometheus.
MONITORING_HOST = 'hk2-cpu-01'
PROMETHEUS = 'http://10.213.7.32:9090'
GPU_HOSTS = ['hk1-a100-01', 'hk1-a100-02', 'hk2-h100-01', 'hk2-h200-01']
PACK = os.path.join(REPO, 'roles', 'monitoring', 'templates', 'gpu_alerts.rules.yml.j2')
SIMCTL = 'python3 /opt/gpufleet-nvml-sim/simctl.py'
SIM_HOST = '/etc/gpufleet-nvml-sim/host.json'
SIM_STATE = '/var/lib/gpufleet-nvml-sim/state.json'
# Where make site writes the fleet report: beside the example fleet's ansible.cfg (lab.sh down removes it).
REPORTS = os.path.join(EXAMPLE, 'reports')
REPORT_HTML = os.path.join(REPORTS, 'fleet-report.html')
REPORT_JSON = os.path.join(REPORTS, 'fleet-report.json')
PLAN_FILE = '/etc/gpufleet/placement.json'
RECEIPTS = '/var/lib/gpufleet/receipts'


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
    return playbook('site.yml', extra=extra, limit=limit, tags=tags, env=env, watch=watch)


def playbook(name, extra=None, limit=None, tags=None, env=None, watch=None):
    """Run playbook NAME (a file in examples/hk-fleet or a collection's playbook) on the lab, as make site runs it;
    returns (rc, output, recap {host: counts}, summary lines)."""
    command = [os.path.join(REPO, '.venv', 'bin', 'ansible-playbook'), '-i', INVENTORY, name]
    if extra:
        command += ['-e', json.dumps(extra)]
    if limit:
        command += ['--limit', limit]
    if tags:
        command += ['--tags', tags]
    environment = ansible_environment(env)
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
    # Each run's whole output (with the example's per-task times), where GPUFLEET_LAB_LOGS names a directory: where a
    # step's time goes (docs/testing.md).
    if os.environ.get('GPUFLEET_LAB_LOGS'):
        os.makedirs(os.environ['GPUFLEET_LAB_LOGS'], exist_ok=True)
        name = '%03d-%s.log' % (len(os.listdir(os.environ['GPUFLEET_LAB_LOGS'])) + 1, time.strftime('%H%M%S'))
        with open(os.path.join(os.environ['GPUFLEET_LAB_LOGS'], name), 'w') as handle:
            handle.write(' '.join(command) + '\n' + output)
    for line in summary:
        print('  ' + line)
    sys.stdout.flush()
    return process.returncode, output, recap, summary


def ansible_environment(env=None):
    """The checkout as gpufleet.core, then the collections the ansible package bundles (as make site does)."""
    collections = os.pathsep.join([os.path.join(REPO, 'build', 'collections'), sysconfig.get_paths()['purelib']])
    return dict(os.environ, ANSIBLE_CONFIG=os.path.join(EXAMPLE, 'ansible.cfg'), ANSIBLE_FORCE_COLOR='0',
                ANSIBLE_NOCOLOR='1', ANSIBLE_COLLECTIONS_PATH=collections, **(env or {}))


def module(host, name, args):
    """One module run on a lab host over SSH, as ansible runs it ad hoc: its result."""
    ran = subprocess.run([os.path.join(REPO, '.venv', 'bin', 'ansible'), host, '-i', INVENTORY, '-o', '-m', name,
                          '-a', json.dumps(args)], cwd=EXAMPLE, env=ansible_environment(), stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT, universal_newlines=True, check=False)
    check(' => ' in ran.stdout, '%s on %s gave no result' % (name, host), ran.stdout)
    return json.loads(ran.stdout.split(' => ', 1)[1])


def line_of(summary, host):
    found = [line for line in summary if line.startswith(host + ': ')]
    return found[0] if found else ''


def report_line(summary):
    found = [line for line in summary if line.startswith('Fleet report: ')]
    return found[0] if found else ''


def read_report():
    with open(REPORT_JSON) as handle:
        return json.load(handle)


def prometheus(path):
    """Prometheus's HTTP API on the monitoring host, from this machine (the lab network is routed here)."""
    with urllib.request.urlopen(PROMETHEUS + path, timeout=10) as response:
        answer = json.load(response)
    check(answer.get('status') == 'success', 'Prometheus answered %s: %s' % (path, answer))
    return answer['data']


def until(what, probe, timeout=90, every=2):
    """probe() until it returns something true; fails naming `what` and the last answer after `timeout` s."""
    deadline = time.time() + timeout
    while True:
        found = probe()
        if found or time.time() > deadline:
            break
        time.sleep(every)
    check(found, 'after %d s, still not: %s (last: %r)' % (timeout, what, found))
    return found


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
    check(line_of(summary, BAD_HOST).startswith(BAD_HOST + ': FAILED validate, not changed: ')
          and '3g.40gb allows at most 2 per GPU' in line_of(summary, BAD_HOST),
          'validate did not refuse the layout, naming the host and why', output)
    check('Preflight every host' not in output, 'preflight ran after validate refused a host', output)
    host_vars(BAD_HOST, BAD_SHAPE)
    rc, output, recap, summary = site()
    check(rc != 0, 'a host that differs from its class did not fail the run', output)
    check('Preflight failed on 1 of 5 host(s), so no host was changed: %s: ' % BAD_HOST in output,
          'the refusal does not name the host', output)
    check('the class promises 4 NUMA node(s) with CPUs' in output, 'the refusal does not say why', output)
    check(line_of(summary, BAD_HOST).startswith(BAD_HOST + ': FAILED preflight, not changed: '),
          'the summary does not name the failed host', output)
    check(all('not changed (the run stopped before the rollout)' in line_of(summary, host)
              for host in HOSTS if host != BAD_HOST), 'the summary says another host changed', output)
    for host in HOSTS:
        untouched(host)


def step_quarantine():
    install_mps_control(REBOOT_HOST)
    host_vars(REBOOT_HOST, reboot_host_vars())
    rc, output, recap, summary = site(dict(ONE_BATCH, gpufleet_preflight_policy='skip_failed'))
    check(rc == 0, 'skip_failed: the run failed', output)
    check(line_of(summary, BAD_HOST).startswith(BAD_HOST + ': QUARANTINED by preflight, not changed: '),
          'the bad host is not quarantined', output)
    for host in HOSTS:
        if host != BAD_HOST:
            check(line_of(summary, host).startswith(host + ': converged; audit passed'), '%s did not converge' % host,
                  output)
    untouched(BAD_HOST)
    # The report stage ran last: the page is where make site says, with the quarantined host drawn as such.
    check(report_line(summary).startswith('Fleet report: %s (written; 5 host(s); ' % REPORT_HTML)
          and summary[-2] == report_line(summary),
          'the summary does not end with where the report is', output)
    statuses = dict((host['name'], host['status']) for host in read_report()['hosts'])
    check(statuses == dict((host, 'quarantined' if host == BAD_HOST else 'ok') for host in HOSTS),
          'the report\'s hosts: %s' % statuses)
    host_vars(BAD_HOST, None)


def step_again():
    # One run for two things (a full converge costs minutes): the fixed host's first converge, the others' second run.
    rc, output, recap, summary = site(ONE_BATCH)
    check(rc == 0 and summary[-1] == '5 host(s): 5 converged', 'the run did not converge every host', output)
    for host in HOSTS:
        check(line_of(summary, host).startswith(host + ': converged; audit passed: '), '%s: no passing audit' % host,
              output)
    changed = dict((host, counts['changed']) for host, counts in recap.items() if host in HOSTS)
    check(sorted(changed) == sorted(HOSTS) and changed[BAD_HOST] > 0,
          'the host that was quarantined was not converged: %s' % changed, output)
    check(set(count for host, count in changed.items() if host != BAD_HOST) == {0},
          'the second run changed something on a host that had converged: %s' % changed, output)
    # make site's last lines: where Prometheus is and its targets (a dcgm-exporter per GPU host, a node_exporter
    # per host, Prometheus itself), every one up.
    targets = len(GPU_HOSTS) + len(HOSTS) + 1
    expected = ('%s: Prometheus at %s/: %d of %d targets up (gpufleet_dcgm_exporter %d/%d, gpufleet_node_exporter '
                '%d/%d, prometheus 1/1)' % (MONITORING_HOST, PROMETHEUS, targets, targets, len(GPU_HOSTS),
                                            len(GPU_HOSTS), len(HOSTS), len(HOSTS)))
    check([line for line in summary if line.startswith(MONITORING_HOST + ': Prometheus at ')] == [expected],
          'the summary does not give Prometheus\'s address with every target up', output)
    # Then where the report is: every host now ok, the quarantined one's change named.
    check(re.match(r'Fleet report: %s \(written; 5 host\(s\); [1-9]\d* change\(s\) since the previous report; failed audits: '
                   r'none\)\Z' % re.escape(REPORT_HTML), report_line(summary)), 'the report line: %r' % report_line(summary),
          output)
    check(set(host['status'] for host in read_report()['hosts']) == {'ok'}, 'a host of the report is not ok')


REBOOT_HOST = 'hk1-a100-01'
DEVICE_MAP = '/etc/gpufleet/devices.json'
# The reboot host also has an MPS daemon on a MIG device, by its slot: GPU 2's second 3g.40gb, which every layout
# of the later steps keeps (step rolling changes GPU 3 only). Declared from the first converge on (step quarantine).
REBOOT_MPS_GPU = 2
REBOOT_MPS_USER = 'gpufleet-mps-lab'
# The lab's Prometheus evaluates the rules every 5 s (tests/lab/write_inventory.py).
LAB_EVALUATION_SECONDS = 5


def reboot_mps_slot():
    described = json.loads(on_host(REBOOT_HOST, 'cat %s' % SIM_HOST))
    return '%s:3g.40gb:4:0' % described['gpus'][REBOOT_MPS_GPU]['uuid']


def reboot_host_vars():
    """The reboot host's host_vars: its MPS daemon on a MIG slot."""
    return {'mps_daemons': [{'device': reboot_mps_slot(), 'user': REBOOT_MPS_USER,
                             'default_active_thread_percentage': 50}]}


def process_environment(host, unit):
    """{name: value} of the environment of UNIT's main process."""
    text = on_host(host, "tr '\\0' '\\n' < /proc/%d/environ" % main_pid(host, unit))
    return dict(line.split('=', 1) for line in text.splitlines() if '=' in line)


def slot_device(host, slot):
    """The UUID of the MIG device in SLOT (GPU-UUID:PROFILE:START:ORDINAL) now, from the simulated driver's state."""
    gpu, _profile, start, ordinal = slot.split(':')
    instances = json.loads(on_host(host, 'cat %s' % SIM_STATE))['gpus'][gpu].get('gpu_instances', [])
    found = [sorted(instance['compute_instances'], key=lambda ci: ci['id'])[int(ordinal)]['uuid']
             for instance in instances if instance['start'] == int(start)]
    return found[0] if found else None


def booted_again(host, boot):
    """Whether HOST runs again after a reboot: a new boot id, and systemd done booting."""
    ran = subprocess.run(['podman', 'exec', container(host), 'sh', '-c',
                          'cat %s; systemctl is-system-running' % BOOT_ID], stdout=subprocess.PIPE,
                         stderr=subprocess.DEVNULL, universal_newlines=True, check=False)
    lines = ran.stdout.split()
    return len(lines) == 2 and lines[0] != boot and lines[1] in ('running', 'degraded')


def on_slot_devices(host, units):
    """{unit: (its main process's CUDA_VISIBLE_DEVICES, the UUID of the MIG device in its slot now)}, for UNITS
    {unit: slot}."""
    return dict((unit, (process_environment(host, unit).get('CUDA_VISIBLE_DEVICES'), slot_device(host, slot)))
                for unit, slot in units.items())


def reboot_outside_a_run(host, units, unit_file):
    """Reboot HOST outside any run and wait until its services and MPS daemon are active again, with no Ansible run:
    (each of UNITS' ({unit: slot}) device before, after, seconds from the boot to the last unit active)."""
    before = on_slot_devices(host, units)
    check(all(found == now and now.startswith('MIG-') for found, now in before.values()),
          'a unit does not run on the device in its slot before the reboot: %s' % before)
    boot = on_host(host, 'cat %s' % BOOT_ID).strip()
    on_host(host, 'systemctl reboot', check_rc=False)
    until('%s booted again' % host, lambda: booted_again(host, boot), timeout=120, every=1)
    active = SERVICES + [unit for unit in units if unit not in SERVICES]
    until('%s active again within 60 s of the boot' % ', '.join(active), lambda: on_host(
        host, 'systemctl is-active %s' % ' '.join(active), check_rc=False).split() == ['active'] * len(active),
        timeout=60, every=1)
    # The boot's time is when the lab's boot script wrote the boot id; each unit's, when systemd made it active.
    times = on_host(host, 'stat -c %%Y %s; systemctl show -P ActiveEnterTimestamp --timestamp=unix %s'
                    % (BOOT_ID, ' '.join(active))).split()
    booted, last = int(times[0]), max(int(value.lstrip('@')) for value in times[1:])
    after = on_slot_devices(host, units)
    check(all(found == now for found, now in after.values()),
          'a unit does not run on the device in its slot after the reboot ({unit: (its device, the slot\'s)}): %s'
          % after)
    check(on_host(host, 'cat /etc/systemd/system/%s' % SERVICES[1]) == unit_file, 'the reboot changed the unit file')
    converged = dict((stage, (0, 0)) for stage in RECEIPT_STAGES)
    check(drift_metric(host) == converged, 'the drift check after the reboot: %s' % drift_metric(host))
    # The audit of the plan the last run wrote, which names the first UUID: each service holds the device in its slot.
    audit = module(host, 'gpufleet.core.numa_audit', {'plan_file': PLAN_FILE, 'sample_seconds': 0})
    check(audit.get('passed') is True, 'the audit after the reboot: %s' % json.dumps(audit.get('services'))[:3000])
    return (dict((unit, found) for unit, (found, _now) in before.items()),
            dict((unit, found) for unit, (found, _now) in after.items()), last - booted)


def step_reboot():
    # A reboot outside any run (a power event, a kernel update): the MIG instances are made again at boot. A driver
    # may give them new UUIDs or keep them; either way the services and the MPS daemon serve again on the devices in
    # their slots without a site run, the unit files untouched, no stage drifted (docs/drift.md). Two reboots show
    # both: with the simulator told to keep UUIDs (a device made where one was gets the UUID of that place), the first
    # reboot still changes the UUID the site run saw (made under the default, a new UUID each time), and the second
    # keeps it.
    unit = SERVICES[1]  # imagegen, on a 3g.40gb
    slot, = json.loads(on_host(REBOOT_HOST, 'cat %s' % DEVICE_MAP))['units'][unit]['devices']
    daemon_slot = reboot_mps_slot()
    units = {unit: slot, 'gpufleet-mps@%s.service' % daemon_slot: daemon_slot}
    unit_file = on_host(REBOOT_HOST, 'cat /etc/systemd/system/%s' % unit)
    first = process_environment(REBOOT_HOST, unit).get('CUDA_VISIBLE_DEVICES')
    check(first and first not in unit_file, 'the unit file names the MIG device by UUID:\n' + unit_file)
    on_host(REBOOT_HOST, '%s mig-uuids %s stable' % (SIMCTL, SIM_STATE))
    try:
        before, after, took = reboot_outside_a_run(REBOOT_HOST, units, unit_file)
        check(all(after[name] != before[name] for name in units),
              'a MIG device kept the UUID the site run saw: %s, now %s' % (before, after))
        moved = ', '.join('%s on %s (slot %s)' % (name, after[name], units[name]) for name in sorted(units))
        print('lab_site: reboot: new UUIDs: %s; the services and the MPS daemon active %d s after the boot; audit '
              'passed, no stage drifted' % (moved, took))
        before, after, took = reboot_outside_a_run(REBOOT_HOST, units, unit_file)
    finally:
        on_host(REBOOT_HOST, '%s mig-uuids %s new' % (SIMCTL, SIM_STATE))
    check(after == before, 'a MIG device has a new UUID though the simulator keeps them: %s, was %s' % (after, before))
    check(first in on_host(REBOOT_HOST, 'cat %s' % PLAN_FILE), 'the plan file changed without a run')
    # The soak: Prometheus has scraped the host since it booted and evaluated the pack: nothing fires for it.
    booted = float(on_host(REBOOT_HOST, 'stat -c %%Y %s' % BOOT_ID))
    until('every target of %s scraped since its boot' % REBOOT_HOST,
          lambda: scraped_since(REBOOT_HOST) > booted + 5, timeout=60, every=1)
    time.sleep(LAB_EVALUATION_SECONDS)
    check(firing(REBOOT_HOST) == [], 'alerts fire for %s after the reboots: %s' % (REBOOT_HOST, firing(REBOOT_HOST)))
    print('lab_site: reboot: kept UUIDs: %s; the services and the MPS daemon active %d s after the boot; audit passed, '
          'no stage drifted, no alert firing' % (', '.join(sorted(after.values())), took))
    reboot_without_a_gpu(list(units))


def scraped_since(host):
    """When Prometheus last scraped every target of HOST (the oldest of their last scrapes), 0 before any."""
    result = prometheus('/api/v1/query?query=' + urllib.request.quote('min(timestamp(up{host="%s"}))' % host))['result']
    return float(result[0]['value'][1]) if result else 0


def reboot_without_a_gpu(units):
    """A GPU that does not come back from a reboot (off the bus for good): the layout cannot be made again and its
    slots stay empty, so the boot units fail, gpufleet-gpu.target is not reached, no service or MPS daemon starts on
    a wrong device, and GpusMissing names the host. Then the board is replaced and a reboot brings everything back."""
    broken = json.loads(on_host(REBOOT_HOST, 'cat %s' % SIM_HOST))['gpus'][REBOOT_MPS_GPU]['uuid']
    on_host(REBOOT_HOST, '%s break-gpu %s %s %s' % (SIMCTL, SIM_HOST, SIM_STATE, broken))
    try:
        boot = on_host(REBOOT_HOST, 'cat %s' % BOOT_ID).strip()
        on_host(REBOOT_HOST, 'systemctl reboot', check_rc=False)
        until('%s booted again' % REBOOT_HOST, lambda: booted_again(REBOOT_HOST, boot), timeout=120, every=1)
        boot_units = ['gpufleet-mig.service', 'gpufleet-devices.service']
        until('%s failed' % ' and '.join(boot_units), lambda: on_host(
            REBOOT_HOST, 'systemctl is-failed %s' % ' '.join(boot_units), check_rc=False).split() == ['failed'] * 2,
            timeout=60, every=1)
        target = on_host(REBOOT_HOST, 'systemctl is-active gpufleet-gpu.target', check_rc=False).strip()
        check(target != 'active', 'gpufleet-gpu.target was reached without GPU %s' % broken)
        pids = dict((unit, main_pid(REBOOT_HOST, unit)) for unit in SERVICES + units)
        check(set(pids.values()) == {0}, 'a unit runs though its devices could not be found: %s' % pids)
        journal = on_host(REBOOT_HOST, 'journalctl -b -u gpufleet-devices.service -o cat --no-pager')
        check('fallen off the bus' in journal, 'the devices unit does not say why: ' + journal[-2000:])
        missing = until('GpusMissing for %s' % REBOOT_HOST, lambda: [
            alert for alert in prometheus('/api/v1/alerts')['alerts'] if alert['labels']['alertname'] == 'GpusMissing'
            and alert['labels'].get('host') == REBOOT_HOST], timeout=60, every=1)
        # The watchdog's check (its timer's, run now) quarantines the GPU that did not come back.
        watchdog_check(REBOOT_HOST)
        check([line for line in acted(REBOOT_HOST) if line.startswith('ACT quarantine') and broken in line],
              'the watchdog did not quarantine the GPU that did not come back: %s' % acted(REBOOT_HOST))
        print('lab_site: reboot: without GPU %s: %s failed, gpufleet-gpu.target not reached, no service or MPS daemon '
              'started; GpusMissing %s for %s; the watchdog quarantined the GPU' % (
                  broken, ' and '.join(boot_units), missing[0]['state'], REBOOT_HOST))
    finally:
        on_host(REBOOT_HOST, '%s repair-gpu %s %s' % (SIMCTL, SIM_STATE, broken))
        boot = on_host(REBOOT_HOST, 'cat %s' % BOOT_ID).strip()
        on_host(REBOOT_HOST, 'systemctl reboot', check_rc=False)
        until('%s booted again' % REBOOT_HOST, lambda: booted_again(REBOOT_HOST, boot), timeout=120, every=1)
        # The operator, the board replaced, lifts the quarantine; the next check reports it lifted.
        on_host(REBOOT_HOST, 'python3 /usr/local/lib/gpufleet/gpufleet-helpers.pyz watchdog /etc/gpufleet/watchdog.json '
                             '--clear-quarantine')
        watchdog_check(REBOOT_HOST)
    active = SERVICES + [unit for unit in units if unit not in SERVICES] + ['gpufleet-gpu.target']
    until('%s active again once the GPU is back' % ', '.join(active), lambda: on_host(
        REBOOT_HOST, 'systemctl is-active %s' % ' '.join(active), check_rc=False).split() == ['active'] * len(active),
        timeout=60, every=1)
    # The previous boot's Xid 79 is not this boot's: what fired for the lost GPU resolves (the next steps' gates).
    until('no alert firing for %s once the GPU is back' % REBOOT_HOST, lambda: firing(REBOOT_HOST) == [], timeout=60,
          every=1)


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
    # The operator commits the layout the fleet now has: the later steps' runs keep it.
    for host in A100:
        host_vars(host, dict(layout, **(reboot_host_vars() if host == REBOOT_HOST else {})))


def step_lost():
    lost = 'hk2-h100-01'
    stopped = []

    def watch(line):
        if not stopped and line.startswith('TASK [Enter the partition stage]'):
            stopped.append(subprocess.run(['podman', 'stop', '-t', '0', container(lost)], stdout=subprocess.PIPE,
                                          stderr=subprocess.STDOUT, check=False).returncode)

    # The data centre hk2 (three hosts, one batch): one lost host is 33% of it, within a limit of 34%. Its hosts are
    # converged, so their receipts would skip every stage: without its partition receipt (as after a drift there) the
    # lost host goes through the partition stage and the ones after it, and the others through none, as they would.
    on_host(lost, 'rm %s/partition.json' % RECEIPTS)
    rc, output, recap, summary = site(dict(ONE_BATCH, gpufleet_max_fail_percentage=34), limit='dc_hk2', watch=watch)
    check(stopped == [0], 'the container was not stopped during the partition stage', output)
    check(rc != 0, 'a lost host did not fail the run', output)
    check(line_of(summary, lost).startswith(lost + ': UNREACHABLE during the partition stage: '),
          'the summary does not name the lost host and its stage', output)
    for host in ('hk2-h200-01', 'hk2-cpu-01'):
        check(line_of(summary, host).startswith(host + ': converged'), '%s did not go on' % host, output)
    # Within its failure limit the run went on to the report stage: the lost host is failed there, in its stage.
    lost_model = [host for host in read_report()['hosts'] if host['name'] == lost]
    check(report_line(summary) and lost_model and lost_model[0]['status'] == 'failed'
          and 'partition stage' in lost_model[0]['failure'],
          'the report does not show the lost host as failed in the partition stage: %s' % lost_model, output)
    # Back (a reboot: its simulated GPUs lost their instances), then a run limited to it, with no fact cache.
    subprocess.run([os.path.join(REPO, 'tests', 'lab', 'lab.sh'), 'up'], check=True, stdout=subprocess.PIPE)
    rc, output, recap, summary = site(ONE_BATCH, limit=lost, env={'ANSIBLE_CACHE_PLUGIN': 'memory'})
    check(rc == 0, 'the host that came back did not converge', output)
    others = ', '.join(sorted(host for host in HOSTS if host != lost))
    check([line for line in summary if not line.startswith('Health gate after batch ')]
          == [line_of(summary, lost), report_line(summary), '1 host(s): 1 converged'],
          'the limited run touched other hosts', output)
    # The fleet's other hosts stay on the page as the last report found them.
    check(report_line(summary).startswith('Fleet report: %s (written; 5 host(s); not in this run: %s; ' % (REPORT_HTML, others)),
          'the limited run\'s report does not keep the other hosts: %r' % report_line(summary), output)
    check(recap.get(lost, {}).get('changed', 0) > 0, 'the host that came back had nothing to redo', output)


def step_monitoring():
    targets = prometheus('/api/v1/targets?state=active')['activeTargets']
    jobs = sorted(set(target['labels']['job'] for target in targets))
    check(jobs == ['gpufleet_dcgm_exporter', 'gpufleet_node_exporter', 'prometheus'], 'jobs: %s' % jobs)
    fleet = [target for target in targets if target['labels']['job'] != 'prometheus']
    found = sorted((target['labels']['job'], target['labels'].get('host')) for target in fleet)
    check(found == sorted([('gpufleet_dcgm_exporter', host) for host in GPU_HOSTS]
                          + [('gpufleet_node_exporter', host) for host in HOSTS]),
          'the targets are not one per exporter of each lab host: %s' % found)
    down = ['%s %s: %s' % (t['labels']['job'], t['scrapeUrl'], t['lastError']) for t in targets if t['health'] != 'up']
    check(not down, 'targets not up: %s' % down)
    labels = ('dc', 'rack', 'host', 'gpu_class')
    unlabelled = [t['scrapeUrl'] for t in fleet if not all(t['labels'].get(key) for key in labels)]
    check(not unlabelled, 'targets without dc, rack, host and gpu_class labels: %s' % unlabelled)
    with open(PACK) as handle:
        pack = sorted(re.findall(r'^\s*- alert: (\w+)$', handle.read(), re.M))
    loaded = sorted(rule['name'] for group in prometheus('/api/v1/rules')['groups'] for rule in group['rules']
                    if rule['type'] == 'alerting')
    check(pack and set(pack) <= set(loaded), 'of the pack\'s %d alerts, these are not loaded: %s'
          % (len(pack), sorted(set(pack) - set(loaded))))
    # The last run gave its hosts back moments ago: their drain marks went to 0, and GpuHostDrained resolves at the
    # next scrape and rule evaluation (5 s each in the lab). Anything still firing after three of each is real.
    deadline = time.time() + 30
    while True:
        firing = sorted('%s %s' % (alert['labels']['alertname'], alert['labels'].get('host', ''))
                        for alert in prometheus('/api/v1/alerts')['alerts'])
        if not firing or time.time() > deadline:
            break
        time.sleep(2)
    check(not firing, 'alerts fire on a healthy lab 30 s after the last run: %s' % firing)
    print('lab_site: monitoring: %d targets up, %d alerts of the pack loaded' % (len(targets), len(pack)))


def unit_pids(host):
    """{unit: (main PID, when it became active)} for each GPU service, MPS daemon and the exporter of a host."""
    units = on_host(host, "systemctl list-units --all --plain --no-legend 'gpufleet-svc-*' 'gpufleet-mps*' "
                          "'gpufleet-dcgm-exporter.service' | awk '{print $1}'").split()
    if not units:
        return {}
    out = on_host(host, 'systemctl show --property=Id,MainPID,ActiveEnterTimestampMonotonic ' + ' '.join(units))
    found = {}
    for block in out.strip().split('\n\n'):
        values = dict(line.split('=', 1) for line in block.splitlines() if '=' in line)
        found[values['Id']] = (values['MainPID'], values['ActiveEnterTimestampMonotonic'])
    return found


def watchdog_check(host):
    """One watchdog check now (the timer's 30 s is too slow for a test; the check is the same). systemd refuses a
    sixth start of a unit within 10 s; reset-failed clears that count (the timer never comes near it)."""
    on_host(host, 'systemctl reset-failed gpufleet-watchdog.service; systemctl start gpufleet-watchdog.service')


def acted(host):
    """What the host's watchdog did in this boot."""
    return [line for line in on_host(host, 'journalctl -b -u gpufleet-watchdog.service -o cat --no-pager').splitlines()
            if line.startswith('ACT ')]


def main_pid(host, unit):
    return int(on_host(host, 'systemctl show -P MainPID %s' % unit).strip())


def over_budget(host, unit):
    """The driver now says the unit's process uses 70000 MiB of each of its 81920 MiB GPUs: 85.4%, over 85%."""
    def registered():
        pid = main_pid(host, unit)
        state = json.loads(on_host(host, 'cat %s' % SIM_STATE))
        return pid if pid in [process['pid'] for process in state.get('processes', [])] else 0

    pid = until('the driver lists %s\'s process on its GPUs' % unit, registered, timeout=30, every=0.5)
    on_host(host, '%s set-process-memory %s %d 70000' % (SIMCTL, SIM_STATE, pid))
    return pid


def step_faults():
    busy, lost_host = 'hk1-a100-01', 'hk2-h200-01'
    llm, imagegen = SERVICES
    before = dict((host, unit_pids(host)) for host in HOSTS)
    for host in GPU_HOSTS:
        check(acted(host) == [], '%s: the watchdog acted before any fault: %s' % (host, acted(host)))
        # The timer runs at boot, and each check is the helper bundle's watchdog, once.
        shown = on_host(host, 'systemctl show --property=ActiveState,UnitFileState gpufleet-watchdog.timer; '
                              'systemctl show --property=Type,ExecStart gpufleet-watchdog.service')
        units = dict(line.split('=', 1) for line in shown.splitlines() if '=' in line)
        check((units.get('ActiveState'), units.get('UnitFileState'), units.get('Type')) == ('active', 'enabled', 'oneshot')
              and '/usr/local/lib/gpufleet/gpufleet-helpers.pyz watchdog /etc/gpufleet/watchdog.json'
              in units.get('ExecStart', ''), '%s: the watchdog\'s timer and check are not as installed: %s' % (host, shown))

    # Over budget: llm restarted, alone, each time, until the rate limit (3 in the window) holds it.
    pids = []
    for attempt in range(4):
        pids.append(over_budget(busy, llm))
        watchdog_check(busy)
        watchdog_check(busy)  # a second check right after finds nothing more to do
    restarts = [line for line in acted(busy) if line.startswith('ACT restart: restart %s: GPU memory' % llm)]
    check(len(restarts) == 3 and len(acted(busy)) == 3, '%s: not three restarts of llm: %s' % (busy, acted(busy)))
    check(len(set(pids)) == 4 and main_pid(busy, llm) == pids[-1],
          'llm was not restarted three times and then left alone: PIDs %s, now %s' % (pids, main_pid(busy, llm)))
    journal = on_host(busy, 'journalctl -u gpufleet-watchdog.service -o cat --no-pager')
    check('rate limit: 3 restarts in the last' in journal, 'the rate limit is not reported', journal)
    metrics = on_host(busy, 'cat /var/lib/prometheus/node-exporter/gpufleet_watchdog.prom')
    check('gpufleet_watchdog_actions_total{kind="restart"} 3' in metrics
          and 'gpufleet_watchdog_service_rate_limited{service="llm"} 1' in metrics, 'metrics: ' + metrics)

    # The GPU of the single-GPU host falls off the bus: Xid 79 in the kernel log, GPU_IS_LOST from NVML.
    uuid = json.loads(on_host(lost_host, 'cat %s' % SIM_HOST))['gpus'][0]['uuid']
    on_host(lost_host, '%s lose-gpu %s %s %s' % (SIMCTL, SIM_HOST, SIM_STATE, uuid))
    for _check in range(3):
        watchdog_check(lost_host)
    check([line.split(':')[0] for line in acted(lost_host)] == ['ACT quarantine'],
          '%s: not quarantined exactly once: %s' % (lost_host, acted(lost_host)))
    # Within the fleet's cap (10% of 4 GPU hosts: 1), counted by the monitoring host's Prometheus: none before it.
    check('"fleet_max_quarantined": 1' in acted(lost_host)[0] and '"fleet_quarantined": 0' in acted(lost_host)[0],
          'the quarantine was not checked against the fleet cap: %s' % acted(lost_host))

    # Prometheus sees both: the watchdog's metrics through node_exporter, the Xid through dcgm-exporter.
    def series(query):
        return prometheus('/api/v1/query?query=' + urllib.request.quote(query))['result']

    until('the watchdog\'s quarantine and restarts in Prometheus', lambda: (
        [r['metric']['host'] for r in series('gpufleet_watchdog_quarantined == 1')] == [lost_host]
        and [r['value'][1] for r in series('gpufleet_watchdog_actions_total{kind="restart",host="%s"}' % busy)]
        == ['3']))
    firing = until('GpuFallenOffBus firing for %s' % lost_host, lambda: [
        alert for alert in prometheus('/api/v1/alerts')['alerts'] if alert['state'] == 'firing'
        and alert['labels']['alertname'] == 'GpuFallenOffBus'])
    check([(a['labels']['host'], a['labels']['UUID']) for a in firing] == [(lost_host, uuid)],
          'GpuFallenOffBus fired for something else: %s' % firing)
    check('GPU %s' % uuid in firing[0]['annotations']['description'] or uuid in firing[0]['annotations']['description'],
          'the alert does not name the GPU: %s' % firing[0]['annotations'])

    # Nothing else was touched: every other unit on every host, and the other hosts' watchdogs did nothing.
    after = dict((host, unit_pids(host)) for host in HOSTS)
    for host in HOSTS:
        changed = sorted(unit for unit in set(after[host]) | set(before[host])
                         if after[host].get(unit) != before[host].get(unit))
        check(changed == ([llm] if host == busy else []), '%s: units restarted besides llm on %s: %s'
              % (host, busy, changed))
    for host in GPU_HOSTS:
        if host not in (busy, lost_host):
            check(acted(host) == [], '%s: its watchdog acted: %s' % (host, acted(host)))
    print('lab_site: faults: llm restarted 3 times then held by the rate limit; %s quarantined once; %s' % (
        lost_host, ', '.join(sorted(set(a['labels']['alertname'] for a in firing)))))


def cpus_allowed(host, pid):
    return on_host(host, "awk '/^Cpus_allowed_list/ {print $2}' /proc/%d/status" % pid).strip()


def set_affinity(host, pid, cpus):
    """Every thread of PID onto CPUS, as its own user (a lab host's root has no CAP_SYS_NICE to move another user's
    process; a process may move its own user's)."""
    on_host(host, "uid=$(awk '/^Uid:/ {print $2}' /proc/%d/status); setpriv --reuid=$uid --regid=$uid --clear-groups "
                  "taskset -a -p -c %s %d >/dev/null" % (pid, cpus, pid))


def step_report():
    """The report playbook on its own, after a service's binding was broken by hand: the page shows that audit failed,
    says what changed since make site's report, and draws every host as its facts, plan and GPUs are."""
    host, unit, service = 'hk1-a100-01', SERVICES[0], 'llm'
    pid = main_pid(host, unit)
    planned = cpus_allowed(host, pid)
    online = parse_cpulist(on_host(host, 'cat /sys/devices/system/cpu/online').strip())
    check(len(online) > 1, 'the lab has one CPU: no other CPU to move %s to' % unit)
    # Somewhere the plan does not say: the first CPU alone, or the last one if the plan is the first CPU alone.
    wrong = str(online[-1] if parse_cpulist(planned) == online[:1] else online[0])
    set_affinity(host, pid, wrong)
    try:
        rc, output = playbook('gpufleet.core.report')[:2]
    finally:
        set_affinity(host, pid, planned)
    check(rc == 0, 'the report playbook failed', output)
    check(re.search(r'Fleet report: %s \(written; 5 host\(s\); [1-9]\d* change\(s\) since the previous report; failed audits: '
                    r'%s/%s\)' % (re.escape(REPORT_HTML), host, service), output),
          'the report playbook does not say where the page is and what failed', output)
    data = read_report()
    models = dict((model['name'], model) for model in data['hosts'])
    check(sorted(models) == sorted(HOSTS), 'the report\'s hosts: %s' % sorted(models))
    failed = [item for item in models[host]['services'] if item['audit']['state'] == 'fail']
    check(models[host]['status'] == 'audit failed' and [item['name'] for item in failed] == [service]
          and any('CPUs %s allowed' % wrong in reason for reason in failed[0]['audit']['reasons']),
          '%s: the report does not show %s\'s audit failed on CPU %s: %s' % (host, service, wrong, models[host]))
    check(all(model['status'] == 'ok' for name, model in models.items() if name != host),
          'another host is not ok: %s' % dict((name, model['status']) for name, model in models.items()))
    with open(os.path.join(REPORTS, 'fleet-report.previous.json')) as handle:
        previous = json.load(handle)
    check([item['name'] for item in previous['hosts']] == sorted(HOSTS), 'the previous report was not kept')
    # Each host drawn as it is: its GPUs and MIG instances as the simulated driver has them, its services as placed.
    for name in HOSTS:
        model = models[name]
        state = json.loads(on_host(name, 'cat %s 2>/dev/null || echo {}' % SIM_STATE))
        described = json.loads(on_host(name, 'cat %s 2>/dev/null || echo {}' % SIM_HOST))
        gpus = len(described.get('gpus', []))
        instances = sum(len(gpu.get('gpu_instances') or []) for gpu in state.get('gpus', {}).values()
                        if gpu.get('mig_current'))
        plan = json.loads(on_host(name, 'cat %s 2>/dev/null || echo {}' % PLAN_FILE)).get('services', [])
        found = (len(model['topology']['gpus']) if model['topology'] else 0,
                 sum(len(gpu['instances']) for gpu in model['topology']['gpus'] if gpu['mig']) if model['topology'] else 0,
                 sorted(item['name'] for item in model['services']))
        want = (gpus, instances, sorted(item['name'] for item in plan))
        check(found == want, '%s: the report has (GPUs, MIG instances, services) %s, the host %s' % (name, found, want))
    # In a browser: one drawing per host with those numbers, the failed audit drawn as failed, nothing fetched.
    import report_chromium  # tests/integration, beside this file; it needs the collection on the path (above)
    work = tempfile.mkdtemp(prefix='lab-report-')
    try:
        root, problems = report_chromium.browse(REPORT_HTML, os.path.join(REPORTS, 'fleet-report.png'), work)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    check(not problems, 'the page in Chromium: %s' % '; '.join(problems))
    drawings = report_chromium.dom.drawings(root)
    check(sorted(drawings) == sorted(HOSTS), 'drawings: %s' % sorted(drawings))
    for name, svg in drawings.items():
        counted = report_chromium.dom.counts(svg)
        topology = models[name]['topology'] or {'gpus': [], 'nodes': []}
        want = {'gpus': len(topology['gpus']), 'services': len(models[name]['services']),
                'mig-instances': sum(len(gpu['instances']) for gpu in topology['gpus'] if gpu['mig'])}
        check(dict((key, counted[key]) for key in want) == want, '%s: drawn %s, the report %s' % (name, counted, want))
    drawn = [g.attrs.get('data-audit') for g in drawings[host].find_all('g', 'service') if g.attrs.get('data-service') == service]
    article = [a for a in root.find_all('article', 'host') if a.attrs.get('data-host') == host]
    check(drawn == ['fail'] and article[0].attrs.get('data-status') == 'audit-failed',
          '%s\'s failed audit is not drawn as failed: %s' % (service, drawn))
    changes = [section for section in root.find_all('section') if section.attrs.get('id') == 'changes'][0]
    rows = [[cell.all_text() for cell in row.children] for row in changes.find_all('tr')]
    check([row for row in rows if row[:2] == [host, service] and row[2].startswith('passed')
           and row[3].startswith('FAILED')], 'the page does not list the audit that changed: %s' % rows)
    print('lab_site: report: %s drawn in Chromium; %s/%s shown as failed' % (', '.join(sorted(drawings)), host, service))


# -- Day 2: rolling driver upgrades (issue 31) -------------------------------------------------------------------------

# The stand-in driver's two versions (tests/apt_repo/build.py); the lab converges on the first.
DRIVER_OLD, DRIVER_NEW = '570.133.20', '570.148.08'
# The driver packages NVIDIA's repository for Debian has (fabric manager and NSCQ only where there are NVSwitches).
DRIVER_PACKAGES = ['nvidia-driver', 'nvidia-kernel-open-dkms', 'nvidia-smi', 'nvidia-persistenced',
                   'nvidia-fabricmanager-570', 'libnvidia-nscq-570']
# The upgrade's rollout: a canary of one host, then the other three in one batch (step rolling shows batches of one
# host each, and the batch sizes are _fleet_rollout's, unit-tested); each batch's health gate asks Prometheus after a
# few seconds (the lab's Prometheus scrapes and evaluates every 5 s). Limited to the GPU
# hosts: the rollout's order starts with the fleet's CPU-only host, which has no driver to upgrade and would be the
# canary otherwise.
SOAK = 3
UPGRADE_ROLLOUT = {'gpufleet_serial': 3, 'gpufleet_batch_by': '', 'gpufleet_canary': 1,
                   'gpufleet_health_gate_soak': SOAK}
UPGRADE_LIMIT = 'gpu_hosts'
UPGRADE_BATCHES = [['hk1-a100-01'], ['hk1-a100-02', 'hk2-h100-01', 'hk2-h200-01']]
CANARY = UPGRADE_BATCHES[0][0]
# Long enough for a fault injected as the soak starts to be scraped (5 s) and its alert evaluated (5 s), with room.
FAULT_SOAK = 20
# Where a lab host's stand-in driver says which module version is loaded (write_inventory.py's
# nvidia_driver_loaded_version_file), and its boot id (the boot script's).
LOADED_MODULE = '/run/gpufleet-lab/nvidia-module-version'
BOOT_ID = '/run/gpufleet-lab/boot_id'
DRAIN_FILE = '/var/lib/prometheus/node-exporter/gpufleet-drain.prom'
INSTALL_TASK = 'gpufleet.core.apt_pinned : Install the exact versions'
REBOOT_TASK = 'gpufleet.core.nvidia_driver : Reboot into the new driver'


class RunWatch(object):
    """Reads a run's output as it comes: the hosts each task changed, in the order Ansible reported them."""

    def __init__(self, then=None):
        self.task = ''
        self.changed = {}
        self.then = then

    def __call__(self, line):
        if line.startswith('TASK ['):
            self.task = line[len('TASK ['):line.rfind(']')]
        found = re.match(r'changed: \[([^\]\s]+)', line)
        if found:
            self.changed.setdefault(self.task, []).append(found.group(1))
        if self.then:
            self.then(line)


def driver_state(host):
    """What a GPU host runs: its driver packages' versions, the loaded module's version (the lab's stand-in for
    /sys/module/nvidia/version), the driver version NVML reports, its boot id, MIG profiles per GPU, active units,
    and whether it is drained."""
    out = on_host(host, "dpkg-query -W -f '${db:Status-Abbrev} ${Package} ${Version}\\n' %s 2>/dev/null; echo ---; "
                        "/usr/bin/cat %s 2>/dev/null; echo ---; /usr/bin/cat %s; echo ---; "
                        "python3 -c 'import pynvml; pynvml.nvmlInit(); print(pynvml.nvmlSystemGetDriverVersion())'; "
                        "echo ---; systemctl list-units --plain --no-legend --state=active 'gpufleet-svc-*' "
                        "'gpufleet-mps*' gpufleet-dcgm-exporter.service gpufleet-watchdog.timer | awk '{print $1}'; "
                        "echo ---; grep -hs '^gpufleet_host_drained' %s; true"
                        % (' '.join(DRIVER_PACKAGES), LOADED_MODULE, BOOT_ID, DRAIN_FILE))
    packages, loaded, boot, nvml, units, drained = out.split('---\n')
    state = json.loads(on_host(host, 'cat %s' % SIM_STATE))
    return {'packages': dict(line.split()[1:3] for line in packages.splitlines()
                             if len(line.split()) == 3 and line.split()[0][1:] == 'i'),
            'loaded': loaded.strip(), 'boot': boot.strip(), 'nvml': nvml.strip(), 'units': sorted(units.split()),
            # The give-back leaves the mark at 0 (the alert reads its last sample): drained is a sample that is not 0.
            'drained': [line for line in drained.splitlines() if line.split() and line.split()[-1] != '0'],
            'mig': dict((uuid, sorted(gi['profile_id'] for gi in gpu.get('gpu_instances', []))
                         if gpu.get('mig_current') else None)
                        for uuid, gpu in state['gpus'].items())}


def on_version(state, version):
    """Why a host's driver is not all at `version` (packages, the loaded module, NVML), or ''."""
    wrong = dict((name, found) for name, found in state['packages'].items() if found != version + '-1')
    problems = []
    if not state['packages'] or wrong:
        problems.append('packages %s' % (wrong or 'none installed'))
    if state['loaded'] != version:
        problems.append('loaded module %r' % state['loaded'])
    if state['nvml'] != version:
        problems.append('NVML reports %r' % state['nvml'])
    return ', '.join(problems)


class FleetProbe(threading.Thread):
    """Every second or so, each GPU host's boot id and whether all its GPU services are active (a host that is
    rebooting answers nothing: no boot id, services down). A host is out for several seconds, and batches minutes
    apart: finer sampling would only slow the run it watches (four podman execs a sample)."""

    def __init__(self, services):
        super(FleetProbe, self).__init__()
        self.daemon = True
        self.stopping = False
        self.services = services
        self.samples = []

    def run(self):
        while not self.stopping:
            sample = {}
            for host, units in sorted(self.services.items()):
                out = on_host(host, 'echo boot=$(/usr/bin/cat %s); systemctl is-active %s'
                              % (BOOT_ID, ' '.join(units)), check_rc=False).split()
                boot = [word[len('boot='):] for word in out if word.startswith('boot=')]
                sample[host] = (boot[0] if boot else '', out[1:] == ['active'] * len(units) and bool(boot))
            self.samples.append((time.time(), sample))
            time.sleep(1)

    def stop(self):
        self.stopping = True
        self.join()


def gate_lines(output):
    """The summary's health-gate lines, one per batch gated."""
    summary = output.split('FLEET SUMMARY', 1)[-1]
    return [line.strip() for line in summary.splitlines() if line.startswith('Health gate after batch ')]


def gated_batches(gates):
    """[(the batch's hosts, 'passed', 'STOPPED' or 'not checked')] from the gate lines, in batch order."""
    found = []
    for line in gates:
        match = re.match(r'Health gate after batch \d+(?:, the canary)? \(([^)]*)\): (passed|STOPPED|not checked)', line)
        if match:
            found.append((match.group(1).split(', '), match.group(2)))
    return found


def set_row_remap_failure(host, uuid, failed):
    """The GPU runs out of spare rows (or is replaced): what dcgm-exporter reads as DCGM_FI_DEV_ROW_REMAP_FAILURE,
    which fires GpuRowRemapFailure at the next evaluation and resolves at the first one after it is cleared."""
    on_host(host, "python3 -c 'import sys; sys.path.insert(0, \"/opt/gpufleet-nvml-sim\"); import simctl; "
                  "simctl._locked_update(\"%s\", lambda state: state[\"gpus\"][\"%s\"].__setitem__(\"row_remap_failure\", %s))'"
                  % (SIM_STATE, uuid, 'True' if failed else 'False'))


def firing(host=None):
    """The alerts of the pack firing (for `host`), but the informational ones, as the health gate counts them."""
    return sorted((alert['labels'].get('host'), alert['labels']['alertname'])
                  for alert in prometheus('/api/v1/alerts')['alerts']
                  if alert['state'] == 'firing' and alert['labels'].get('pack') == 'gpufleet'
                  and alert['labels'].get('severity') != 'info' and (host is None or alert['labels'].get('host') == host))


# Where the upgrade step writes the fleet's new driver version once it is there, as an operator commits it: after the
# lab's own overrides (group_vars/all/zz-lab.yml), so that the later steps' runs keep it.
UPGRADED_VARS = os.path.join(INVENTORY, 'group_vars', 'all', 'zz-upgraded.yml')


def step_upgrade_fault():
    # The canary's batch of the upgrade, with a fault on the canary during its health gate.
    before = dict((host, driver_state(host)) for host in GPU_HOSTS)
    for host, state in before.items():
        check(not on_version(state, DRIVER_OLD), '%s is not on driver %s before the upgrade: %s'
              % (host, DRIVER_OLD, on_version(state, DRIVER_OLD)))
    check(not firing(), 'alerts of the pack fire before the upgrade: %s' % firing())
    uuid = json.loads(on_host(CANARY, 'cat %s' % SIM_HOST))['gpus'][0]['uuid']
    injected = []

    def inject(line):
        if not injected and line.startswith('TASK [') and 'health gate' in line.lower():
            set_row_remap_failure(CANARY, uuid, True)
            injected.append(line.strip())

    watch = RunWatch(inject)
    try:
        rc, output, recap, summary = site(dict(UPGRADE_ROLLOUT, gpufleet_health_gate_soak=FAULT_SOAK,
                                               nvidia_driver_version=DRIVER_NEW), limit=UPGRADE_LIMIT, watch=watch)
    finally:
        set_row_remap_failure(CANARY, uuid, False)
    check(injected, 'no health gate started: the fault was not injected', output)
    check(rc != 0, 'a fault on the canary during its health gate did not stop the run', output)
    gates = gate_lines(output)
    stopped = [line for line in summary if line.startswith('Health gate after batch 1, the canary (%s): STOPPED the '
                                                           'rollout: ' % CANARY)]
    check(stopped and 'GpuRowRemapFailure on %s' % CANARY in stopped[0],
          'the summary does not say that the canary\'s gate stopped the rollout, naming the host and the alert: %s'
          % gates, output)
    check(not [line for line in gates if 'after batch 2' in line], 'a second batch was gated: %s' % gates, output)
    installs = watch.changed.get(INSTALL_TASK, [])
    check(installs == [CANARY], 'hosts besides the canary changed their packages: %s' % installs, output)
    check(watch.changed.get(REBOOT_TASK, []) == [CANARY], 'hosts besides the canary rebooted, or it did not: %s'
          % watch.changed.get(REBOOT_TASK), output)
    after = dict((host, driver_state(host)) for host in GPU_HOSTS)
    check(not on_version(after[CANARY], DRIVER_NEW) and after[CANARY]['boot'] != before[CANARY]['boot'],
          'the canary %s was not upgraded and rebooted: %s'
          % (CANARY, on_version(after[CANARY], DRIVER_NEW) or 'the same boot id'))
    for host in GPU_HOSTS:
        if host != CANARY:
            check(not on_version(after[host], DRIVER_OLD) and after[host]['boot'] == before[host]['boot'],
                  '%s was touched although the canary failed: %s, boot id %s' % (
                      host, on_version(after[host], DRIVER_OLD) or 'on %s' % DRIVER_OLD,
                      'changed' if after[host]['boot'] != before[host]['boot'] else 'the same'))
    others = dict((host, counts['changed']) for host, counts in recap.items() if host in HOSTS and host != CANARY)
    check(set(others.values()) <= {0}, 'hosts besides the canary report changes: %s' % others, output)
    # The fault cleared: the alert resolves before the next step's gates ask.
    until('GpuRowRemapFailure on %s resolved' % CANARY, lambda: not firing(CANARY), timeout=60)
    print('lab_site: upgrade_fault: fault injected at "%s"' % injected[0])


def step_upgrade():
    # The rollout resumed after upgrade_fault's stop (or, run alone, from the start): the hosts still behind change,
    # the canary's batch first.
    before = dict((host, driver_state(host)) for host in GPU_HOSTS)
    behind = [host for host in GPU_HOSTS if on_version(before[host], DRIVER_NEW)]
    for host in behind:
        check(not on_version(before[host], DRIVER_OLD), '%s is on neither driver before the upgrade: %s'
              % (host, on_version(before[host], DRIVER_OLD)))
    check(behind, 'every GPU host is on %s already: nothing to upgrade' % DRIVER_NEW)
    check(not firing(), 'alerts of the pack fire before the upgrade: %s' % firing())
    services = dict((host, [unit for unit in before[host]['units'] if unit.startswith('gpufleet-svc-')])
                    for host in GPU_HOSTS)
    check(all(services.values()), 'a GPU host runs no service to watch: %s' % services)
    probe = FleetProbe(services)
    probe.start()
    watch = RunWatch()
    try:
        rc, output, recap, summary = site(dict(UPGRADE_ROLLOUT, nvidia_driver_version=DRIVER_NEW), limit=UPGRADE_LIMIT,
                                          watch=watch)
    finally:
        probe.stop()
    check(rc == 0, 'the upgrade failed', output)
    for host in GPU_HOSTS:
        check(line_of(summary, host).startswith(host + ': converged; audit passed'),
              '%s did not converge with its audit passing after the upgrade' % host, output)
    # The canary first where it is behind; each host behind changes its packages once and reboots once, no other.
    installs = watch.changed.get(INSTALL_TASK, [])
    check(sorted(installs) == sorted(behind) and (CANARY not in behind or installs[:1] == [CANARY]),
          'the driver packages did not change once on each host behind (%s), the canary %s first: %s'
          % (behind, CANARY, installs), output)
    reboots = watch.changed.get(REBOOT_TASK, [])
    check(sorted(reboots) == sorted(behind), 'each host behind must reboot once into the new driver, no other: %s'
          % reboots, output)
    after = dict((host, driver_state(host)) for host in GPU_HOSTS)
    for host in GPU_HOSTS:
        check(not on_version(after[host], DRIVER_NEW),
              '%s after the upgrade: %s' % (host, on_version(after[host], DRIVER_NEW)))
        seen = [sample[host][0] for _stamp, sample in probe.samples if sample[host][0]]
        boots = [boot for index, boot in enumerate(seen) if index == 0 or boot != seen[index - 1]]
        if host in behind:
            check(after[host]['boot'] != before[host]['boot']
                  and boots in ([before[host]['boot'], after[host]['boot']], [after[host]['boot']]),
                  '%s was not rebooted exactly once: boot ids %s, seen by the probe in turn %s'
                  % (host, (before[host]['boot'], after[host]['boot']), boots))
        else:
            check(after[host]['boot'] == before[host]['boot'], '%s was on %s already and rebooted' % (host, DRIVER_NEW))
        check(after[host]['mig'] == before[host]['mig'], '%s: its MIG layout did not come back: %s, before %s'
              % (host, after[host]['mig'], before[host]['mig']))
        check(after[host]['units'] == before[host]['units'], '%s: its units did not all come back: %s, before %s'
              % (host, after[host]['units'], before[host]['units']))
        check(not after[host]['drained'], '%s is still drained: %s has %s' % (host, DRAIN_FILE, after[host]['drained']))
    gates = gate_lines(output)
    check(gated_batches(gates) == [(batch, 'passed') for batch in UPGRADE_BATCHES],
          'the batches were not the canary, then the other three, each through a passed health gate: %s' % gates,
          output)
    # At most one batch's hosts out at any time, and each host behind out at some time (the probe saw the drain).
    batches = [set(batch) for batch in UPGRADE_BATCHES]
    outs = [(stamp, sorted(host for host, (_boot, up) in sample.items() if not up)) for stamp, sample in probe.samples]
    mixed = [(round(stamp - probe.samples[0][0], 1), down) for stamp, down in outs
             if down and not any(set(down) <= batch for batch in batches)]
    never = sorted(set(behind) - set(host for _stamp, down in outs for host in down))
    seen_out = dict((host, [stamp for stamp, down in outs if host in down]) for host in GPU_HOSTS)
    print('lab_site: upgrade: %d probes, %d with a host out, %d with hosts of two batches out; packages changed in '
          'the order %s; out of service (first to last probe that saw it out): %s'
          % (len(outs), len([1 for _s, down in outs if down]), len(mixed), ', '.join(installs),
             ', '.join('%s %.0f s' % (host, max(stamps) - min(stamps)) for host, stamps in seen_out.items() if stamps)))
    check(len(outs) > 20, 'the probe ran too few times to tell')
    check(not never, 'the probe never saw %s out: its services were not stopped' % never)
    check(not mixed, 'hosts of more than one batch were out at once (seconds into the run, hosts out): %s' % mixed[:5])
    # Once there, the same version again changes nothing.
    rc, output, recap, summary = site(dict(ONE_BATCH, gpufleet_health_gate_soak=SOAK, nvidia_driver_version=DRIVER_NEW))
    changed = dict((host, counts['changed']) for host, counts in recap.items() if host in HOSTS)
    check(rc == 0 and sorted(changed) == sorted(HOSTS) and set(changed.values()) == {0},
          'a second run on %s changed something: %s' % (DRIVER_NEW, changed), output)
    check(all(driver_state(host)['boot'] == after[host]['boot'] for host in GPU_HOSTS),
          'a second run on %s rebooted a host' % DRIVER_NEW)
    # The operator commits the version the fleet now runs: the later steps' runs keep it.
    with open(UPGRADED_VARS, 'w') as handle:
        json.dump({'nvidia_driver_version': DRIVER_NEW}, handle)  # JSON is YAML


DRIFT_HOST = 'hk2-h100-01'
# The hosts of step drift's run: the drifted host and one that is converged. Not hk1-a100-01, whose llm step faults
# left over its memory budget (its alert would fail the health gate), nor hk2-h200-01, whose GPU it took off the bus.
DRIFT_RUN = 'hk1-a100-02,' + DRIFT_HOST
DRIFT_METRICS = '/var/lib/prometheus/node-exporter/gpufleet-drift.prom'
DRIFT_MPS_GPU = 3  # a GPU of hk2-h100-01 no service uses
DRIFT_MPS_USER = 'gpufleet-mps-lab'
CHECK_TASK = 'Which stages are converged on this host (state receipts)'


def drift_metric(host):
    """The drift check on HOST, as its timer runs it: {stage: (drifted, items)} from the metric file it writes."""
    on_host(host, 'systemctl start gpufleet-drift.service')
    return written_drift_metric(host)


def written_drift_metric(host):
    text = on_host(host, 'cat %s' % DRIFT_METRICS)
    values = {}
    for name, stage, value in re.findall(r'^(gpufleet_drift(?:_items)?)\{stage="(\w+)"\} (\d+)$', text, re.M):
        values.setdefault(stage, [0, 0])[name == 'gpufleet_drift_items'] = int(value)
    return dict((stage, tuple(value)) for stage, value in values.items())


def task_results(output, task):
    """{host: result} of TASK in a -v run's output."""
    section = output.split('TASK [%s]' % task, 1)[1].split('\nTASK [', 1)[0]
    results = {}
    for match in re.finditer(r'^(?:ok|changed): \[([^\]]+)\] => ', section, re.M):
        results[match.group(1)] = json.JSONDecoder().raw_decode(section[match.end():])[0]
    return results


def included_stages(output):
    """{host: [stage]}: the stages each host went through (their task files included), in order."""
    found = {}
    for stage, hosts in re.findall(r'^included: \S+/playbooks/fleet/tasks/(\w+)\.yml for (.+)$', output, re.M):
        for host in hosts.split(', '):
            found.setdefault(host.strip(), []).append(stage)
    return found


def mps_threads(host, pipe):
    answer = on_host(host, 'echo get_default_active_thread_percentage | CUDA_MPS_PIPE_DIRECTORY=%s '
                           'nvidia-cuda-mps-control' % pipe)
    return answer.strip()


def mig_instances(host, uuid):
    """The ids of the GPU instances on GPU UUID of HOST (the simulator's state)."""
    return sorted(gi['id'] for gi in json.loads(on_host(host, 'cat %s' % SIM_STATE))['gpus'][uuid]['gpu_instances'])


# Destroys a GPU instance and its compute instances through NVML, as nvidia-smi mig -dci and -dgi do:
# % (GPU UUID, GPU instance id, [compute instance ids]).
DESTROY_GPU_INSTANCE = (
    "python3 -c 'import pynvml; pynvml.nvmlInit(); "
    "gpu = [pynvml.nvmlDeviceGetHandleByIndex(i) for i in range(pynvml.nvmlDeviceGetCount()) "
    "if pynvml.nvmlDeviceGetUUID(pynvml.nvmlDeviceGetHandleByIndex(i)) in (\"%s\", b\"%s\")][0]; "
    "gi = pynvml.nvmlDeviceGetGpuInstanceById(gpu, %d); "
    "[pynvml.nvmlComputeInstanceDestroy(pynvml.nvmlGpuInstanceGetComputeInstanceById(gi, ci)) for ci in %r]; "
    "pynvml.nvmlGpuInstanceDestroy(gi)'")


def install_mps_control(host):
    """tests/mps_sim's double of nvidia-cuda-mps-control where the real one lives (a lab host has none)."""
    subprocess.check_call(['podman', 'cp', os.path.join(REPO, 'tests', 'mps_sim', 'nvidia-cuda-mps-control'),
                           '%s:/usr/bin/nvidia-cuda-mps-control' % container(host)])
    on_host(host, "sed -i '1s,.*,#!/usr/bin/python3,' /usr/bin/nvidia-cuda-mps-control && "
                  "chmod 0755 /usr/bin/nvidia-cuda-mps-control")


def step_drift():
    # An MPS daemon on DRIFT_HOST: one daemon on a free GPU.
    install_mps_control(DRIFT_HOST)
    described = json.loads(on_host(DRIFT_HOST, 'cat %s' % SIM_HOST))
    gpu_uuid = described['gpus'][DRIFT_MPS_GPU]['uuid']
    pipe = '/run/gpufleet-mps/%s' % gpu_uuid
    host_vars(DRIFT_HOST, {'mps_daemons': [{'device': gpu_uuid, 'user': DRIFT_MPS_USER,
                                            'default_active_thread_percentage': 50}]})
    rc, output, _recap, _summary = site(limit=DRIFT_HOST)
    check(rc == 0, 'the run that added an MPS daemon failed', output)
    threads = mps_threads(DRIFT_HOST, pipe)
    check(threads in ('50', '50.0'), 'the MPS daemon does not serve 50%% of the SMs: %s' % threads)
    converged = dict((stage, (0, 0)) for stage in RECEIPT_STAGES)
    check(drift_metric(DRIFT_HOST) == converged, 'the drift check finds drift on a converged host: %s'
          % drift_metric(DRIFT_HOST))

    # The six kinds of drift, by hand: two in the drivers stage, two in partition, two in services.
    plan = on_host(DRIFT_HOST, 'cat %s' % PLAN_FILE)
    state = json.loads(on_host(DRIFT_HOST, 'cat %s' % SIM_STATE))
    mig_uuid, mig_state = [(uuid, gpu) for uuid, gpu in sorted(state['gpus'].items()) if gpu.get('gpu_instances')][0]
    spare = [gi['id'] for gi in mig_state['gpu_instances']
             if not any(ci.get('uuid') and ci['uuid'] in plan for ci in gi.get('compute_instances', []))]
    check(spare, 'no MIG instance of %s is free to destroy: %s' % (DRIFT_HOST, mig_state['gpu_instances']))
    before_mig = mig_instances(DRIFT_HOST, mig_uuid)
    for command in [
        'echo "# edited by hand" >> /etc/systemd/system/%s' % SERVICES[0],
        'apt-mark unhold nvidia-container-toolkit',
        'echo "{}" > /etc/docker/daemon.json',
        DESTROY_GPU_INSTANCE % (mig_uuid, mig_uuid, spare[0], [ci['id'] for gi in mig_state['gpu_instances']
                                                               if gi['id'] == spare[0]
                                                               for ci in gi.get('compute_instances', [])]),
        'echo set_default_active_thread_percentage 100 | CUDA_MPS_PIPE_DIRECTORY=%s nvidia-cuda-mps-control' % pipe,
        'systemctl stop %s' % SERVICES[1],
    ]:
        on_host(DRIFT_HOST, command)
    check(len(mig_instances(DRIFT_HOST, mig_uuid)) == len(before_mig) - 1, 'the MIG instance was not destroyed')
    drifted = dict(converged, drivers=(1, 2), partition=(1, 2), services=(1, 2))
    check(drift_metric(DRIFT_HOST) == drifted, 'the drift check did not see each drift on its stage: %s'
          % drift_metric(DRIFT_HOST))

    # The timer's metric in the lab's Prometheus, and the pack's alert for each drifted stage.
    query = urllib.parse.quote('gpufleet_drift{host="%s"} == 1' % DRIFT_HOST)
    until('gpufleet_drift is 1 in Prometheus for drivers, partition and services on %s' % DRIFT_HOST,
          lambda: sorted(r['metric']['stage'] for r in prometheus('/api/v1/query?query=' + query)['result'])
          == ['drivers', 'partition', 'services'], timeout=60)
    until('GpuHostDrifted firing for %s\'s three drifted stages' % DRIFT_HOST, lambda: sorted(
        alert['labels']['stage'] for alert in prometheus('/api/v1/alerts')['alerts']
        if alert['labels']['alertname'] == 'GpuHostDrifted' and alert['state'] == 'firing'
        and alert['labels'].get('host') == DRIFT_HOST) == ['drivers', 'partition', 'services'], timeout=60)

    # The fast check: one site run on the drifted host and a converged one. The drifted host goes through every stage
    # from the first that drifted; the converged one through none (the audit runs everywhere).
    rc, output, recap, _summary = site(dict(ONE_BATCH, gpufleet_health_gate_soak=15), limit=DRIFT_RUN,
                                       env={'ANSIBLE_VERBOSITY': '1'})
    check(rc == 0, 'the run that corrects the drift failed', output)
    checks = task_results(output, CHECK_TASK)
    found = checks[DRIFT_HOST]['stages']
    expected = {'drivers': ['hold nvidia-container-toolkit: held -> not held', 'file /etc/docker/daemon.json: '],
                'partition': ['mig %s: ' % mig_uuid, 'mps %s: ' % pipe],
                'services': ['file /etc/systemd/system/%s: ' % SERVICES[0], 'unit %s: ' % SERVICES[1]]}
    for stage, items in expected.items():
        check(len(found[stage]['drift']) == len(items) and all(
            any(line.startswith(item) for line in found[stage]['drift']) for item in items),
            'the run\'s check did not name each drift of the %s stage: %s' % (stage, found[stage]['drift']))
    check([stage for stage in RECEIPT_STAGES if found[stage]['current']] == ['exporter', 'watchdog']
          and checks[DRIFT_HOST]['skippable'] == [], 'the drifted host\'s check: %s' % checks[DRIFT_HOST], output)
    check(checks['hk1-a100-02']['skippable'] == list(RECEIPT_STAGES), 'the converged host\'s check: %s' % checks['hk1-a100-02'])
    stages = included_stages(output)
    check(stages.get(DRIFT_HOST) == list(RECEIPT_STAGES[:4]) + ['verify', 'watchdog'] and stages.get('hk1-a100-02') == ['verify'],
          'the stages each host went through: %s' % stages, output)
    check(recap['hk1-a100-02']['changed'] == 0 and recap[DRIFT_HOST]['changed'] > 0, 'changed: %s' % recap, output)

    # Each drift corrected, and the metric cleared by the run itself.
    check(written_drift_metric(DRIFT_HOST) == converged, 'the run did not clear the drift metric: %s'
          % written_drift_metric(DRIFT_HOST))
    check('# edited by hand' not in on_host(DRIFT_HOST, 'cat /etc/systemd/system/%s' % SERVICES[0]),
          'the unit file keeps the edit')
    check('nvidia-container-toolkit' in on_host(DRIFT_HOST, 'apt-mark showhold').split(), 'the hold is not back')
    check('nvidia' in json.loads(on_host(DRIFT_HOST, 'cat /etc/docker/daemon.json')).get('runtimes', {}),
          'daemon.json has no nvidia runtime again')
    check(len(mig_instances(DRIFT_HOST, mig_uuid)) == len(before_mig), 'the MIG layout is not back')
    threads = mps_threads(DRIFT_HOST, pipe)
    check(threads in ('50', '50.0'), 'the MPS limit is not back: %s' % threads)
    check(on_host(DRIFT_HOST, 'systemctl is-active %s' % SERVICES[1], check_rc=False).strip() == 'active',
          '%s is not running again' % SERVICES[1])
    check(drift_metric(DRIFT_HOST) == converged, 'the drift check after the run: %s' % drift_metric(DRIFT_HOST))
    until('GpuHostDrifted resolved for %s' % DRIFT_HOST, lambda: not [
        alert for alert in prometheus('/api/v1/alerts')['alerts']
        if alert['labels']['alertname'] == 'GpuHostDrifted' and alert['labels'].get('host') == DRIFT_HOST], timeout=60)
    print('lab_site: drift: 6 drifts on %s in 3 stages (%s), each named by the drift check, the alert and the run\'s '
          'check; the run went through %s there and through none of them on hk1-a100-02' % (
              DRIFT_HOST, ', '.join(sorted(expected)), ', '.join(stages[DRIFT_HOST])))


def machine_busy():
    """Busy CPU-seconds of the whole machine so far (/proc/stat: every state but idle and iowait)."""
    with open('/proc/stat') as handle:
        ticks = [int(value) for value in handle.readline().split()[1:9]]
    return float(sum(ticks) - ticks[3] - ticks[4]) / os.sysconf('SC_CLK_TCK')


STEPS = ['refused', 'quarantine', 'again', 'reboot', 'rolling', 'lost', 'monitoring', 'report', 'upgrade_fault',
         'upgrade', 'faults', 'drift']


def main(argv):
    steps = argv[1:] or STEPS
    unknown = [step for step in steps if step not in STEPS]
    if unknown:
        sys.exit('lab_site: unknown step %s (steps: %s)' % (', '.join(unknown), ', '.join(STEPS)))
    timings = []
    for step in steps:
        started, busy = time.time(), machine_busy()
        try:
            globals()['step_' + step]()
        except Failed as failure:
            print('lab_site: %s FAILED: %s' % (step, failure))
            return 1
        finally:
            took = time.time() - started
            # The lab runs alone (tests/run.sh), so the machine's busy CPU is the step's: Ansible's, the containers'.
            timings.append('%s %.0fs (CPU %.0f%%)' % (step, took, 100.0 * (machine_busy() - busy)
                                                      / max(took * os.cpu_count(), 1)))
            print('lab_site: ' + ', '.join(timings))
    print('lab_site: every step passed')
    return 0


if __name__ == '__main__':
    sys.exit(main(sys.argv))
