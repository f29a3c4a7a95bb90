# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""numa_audit against fake /proc and cgroup trees, a fake systemctl, and the NVML simulator.

The status and numa_maps files below are in the kernel's own format (captured from a 2-node guest and
trimmed); every expected value is worked out by hand from them.
"""

from __future__ import absolute_import, division, print_function

import json
import os
import stat

import pytest
import yaml

from ansible_collections.gpufleet.core.plugins.module_utils import _audit_readings, _numa_audit
from ansible_collections.gpufleet.core.plugins.module_utils._plan import CONTAINER_RUNTIMES, MEMORY_POLICIES
from ansible_collections.gpufleet.core.plugins.modules import numa_audit

from ...conftest import ModuleFail

import pynvml  # noqa: E402  (the simulator in tests/nvml_sim, put first on sys.path by conftest)
import simctl  # noqa: E402

GPU0 = 'GPU-5c6f7a2e-1b3d-4e8f-9a0b-1c2d3e4f5a60'
GPU2 = 'GPU-5c6f7a2e-1b3d-4e8f-9a0b-1c2d3e4f5a62'
H200_MIG_3G = 'MIG-1a2b3c4d-5e6f-5a7b-8c9d-0e1f2a3b4c01'

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

# A bound service: 65536 anonymous pages on node 1, its interpreter's file pages split 100/35.
NUMA_MAPS_BOUND = """55d0c8a00000 bind:1 file=/usr/bin/python3.11 mapped=135 active=0 N0=100 N1=35 kernelpagesize_kB=4
55d0c8e2b000 bind:1 anon=12 dirty=12 active=0 N1=12 kernelpagesize_kB=4
7f1c2c000000 bind:1 anon=65536 dirty=65536 active=0 N1=65536 kernelpagesize_kB=4
7f1c3c001000 bind:1
7ffd1a5e1000 bind:1 stack anon=9 dirty=9 N1=9 kernelpagesize_kB=4
"""
# Its NUMA-blind twin: first touch put everything on node 0, a few pages on node 1.
NUMA_MAPS_BLIND = """55d0c8a00000 default file=/usr/bin/python3.11 mapped=135 active=0 N0=100 N1=35 kernelpagesize_kB=4
7f1c2c000000 default anon=65536 dirty=65536 active=0 N0=65536 kernelpagesize_kB=4
7ffd1a5e1000 default stack anon=9 dirty=9 N0=9 kernelpagesize_kB=4
"""


class Tree(object):
    """Fake processes under the rendered host's procfs, cgroups under its sysfs, and a fake systemctl."""

    def __init__(self, paths, tmp_path, monkeypatch):
        self.paths = paths
        self.proc = paths['procfs_root']
        self.sys = paths['sysfs_root']
        self.units = {}
        self.containers = {}
        self.bin = tmp_path / 'bin'
        self.bin.mkdir()
        self.calls = tmp_path / 'systemctl.calls'
        monkeypatch.setenv('PATH', '%s:%s' % (self.bin, os.environ.get('PATH', '')))
        self._write_systemctl()

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
        if os.path.exists(path):  # keep the allowed lists, change only the counters
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
        """A unit whose cgroup (relative path -> pids) lives in the given hierarchy; no cgroups: not loaded."""
        group = '/system.slice/%s' % name
        self.units[name] = {'state': state, 'group': group if cgroups is not None else ''}
        for relative, pids in (cgroups or {}).items():
            directory = os.path.join(self.sys, *(hierarchy + ('system.slice', name) + tuple(p for p in relative.split('/') if p)))
            os.makedirs(directory)
            with open(os.path.join(directory, 'cgroup.procs'), 'w') as handle:
                handle.write(''.join('%d\n' % pid for pid in pids))
            with open(os.path.join(directory, 'notify_on_release'), 'w') as handle:
                handle.write('0\n')
        self._write_systemctl()

    def container(self, runtime, name, pid, cgroup_line, group_pids, hierarchy=('fs', 'cgroup')):
        """A running container: <runtime> inspect answers its first pid, whose cgroup holds group_pids."""
        with open(os.path.join(self.proc, str(pid), 'cgroup'), 'w') as handle:
            handle.write(cgroup_line + '\n')
        relative = cgroup_line.split(':', 2)[2]
        directory = os.path.join(self.sys, *(hierarchy + tuple(part for part in relative.split('/') if part)))
        os.makedirs(directory)
        with open(os.path.join(directory, 'cgroup.procs'), 'w') as handle:
            handle.write(''.join('%d\n' % each for each in group_pids))
        self.containers.setdefault(runtime, {})[name] = pid
        self._write_runtime(runtime)

    def _write_runtime(self, runtime):
        lines = ['#!/bin/sh', 'echo "%s $*" >> %s' % (runtime, self.calls), 'for name; do :; done', 'case "$name" in']
        for name, pid in self.containers.get(runtime, {}).items():
            lines.append('  %s) echo %d ;;' % (name, pid))
        lines.append('  *) echo "Error: no such container $name" >&2; exit 125 ;;')
        lines.append('esac')
        self._write_program(runtime, lines)

    def _write_systemctl(self):
        lines = ['#!/bin/sh', 'echo "$*" >> %s' % self.calls, 'for unit; do :; done', 'case "$unit" in']
        for name, unit in self.units.items():
            sub = {'active': 'running', 'inactive': 'dead', 'failed': 'failed'}[unit['state']]
            lines.append('  %s) printf "LoadState=loaded\\nActiveState=%s\\nSubState=%s\\nControlGroup=%s\\n" ;;'
                         % (name, unit['state'], sub, unit['group'] if unit['state'] == 'active' else ''))
        lines.append('  *) printf "LoadState=not-found\\nActiveState=inactive\\nSubState=dead\\nControlGroup=\\n" ;;')
        lines.append('esac')
        self._write_program('systemctl', lines)

    def _write_program(self, name, lines):
        path = self.bin / name
        path.write_text('\n'.join(lines) + '\n')
        path.chmod(path.stat().st_mode | stat.S_IEXEC)

    def systemctl_calls(self):
        return self.calls.read_text().splitlines() if self.calls.exists() else []


