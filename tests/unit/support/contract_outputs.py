# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""The outputs the report, the binding audit and the watchdog give on the simulator fleet, for issue 30's contract:
a refactor of them changes no byte of what they write (tests/unit/test_contract_outputs.py compares).

``collect()`` returns {entry name: output text}, made deterministically (fixed clocks, fixed generated_at, JSON with
sorted keys, the scratch directory written as <workdir>):

    report/...          fleet_report's plan_report on tests/unit/report/fleet.py's lab fleet: the page, the JSON,
                        the previous report kept, and what it plans (files written, changes), over the scenarios of
                        tests/unit/plugins/plugin_utils/test_fleet_report.py (failing audit, missing plan, --limit,
                        corrupt or damaged previous report, bad input, escaping, refused input)
    audit/...           the numa_audit module's result (exit_json's or fail_json's dict) and the commands it ran, over
                        the scenarios of tests/unit/plugins/modules/test_numa_audit.py
    watchdog/helper/... each check of _helper_watchdog.main on a simulated host: exit code, journal lines, systemctl
                        verbs done, state file, metrics file (test_watchdog_helper.py's scenarios)
    watchdog/decide/... _watchdog.decide's decisions, new state, summary and journal lines (test_watchdog.py's)

Every call into the collection goes through the import block at the top of ``collect()``: when a refactor moves a
function, that block is the one place to change. The fake hosts are copies of those test modules' fakes, not imports:
a later change to a test's fake must not change what the fixture was recorded against.

Regenerate the fixture (tests/unit/fixtures/contract_outputs.json.gz) from the code before a refactor, BASE:

    git -C /work/main worktree add /tmp/base-BASE BASE
    mkdir -p /tmp/base-coll/ansible_collections/gpufleet && ln -sfn /tmp/base-BASE /tmp/base-coll/ansible_collections/gpufleet/core
    PYTHONPATH=/tmp/base-coll .venv/bin/python tests/unit/support/contract_outputs.py   # writes the fixture

