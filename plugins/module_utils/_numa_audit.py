# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.core contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Audits running services against their NUMA placement: CPUs and memory nodes allowed, where their pages
are, how often they switch context, and which GPUs they hold.

Everything read from the system goes through ServiceHost (procfs, cgroup files, systemctl, the clock)
and the NVML adapter, so tests can stand in for both. This is a private module: its API may change
without notice.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import math
import os
import re
import time

from ansible_collections.gpufleet.core.plugins.module_utils._cpulist import CpuListError, format_cpulist, parse_cpulist
from ansible_collections.gpufleet.core.plugins.module_utils._device_env import RUNTIME_DIR, resolve_entries
from ansible_collections.gpufleet.core.plugins.module_utils._errors import GpufleetError
from ansible_collections.gpufleet.core.plugins.module_utils._audit_readings import gpu_holders, memory_nodes, parse_numa_maps, parse_policies
from ansible_collections.gpufleet.core.plugins.module_utils._plan import CONTAINER_RUNTIMES, MEMORY_POLICIES, PlanError
from ansible_collections.gpufleet.core.plugins.module_utils._plan import load_plan as read_plan_file
from ansible_collections.gpufleet.core.plugins.module_utils._values import is_device_uuid

# Where systemd's cgroup tree lives, below the sysfs root: pure v2, then the v1 hybrid name hierarchy
# and the hybrid's v2 tree. Every one that has the unit's cgroup is read, so nothing is missed.
CGROUP_TREES = (('fs', 'cgroup'), ('fs', 'cgroup', 'systemd'), ('fs', 'cgroup', 'unified'))
_STATUS_FIELD = re.compile(r'^(\w+):\s*(.*)$', re.MULTILINE)
# A longer context-switch sample only delays the answer.
MAX_SAMPLE_SECONDS = 300


class NumaAuditError(GpufleetError):
    """Input the audit cannot work with, or a system it cannot read; the message names the fix."""


class ServiceHost:
    """numa_audit's one door to the system: procfs and cgroup files through HostFiles, systemctl, the container
    runtimes, the clock.

    run_command is AnsibleModule.run_command or a test double; systemctl is the path of the program;
    find_program(name) returns a program's path or None (AnsibleModule.get_bin_path).
    """

    def __init__(self, files, run_command, systemctl, find_program=None):
        self.files = files
        self.run_command = run_command
        self.systemctl = systemctl
        self.find_program = find_program or (lambda name: None)

    @staticmethod
    def sleep(seconds):
        time.sleep(seconds)

    @staticmethod
    def clock():
        return time.monotonic()

    def unit_properties(self, unit):
        """LoadState, ActiveState, SubState and ControlGroup of a unit, from systemctl show."""
        if not self.systemctl:
            raise NumaAuditError('systemctl was not found on this host; audit services by pid instead of unit')
        command = [self.systemctl, 'show', '-p', 'LoadState', '-p', 'ActiveState', '-p', 'SubState',
                   '-p', 'ControlGroup', '--', unit]
        rc, out, err = self.run_command(command)
        if rc != 0:
            raise NumaAuditError('"%s" failed (rc=%d): %s' % (' '.join(command), rc, (err or out or '').strip()))
        props = {}
        for line in (out or '').splitlines():
            key, sep, value = line.partition('=')
            if sep:
                props[key.strip()] = value.strip()
        return props

    def container_pid(self, runtime, name):
        """(pid, None) of a running container's first process, or (None, reason) when it is not running."""
        program = self.find_program(runtime)
        if not program:
            raise NumaAuditError('%s was not found on this host; audit container %s with container_runtime set to '
                                 'the runtime that runs it, or by pid' % (runtime, name))
        rc, out, err = self.run_command([program, 'inspect', '--format', '{{.State.Pid}}', name])
        if rc != 0:
            return None, 'container %s is not running: %s inspect says %s' % (
                name, runtime, ' '.join((err or out or '').split()) or 'rc=%d' % rc)
        text = (out or '').strip()
        if not text.isdigit():
            raise NumaAuditError('"%s inspect" gave %r as the PID of container %s, not a number' % (runtime, text, name))
        if int(text) == 0:
            return None, 'container %s is not running (it exists, stopped)' % name
        return int(text), None

    def control_group(self, pid):
        """The cgroup path of a process in systemd's hierarchy (v2, or the v1 name=systemd one), or None."""
        paths = {}
        for line in (self.files.read_proc(str(pid), 'cgroup') or '').splitlines():
            parts = line.split(':', 2)
            if len(parts) == 3:
                paths[parts[1]] = parts[2]
        return paths.get('name=systemd') or paths.get('')

    def cgroup_pids(self, control_group):
        """PIDs in a cgroup and every cgroup below it (a container's processes may sit in sub-cgroups)."""
        relative = [part for part in control_group.split('/') if part]
        pids = set()
        for tree in CGROUP_TREES:
            top = os.path.join(self.files.sysfs_root, *(tree + tuple(relative)))
            for directory, _subdirs, names in os.walk(top):
                if 'cgroup.procs' not in names:
                    continue
                rel = os.path.relpath(os.path.join(directory, 'cgroup.procs'), self.files.sysfs_root)
                for word in (self.files.read_sys(*rel.split(os.sep)) or '').split():
                    if word.isdigit():
                        pids.add(int(word))
        return sorted(pids)

    def status(self, pid, tid=None):
        """Raw /proc/<pid>/status (or a thread's), or None when the process is gone."""
        if tid is None:
            return self.files.read_proc(str(pid), 'status')
        return self.files.read_proc(str(pid), 'task', str(tid), 'status')

    def thread_ids(self, pid):
        return [int(name) for name in self.files.list_proc(str(pid), 'task') if name.isdigit()]

    def numa_maps(self, pid):
        return self.files.read_proc(str(pid), 'numa_maps')

    @staticmethod
    def page_size_kb():
        return os.sysconf('SC_PAGE_SIZE') // 1024