def gpu_process(paths, uuid, pid):
    """Make NVML see pid running on a GPU (the simulator writes its state file on first use)."""
    pynvml.nvmlInit()
    pynvml.nvmlShutdown()
    simctl.add_process(paths['state_file'], uuid, pid)


@pytest.fixture
def tree(sim_host, tmp_path, monkeypatch):
    def make(host='reference-a100'):
        return Tree(sim_host(host), tmp_path, monkeypatch)
    return make


@pytest.fixture
def clock(monkeypatch):
    """A clock that advances by the slept time; on_sleep callbacks change the counters meanwhile."""
    state = {'now': 100.0, 'on_sleep': [], 'slept': []}

    def sleep(seconds):
        state['slept'].append(seconds)
        for callback in state['on_sleep']:
            callback()
        state['now'] += seconds

    monkeypatch.setattr(_numa_audit.ServiceHost, 'sleep', staticmethod(sleep))
    monkeypatch.setattr(_numa_audit.ServiceHost, 'clock', staticmethod(lambda: state['now']))
    monkeypatch.setattr(_numa_audit.ServiceHost, 'page_size_kb', staticmethod(lambda: 4))
    return state


def audit(run_module, tree, **args):
    args.setdefault('sysfs_root', tree.sys)
    args.setdefault('procfs_root', tree.proc)
    result = run_module(numa_audit, args)
    assert result['changed'] is False
    return result


def bound_and_blind(tree, clock):
    """gpufleet-svc-a (bound to node 1, 2 processes, the second in a podman split sub-cgroup) and its blind twin."""
    t = tree()
    # NUMAPolicy=bind leaves the cpuset's Mems_allowed_list at 0-1: the policy in numa_maps narrows it.
    t.process(2001, '32-63', '0-1', NUMA_MAPS_BOUND, tids=[2001, 2002])
    t.process(2010, '32-63', '1', '7f00 bind=static:1 anon=100 dirty=100 N1=100 kernelpagesize_kB=4\n')
    t.process(3001, '0-31', '0-1', NUMA_MAPS_BLIND, cpumask='00000000,ffffffff')
    t.unit('gpufleet-svc-a.service', {'': [2001], 'libpod-4f2a/container': [2010]})
    t.unit('gpufleet-svc-b.service', {'': [3001]})
    gpu_process(t.paths, GPU2, 2010)

    def busy():  # 2 s: 2001's two threads switch 300 and 100 times more, 2010 40
        t.switches(2001, 2001, 400, 53)
        t.switches(2001, 2002, 250, 3)
        t.switches(2010, 2010, 190, 3)
    clock['on_sleep'].append(busy)
    return t