(the fixture in this commit is from 0a581e4). Without arguments it writes the fixture; ``--print NAME`` prints one
entry instead, ``--out FILE`` writes elsewhere.
"""

from __future__ import absolute_import, division, print_function

import contextlib
import copy
import gzip
import io
import json
import os
import shutil
import stat
import subprocess
import sys
import tempfile
import threading

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), '..', '..', '..'))
FIXTURE = os.path.join(REPO, 'tests', 'unit', 'fixtures', 'contract_outputs.json.gz')
WORKDIR = '<workdir>'
GENERATED_AT = '2025-06-01T12:00:00Z'


def dumps(value):
    return json.dumps(value, indent=1, sort_keys=True) + '\n'


def write_fixture(outputs, path=FIXTURE):
    """The fixture: gzip with mtime 0 and no file name, JSON with sorted keys, so equal outputs give equal bytes."""
    raw = io.BytesIO()
    with gzip.GzipFile(filename='', mode='wb', fileobj=raw, mtime=0, compresslevel=9) as handle:
        handle.write(json.dumps(outputs, indent=0, sort_keys=True).encode('utf-8') + b'\n')
    directory = os.path.dirname(path)
    if not os.path.isdir(directory):
        os.makedirs(directory)
    with open(path, 'wb') as handle:
        handle.write(raw.getvalue())


def read_fixture(path=FIXTURE):
    with gzip.open(path, 'rb') as handle:
        return json.loads(handle.read().decode('utf-8'))


# -- the process environment, changed for a scenario and put back ---------------------------------------------------

@contextlib.contextmanager
def environ(**values):
    saved = dict((key, os.environ.get(key)) for key in values)
    try:
        for key, value in values.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
        yield
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


@contextlib.contextmanager
def patched(owner, **values):
    saved = dict((name, owner.__dict__[name]) for name in values)
    try:
        for name, value in values.items():
            setattr(owner, name, value)
        yield
    finally:
        for name, value in saved.items():
            setattr(owner, name, value)


def collect():
    """{entry name: output text} of the code on sys.path as ansible_collections.gpufleet.core."""
    # -- the only imports of the code under contract: a moved function is a one-line change here ------------------
    from . import sim  # (first: puts the NVML simulator ahead of nvidia-ml-py as pynvml)
    from ansible.module_utils import basic
    from ansible_collections.gpufleet.core.plugins.plugin_utils._report.files import (
        HTML_NAME, JSON_NAME, PREVIOUS_NAME, plan_report)
    from ansible_collections.gpufleet.core.plugins.modules import numa_audit
    from ansible_collections.gpufleet.core.plugins.module_utils._numa_audit import ServiceHost
    from ansible_collections.gpufleet.core.plugins.module_utils._watchdog_host import WatchdogHost
    from ansible_collections.gpufleet.core.plugins.module_utils._helper_watchdog import main as watchdog_main
    from ansible_collections.gpufleet.core.plugins.module_utils._host import HostFiles
    from ansible_collections.gpufleet.core.plugins.module_utils._plan import read_plan
    from ansible_collections.gpufleet.core.plugins.module_utils._watchdog import decide
    from ansible_collections.gpufleet.core.plugins.module_utils._watchdog_config import check_config
    from ansible_collections.gpufleet.core.plugins.module_utils._watchdog_state import fresh_state, read_state
    from ansible_collections.gpufleet.core.plugins.module_utils._watchdog_xids import parse_kernel_xid
    from ansible_collections.gpufleet.core.plugins.module_utils._watchdog_report import journal_lines
    from ansible_collections.gpufleet.core.plugins.module_utils import _xid_catalog as catalog
    # -- the simulator and the test fleet (inputs, not under contract) ------------------------------------------------
    from ..report.fleet import lab_fleet, simulated_host
    import pynvml  # the simulator
    import render_tree
    import simctl

    api = {'sim': sim, 'basic': basic, 'HTML_NAME': HTML_NAME, 'JSON_NAME': JSON_NAME, 'PREVIOUS_NAME': PREVIOUS_NAME,
           'plan_report': plan_report, 'numa_audit': numa_audit, 'ServiceHost': ServiceHost, 'WatchdogHost': WatchdogHost,
           'watchdog_main': watchdog_main, 'HostFiles': HostFiles, 'read_plan': read_plan, 'check_config': check_config,
           'decide': decide, 'fresh_state': fresh_state, 'parse_kernel_xid': parse_kernel_xid, 'read_state': read_state,
           'journal_lines': journal_lines, 'catalog': catalog, 'lab_fleet': lab_fleet, 'simulated_host': simulated_host,
           'pynvml': pynvml, 'render_tree': render_tree, 'simctl': simctl}
    workdir = tempfile.mkdtemp(prefix='gpufleet-contract-')
    outputs = {}
    try:
        _report_outputs(api, os.path.join(workdir, 'report'), outputs)
        _audit_outputs(api, os.path.join(workdir, 'audit'), outputs)
        _helper_outputs(api, os.path.join(workdir, 'helper'), outputs)
        _decide_outputs(api, outputs)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    return dict((name, text.replace(workdir, WORKDIR)) for name, text in outputs.items())


# -- the fleet report ------------------------------------------------------------------------------------------------

FAILED = {'hk1-a100-02': {'imagegen': 0.418}}


def _report_outputs(api, workdir, outputs):
    plan_report, lab_fleet, simulated_host = api['plan_report'], api['lab_fleet'], api['simulated_host']
    html_name, json_name, previous_name = api['HTML_NAME'], api['JSON_NAME'], api['PREVIOUS_NAME']

    def record(scenario, planned):
        for name, text in planned['write'].items():
            outputs['report/%s/%s' % (scenario, name)] = text
        outputs['report/%s/plan' % scenario] = dumps({'write': sorted(planned['write']), 'changes': planned['changes'],
                                                     'generated_at': planned['data']['generated_at']})
        return planned

    def run(scenario, hosts, generated_at=GENERATED_AT, found=None, fleet=None):
        try:
            planned = plan_report(copy.deepcopy(hosts), generated_at, dict(found or {}), fleet)
        except Exception as exc:  # the refusal's words are the output
            outputs['report/%s/refused' % scenario] = '%s\n' % exc
            return None
        return record(scenario, planned)

    fleet = lab_fleet(os.path.join(workdir, 'fleet'), FAILED)
    names = [host['name'] for host in fleet]

    # All audits passing; one failing; a host without its plan (and audit); one without facts.
    passing = copy.deepcopy(fleet)
    passing[1]['audit']['services'] = [dict(item, passed=True, reasons=[], remote_fraction=0.004, remote_pages=400)
                                       for item in passing[1]['audit']['services']]
    passing[1]['audit'].update(passed=True, failed_services=[])
    run('all-pass', passing)
    first = run('failing-audit', fleet)
    missing = copy.deepcopy(fleet)
    missing[2].update(plan=None, audit=None)
    missing[3].update(topology=None, failure={'stage': 'preflight', 'task': 'Gather the NUMA and GPU topology',
                                              'reason': 'unreachable'})
    run('missing-plan', missing)

    # The same fleet again; a changed fleet; a corrupt previous report.
    on_disk = dict(first['write'], **{previous_name: None})
    run('same-again', fleet, 'T2', on_disk)
    changed = [host for host in copy.deepcopy(fleet) if host['name'] != 'lab-quirks-01']
    changed[0] = simulated_host(os.path.join(workdir, 'changed'), 'reference-a100', 'hk1-a100-01',
                                [{'name': 'llm', 'gpus': 1, 'cpus': 8},
                                 {'name': 'imagegen', 'gpus': {'mig_profile': '1g.10gb', 'count': 1}, 'cpus': 4}],
                                mig_layouts=[{'gpus': [3], 'layout': ['1g.10gb'] * 7}], reserved_cpus='0,32',
                                failing={'llm': 0.3}, labels={'dc': 'hk1', 'rack': 'hk1-a', 'class': 'a100_pcie_4x'})
    changed.append({'name': 'hk3-new-01', 'failure': 'unreachable'})
    changed_run = run('changed', changed, 'T3', on_disk)
    run('changed-again', changed, 'T5', dict(changed_run['write']))
    run('corrupt-previous', fleet, 'T4', {json_name: '{"version": 1, "hosts": [', html_name: None})

    # --limit: the fleet's other hosts stay as the previous report found them.
    limited_first = run('limit-first', fleet, 'T1', {}, names)
    on_disk = dict(limited_first['write'], **{previous_name: None})
    limited = [host for host in fleet if host['name'] == 'hk1-a100-01']
    second = run('limit-one-host', limited, 'T2', on_disk, [name for name in names if name != 'lab-quirks-01'])
    on_disk = dict((name, second['write'].get(name)) for name in (html_name, json_name, previous_name))
    run('limit-again', limited, 'T3', on_disk, names)
    run('limit-other-host', [host for host in fleet if host['name'] == 'hk2-h100-01'], 'T4', on_disk, names)
    old = json.loads(limited_first['write'][json_name])
    [host for host in old['hosts'] if host['name'] == 'hk2-h100-01'][0]['topology']['gpus'] = 'edited by hand'
    run('limit-damaged-previous', limited, 'T2', {json_name: json.dumps(old)}, names)

    # Bad input drawn with what is usable; text that must be escaped; input that is refused.
    bad = [
        {'name': 'before-facts', 'failure': {'stage': 'preflight', 'task': 'Gather the NUMA and GPU topology',
                                             'reason': 'unreachable'}},
        {'name': 'quarantined', 'quarantined': True, 'failure': 'Plan the MIG change: 3g.40gb x3 does not fit'},
        {'name': 'garbage', 'topology': 'not a fact', 'plan': '{not json', 'audit': 'x', 'reserved_cpus': 'abc'},
        {'name': 'odd', 'topology': {'numa_nodes': [{'id': 0, 'cpulist': '0-3,x'}, 'junk'],
                                     'gpus': [{'index': 0, 'uuid': 'GPU-1', 'mig': {'mode_current': 'enabled',
                                               'gpu_instances': [{'profile': '9g', 'placement': {'start': 7}}]}}, 5]},
         'plan': {'version': 1, 'services': [{'name': 's', 'cpus': [1], 'gpus': ['GPU-gone']}, {'cpus': 3}]}},
        dict(copy.deepcopy(fleet[4]), name='no-audit', audit=None),
        dict(copy.deepcopy(fleet[0]), name='plan-v2', plan={'version': 2, 'services': []}),
        dict(copy.deepcopy(fleet[0]), name='plan-text', plan=json.dumps(fleet[0]['plan'])),
    ]
    run('bad-input', bad)
    evil = copy.deepcopy(fleet[0])
    script = '<script>alert(1)</script>'
    evil.update(name='h<script>"', dc=script, rack='r&<b>',
                failure={'stage': 'verify', 'task': script, 'reason': '<img src=x>'})
    evil['topology']['gpus'][0]['name'] = 'GPU <b>bold</b>'
    evil['topology']['cpu']['model'] = '"><svg onload=alert(1)>'
    evil['audit']['services'][0].update(passed=False, reasons=['<iframe src=x>'])
    run('escaped', [evil])
    for number, hosts in enumerate([{'name': 'a'}, [{'name': 'a'}, {'dc': 'hk1'}], [{'name': 'a'}, {'name': 'a'}],
                                    ['a']]):
        run('refused-%d' % number, hosts)


# -- the binding audit -----------------------------------------------------------------------------------------------

GPU0 = 'GPU-5c6f7a2e-1b3d-4e8f-9a0b-1c2d3e4f5a60'
GPU2 = 'GPU-5c6f7a2e-1b3d-4e8f-9a0b-1c2d3e4f5a62'
H200_MIG_3G = 'MIG-1a2b3c4d-5e6f-5a7b-8c9d-0e1f2a3b4c01'

# As tests/unit/plugins/modules/test_numa_audit.py's (the kernel's format, trimmed).
STATUS = """Name:\tpython3
Umask:\t0022
State:\tS (sleeping)
Tgid:\t{pid}
Ngid:\t0
Pid:\t{tid}
PPid:\t1
TracerPid:\t0
Uid:\t0\t0\t0\t0
Gid:\t0\t0\t0\t0
FDSize:\t64
Groups:\t0
VmPeak:\t  275532 kB
VmSize:\t  275532 kB
VmRSS:\t  265044 kB
Threads:\t{threads}
SigQ:\t0/7633
Seccomp:\t0
Speculation_Store_Bypass:\tthread vulnerable
Cpus_allowed:\t{cpumask}
Cpus_allowed_list:\t{cpus}
Mems_allowed:\t00000000,00000003
Mems_allowed_list:\t{mems}
voluntary_ctxt_switches:\t{voluntary}
nonvoluntary_ctxt_switches:\t{nonvoluntary}
"""
NUMA_MAPS_BOUND = """55d0c8a00000 bind:1 file=/usr/bin/python3.11 mapped=135 active=0 N0=100 N1=35 kernelpagesize_kB=4
55d0c8e2b000 bind:1 anon=12 dirty=12 active=0 N1=12 kernelpagesize_kB=4
7f1c2c000000 bind:1 anon=65536 dirty=65536 active=0 N1=65536 kernelpagesize_kB=4
7f1c3c001000 bind:1
7ffd1a5e1000 bind:1 stack anon=9 dirty=9 N1=9 kernelpagesize_kB=4
"""
NUMA_MAPS_BLIND = """55d0c8a00000 default file=/usr/bin/python3.11 mapped=135 active=0 N0=100 N1=35 kernelpagesize_kB=4
7f1c2c000000 default anon=65536 dirty=65536 active=0 N0=65536 kernelpagesize_kB=4
7ffd1a5e1000 default stack anon=9 dirty=9 N0=9 kernelpagesize_kB=4
"""
EXPECT_B = {'cpus': '32-63', 'mems': 1, 'gpus': [GPU2]}


def _write_program(path, lines):
    with open(path, 'w') as handle:
        handle.write('\n'.join(lines) + '\n')
    os.chmod(path, os.stat(path).st_mode | stat.S_IEXEC)


class Tree(object):
    """A simulated host's procfs and sysfs with fake processes and cgroups, and fake systemctl, podman and docker
    (test_numa_audit.py's Tree, without pytest)."""

    def __init__(self, api, directory, host='reference-a100'):
        self.root = os.path.join(directory, host)
        api['render_tree'].render(api['sim'].load_host(host), self.root)
        self.proc, self.sys = os.path.join(self.root, 'proc'), os.path.join(self.root, 'sys')
        self.host_file = os.path.join(api['sim'].HOSTS_DIR, host + '.json')
        self.state_file = os.path.join(directory, host + '.state.json')
        self.bin = os.path.join(directory, 'bin')
        os.makedirs(self.bin)
        self.calls = os.path.join(directory, 'systemctl.calls')
        self.units, self.containers = {}, {}
        self.api = api
        self._write_systemctl()

    def env(self):
        return environ(GPUFLEET_NVML_SIM_HOST=self.host_file, GPUFLEET_NVML_SIM_STATE=self.state_file,
                       PATH='%s:%s' % (self.bin, os.environ.get('PATH', '')))

    def process(self, pid, cpus, mems, numa_maps, tids=None, switches=(150, 3), cpumask='ffffffff,00000000'):
        tids = tids or [pid]
        base = os.path.join(self.proc, str(pid))
        for tid in tids:
            self.switches(pid, tid, *switches, cpus=cpus, mems=mems, threads=len(tids), cpumask=cpumask)
        with open(os.path.join(base, 'status'), 'w') as handle:
            handle.write(STATUS.format(pid=pid, tid=pid, threads=len(tids), cpus=cpus, mems=mems, cpumask=cpumask,
                                       voluntary=switches[0], nonvoluntary=switches[1]))
        with open(os.path.join(base, 'numa_maps'), 'w') as handle:
            handle.write(numa_maps)

    def switches(self, pid, tid, voluntary, nonvoluntary, cpus='32-63', mems='1', threads=1, cpumask='ffffffff,00000000'):
        directory = os.path.join(self.proc, str(pid), 'task', str(tid))
        if not os.path.isdir(directory):
            os.makedirs(directory)
        path = os.path.join(directory, 'status')
        if os.path.exists(path):
            with open(path) as handle:
                lines = [line for line in handle.read().splitlines() if 'ctxt_switches' not in line]
            text = '\n'.join(lines) + '\nvoluntary_ctxt_switches:\t%d\nnonvoluntary_ctxt_switches:\t%d\n' % (
                voluntary, nonvoluntary)
        else:
            text = STATUS.format(pid=pid, tid=tid, threads=threads, cpus=cpus, mems=mems, cpumask=cpumask,
                                 voluntary=voluntary, nonvoluntary=nonvoluntary)
        with open(path, 'w') as handle:
            handle.write(text)

    def unit(self, name, cgroups=None, state='active', hierarchy=('fs', 'cgroup', 'systemd')):
        group = '/system.slice/%s' % name
        self.units[name] = {'state': state, 'group': group if cgroups is not None else ''}
        for relative, pids in sorted((cgroups or {}).items()):
            directory = os.path.join(self.sys, *(hierarchy + ('system.slice', name) + tuple(p for p in relative.split('/') if p)))
            os.makedirs(directory)
            with open(os.path.join(directory, 'cgroup.procs'), 'w') as handle:
                handle.write(''.join('%d\n' % pid for pid in pids))
            with open(os.path.join(directory, 'notify_on_release'), 'w') as handle:
                handle.write('0\n')
        self._write_systemctl()

    def container(self, runtime, name, pid, cgroup_line, group_pids, hierarchy=('fs', 'cgroup')):
        with open(os.path.join(self.proc, str(pid), 'cgroup'), 'w') as handle:
            handle.write(cgroup_line + '\n')
        relative = cgroup_line.split(':', 2)[2]
        directory = os.path.join(self.sys, *(hierarchy + tuple(part for part in relative.split('/') if part)))
        os.makedirs(directory)
        with open(os.path.join(directory, 'cgroup.procs'), 'w') as handle:
            handle.write(''.join('%d\n' % each for each in group_pids))
        self.containers.setdefault(runtime, {})[name] = pid
        lines = ['#!/bin/sh', 'echo "%s $*" >> %s' % (runtime, self.calls), 'for name; do :; done', 'case "$name" in']
        for known, first in sorted(self.containers[runtime].items()):
            lines.append('  %s) echo %d ;;' % (known, first))
        lines.append('  *) echo "Error: no such container $name" >&2; exit 125 ;;')
        lines.append('esac')
        _write_program(os.path.join(self.bin, runtime), lines)

    def _write_systemctl(self):
        lines = ['#!/bin/sh', 'echo "$*" >> %s' % self.calls, 'for unit; do :; done', 'case "$unit" in']
        for name, unit in sorted(self.units.items()):
            sub = {'active': 'running', 'inactive': 'dead', 'failed': 'failed'}[unit['state']]
            lines.append('  %s) printf "LoadState=loaded\\nActiveState=%s\\nSubState=%s\\nControlGroup=%s\\n" ;;'
                         % (name, unit['state'], sub, unit['group'] if unit['state'] == 'active' else ''))
        lines.append('  *) printf "LoadState=not-found\\nActiveState=inactive\\nSubState=dead\\nControlGroup=\\n" ;;')
        lines.append('esac')
        _write_program(os.path.join(self.bin, 'systemctl'), lines)

    def gpu_process(self, uuid, pid):
        with self.env():
            self.api['pynvml'].nvmlInit()
            self.api['pynvml'].nvmlShutdown()
        self.api['simctl'].add_process(self.state_file, uuid, pid)

    def take_calls(self):
        if not os.path.exists(self.calls):
            return []
        with open(self.calls) as handle:
            calls = handle.read().splitlines()
        os.unlink(self.calls)
        return calls


class _Exit(Exception):
    def __init__(self, how, result):
        super(_Exit, self).__init__(how)
        self.how, self.result = how, result


def _module_args(args):
    try:
        from ansible.module_utils.testing import patch_module_args  # ansible-core >= 2.19
    except ImportError:
        from ansible.module_utils import basic
        from ansible.module_utils.common.text.converters import to_bytes

        @contextlib.contextmanager
        def patch_module_args(args):
            saved = basic._ANSIBLE_ARGS
            basic._ANSIBLE_ARGS = to_bytes(json.dumps({'ANSIBLE_MODULE_ARGS': args}))
            try:
                yield
            finally:
                basic._ANSIBLE_ARGS = saved
    return patch_module_args(args)


def _audit_outputs(api, workdir, outputs):
    basic, module, service_host = api['basic'], api['numa_audit'], api['ServiceHost']
    clock = {'now': 100.0, 'on_sleep': [], 'slept': []}

    def sleep(seconds):
        clock['slept'].append(seconds)
        for callback in clock['on_sleep']:
            callback()
        clock['now'] += seconds

    def exit_json(self, **result):
        raise _Exit('exit_json', result)

    def fail_json(self, **result):
        raise _Exit('fail_json', result)

    scenarios = []

    def scenario(function):
        scenarios.append(function)
        return function

    def tree(directory, host='reference-a100'):
        return Tree(api, directory, host)

    def bound_and_blind(directory):
        t = tree(directory)
        t.process(2001, '32-63', '0-1', NUMA_MAPS_BOUND, tids=[2001, 2002])
        t.process(2010, '32-63', '1', '7f00 bind=static:1 anon=100 dirty=100 N1=100 kernelpagesize_kB=4\n')
        t.process(3001, '0-31', '0-1', NUMA_MAPS_BLIND, cpumask='00000000,ffffffff')
        t.unit('gpufleet-svc-a.service', {'': [2001], 'libpod-4f2a/container': [2010]})
        t.unit('gpufleet-svc-b.service', {'': [3001]})
        t.gpu_process(GPU2, 2010)

        def busy():
            t.switches(2001, 2001, 400, 53)
            t.switches(2001, 2002, 250, 3)
            t.switches(2010, 2010, 190, 3)
        clock['on_sleep'].append(busy)
        return t

    def audit(t, **args):
        """The module's result (or failure) and the commands it ran."""
        args.setdefault('sysfs_root', t.sys)
        args.setdefault('procfs_root', t.proc)
        del clock['slept'][:]
        with t.env(), _module_args(args):
            try:
                module.main()
                done = {'how': 'returned', 'result': None}
            except _Exit as exc:
                done = {'how': exc.how, 'result': exc.result}
        done.update(commands=t.take_calls(), slept=list(clock['slept']))
        return done

    @scenario
    def bound_and_blind_twin(directory):
        t = bound_and_blind(directory)
        t.gpu_process(GPU2, 3001)
        return audit(t, sample_seconds=2, services=[
            {'name': 'a', 'unit': 'gpufleet-svc-a.service', 'expect': {'cpus': [32, 33] + list(range(34, 64)),
                                                                       'mems': '1', 'gpus': [GPU2]}},
            {'name': 'b', 'unit': 'gpufleet-svc-b.service', 'expect': EXPECT_B}])

    @scenario
    def remote_pages_limit(directory):
        t = tree(directory)
        t.process(4001, '32-63', '1', '7f00 bind:1 anon=1000 dirty=1000 N0=30 N1=970 kernelpagesize_kB=4\n')
        t.unit('svc.service', {'': [4001]})
        services = [{'name': 'svc', 'unit': 'svc.service', 'expect': {'mems': [1]}}]
        return [audit(t, services=services, max_remote_fraction=0.05, sample_seconds=0),
                audit(t, services=services, sample_seconds=0)]

    @scenario
    def not_running(directory):
        t = tree(directory)
        t.unit('gpufleet-svc-down.service', {'': []}, state='failed')
        t.unit('gpufleet-svc-empty.service', {'': []})
        return audit(t, services=[
            {'name': 'down', 'unit': 'gpufleet-svc-down.service', 'expect': EXPECT_B},
            {'name': 'empty', 'unit': 'gpufleet-svc-empty.service'},
            {'name': 'unknown', 'unit': 'gpufleet-svc-nope.service'},
            {'name': 'gone', 'pid': 999999}])

    @scenario
    def without_expectations(directory):
        t = tree(directory)
        t.process(5001, '0-31', '0-1', NUMA_MAPS_BLIND)
        return audit(t, services=[{'name': 'adhoc', 'pid': 5001}])

    @scenario
    def plan_file(directory):
        t = bound_and_blind(directory)
        plan = os.path.join(directory, 'placement.json')
        done = []
        for document, seconds in (
                ({'schema_version': 1, 'services': [
                    {'name': 'a', 'gpus': [GPU2], 'cpulist': '32-63', 'memlist': '1', 'memory_policy': 'bind', 'cpus': 32},
                    {'name': 'b', 'gpus': [GPU2], 'cpulist': '32-63', 'memlist': '1', 'memory_policy': 'bind', 'cpus': 32}]},
                 0.5),
                ({'services': [
                    {'name': 'b', 'gpus': [GPU2], 'cpulist': '0-31', 'memlist': '0', 'memory_policy': 'preferred'},
                    {'name': 'a', 'gpus': [GPU2], 'cpulist': '32-63', 'memlist': '0', 'memory_policy': 'preferred'}]}, 0),
                ({'services': [{'name': 'b', 'gpus': [], 'cpulist': '0-31', 'memlist': None}]}, 0),
                ({'version': 1, 'services': [{'name': 'a', 'unit': 'gpufleet-svc-a.service', 'gpus': [GPU2],
                                              'cpulist': '32-63', 'memlist': '1', 'memory_policy': 'interleave'}]}, 0)):
            with open(plan, 'w') as handle:
                handle.write(json.dumps(document))
            done.append(audit(t, plan_file=plan, sample_seconds=seconds))
        return done

    @scenario
    def containers(directory):
        t = tree(directory)
        t.process(4001, '32-63', '1', NUMA_MAPS_BOUND)
        t.process(4002, '32-63', '1', '7f00 default anon=100 dirty=100 N1=100 kernelpagesize_kB=4\n')
        t.process(4090, '0-63', '0-1', NUMA_MAPS_BLIND)
        t.container('podman', 'gpufleet-svc-c', 4001, '0::/machine.slice/libpod-3e1f.scope/container', [4001, 4002])
        t.process(5001, '0-31', '0-1', NUMA_MAPS_BLIND)
        t.container('docker', 'gpufleet-svc-d', 5001, '1:name=systemd:/system.slice/docker-9c0d.scope', [5001],
                    hierarchy=('fs', 'cgroup', 'systemd'))
        t.gpu_process(GPU2, 4002)
        return audit(t, sample_seconds=0, services=[
            {'name': 'c', 'container': 'gpufleet-svc-c', 'expect': EXPECT_B},
            {'name': 'd', 'container': 'gpufleet-svc-d', 'container_runtime': 'docker', 'expect': EXPECT_B},
            {'name': 'gone', 'container': 'gpufleet-svc-gone'}])

    @scenario
    def plan_containers(directory):
        t = tree(directory)
        t.process(4001, '32-63', '1', NUMA_MAPS_BOUND)
        t.container('docker', 'gpufleet-svc-c', 4001, '0::/system.slice/docker-77aa.scope', [4001])
        t.gpu_process(GPU2, 4001)
        plan = os.path.join(directory, 'placement.json')
        with open(plan, 'w') as handle:
            handle.write(json.dumps({'version': 1, 'services': [
                {'name': 'c', 'gpus': [GPU2], 'cpulist': '32-63', 'memlist': '1', 'memory_policy': 'bind',
                 'unit': 'gpufleet-svc-c.service', 'container': 'gpufleet-svc-c', 'container_runtime': 'docker'}]}))
        return audit(t, plan_file=plan, sample_seconds=0)

    @scenario
    def mig_device(directory):
        t = tree(directory, 'single-h200')
        t.process(5150, '0-95', '0', '7f00 default anon=10 N0=10 kernelpagesize_kB=4\n')
        t.gpu_process(H200_MIG_3G, 5150)
        return audit(t, sample_seconds=0, services=[{'name': 'mig', 'pid': 5150, 'expect': {'gpus': [H200_MIG_3G]}}])

    @scenario
    def without_nvml(directory):
        t = tree(directory, 'cpu-only')
        t.process(6001, '0-15', '0', '7f00 default anon=10 N0=10 kernelpagesize_kB=4\n')
        return audit(t, sample_seconds=0, services=[
            {'name': 'plain', 'pid': 6001}, {'name': 'planned', 'pid': 6001, 'expect': {'gpus': [GPU0]}},
            {'name': 'gpuless', 'pid': 6001, 'expect': {'gpus': []}}])

    @scenario
    def cgroup_v2_hugetlb(directory):
        t = tree(directory)
        t.process(7001, '32-63', '1', '7e00 bind:1 file=/dev/hugepages/kv huge dirty=4 N1=3 N0=1 kernelpagesize_kB=2048\n')
        t.unit('v2.service', {'': [7001]}, hierarchy=('fs', 'cgroup'))
        return audit(t, sample_seconds=0, services=[{'name': 'v2', 'unit': 'v2.service', 'expect': {'mems': '1'}}])

    @scenario
    def mixed_allowed_cpus(directory):
        t = tree(directory)
        t.process(8001, '32-63', '1', '')
        t.process(8002, '0-63', '0-1', '')
        t.unit('mixed.service', {'': [8001, 8002]})
        return audit(t, sample_seconds=0, services=[{'name': 'mixed', 'unit': 'mixed.service',
                                                     'expect': {'cpus': '32-63'}}])

    @scenario
    def check_mode(directory):
        t = bound_and_blind(directory)
        services = [{'name': 'b', 'unit': 'gpufleet-svc-b.service', 'expect': EXPECT_B}]
        return [audit(t, services=services, sample_seconds=0),
                audit(t, services=services, sample_seconds=0, _ansible_check_mode=True)]

    @scenario
    def fail_on_violation(directory):
        t = bound_and_blind(directory)
        return audit(t, fail_on_violation=True, sample_seconds=0, services=[
            {'name': 'a', 'unit': 'gpufleet-svc-a.service', 'expect': {'cpus': '32-63', 'mems': '1'}},
            {'name': 'b', 'unit': 'gpufleet-svc-b.service', 'expect': {'cpus': '32-63'}}])

    @scenario
    def memory_policies(directory):
        t = tree(directory)
        t.process(9001, '0-63', '0-1', '7f00 interleave:0-1 anon=2 N0=1 N1=1 kernelpagesize_kB=4\n')
        t.process(9002, '0-63', '0-1', '7f00 prefer:1 anon=2 N1=2 kernelpagesize_kB=4\n')
        t.process(9003, '0-63', '0-1', '7f00 bind:1 anon=2 N1=2 kernelpagesize_kB=4\n7f10 interleave:0-1 anon=1 N0=1\n')
        return audit(t, sample_seconds=0, services=[
            {'name': name, 'pid': pid, 'expect': {'mems': '1', 'memory_policy': policy}}
            for name, pid, policy in (('il', 9001, 'interleave'), ('pref', 9002, 'preferred'), ('mbind', 9003, 'bind'))])

    @scenario
    def bad_input(directory):
        t = tree(directory)
        done = []
        for args in [
                {},
                {'services': [{'name': 'x', 'unit': 'x.service', 'pid': 1}]},
                {'services': [{'name': 'x', 'unit': 'x.service', 'container': 'x'}]},
                {'services': [{'name': 'x'}]},
                {'services': [{'name': 'x', 'container': 'x', 'container_runtime': 'lxc'}]},
                {'services': []},
                {'services': [{'name': 'x', 'pid': 1}, {'name': 'x', 'pid': 2}]},
                {'services': [{'name': 'x', 'pid': 1, 'expect': {'cpus': '3-1'}}]},
                {'services': [{'name': 'x', 'pid': 1, 'expect': {'mems': ['one']}}]},
                {'services': [{'name': 'x', 'pid': 1, 'expect': {'gpus': ['0']}}]},
                {'services': [{'name': 'x', 'pid': 0}]},
                {'services': [{'name': 'x', 'pid': 1, 'expect': {'memory_policy': 'local'}}]},
                {'services': [{'name': 'x', 'pid': 1}], 'max_remote_fraction': 2},
                {'services': [{'name': 'x', 'pid': 1}], 'sample_seconds': -1},
                {'plan_file': '/nonexistent/placement.json'}]:
            done.append(dict(audit(t, **args), args=args))
        return done

    @scenario
    def unreadable_plans(directory):
        t = tree(directory)
        plan = os.path.join(directory, 'placement.json')
        done = []
        for content in ('{"layout": []}', '{not json', '[]', '{"version": 1}', '{"version": 2, "services": []}',
                        '{"version": 1, "services": [{"cpulist": "0"}]}', '{"version": 1, "services": [{"name": 7}]}',
                        '{"version": 1, "services": []}'):
            with open(plan, 'w') as handle:
                handle.write(content)
            done.append(dict(audit(t, plan_file=plan, sample_seconds=0), plan=content))
        return done

    with patched(basic.AnsibleModule, exit_json=exit_json, fail_json=fail_json), \
            patched(service_host, sleep=staticmethod(sleep), clock=staticmethod(lambda: clock['now']),
                    page_size_kb=staticmethod(lambda: 4)):
        for function in scenarios:
            directory = os.path.join(workdir, function.__name__)
            os.makedirs(directory)
            del clock['on_sleep'][:]
            clock['now'] = 100.0
            outputs['audit/' + function.__name__.replace('_', '-')] = dumps(function(directory))


# -- the watchdog program --------------------------------------------------------------------------------------------

WD_GPU0 = 'GPU-00000000-0000-4000-8000-000000000000'
WD_GPU1 = 'GPU-00000000-0000-4000-8000-000000000001'
WD_PIDS = {'llm': 4101, 'chat': 4102, 'embed': 4103}
WD_ON = {'llm': WD_GPU0, 'chat': WD_GPU0, 'embed': WD_GPU1}
WD_NOW = 1750000000.0


class Systemd(object):
    """systemctl show/restart/stop/start/reboot as a double; every other command (journalctl) runs for real."""

    def __init__(self, units):
        self.units = dict((unit, {'LoadState': 'loaded', 'ActiveState': 'active', 'SubState': 'running',
                                  'ControlGroup': '/system.slice/%s' % unit}) for unit in units)
        self.done = []

    def __call__(self, argv):
        if argv[0] != 'systemctl':
            ran = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True,
                                 check=False)
            return ran.returncode, ran.stdout, ran.stderr
        if argv[1] == 'show':
            props = self.units.get(argv[-1], {'LoadState': 'not-found', 'ActiveState': 'inactive',
                                              'SubState': 'dead', 'ControlGroup': ''})
            return 0, ''.join('%s=%s\n' % item for item in sorted(props.items())), ''
        self.done.append(list(argv[1:2] + argv[-1:]) if argv[1] != 'reboot' else ['reboot'])
        return 0, '', ''