# Input ----------------------------------------------------------------------------------------------------


def _node_set(value, what):
    """A CPU or node expectation as a sorted list: '2-3', 1, or [2, 3]."""
    if value is None:
        return None
    if isinstance(value, bool):
        raise NumaAuditError('%s must be a list such as "2-3" or [2, 3], not %r' % (what, value))
    if isinstance(value, int):
        value = [value]
    if isinstance(value, (list, tuple)):
        try:
            numbers = sorted(set(int(item) for item in value))
        except (TypeError, ValueError):
            raise NumaAuditError('%s must hold whole numbers, such as [2, 3]; got %r' % (what, value))
        if any(number < 0 for number in numbers):
            raise NumaAuditError('%s cannot hold negative numbers; got %r' % (what, value))
        return numbers
    try:
        return parse_cpulist(str(value))
    except CpuListError as exc:
        raise NumaAuditError('%s: %s' % (what, exc))


def _expectation(raw, where):
    raw = raw or {}
    unknown = sorted(set(raw) - set(('cpus', 'mems', 'gpus', 'memory_policy')))
    if unknown:
        raise NumaAuditError('%s.expect has unknown keys %s; it takes cpus, mems, gpus and memory_policy'
                             % (where, ', '.join(unknown)))
    policy = raw.get('memory_policy')
    if policy is not None and policy not in MEMORY_POLICIES:
        raise NumaAuditError('%s.expect.memory_policy is %r; use %s or %s'
                             % (where, policy, ', '.join(MEMORY_POLICIES[:-1]), MEMORY_POLICIES[-1]))
    gpus = raw.get('gpus')
    if gpus is not None:
        if isinstance(gpus, str) or not isinstance(gpus, (list, tuple)):
            raise NumaAuditError('%s.expect.gpus must be a list of GPU-/MIG- UUIDs' % where)
        bad = [gpu for gpu in gpus if not is_device_uuid(gpu)]
        if bad:
            raise NumaAuditError('%s.expect.gpus: %s is not a GPU-... or MIG-... UUID; name GPUs by UUID '
                                 '(indices reorder), as topology_facts reports them' % (where, bad[0]))
        gpus = sorted(set(gpus))
    return {
        'cpus': _node_set(raw.get('cpus'), '%s.expect.cpus' % where),
        'mems': _node_set(raw.get('mems'), '%s.expect.mems' % where),
        'gpus': gpus,
        'memory_policy': policy,
    }