EXPECT_B = {'cpus': '32-63', 'mems': 1, 'gpus': [GPU2]}


def test_bound_unit_passes_and_blind_twin_fails(run_module, tree, clock):
    t = bound_and_blind(tree, clock)
    # The twin was planned onto the same GPU; NVML sees it there too.
    gpu_process(t.paths, GPU2, 3001)
    result = audit(run_module, t, sample_seconds=2, services=[
        {'name': 'a', 'unit': 'gpufleet-svc-a.service', 'expect': {'cpus': [32, 33] + list(range(34, 64)),
                                                                   'mems': '1', 'gpus': [GPU2]}},
        {'name': 'b', 'unit': 'gpufleet-svc-b.service', 'expect': EXPECT_B},
    ])
    assert clock['slept'] == [2.0]
    a, b = result['services']
    assert (a['name'], a['unit'], a['pids']) == ('a', 'gpufleet-svc-a.service', [2001, 2010])
    assert (a['cpus_allowed_list'], a['mems_allowed_list'], a['memory_nodes_list']) == ('32-63', '0-1', '1')
    assert a['memory_policies'] == ['bind:1', 'bind=static:1']
    assert a['pages_per_node'] == {'0': 100, '1': 35 + 12 + 65536 + 9 + 100}
    assert a['pages_total'] == 65792
    assert (a['local_nodes'], a['remote_pages']) == ([1], 100)
    assert a['remote_fraction'] == round(100 / 65792.0, 6)
    # 300 + 100 + 40 switches over 2 s, summed over the three threads.
    assert a['context_switches_per_second'] == 220.0
    assert (a['gpus_held'], a['gpus_held_reason']) == ([GPU2], None)
    assert (a['passed'], a['reasons']) == (True, [])

    assert b['pids'] == [3001]
    assert (b['cpus_allowed_list'], b['mems_allowed_list'], b['memory_nodes_list']) == ('0-31', '0-1', '0-1')
    assert b['memory_policies'] == ['default']
    assert b['pages_per_node'] == {'0': 65645, '1': 35}
    assert (b['remote_pages'], b['remote_fraction']) == (65645, round(65645 / 65680.0, 6))
    assert b['context_switches_per_second'] == 0.0
    assert b['gpus_held'] == [GPU2]
    assert b['passed'] is False
    assert b['reasons'] == ['CPUs 0-31 allowed, plan says 32-63', 'memory nodes 0-1 allowed, plan says 1',
                            '99.9% of pages on remote nodes (max 2.0%)']
    assert (result['passed'], result['failed_services']) == (False, ['b'])
    # Read-only: systemctl was only asked to show.
    assert all(call.startswith('show ') for call in t.systemctl_calls())
    assert len(t.systemctl_calls()) == 2


def test_remote_pages_within_the_limit_pass_and_above_it_fail(run_module, tree, clock):
    t = tree()
    maps = '7f00 bind:1 anon=1000 dirty=1000 N0=30 N1=970 kernelpagesize_kB=4\n'
    t.process(4001, '32-63', '1', maps)
    t.unit('svc.service', {'': [4001]})
    services = [{'name': 'svc', 'unit': 'svc.service', 'expect': {'mems': [1]}}]
    loose = audit(run_module, t, services=services, max_remote_fraction=0.05, sample_seconds=0)
    assert loose['services'][0]['remote_fraction'] == 0.03 and loose['passed'] is True
    assert loose['services'][0]['context_switches_per_second'] is None and clock['slept'] == []
    strict = audit(run_module, t, services=services, sample_seconds=0)
    assert strict['services'][0]['reasons'] == ['3.0% of pages on remote nodes (max 2.0%)']