class _OnFirstWait(object):
    """The simulator's pynvml, calling ``action`` when the check first waits for NVML events (an Xid that comes
    while the watchdog listens, without a timer)."""

    def __init__(self, library, action):
        self.library, self.action, self.waited = library, action, False

    def __getattr__(self, name):
        value = getattr(self.library, name)
        if name != 'nvmlEventSetWait_v2':
            return value

        def wait(*args):
            if not self.waited:
                self.waited = True
                self.action()
            return value(*args)
        return wait


class _Prometheus(object):
    """Prometheus's query API on 127.0.0.1, answering each query with the next of ``answers``."""

    def __init__(self, answers):
        import http.server

        self.answers, self.queries = list(answers), []
        outer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self):
                outer.queries.append(self.path)
                body = json.dumps(outer.answers.pop(0)).encode()
                self.send_response(200)
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *_):
                pass

        self.server = http.server.HTTPServer(('127.0.0.1', 0), Handler)
        self.url = 'http://127.0.0.1:%d' % self.server.server_port
        self.thread = threading.Thread(target=self.server.serve_forever)
        self.thread.daemon = True
        self.thread.start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()
        self.thread.join()


def _count(value):
    return {'status': 'success', 'data': {'resultType': 'vector', 'result': [{'metric': {}, 'value': [1, value]}]}}