def normalise_services(services):
    """Validated services: name, unit or pid, and the expectation with lists of ints."""
    if not services:
        raise NumaAuditError('services is empty; list the services to audit, or give plan_file')
    seen = set()
    result = []
    for index, service in enumerate(services):
        where = 'services[%d]' % index
        name = service.get('name')
        if not name:
            raise NumaAuditError('%s has no name; every service needs one' % where)
        if name in seen:
            raise NumaAuditError('service name %s appears twice; names must be unique' % name)
        seen.add(name)
        unit, pid, container = service.get('unit'), service.get('pid'), service.get('container')
        if [unit, pid, container].count(None) != 2:
            raise NumaAuditError('service %s: give exactly one of unit, pid and container' % name)
        if pid is not None and (isinstance(pid, bool) or not isinstance(pid, int) or pid <= 0):
            raise NumaAuditError('service %s: pid must be a positive whole number; got %r' % (name, pid))
        runtime = service.get('container_runtime') or CONTAINER_RUNTIMES[0]
        if runtime not in CONTAINER_RUNTIMES:
            raise NumaAuditError('service %s: container_runtime is %r; use %s' % (name, runtime, ' or '.join(CONTAINER_RUNTIMES)))
        result.append({'name': name, 'unit': unit, 'pid': pid, 'container': container,
                       'container_runtime': runtime if container is not None else None,
                       'expect': _expectation(service.get('expect'), 'service %s' % name)})
    return result


def load_plan(path, runtime_dir=RUNTIME_DIR):
    """Services from the plan the gpufleet.core.gpu_services role writes (/etc/gpufleet/placement.json), each held
    to the devices its runtime file in RUNTIME_DIR names, where it has one."""
    try:
        plan = read_plan_file(path, instead='list the services to audit')
    except PlanError as exc:
        raise NumaAuditError(str(exc))
    return [plan_service(entry) for entry in resolve_entries(plan.entries, runtime_dir)]


def plan_service(entry):
    """The audit's service for a plan Entry: its unit, or its container, and what the plan expects of it."""
    # A container's processes are the runtime's, not its unit's: the unit holds only the runtime's client.
    return {'name': entry.name, 'unit': None if entry.container else entry.unit, 'container': entry.container,
            'container_runtime': entry.container_runtime, 'expect': entry.expectations()}


# Reading processes ----------------------------------------------------------------------------------------


def _status_fields(text):
    return dict(_STATUS_FIELD.findall(text or ''))


def _context_switches(host, pids):
    """Voluntary + nonvoluntary context switches per thread, over every thread of the pids."""
    counts = {}
    for pid in pids:
        tids = host.thread_ids(pid)
        texts = [(tid, host.status(pid, tid)) for tid in tids] if tids else [(pid, host.status(pid))]
        for tid, text in texts:
            fields = _status_fields(text)
            try:
                counts[tid] = int(fields['voluntary_ctxt_switches']) + int(fields['nonvoluntary_ctxt_switches'])
            except (KeyError, ValueError):
                continue
    return counts