def test_a_service_that_is_not_running_fails_with_the_reason(run_module, tree, clock):
    t = tree()
    t.unit('gpufleet-svc-down.service', {'': []}, state='failed')
    t.unit('gpufleet-svc-empty.service', {'': []})
    result = audit(run_module, t, services=[
        {'name': 'down', 'unit': 'gpufleet-svc-down.service', 'expect': EXPECT_B},
        {'name': 'empty', 'unit': 'gpufleet-svc-empty.service'},
        {'name': 'unknown', 'unit': 'gpufleet-svc-nope.service'},
        {'name': 'gone', 'pid': 999999},
    ])
    assert result['failed_services'] == ['down', 'empty', 'unknown', 'gone']
    reasons = [entry['reasons'] for entry in result['services']]
    assert reasons == [
        ['unit gpufleet-svc-down.service is not running (ActiveState=failed, SubState=failed)'],
        ['unit gpufleet-svc-empty.service is not running: its cgroup /system.slice/gpufleet-svc-empty.service '
         'holds no process'],
        ['unit gpufleet-svc-nope.service is not running: systemd does not know it'],
        ['process 999999 is not running'],
    ]
    down = result['services'][0]
    assert (down['pids'], down['pages_total'], down['remote_fraction'], down['gpus_held']) == ([], 0, None, None)
    assert down['local_nodes'] == [1]
    assert clock['slept'] == []  # nothing to sample


def test_without_expectations_values_are_reported_not_judged(run_module, tree, clock):
    t = tree()
    t.process(5001, '0-31', '0-1', NUMA_MAPS_BLIND)
    result = audit(run_module, t, services=[{'name': 'adhoc', 'pid': 5001}])
    entry = result['services'][0]
    assert (entry['unit'], entry['pids'], entry['passed'], entry['reasons']) == (None, [5001], True, [])
    assert entry['cpus_allowed_list'] == '0-31' and entry['pages_total'] == 65680
    assert (entry['local_nodes'], entry['remote_pages'], entry['remote_fraction']) == (None, None, None)
    assert entry['gpus_held'] == []
    assert t.systemctl_calls() == []


def test_services_from_the_gpu_services_plan(run_module, tree, clock, tmp_path):
    t = bound_and_blind(tree, clock)
    plan = tmp_path / 'placement.json'
    plan.write_text(json.dumps({'schema_version': 1, 'services': [
        {'name': 'a', 'gpus': [GPU2], 'cpulist': '32-63', 'memlist': '1', 'memory_policy': 'bind', 'cpus': 32},
        {'name': 'b', 'gpus': [GPU2], 'cpulist': '32-63', 'memlist': '1', 'memory_policy': 'bind', 'cpus': 32},
    ]}))
    result = audit(run_module, t, plan_file=str(plan), sample_seconds=0.5)
    assert [entry['unit'] for entry in result['services']] == ['gpufleet-svc-a.service', 'gpufleet-svc-b.service']
    assert result['failed_services'] == ['b']
    assert result['services'][1]['reasons'] == [
        'CPUs 0-31 allowed, plan says 32-63', 'memory nodes 0-1 allowed, plan says 1',
        '99.9% of pages on remote nodes (max 2.0%)', 'holds no GPU, plan says %s' % GPU2]
    # A preferred policy may spill: the allowed nodes are not judged, the remote share still is.
    plan.write_text(json.dumps({'services': [
        {'name': 'b', 'gpus': [GPU2], 'cpulist': '0-31', 'memlist': '0', 'memory_policy': 'preferred'},
        {'name': 'a', 'gpus': [GPU2], 'cpulist': '32-63', 'memlist': '0', 'memory_policy': 'preferred'}]}))
    preferred = audit(run_module, t, plan_file=str(plan), sample_seconds=0)
    assert preferred['services'][0]['reasons'] == ['holds no GPU, plan says %s' % GPU2]
    assert preferred['services'][1]['reasons'] == ['99.8% of pages on remote nodes (max 2.0%)']
    # A plan without a memory binding has nothing to judge pages against.
    plan.write_text(json.dumps({'services': [{'name': 'b', 'gpus': [], 'cpulist': '0-31', 'memlist': None}]}))
    only_b = audit(run_module, t, plan_file=str(plan), sample_seconds=0)
    assert (only_b['passed'], only_b['services'][0]['remote_fraction']) == (True, None)