def _helper_outputs(api, workdir, outputs):
    simctl, pynvml, sim = api['simctl'], api['pynvml'], api['sim']
    watchdog_host, watchdog_main = api['WatchdogHost'], api['watchdog_main']
    clock = {'now': WD_NOW}

    class Host(watchdog_host):
        """The watchdog's door to the system, with a clock that moves 30 s a check."""

        def now(self):
            return clock['now']

    class Bench(object):
        """test_watchdog_helper.py's host: two A100s; llm and chat share GPU 0, embed has GPU 1; 1 GiB each."""

        def __init__(self, directory, library=None):
            self.tmp = directory
            self.host_file = os.path.join(directory, 'host.json')
            self.state_file = os.path.join(directory, 'host.state.json')
            with open(self.host_file, 'w') as handle:
                handle.write(json.dumps(dict(sim.BARE_HOST, gpus=sim.make_gpus('A100-80GB-PCIe', 2))))
            with self.env():
                pynvml.nvmlInit()
                pynvml.nvmlShutdown()
            sysfs, procfs = os.path.join(directory, 'sys'), os.path.join(directory, 'proc')
            plan = {'version': 1, 'services': []}
            for name, pid in sorted(WD_PIDS.items(), key=lambda item: item[1]):
                unit = 'gpufleet-svc-%s.service' % name
                cgroup = os.path.join(sysfs, 'fs', 'cgroup', 'system.slice', unit)
                os.makedirs(cgroup)
                self._write(os.path.join(cgroup, 'cgroup.procs'), '%d\n' % pid)
                os.makedirs(os.path.join(procfs, str(pid)))
                self._write(os.path.join(procfs, str(pid), 'status'),
                            'Name:\tpython3\nCpus_allowed_list:\t0-1\nMems_allowed_list:\t0\n')
                self._write(os.path.join(procfs, str(pid), 'numa_maps'),
                            '7f0000000000 bind:0 anon=10 dirty=10 N0=10 kernelpagesize_kB=4\n')
                simctl.add_process(self.state_file, WD_ON[name], pid, used_memory_mb=1024)
                plan['services'].append({'name': name, 'unit': unit, 'gpus': [WD_ON[name]], 'gpu_uuids': [WD_ON[name]],
                                         'mps': None, 'cpulist': '0-1', 'memlist': '0', 'memory_policy': 'bind'})
            self._write(os.path.join(procfs, 'uptime'), '7200.00 100.00\n')
            os.makedirs(os.path.join(procfs, 'sys', 'kernel', 'random'))
            self._write(os.path.join(procfs, 'sys', 'kernel', 'random', 'boot_id'), 'boot-1\n')
            self.plan_file = os.path.join(directory, 'placement.json')
            self._write(self.plan_file, json.dumps(plan))
            self.systemd = Systemd(['gpufleet-svc-%s.service' % name for name in sorted(WD_PIDS)])
            self.watchdog = Host(library or pynvml, run=self.systemd, journalctl=os.path.join(sim.SIM_DIR, 'journalctl'),
                                 files=api['HostFiles'](sysfs, procfs))
            self.config = {'version': 1, 'plan_file': self.plan_file, 'state_file': os.path.join(directory, 'state.json'),
                           'textfile_dir': os.path.join(directory, 'textfile'), 'xid_event_wait_ms': 0}
            self.steps = []
            self.seen = 0

        @staticmethod
        def _write(path, text):
            with open(path, 'w') as handle:
                handle.write(text)

        @staticmethod
        def _read(path):
            if not os.path.exists(path):
                return None
            with open(path) as handle:
                return handle.read()

        def env(self):
            return environ(GPUFLEET_NVML_SIM_HOST=self.host_file, GPUFLEET_NVML_SIM_STATE=self.state_file)

        def run(self, what, argv_tail, **config):
            path = os.path.join(self.tmp, 'watchdog.json')
            self._write(path, json.dumps(dict(self.config, **config)))
            self.watchdog.out = io.StringIO()
            errors = io.StringIO()
            clock['now'] += 30
            with self.env(), contextlib.redirect_stderr(errors):
                rc = watchdog_main(['watchdog'] + [path if word == 'CONFIG' else word for word in argv_tail],
                                   host=self.watchdog)
            self.steps.append({'what': what, 'config': config, 'rc': rc,
                               'lines': self.watchdog.out.getvalue().splitlines(),
                               'stderr': errors.getvalue().splitlines(), 'done': self.systemd.done[self.seen:],
                               'state': self._read(self.config['state_file']),
                               'metrics': self._read(os.path.join(self.config['textfile_dir'], 'gpufleet_watchdog.prom'))})
            self.seen = len(self.systemd.done)

        def check(self, what='check', **config):
            self.run(what, ['CONFIG'], **config)

        def inject(self, uuid, xid):
            simctl.inject_xid(self.host_file, self.state_file, uuid, xid)

    scenarios = []

    def scenario(function):
        scenarios.append(function)
        return function

    @scenario
    def over_budget_restart(bench):
        bench.check()
        simctl.set_process_memory(bench.state_file, WD_PIDS['chat'], 70000)
        bench.check('chat over budget')
        simctl.remove_process(bench.state_file, WD_PIDS['chat'])
        simctl.add_process(bench.state_file, WD_GPU0, WD_PIDS['chat'], used_memory_mb=1024)
        bench.check('chat restarted, within budget')

    @scenario
    def rate_limit(bench):
        simctl.set_process_memory(bench.state_file, WD_PIDS['llm'], 79000)
        for _check in range(4):
            bench.check(rate_limit_restarts=2)

    @scenario
    def fallen_off_the_bus(bench):
        bench.check()
        simctl.lose_gpu(bench.host_file, bench.state_file, WD_GPU1)
        for _check in range(4):
            bench.check(allow_reboot=True, min_uptime_sec=3600)
        bench.run('clear quarantine', ['CONFIG', '--clear-quarantine'])
        bench.check('after clearing', allow_reboot=True, min_uptime_sec=3600)

    @scenario
    def kernel_history_then_xid(bench):
        bench.inject(WD_GPU0, 13)
        bench.check('history before the first check')
        bench.inject(WD_GPU1, 31)
        bench.check('xid 31 on GPU 1')

    @scenario
    def reset_allowed(bench):
        bench.check()
        bench.inject(WD_GPU1, 48)
        bench.check('xid 48', allow_reset=True, gpu_reset_command=['true'], mig_unit='')

    @scenario
    def reset_not_allowed(bench):
        bench.check()
        bench.inject(WD_GPU1, 48)
        bench.check('xid 48')
        simctl.set_process_memory(bench.state_file, WD_PIDS['embed'], 79000)
        bench.check('embed over budget on the quarantined GPU')

    @scenario
    def every_bucket_through_the_kernel_log(bench):
        bench.check()
        for number in (13, 43, 31, 63, 64, 94, 119, 154, 999):
            bench.inject(WD_GPU0, number)
            bench.check('xid %d' % number, allow_reset=True, gpu_reset_command=['true'], mig_unit='')

    @scenario
    def plan_problems(bench):
        simctl.set_process_memory(bench.state_file, WD_PIDS['llm'], 79000)
        del bench.systemd.units['gpufleet-svc-embed.service']
        bench.check('a planned unit is missing')
        bench._write(bench.plan_file, '{not json')
        bench.check('the plan is not JSON')
        bench._write(bench.plan_file, '{"version": 2, "services": []}')
        bench.check('the plan has version 2')
        os.unlink(bench.plan_file)
        bench.check('the plan is gone')

    @scenario
    def dry_run(bench):
        simctl.set_process_memory(bench.state_file, WD_PIDS['llm'], 79000)
        bench.check(dry_run=True)

    @scenario
    def configuration(bench):
        path = os.path.join(bench.tmp, 'bad.json')
        bench._write(path, json.dumps({'version': 1, 'memory_budget_percent': 120}))
        bench.run('bad configuration', ['--check-config', path])
        bench.run('good configuration', ['--check-config', 'CONFIG'])
        bench.run('no arguments', [])
        bench.run('configuration missing', [os.path.join(bench.tmp, 'absent.json')])
        bench._write(bench.config['state_file'], '{"version": 99}')
        bench.check('a state of another release')

    @scenario
    def lost_cursor(bench):
        bench.check()
        bench.inject(WD_GPU1, 31)
        document = json.loads(bench._read(bench.config['state_file']))
        document['kernel_cursor'] = 's=gone;i=1'
        bench._write(bench.config['state_file'], json.dumps(document))
        bench.check('cursor lost')

    @scenario
    def fleet_cap(bench):
        bench.check()
        prometheus = _Prometheus([_count('2')])
        try:
            simctl.lose_gpu(bench.host_file, bench.state_file, WD_GPU1)
            bench.check('GPU 1 lost, two hosts quarantined', fleet_max_quarantined=2, fleet_prometheus_url=prometheus.url)
        finally:
            prometheus.close()
        bench.steps[-1]['queries'] = prometheus.queries
        for step in bench.steps:
            step['config'] = dict((key, '<prometheus>' if value == prometheus.url else value)
                                  for key, value in step['config'].items())
            step['lines'] = [line.replace(prometheus.url, '<prometheus>') for line in step['lines']]

    @scenario
    def fleet_cap_unanswered(bench):
        bench.check()
        simctl.lose_gpu(bench.host_file, bench.state_file, WD_GPU1)
        bench.check('prometheus does not answer', fleet_max_quarantined=1, fleet_prometheus_url='http://127.0.0.1:9')

    @scenario
    def xid_during_the_check(bench):
        bench.check()
        bench.library.waited = False
        bench.check('xid 13 while the check listens', xid_event_wait_ms=2000)
        bench.check('nothing new')

    for function in scenarios:
        directory = os.path.join(workdir, function.__name__)
        os.makedirs(directory)
        clock['now'] = WD_NOW
        if function is xid_during_the_check:
            # NVML's wait calls the injection only once the scenario arms it (waited False).
            holder = {}
            library = _OnFirstWait(pynvml, lambda: holder['bench'].inject(WD_GPU0, 13))
            library.waited = True
            bench = holder['bench'] = Bench(directory, library)
            bench.library = library
        else:
            bench = Bench(directory)
        function(bench)
        outputs['watchdog/helper/' + function.__name__.replace('_', '-')] = dumps(bench.steps)