def _resolve(host, service):
    """(pids, None) or ([], reason) for a service that is not running."""
    if service['pid'] is not None:
        if host.status(service['pid']) is None:
            return [], 'process %d is not running' % service['pid']
        return [service['pid']], None
    if service.get('container') is not None:
        return _resolve_container(host, service['container_runtime'], service['container'])
    unit = service['unit']
    props = host.unit_properties(unit)
    if props.get('LoadState') == 'not-found':
        return [], 'unit %s is not running: systemd does not know it' % unit
    state = props.get('ActiveState')
    if state not in ('active', 'reloading', 'deactivating') or not props.get('ControlGroup'):
        return [], 'unit %s is not running (ActiveState=%s, SubState=%s)' % (unit, state, props.get('SubState'))
    pids = [pid for pid in host.cgroup_pids(props['ControlGroup']) if host.status(pid) is not None]
    if not pids:
        return [], 'unit %s is not running: its cgroup %s holds no process' % (unit, props['ControlGroup'])
    return pids, None


def _resolve_container(host, runtime, name):
    """Every process in the cgroup of the container's first process (the runtime's conmon or shim is not)."""
    pid, reason = host.container_pid(runtime, name)
    if reason:
        return [], reason
    group = host.control_group(pid)
    pids = host.cgroup_pids(group) if group else []
    if pid not in pids:
        pids = sorted(set(pids) | set([pid]))
    pids = [each for each in pids if host.status(each) is not None]
    if not pids:
        return [], 'container %s is not running: its process %d is gone' % (name, pid)
    return pids, None


# Judging -------------------------------------------------------------------------------------------------


def _percent(fraction):
    return '%.1f%%' % (100.0 * fraction)


def _judge_list(reasons, what, seen, expected):
    """One reason per distinct allowed set that differs from the plan."""
    if expected is None:
        return
    wrong = [(allowed, pids) for allowed, pids in sorted(seen.items()) if list(allowed) != expected]
    for allowed, pids in wrong:
        where = ' (pid %s)' % ', '.join(str(pid) for pid in pids) if len(seen) > 1 else ''
        reasons.append('%s %s allowed, plan says %s%s' % (what, format_cpulist(allowed) or 'none',
                                                          format_cpulist(expected), where))


def _label(service):
    if service.get('container') is not None:
        return 'container %s' % service['container']
    return service['unit'] or 'process %d' % service['pid']


def _audit_one(host, service, pids, rate, holders, nvml_reason, base_page_kb, max_remote):
    expect = service['expect']
    cpus_seen, mems_seen, nodes_seen, pages, policies = {}, {}, {}, {}, set()
    live = []
    for pid in pids:
        fields = _status_fields(host.status(pid))
        if not fields:
            continue  # exited while being audited
        live.append(pid)
        allowed = {}
        for key, seen in (('Cpus_allowed_list', cpus_seen), ('Mems_allowed_list', mems_seen)):
            try:
                allowed[key] = tuple(parse_cpulist(fields.get(key, '')))
            except CpuListError as exc:
                raise NumaAuditError('%s of process %d: %s' % (key, pid, exc))
            seen.setdefault(allowed[key], []).append(pid)
        numa_maps = host.numa_maps(pid)
        try:
            pid_policies = parse_policies(numa_maps)
        except CpuListError as exc:
            raise NumaAuditError('memory policy in numa_maps of process %d: %s' % (pid, exc))
        policies.update(pid_policies)
        nodes_seen.setdefault(memory_nodes(allowed['Mems_allowed_list'], pid_policies), []).append(pid)
        for node, count in parse_numa_maps(numa_maps, base_page_kb).items():
            pages[node] = pages.get(node, 0) + count
    if not live:
        return {'pids': [], 'reasons': ['%s is not running: its processes exited during the audit' % _label(service)]}
    reasons = []
    _judge_list(reasons, 'CPUs', cpus_seen, expect['cpus'])
    # A preferred policy lets pages spill to other nodes by design: only their share is judged.
    if expect['memory_policy'] != 'preferred':
        _judge_list(reasons, 'memory nodes', nodes_seen, expect['mems'])

    total = sum(pages.values())
    remote = remote_fraction = None
    if expect['mems'] is not None:
        remote = sum(count for node, count in pages.items() if node not in expect['mems'])
        remote_fraction = round(float(remote) / total, 6) if total else None
        if remote_fraction is not None and remote_fraction > max_remote:
            reasons.append('%s of pages on remote nodes (max %s)' % (_percent(remote_fraction), _percent(max_remote)))

    held = None
    if holders is not None:
        held = sorted(uuid for uuid, users in holders.items() if users & set(live))
        if expect['gpus'] is not None and held != expect['gpus']:
            reasons.append('holds %s, plan says %s' % (', '.join(held) or 'no GPU', ', '.join(expect['gpus']) or 'none'))
    elif expect['gpus']:  # a service planned on no GPU has none to check, even where NVML is missing
        reasons.append('GPUs not checked: %s' % nvml_reason)

    return {
        'pids': live,
        'cpus_allowed_list': format_cpulist(set(cpu for allowed in cpus_seen for cpu in allowed)),
        'mems_allowed_list': format_cpulist(set(node for allowed in mems_seen for node in allowed)),
        'memory_policies': sorted(policies),
        'memory_nodes_list': format_cpulist(set(node for allowed in nodes_seen for node in allowed)),
        'pages_per_node': dict((str(node), count) for node, count in sorted(pages.items())),
        'pages_total': total,
        'local_nodes': expect['mems'],
        'remote_pages': remote,
        'remote_fraction': remote_fraction,
        'context_switches_per_second': rate,
        'gpus_held': held,
        'gpus_held_reason': None if holders is not None else nvml_reason,
        'reasons': reasons,
    }