def test_a_container_is_audited_by_its_own_cgroup_not_its_client_unit(run_module, tree, clock):
    t = tree()
    # podman on cgroup v2: the container's processes sit in libpod-<id>.scope/container; conmon elsewhere.
    t.process(4001, '32-63', '1', NUMA_MAPS_BOUND)
    t.process(4002, '32-63', '1', '7f00 default anon=100 dirty=100 N1=100 kernelpagesize_kB=4\n')
    t.process(4090, '0-63', '0-1', NUMA_MAPS_BLIND)  # conmon: not the container's
    t.container('podman', 'gpufleet-svc-c', 4001, '0::/machine.slice/libpod-3e1f.scope/container', [4001, 4002])
    # docker on a v1 hybrid host: the name=systemd hierarchy names the scope.
    t.process(5001, '0-31', '0-1', NUMA_MAPS_BLIND)
    t.container('docker', 'gpufleet-svc-d', 5001, '1:name=systemd:/system.slice/docker-9c0d.scope', [5001],
                hierarchy=('fs', 'cgroup', 'systemd'))
    gpu_process(t.paths, GPU2, 4002)
    result = audit(run_module, t, sample_seconds=0, services=[
        {'name': 'c', 'container': 'gpufleet-svc-c', 'expect': EXPECT_B},
        {'name': 'd', 'container': 'gpufleet-svc-d', 'container_runtime': 'docker', 'expect': EXPECT_B},
        {'name': 'gone', 'container': 'gpufleet-svc-gone'}])
    c, d, gone = result['services']
    assert (c['container'], c['unit'], c['pids'], c['passed']) == ('gpufleet-svc-c', None, [4001, 4002], True)
    # 4001's interpreter pages 100 on node 0 and 35 + 12 + 65536 + 9 on node 1; 4002's 100 on node 1.
    assert c['pages_per_node'] == {'0': 100, '1': 35 + 12 + 65536 + 9 + 100}
    assert (c['cpus_allowed_list'], c['memory_nodes_list'], c['gpus_held']) == ('32-63', '1', [GPU2])
    assert (d['pids'], d['cpus_allowed_list'], d['passed']) == ([5001], '0-31', False)
    assert d['reasons'][0] == 'CPUs 0-31 allowed, plan says 32-63'
    assert gone['reasons'] == ['container gpufleet-svc-gone is not running: podman inspect says Error: no such '
                               'container gpufleet-svc-gone']
    assert result['failed_services'] == ['d', 'gone']
    assert 'podman inspect --format {{.State.Pid}} gpufleet-svc-c' in t.systemctl_calls()
    assert 'docker inspect --format {{.State.Pid}} gpufleet-svc-d' in t.systemctl_calls()


def test_a_plans_container_services_are_audited_as_containers(run_module, tree, clock, tmp_path):
    t = tree()
    t.process(4001, '32-63', '1', NUMA_MAPS_BOUND)
    t.container('docker', 'gpufleet-svc-c', 4001, '0::/system.slice/docker-77aa.scope', [4001])
    gpu_process(t.paths, GPU2, 4001)
    plan = tmp_path / 'placement.json'
    plan.write_text(json.dumps({'version': 1, 'services': [
        {'name': 'c', 'gpus': [GPU2], 'cpulist': '32-63', 'memlist': '1', 'memory_policy': 'bind',
         'unit': 'gpufleet-svc-c.service', 'container': 'gpufleet-svc-c', 'container_runtime': 'docker'}]}))
    result = audit(run_module, t, plan_file=str(plan), sample_seconds=0)
    entry = result['services'][0]
    assert (entry['unit'], entry['container'], entry['pids'], entry['passed']) == (None, 'gpufleet-svc-c', [4001], True)
    assert not [call for call in t.systemctl_calls() if call.startswith('show')]


def test_a_container_runtime_that_is_missing_is_named():
    host = _numa_audit.ServiceHost(files=None, run_command=None, systemctl=None, find_program=lambda name: None)
    services = _numa_audit.normalise_services([{'name': 'c', 'container': 'gpufleet-svc-c', 'container_runtime': 'docker'}])
    with pytest.raises(_numa_audit.NumaAuditError) as failed:
        _numa_audit.audit(host, services, None)
    assert str(failed.value) == ('docker was not found on this host; audit container gpufleet-svc-c with '
                                 'container_runtime set to the runtime that runs it, or by pid')