# -- the watchdog's decisions ------------------------------------------------------------------------------------

D_GPU0, D_GPU1 = WD_GPU0, WD_GPU1
D_MIG1 = 'MIG-00000000-0000-5000-8000-000000000011'
D_MIG2 = 'MIG-00000000-0000-5000-8000-000000000012'
GIB = 1024 ** 3
D_NOW = 1000000.0
D_PIDS = {'llm': 101, 'chat': 102, 'embed': 103, 'rerank': 104}
D_DEVICE_OF = {'llm': D_GPU0, 'chat': D_GPU0, 'embed': D_MIG1, 'rerank': D_MIG2}


def _entry(name, devices, parents, mps=None):
    return {'name': name, 'gpus': devices, 'gpu_uuids': parents, 'unit': 'gpufleet-svc-%s.service' % name,
            'mps': {'device': mps} if mps else None, 'cpulist': '0-1', 'memlist': '0', 'memory_policy': 'bind'}


D_PLAN = {'version': 1, 'services': [
    _entry('llm', [D_GPU0], [D_GPU0]), _entry('chat', [D_GPU0], [D_GPU0]),
    _entry('embed', [D_MIG1], [D_GPU1]), _entry('rerank', [D_MIG2], [D_GPU1])]}


def _readings(used_gib=None, xids=(), lost=(), missing=(), inactive=(), drift=None, uptime=7200.0):
    used_gib = dict(used_gib or {})
    devices = {D_GPU0: {'gpu': D_GPU0, 'memory_total_bytes': 80 * GIB, 'processes': {}},
               D_MIG1: {'gpu': D_GPU1, 'memory_total_bytes': 40 * GIB, 'processes': {}},
               D_MIG2: {'gpu': D_GPU1, 'memory_total_bytes': 40 * GIB, 'processes': {}}}
    for name, pid in sorted(D_PIDS.items()):
        devices[D_DEVICE_OF[name]]['processes'][pid] = int(used_gib.get(name, 1) * GIB)
    gpus = [{'index': 0, 'uuid': D_GPU0, 'pci_bus_id': '00000000:17:00.0', 'lost': False},
            {'index': 1, 'uuid': D_GPU1, 'pci_bus_id': '00000000:18:00.0', 'lost': False}]
    for index in lost:
        gpus[index] = {'index': index, 'uuid': None, 'pci_bus_id': None, 'lost': True}
        devices = dict((k, v) for k, v in devices.items() if v['gpu'] != [D_GPU0, D_GPU1][index])
    running = {'LoadState': 'loaded', 'ActiveState': 'active', 'SubState': 'running'}
    units = dict(('gpufleet-svc-%s.service' % name, dict(running)) for name in D_PIDS)
    for name in missing:
        units['gpufleet-svc-%s.service' % name] = {'LoadState': 'not-found', 'ActiveState': 'inactive', 'SubState': 'dead'}
    for name in inactive:
        units['gpufleet-svc-%s.service' % name] = {'LoadState': 'loaded', 'ActiveState': 'failed', 'SubState': 'failed'}
    services = dict((name, {'pids': [pid], 'binding_problems': [], 'remote_fraction': 0.0}) for name, pid in D_PIDS.items())
    for name, problems in (drift or {}).items():
        services[name]['binding_problems'] = problems
    return {'gpus': gpus, 'devices': devices, 'units': units, 'services': services, 'xids': list(xids),
            'uptime_sec': uptime, 'boot_id': 'boot-1'}