_EMPTY = {
    'pids': [], 'cpus_allowed_list': None, 'mems_allowed_list': None, 'memory_policies': [], 'memory_nodes_list': None,
    'pages_per_node': {}, 'pages_total': 0,
    'local_nodes': None, 'remote_pages': None, 'remote_fraction': None, 'context_switches_per_second': None,
    'gpus_held': None, 'gpus_held_reason': None,
}


def audit(host, services, nvml_library, max_remote_fraction=0.02, sample_seconds=1.0):
    """Audit validated services; returns (service results, failed service names)."""
    if not 0.0 <= max_remote_fraction <= 1.0:
        raise NumaAuditError('max_remote_fraction=%s must be between 0 and 1 (0.02 is 2%%)' % max_remote_fraction)
    if sample_seconds < 0:
        raise NumaAuditError('sample_seconds=%s cannot be negative; use 0 to skip the context-switch sample'
                             % sample_seconds)
    if math.isnan(sample_seconds) or sample_seconds > MAX_SAMPLE_SECONDS:  # NaN would skip it, infinity never end it
        raise NumaAuditError('sample_seconds=%s: expected a number of seconds from 0 to %d'
                             % (sample_seconds, MAX_SAMPLE_SECONDS))
    resolved = [(service,) + _resolve(host, service) for service in services]

    running = [pid for _service, pids, _reason in resolved for pid in pids]
    rates = {}
    if running and sample_seconds > 0:
        start, before = host.clock(), _context_switches(host, running)
        host.sleep(sample_seconds)
        after = _context_switches(host, running)
        elapsed = max(host.clock() - start, 1e-6)
        for service, pids, _reason in resolved:
            tids = set()
            for pid in pids:
                tids.update(host.thread_ids(pid) or [pid])
            delta = sum(max(after[tid] - before.get(tid, 0), 0) for tid in tids if tid in after)
            rates[service['name']] = round(delta / elapsed, 1)

    holders, nvml_reason = gpu_holders(nvml_library) if running else (None, None)
    base_page_kb = host.page_size_kb()
    results, failed = [], []
    for service, pids, reason in resolved:
        entry = dict(_EMPTY, name=service['name'], unit=service['unit'], container=service.get('container'),
                     reasons=[reason] if reason else [])
        if not reason:
            entry.update(_audit_one(host, service, pids, rates.get(service['name']), holders, nvml_reason,
                                    base_page_kb, max_remote_fraction))
        entry['local_nodes'] = service['expect']['mems']
        entry['passed'] = not entry['reasons']
        if not entry['passed']:
            failed.append(service['name'])
        results.append(entry)
    return results, failed