def test_a_mig_device_is_named_instead_of_its_gpu(run_module, tree, clock):
    t = tree('single-h200')
    t.process(5150, '0-95', '0', '7f00 default anon=10 N0=10 kernelpagesize_kB=4\n')
    result = audit(run_module, t, sample_seconds=0,
                   services=[{'name': 'mig', 'pid': 5150, 'expect': {'gpus': [H200_MIG_3G]}}])
    assert result['services'][0]['gpus_held'] == [H200_MIG_3G]
    assert result['passed'] is True


def test_without_nvml_gpus_are_not_known_and_an_expectation_fails(run_module, tree, clock):
    t = tree('cpu-only')
    t.process(6001, '0-15', '0', '7f00 default anon=10 N0=10 kernelpagesize_kB=4\n')
    result = audit(run_module, t, sample_seconds=0, services=[
        {'name': 'plain', 'pid': 6001}, {'name': 'planned', 'pid': 6001, 'expect': {'gpus': [GPU0]}},
        {'name': 'gpuless', 'pid': 6001, 'expect': {'gpus': []}}])
    plain, planned, gpuless = result['services']
    assert plain['gpus_held'] is None and 'driver is not installed' in plain['gpus_held_reason']
    assert plain['passed'] is True
    assert planned['reasons'][0].startswith('GPUs not checked: libnvidia-ml.so.1 was not found')
    # A service planned on no GPU (a CPU-only host's gateway) has nothing to check: NVML's absence is no failure.
    assert gpuless['passed'] is True and gpuless['reasons'] == []


def test_cgroup_v2_hosts_and_hugetlb_pages(run_module, tree, clock):
    t = tree()
    # A hugetlbfs mapping counts 2 MiB pages; the audit counts them as 512 base pages each.
    t.process(7001, '32-63', '1', '7e00 bind:1 file=/dev/hugepages/kv huge dirty=4 N1=3 N0=1 kernelpagesize_kB=2048\n')
    t.unit('v2.service', {'': [7001]}, hierarchy=('fs', 'cgroup'))
    entry = audit(run_module, t, sample_seconds=0, services=[
        {'name': 'v2', 'unit': 'v2.service', 'expect': {'mems': '1'}}])['services'][0]
    assert entry['pids'] == [7001]
    assert entry['pages_per_node'] == {'0': 512, '1': 1536}
    assert entry['remote_fraction'] == 0.25


def test_pids_with_different_allowed_cpus_are_named(run_module, tree, clock):
    t = tree()
    t.process(8001, '32-63', '1', '')
    t.process(8002, '0-63', '0-1', '')
    t.unit('mixed.service', {'': [8001, 8002]})
    entry = audit(run_module, t, sample_seconds=0, services=[
        {'name': 'mixed', 'unit': 'mixed.service', 'expect': {'cpus': '32-63'}}])['services'][0]
    assert entry['cpus_allowed_list'] == '0-63'
    assert entry['reasons'] == ['CPUs 0-63 allowed, plan says 32-63 (pid 8002)']


def test_check_mode_gives_the_same_answer(run_module, tree, clock):
    t = bound_and_blind(tree, clock)
    services = [{'name': 'b', 'unit': 'gpufleet-svc-b.service', 'expect': EXPECT_B}]
    normal = audit(run_module, t, services=services, sample_seconds=0)
    checked = audit(run_module, t, services=services, sample_seconds=0, _ansible_check_mode=True)
    assert checked == normal


def test_fail_on_violation_fails_the_task_with_the_reasons(run_module, tree, clock):
    t = bound_and_blind(tree, clock)
    with pytest.raises(ModuleFail) as failed:
        audit(run_module, t, fail_on_violation=True, sample_seconds=0, services=[
            {'name': 'a', 'unit': 'gpufleet-svc-a.service', 'expect': {'cpus': '32-63', 'mems': '1'}},
            {'name': 'b', 'unit': 'gpufleet-svc-b.service', 'expect': {'cpus': '32-63'}}])
    result = failed.value.result
    assert result['msg'] == '1 of 2 services stray from their placement plan: b: CPUs 0-31 allowed, plan says 32-63'
    assert result['failed_services'] == ['b'] and len(result['services']) == 2