def _xid(number, gpu=D_GPU0, device=None, source='nvml'):
    return {'gpu': gpu, 'device': device, 'xid': number, 'source': source, 'message': 'Xid %d' % number}


def _decide_outputs(api, outputs):
    decide, check_config, fresh_state, read_plan = api['decide'], api['check_config'], api['fresh_state'], api['read_plan']
    journal_lines, catalog = api['journal_lines'], api['catalog']

    def run(steps, cfg=None, reads=None, state=None, plan='the plan', now=D_NOW):
        """One check's decisions; appended to steps; returns the new state."""
        plan = D_PLAN if plan == 'the plan' else plan
        plan = read_plan(copy.deepcopy(plan)) if plan is not None else None
        decisions, new_state, summary = decide(check_config(dict(cfg or {})), plan, copy.deepcopy(reads or _readings()),
                                               copy.deepcopy(state or fresh_state()), now)
        steps.append({'decisions': decisions, 'state': new_state, 'summary': summary,
                      'journal': journal_lines(decisions)})
        return copy.deepcopy(new_state)

    def one(name, **kwargs):
        steps = []
        run(steps, **kwargs)
        outputs['watchdog/decide/' + name] = dumps(steps)

    one('healthy')
    for percent in (85, 85.01, 84.99, 100):
        one('budget-%s' % percent, reads=_readings(used_gib={'llm': 80 * percent / 100.0}))
    one('over-budget-mig', reads=_readings(used_gib={'embed': 39}))
    one('service-budget', cfg={'service_budgets': {'llm': 95}}, reads=_readings(used_gib={'llm': 72, 'chat': 72}))
    one('memory-restarts-off', cfg={'restart_on_memory': False}, reads=_readings(used_gib={'llm': 79}))
    for number in sorted(catalog.CATALOG) + [163, 999]:
        for allow_reset in (False, True):
            one('xid-%03d-%s' % (number, 'reset-allowed' if allow_reset else 'no-reset'),
                cfg={'allow_reset': allow_reset, 'allow_reboot': True}, reads=_readings(xids=[_xid(number)]))
    for number in (13, 31, 43, 45):
        one('xid-%d-three-times' % number, cfg={'allow_reset': True, 'allow_reboot': True},
            reads=_readings(xids=[_xid(number)] * 3))
    one('xid-43-on-mig', reads=_readings(xids=[_xid(43, gpu=D_GPU1, device=D_MIG2)]))
    line = 'NVRM: Xid (PCI:0000:18:00): 13, pid=103, name=python3, Graphics Exception'
    kernel = dict(api['parse_kernel_xid'](line), source='kernel', message=line)
    one('kernel-line-merged', reads=_readings(xids=[kernel, _xid(13, gpu=D_GPU1, device=D_MIG1)]))
    one('kernel-line-alone', reads=_readings(xids=[kernel]))
    plan = {'version': 1, 'services': D_PLAN['services'] + [_entry('share', [D_GPU0], [D_GPU0], mps=D_GPU0)]}
    reads = _readings(xids=[_xid(95)])
    reads['units']['gpufleet-svc-share.service'] = reads['units']['gpufleet-svc-llm.service']
    one('reset-with-mps-and-stop-units', cfg={'allow_reset': True, 'reset_stop_units': ['gpufleet-dcgm-exporter.service']},
        reads=reads, plan=plan)

    def sequence(name, *checks):
        steps, state = [], None
        for kwargs in checks:
            state = run(steps, state=state, **kwargs)
        outputs['watchdog/decide/' + name] = dumps(steps)

    sequence('xid-63-then-reboot', {'reads': _readings(xids=[_xid(63)])}, {'reads': _readings(xids=[_xid(63)])},
             {'reads': dict(_readings(), boot_id='boot-2')})
    reset = {'allow_reset': True}
    sequence('xid-64-rma', {'cfg': reset, 'reads': _readings(xids=[_xid(64)])},
             {'cfg': reset, 'reads': _readings(xids=[_xid(64)]), 'now': D_NOW + catalog.RMA_WINDOW_SEC - 60})
    sequence('xid-64-outside-window', {'cfg': reset, 'reads': _readings(xids=[_xid(64)])},
             {'cfg': reset, 'reads': _readings(xids=[_xid(64)]), 'now': D_NOW + catalog.RMA_WINDOW_SEC + 60})
    sequence('memory-faults-per-gpu', {'cfg': reset, 'reads': _readings(xids=[_xid(48)])},
             {'cfg': reset, 'reads': _readings(xids=[_xid(95, gpu=D_GPU1)]), 'now': D_NOW + 60},
             {'cfg': reset, 'reads': _readings(xids=[_xid(95)]), 'now': D_NOW + 120})
    sequence('xid-119-three-times', *[{'cfg': reset, 'reads': _readings(xids=[_xid(119)]), 'now': D_NOW + 600 * check}
                                      for check in range(3)])
    sequence('xid-79-never-loops', {'reads': _readings(xids=[_xid(79)])},
             *[{'reads': _readings(lost=[0], xids=[_xid(79)])} for _check in range(3)])
    cap = {'fleet_max_quarantined': 2, 'fleet_prometheus_url': 'http://10.0.0.5:9090'}
    for counted, error in ((0, None), (1, None), (2, None), (5, None),
                           (None, 'Prometheus at http://10.0.0.5:9090 did not answer: timed out')):
        reads = _readings(xids=[_xid(79)])
        reads.update(fleet_quarantined=counted, fleet_error=error)
        one('fleet-cap-%s' % counted, cfg=cap, reads=reads)
    reads = _readings(xids=[_xid(79)])
    reads.update(fleet_quarantined=2)
    sequence('fleet-cap-already-quarantined', {'reads': _readings(xids=[_xid(48, gpu=D_GPU1)])},
             {'cfg': {'fleet_max_quarantined': 2, 'fleet_prometheus_url': 'http://p:9090'}, 'reads': reads})
    sequence('lost-by-index', {}, {'reads': _readings(lost=[1])})
    reboot = {'allow_reboot': True, 'min_uptime_sec': 3600, 'reboot_cooldown_sec': 21600}
    one('xid-79-reboot-off', reads=_readings(xids=[_xid(79)]))
    one('xid-79-reboot-early', cfg=reboot, reads=_readings(xids=[_xid(79)], uptime=60.0))
    steps = []
    state = run(steps, cfg=reboot, reads=_readings(xids=[_xid(79)]))
    state['quarantined'] = {}
    run(steps, cfg=reboot, reads=_readings(lost=[0]), state=state, now=D_NOW + 7300)
    run(steps, cfg=reboot, reads=_readings(lost=[0]), state=state, now=D_NOW + 21700)
    outputs['watchdog/decide/reboot-cooldown'] = dumps(steps)
    limit = {'rate_limit_restarts': 2, 'rate_limit_window_sec': 600, 'interval_sec': 30}
    over = _readings(used_gib={'llm': 79})
    sequence('rate-limit', *([{'cfg': limit, 'reads': over, 'now': D_NOW + 30 * check} for check in range(4)]
                             + [{'cfg': limit, 'reads': over, 'now': D_NOW + 600}]))
    both = _readings(used_gib={'llm': 79}, xids=[_xid(48, gpu=D_GPU1)])
    one('live', reads=both)
    one('dry-run', cfg={'dry_run': True}, reads=both)
    one('several-causes', reads=_readings(used_gib={'llm': 79}, xids=[_xid(13)]))
    drift = _readings(drift={'chat': ['CPUs 2-3 allowed, plan says 0-1']})
    one('binding-drift-off', reads=drift)
    one('binding-drift-on', cfg={'restart_on_binding_drift': True}, reads=drift)
    one('inactive-unit', reads=_readings(inactive=['chat'], used_gib={'chat': 79}))
    one('no-plan', plan=None, reads=dict(_readings(used_gib={'llm': 79}, xids=[_xid(79)]),
                                         plan_error='plan_file /x is not JSON'))
    one('planned-unit-missing', reads=_readings(missing=['rerank'], used_gib={'llm': 79}, xids=[_xid(48)]))
    one('budget-names-unknown-service', cfg={'service_budgets': {'llama': 90}})
    one('journal-and-metrics', reads=_readings(used_gib={'embed': 39}, xids=[_xid(48, gpu=D_GPU0)]))
    sequence('quarantined-gpu-left-alone', {'reads': _readings(xids=[_xid(48)])},
             {'reads': _readings(used_gib={'llm': 79, 'embed': 39})})
    one('app-and-reset-xid-same-gpu', reads=_readings(xids=[_xid(13), _xid(48)]))
    refused = []
    for changes in ({'memory_budget_percent': 0}, {'memory_budget_percent': 100.5}, {'service_budgets': {'llm': 101}},
                    {'rate_limit_window_sec': 20, 'interval_sec': 30}, {'plan_file': 'relative.json'}, {'dry_run': 'yes'},
                    {'surprise': 1}, {'reset_stop_units': ['exporter']}, {'fleet_max_quarantined': -1},
                    {'fleet_prometheus_url': 'http://prometheus:9090/'}, {'fleet_prometheus_url': 'prometheus:9090'},
                    {'version': 2}):
        try:
            refused.append({'config': changes, 'accepted': check_config(dict(changes))})
        except Exception as exc:  # the refusal's words are the output
            refused.append({'config': changes, 'refused': str(exc)})
    refused.append({'config': {}, 'accepted': check_config({})})
    outputs['watchdog/decide/configuration'] = dumps(refused)
    outputs['watchdog/decide/read-state'] = dumps([api['read_state'](document) for document in (
        None, {'version': 99}, fresh_state(), 'junk')])


# -- the fixture -----------------------------------------------------------------------------------------------------

def main(argv):
    args = list(argv[1:])
    outputs = collect()
    if args[:1] == ['--print']:
        sys.stdout.write(outputs[args[1]])
        return 0
    path = args[1] if args[:1] == ['--out'] else FIXTURE
    write_fixture(outputs, path)
    sys.stderr.write('%d entries written to %s\n' % (len(outputs), path))
    return 0


if __name__ == '__main__':
    if not __package__:
        # Run as a file: import it again as the test package's module (unit.support), so its relative imports work.
        sys.path.insert(0, os.path.join(REPO, 'tests'))
        from unit.support.contract_outputs import main as package_main  # pylint: disable=import-self
        sys.exit(package_main(sys.argv))
    sys.exit(main(sys.argv))