@pytest.mark.parametrize('args, message', [
    ({}, 'plan_file /etc/gpufleet/placement.json cannot be read'),
    ({'services': [{'name': 'x', 'unit': 'x.service', 'pid': 1}]}, 'mutually exclusive: unit|pid|container'),
    ({'services': [{'name': 'x', 'unit': 'x.service', 'container': 'x'}]}, 'mutually exclusive: unit|pid|container'),
    ({'services': [{'name': 'x'}]}, 'one of the following is required: unit, pid, container'),
    ({'services': [{'name': 'x', 'container': 'x', 'container_runtime': 'lxc'}]},
     'value of container_runtime must be one of: podman, docker'),
    ({'services': []}, 'services is empty; list the services to audit, or give plan_file'),
    ({'services': [{'name': 'x', 'pid': 1}, {'name': 'x', 'pid': 2}]}, 'service name x appears twice'),
    ({'services': [{'name': 'x', 'pid': 1, 'expect': {'cpus': '3-1'}}]},
     "service x.expect.cpus: malformed CPU list '3-1'"),
    ({'services': [{'name': 'x', 'pid': 1, 'expect': {'mems': ['one']}}]},
     'service x.expect.mems must hold whole numbers'),
    ({'services': [{'name': 'x', 'pid': 1, 'expect': {'gpus': ['0']}}]},
     'service x.expect.gpus: 0 is not a GPU-... or MIG-... UUID'),
    ({'services': [{'name': 'x', 'pid': 1, 'expect': {'gpus': ['MIG-GPU-5c6f7a2e/1/0']}}]},
     'service x.expect.gpus: MIG-GPU-5c6f7a2e/1/0 is not a GPU-... or MIG-... UUID'),
    ({'services': [{'name': 'x', 'pid': 0}]}, 'service x: pid must be a positive whole number'),
    ({'services': [{'name': 'x', 'pid': 1, 'expect': {'memory_policy': 'local'}}]},
     'value of memory_policy must be one of: bind, preferred, interleave'),
    ({'services': [{'name': 'x', 'pid': 1}], 'max_remote_fraction': 2}, 'max_remote_fraction=2.0 must be between 0 and 1'),
    ({'services': [{'name': 'x', 'pid': 1}], 'sample_seconds': -1}, 'sample_seconds=-1.0 cannot be negative'),
    ({'plan_file': '/nonexistent/placement.json'}, 'plan_file /nonexistent/placement.json cannot be read'),
])
def test_bad_input_is_refused_with_the_fix(run_module, tree, clock, args, message):
    t = tree()
    with pytest.raises(ModuleFail) as failed:
        audit(run_module, t, **args)
    assert message in failed.value.result['msg']
    assert t.systemctl_calls() == []


def test_a_plan_that_is_not_one_is_refused(run_module, tree, clock, tmp_path):
    t = tree()
    plan = tmp_path / 'plan.json'
    plan.write_text('{"layout": []}')
    with pytest.raises(ModuleFail) as failed:
        audit(run_module, t, plan_file=str(plan))
    assert failed.value.result['msg'] == ('plan_file %s has no "services" list; it should be the placement plan '
                                          'written by the gpufleet.core.gpu_services role' % plan)


def test_memory_policies_narrow_the_allowed_nodes(run_module, tree, clock):
    t = tree()
    t.process(9001, '0-63', '0-1', '7f00 interleave:0-1 anon=2 N0=1 N1=1 kernelpagesize_kB=4\n')
    t.process(9002, '0-63', '0-1', '7f00 prefer:1 anon=2 N1=2 kernelpagesize_kB=4\n')
    t.process(9003, '0-63', '0-1', '7f00 bind:1 anon=2 N1=2 kernelpagesize_kB=4\n7f10 interleave:0-1 anon=1 N0=1\n')
    result = audit(run_module, t, sample_seconds=0, services=[
        {'name': name, 'pid': pid, 'expect': {'mems': '1'}} for name, pid in (('il', 9001), ('pref', 9002), ('mbind', 9003))])
    assert [entry['memory_nodes_list'] for entry in result['services']] == ['0-1', '0-1', '0-1']
    assert [entry['memory_policies'] for entry in result['services']] == [
        ['interleave:0-1'], ['prefer:1'], ['bind:1', 'interleave:0-1']]
    assert result['services'][0]['reasons'][0] == 'memory nodes 0-1 allowed, plan says 1'


def test_parse_numa_maps_reads_the_kernel_format():
    text = ('00400000 default file=/usr/bin/sleep mapped=8 N0=8 kernelpagesize_kB=4\n'
            '7f0000000000 interleave:0-1 anon=1024 dirty=1024 N0=512 N1=512 kernelpagesize_kB=4\n'
            '7f1000000000 prefer:1 huge anon=1 dirty=1 N1=1 kernelpagesize_kB=1048576\n'
            '7fff00000000 default\n')
    assert _audit_readings.parse_numa_maps(text, 4) == {0: 520, 1: 512 + 262144}
    assert _audit_readings.parse_numa_maps('', 4) == {}
    assert _audit_readings.parse_policies(text) == {'default': None, 'interleave:0-1': frozenset([0, 1]), 'prefer:1': None}
    assert _audit_readings.parse_policies('7f00 prefer (many):0-1 anon=1 N0=1\n7f10 weighted interleave:1 N1=1\n') == {
        'prefer (many):0-1': None, 'weighted interleave:1': frozenset([1])}


@pytest.mark.parametrize('content, words', [
    (None, 'cannot be read'),
    ('{not json', 'is not JSON'),
    ('[]', 'is not a placement plan'),
    ('{"version": 1}', 'has no "services" list'),
    ('{"version": 2, "services": []}', 'has version 2, but this release of gpufleet.core reads version 1'),
    ('{"version": 1, "services": [{"cpulist": "0"}]}', 'services[0] has no name'),
])
def test_a_plan_that_cannot_be_read_is_refused_through_the_plan_contract(tmp_path, content, words):
    path = tmp_path / 'placement.json'
    if content is not None:
        path.write_text(content)
    with pytest.raises(_numa_audit.NumaAuditError) as caught:
        _numa_audit.load_plan(str(path))
    assert words in str(caught.value) and str(path) in str(caught.value)
    assert ('or list the services to audit' in str(caught.value)) is (content is None)


def test_memory_policies_are_the_plan_contracts():
    documented = yaml.safe_load(numa_audit.DOCUMENTATION)['options']['services']['suboptions']['expect']
    assert tuple(documented['suboptions']['memory_policy']['choices']) == MEMORY_POLICIES
    assert tuple(numa_audit.SERVICE_SPEC['expect']['options']['memory_policy']['choices']) == MEMORY_POLICIES
    assert tuple(numa_audit.SERVICE_SPEC['container_runtime']['choices']) == CONTAINER_RUNTIMES


def test_a_service_is_held_to_the_devices_its_runtime_file_names_now(tmp_path):
    """After a reboot a MIG device may be back in its slot with a new UUID: the runtime file says which (_device_env),
    and the audit holds the service to it, not to the UUID the plan's run saw. Without a runtime file, the plan."""
    old, new = 'MIG-11111111-1111-1111-1111-111111111111', 'MIG-22222222-2222-2222-2222-222222222222'
    entry = {'name': 'imagegen', 'gpus': [old], 'gpu_uuids': ['GPU-33333333-3333-3333-3333-333333333333'],
             'cpulist': '8-9', 'memlist': '1', 'memory_policy': 'bind', 'unit': 'gpufleet-svc-imagegen.service'}
    path = tmp_path / 'placement.json'
    llm = dict(entry, name='llm', unit='gpufleet-svc-llm.service')
    path.write_text(json.dumps({'version': 1, 'services': [entry, llm]}))
    runtime = tmp_path / 'devices'
    runtime.mkdir()
    (runtime / 'gpufleet-svc-imagegen.service.env').write_text('# resolved at boot\nCUDA_VISIBLE_DEVICES=%s\n' % new)
    imagegen, llm = _numa_audit.load_plan(str(path), str(runtime))
    assert imagegen['expect']['gpus'] == [new] and llm['expect']['gpus'] == [old]
    assert [service['expect']['gpus'] for service in _numa_audit.normalise_services([imagegen, llm])] == [[new], [old]]
