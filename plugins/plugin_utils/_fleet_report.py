# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.core contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The fleet report: its data, the changes since the previous report, and one self-contained HTML page.

Pure code for the fleet_report action. Input is one dict per host, as playbooks/report.yml builds it from hostvars:

    name           the inventory name (required, unique)
    dc, rack, class  inventory labels (strings; missing ones show as "-")
    topology       ansible_facts['gpufleet_topology'] (gpufleet.core.topology_facts), or None
    plan           the gpu_services plan: its document ({"version": 1, "services": [...]}), its JSON text, or
                   place_services' list; or None
    audit          the gpufleet.core.numa_audit result (passed, failed_services, services), or None
    reserved_cpus  CPUs no service gets (a CPU list or a list of numbers), or None
    failure        why the host failed in the run: a string, or the site's _gpufleet_failure (stage, task, reason)
    quarantined    whether preflight quarantined the host
    problems       what the report's own reading of the host found missing (strings)

Bad data about a host never stops the report: the host is drawn with what is usable, and the page says what is
missing. Only input that is not a list of named hosts is refused (FleetReportError), before anything is written.
Every text from inventory or facts is escaped; the page holds no script and fetches nothing.
This is a private module: its API may change without notice.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import math
from html import escape

from ansible_collections.gpufleet.core.plugins.module_utils._cpulist import CpuListError, format_cpulist, parse_cpulist
from ansible_collections.gpufleet.core.plugins.module_utils._errors import GpufleetError

REPORT_VERSION = 1
# MIG divides a GPU into 7 compute and 8 memory slices (NVIDIA's MIG user guide).
COMPUTE_SLICES = 7
MEMORY_SLICES = 8
# A service that passed its audit but has at least this share of its pages remote is drawn in the warning colour.
REMOTE_WARNING = 0.01


class FleetReportError(GpufleetError):
    """Input the report cannot be made from; the message names the fix."""


# -- the data ------------------------------------------------------------------------------------------------------


def _text(value, default=''):
    if value is None:
        return default
    return value if isinstance(value, str) else str(value)


def _number(value):
    """An int from a fact's number, or None (booleans are not numbers here)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return int(value)


def _cpus(value, what, problems):
    """CPU numbers from a CPU list or a list of numbers; a problem (and no CPUs) when it is neither."""
    if value is None or value == '':
        return []
    try:
        if isinstance(value, str):
            return parse_cpulist(value)
        if isinstance(value, (list, tuple)) and all(_number(cpu) is not None and cpu >= 0 for cpu in value):
            return sorted(set(int(cpu) for cpu in value))
        raise CpuListError('expected a CPU list or a list of CPU numbers, got %r' % (value,))
    except CpuListError as exc:
        problems.append('%s is unusable (%s)' % (what, exc))
        return []


def _gib(mb):
    return '%.0f GiB' % (mb / 1024.0) if mb is not None else '? GiB'


def _plan_entries(plan, problems):
    """The plan's entries (dicts with a name), from its document, its JSON text or place_services' list."""
    if plan is None or plan == '':
        return None
    if isinstance(plan, str):
        try:
            plan = json.loads(plan)
        except ValueError as exc:
            problems.append('the services plan is not JSON (%s)' % exc)
            return None
    if isinstance(plan, dict):
        if plan.get('version', 1) != 1:
            problems.append('the services plan has version %r, which this report does not read' % plan.get('version'))
            return None
        plan = plan.get('services')
    if not isinstance(plan, list):
        problems.append('the services plan is not a plan document (version and services)')
        return None
    entries = [item for item in plan if isinstance(item, dict) and isinstance(item.get('name'), str)]
    if len(entries) != len(plan):
        problems.append('%d entr(ies) of the services plan have no name and are not drawn' % (len(plan) - len(entries)))
    return entries


def _profile_table(topology, model):
    found = {}
    for profile in (topology.get('mig_profiles') or {}).get(model) or []:
        if isinstance(profile, dict) and isinstance(profile.get('name'), str):
            found[profile['name']] = profile
    return found


def _instance(raw, profiles, gpu_label):
    """A MIG GPU instance on the 7 compute / 8 memory slices: its spans, profile and compute instances' UUIDs."""
    profile = _text(raw.get('profile'), '?')
    placement = raw.get('placement') if isinstance(raw.get('placement'), dict) else {}
    table = profiles.get(profile) or {}
    start = _number(placement.get('start'))
    compute = _number(table.get('slice_count'))
    cis = [ci for ci in raw.get('compute_instances') or [] if isinstance(ci, dict)]
    if compute is None:
        compute = sum(_number(ci.get('slice_count')) or 0 for ci in cis) or _number(placement.get('size'))
    # The memory span of a placement: the profile's table says it for this start (a 3g takes 4 memory slices);
    # the fact's placement size, else the compute slices, when the table is not in the fact.
    memory = None
    for allowed in table.get('placements') or []:
        if isinstance(allowed, dict) and _number(allowed.get('start')) == start:
            memory = _number(allowed.get('size'))
    memory = memory or _number(placement.get('size')) or compute
    if start is None or not compute or not memory or start < 0 or start + memory > MEMORY_SLICES:
        return None, '%s: MIG instance %s has no usable placement (%r)' % (gpu_label, profile, placement)
    compute = min(compute, COMPUTE_SLICES)
    # A GPU instance's compute slices begin at its memory start, as far as the 7 compute slices allow.
    compute_start = min(start, COMPUTE_SLICES - compute)
    return {'profile': profile, 'memory_start': start, 'memory_slices': memory, 'compute_start': compute_start,
            'compute_slices': compute, 'uuids': [_text(ci.get('uuid')) for ci in cis if ci.get('uuid')]}, None


def _gpus(topology, problems):
    gpus = []
    for position, raw in enumerate(topology.get('gpus') or []):
        if not isinstance(raw, dict):
            problems.append('GPU entry %d of the topology fact is not a GPU' % position)
            continue
        index = _number(raw.get('index'))
        label = 'GPU%s' % (index if index is not None else '?')
        mig = raw.get('mig') if isinstance(raw.get('mig'), dict) else {}
        instances = []
        if mig.get('mode_current') == 'enabled':
            profiles = _profile_table(topology, raw.get('name'))
            for item in mig.get('gpu_instances') or []:
                found, problem = _instance(item, profiles, label) if isinstance(item, dict) else (None, label + ': a MIG instance is not a dict')
                if problem:
                    problems.append(problem)
                else:
                    instances.append(found)
            instances.sort(key=lambda item: item['memory_start'])
        gpus.append({'label': label, 'index': index, 'uuid': _text(raw.get('uuid')), 'model': _text(raw.get('name'), 'unknown GPU'),
                     'memory_mb': _number(raw.get('memory_total_mb')), 'node': _number(raw.get('numa_node')),
                     'mig': mig.get('mode_current') == 'enabled', 'instances': instances})
    return gpus


def _topology(topology, reserved, problems):
    """The drawn parts of a gpufleet_topology fact: sockets, nodes, GPUs, driver; None when it is unusable."""
    if not isinstance(topology, dict) or not isinstance(topology.get('numa_nodes'), list):
        return None
    nodes = []
    for raw in topology['numa_nodes']:
        if not isinstance(raw, dict) or _number(raw.get('id')) is None:
            problems.append('a NUMA node of the topology fact has no id and is not drawn')
            continue
        cpus = _cpus(raw.get('cpulist', raw.get('cpus')), 'node %s\'s CPU list' % raw.get('id'), problems)
        nodes.append({'id': _number(raw['id']), 'cpus': cpus, 'cpulist': format_cpulist(cpus),
                      'reserved': [cpu for cpu in cpus if cpu in reserved],
                      'memory_mb': _number(raw.get('memory_total_mb'))})
    nodes.sort(key=lambda node: node['id'])
    cpu = topology.get('cpu') if isinstance(topology.get('cpu'), dict) else {}
    nvml = topology.get('nvml') if isinstance(topology.get('nvml'), dict) else {}
    gpus = _gpus(topology, problems)
    known = set(node['id'] for node in nodes)
    for gpu in gpus:
        if gpu['node'] is not None and gpu['node'] not in known:
            problems.append('%s is on node %s, which the fact does not list; drawn with the GPUs of unknown node' % (gpu['label'], gpu['node']))
            gpu['node'] = None
    return {'sockets': _number(cpu.get('sockets')), 'cpu_model': _text(cpu.get('model')), 'nodes': nodes, 'gpus': gpus,
            'nvml_available': bool(nvml.get('available')), 'nvml_reason': _text(nvml.get('reason')),
            'driver': _text(nvml.get('driver_version')), 'cuda': _text(nvml.get('cuda_driver_version'))}


def _devices(topology):
    """UUID -> (GPU, MIG instance or None), for every GPU and compute instance of the topology."""
    found = {}
    for gpu in topology['gpus'] if topology else []:
        found[gpu['uuid']] = (gpu, None)
        for instance in gpu['instances']:
            for uuid in instance['uuids']:
                found[uuid] = (gpu, instance)
    return found


def _audit_entries(audit, problems):
    if audit is None:
        return None
    if not isinstance(audit, dict) or not isinstance(audit.get('services'), list):
        problems.append('the audit result is not a gpufleet.core.numa_audit result (passed, services)')
        return None
    return dict((item['name'], item) for item in audit['services'] if isinstance(item, dict) and isinstance(item.get('name'), str))


def _service(entry, topology, devices, audits, problems):
    name = entry['name']
    cpus = _cpus(entry.get('cpus', entry.get('cpulist')), 'service %s\'s CPUs' % name, problems)
    node_of_cpu = dict((cpu, node['id']) for node in topology['nodes'] for cpu in node['cpus']) if topology else {}
    cpu_nodes = sorted(set(node_of_cpu[cpu] for cpu in cpus if cpu in node_of_cpu))
    mems = sorted(set(_number(mem) for mem in entry.get('mems') or [] if _number(mem) is not None))
    drawn, unknown = [], []
    mps = entry.get('mps') if isinstance(entry.get('mps'), dict) else None
    share = None
    if mps:
        percentage = ((mps.get('environment') or {}).get('CUDA_MPS_ACTIVE_THREAD_PERCENTAGE')
                      or (entry.get('environment') or {}).get('CUDA_MPS_ACTIVE_THREAD_PERCENTAGE'))
        try:
            share = max(1, min(100, int(str(percentage)))) if percentage is not None else 100
        except ValueError:
            share = 100
    for uuid in entry.get('gpus') or []:
        uuid = _text(uuid)
        if uuid in devices:
            gpu, instance = devices[uuid]
            drawn.append({'uuid': uuid, 'gpu': gpu['uuid'], 'gpu_label': gpu['label'], 'node': gpu['node'],
                          'instance': instance['memory_start'] if instance else None,
                          'label': '%s %s@%d' % (gpu['label'], instance['profile'], instance['memory_start']) if instance else gpu['label']})
        else:
            unknown.append(uuid)
    if unknown and topology:
        problems.append('service %s uses %s, which the topology fact does not have' % (name, ', '.join(unknown)))
    gpu_nodes = sorted(set(device['node'] for device in drawn if device['node'] is not None))
    touched = sorted(set(cpu_nodes) | set(gpu_nodes) | set(mems))
    audit = None
    if audits is not None:
        found = audits.get(name)
        if found is None:
            audit = {'state': 'missing', 'remote_fraction': None, 'reasons': ['the audit did not cover this service']}
        else:
            fraction = found.get('remote_fraction')
            fraction = float(fraction) if isinstance(fraction, (int, float)) and not isinstance(fraction, bool) else None
            passed = found.get('passed') is True
            state = 'fail' if not passed else ('pass-remote' if fraction is not None and fraction >= REMOTE_WARNING else 'pass')
            audit = {'state': state, 'remote_fraction': fraction,
                     'reasons': [_text(reason) for reason in found.get('reasons') or []]}
    return {'name': name, 'unit': _text(entry.get('unit')), 'cpus': cpus, 'cpulist': format_cpulist(cpus),
            'cpu_nodes': cpu_nodes, 'mems': mems, 'memory_policy': _text(entry.get('memory_policy')),
            'numa_node': _number(entry.get('numa_node')), 'devices': drawn, 'unknown_devices': unknown,
            'mps_percentage': share, 'mps_device': _text(mps.get('device')) if mps else None,
            'nodes': touched, 'cross_node': len(touched) > 1,
            'audit': audit or {'state': 'none', 'remote_fraction': None, 'reasons': []}}


def _failure_text(failure):
    if isinstance(failure, dict):
        return '%s stage (%s): %s' % (_text(failure.get('stage'), 'unknown'), _text(failure.get('task'), '?'),
                                      _text(failure.get('reason'), 'failed'))
    return _text(failure)


def host_model(raw):
    """One host's data in the report (JSON-able): labels, status, what is missing, topology, services."""
    problems = [_text(problem) for problem in raw.get('problems') or [] if problem]
    missing = []
    reserved = set(_cpus(raw.get('reserved_cpus'), 'reserved_cpus', problems))
    topology = _topology(raw.get('topology'), reserved, problems)
    failure = _failure_text(raw.get('failure')) if raw.get('failure') else ''
    if topology is None:
        missing.append('topology facts' + (' (the host failed before they were gathered)' if failure or problems else
                                           ' (gpufleet.core.topology_facts has not run on it)'))
    elif not topology['gpus']:
        why = topology['nvml_reason'] if not topology['nvml_available'] else ''
        missing.append('GPUs: none found%s' % (' (NVML: %s)' % why if why else ''))
    entries = _plan_entries(raw.get('plan'), problems)
    if entries is None:
        missing.append('services plan')
    audits = _audit_entries(raw.get('audit'), problems)
    if audits is None and entries:
        missing.append('audit')
    devices = _devices(topology)
    services = [_service(entry, topology, devices, audits, problems) for entry in entries or []]
    failed_audits = [service['name'] for service in services if service['audit']['state'] in ('fail', 'missing')]
    if raw.get('quarantined'):
        status = 'quarantined'
    elif failure:
        status = 'failed'
    elif topology is None:
        status = 'unknown'
    elif failed_audits:
        status = 'audit failed'
    else:
        status = 'ok'
    return {'name': _text(raw['name']), 'dc': _text(raw.get('dc')), 'rack': _text(raw.get('rack')),
            'class': _text(raw.get('class')), 'status': status, 'failure': failure, 'missing': missing,
            'problems': problems, 'topology': topology, 'services': services, 'failed_audits': failed_audits}


def _count(found, key):
    found[key] = found.get(key, 0) + 1


def summary(hosts):
    """The fleet's counts: hosts by data centre and class, GPUs by model and MIG use, versions, failures."""
    result = {'hosts': len(hosts), 'by_dc_class': {}, 'by_dc': {}, 'by_class': {}, 'gpus': 0, 'gpus_by_model': {},
              'drivers': {}, 'cuda': {}, 'failed_hosts': [], 'quarantined_hosts': [], 'unknown_hosts': [],
              'failed_audits': [], 'hosts_without_gpus': [], 'services': 0, 'services_passed': 0,
              'mig_instances': 0, 'mps_shares': 0, 'cross_node_services': 0, 'not_in_run': [],
              'not_drawn': []}
    for host in hosts:
        dc, klass = host['dc'] or '-', host['class'] or '-'
        if host.get('as_of') is not None:
            result['not_in_run'].append({'host': host['name'], 'as_of': host['as_of']})
        _count(result['by_dc'], dc)
        _count(result['by_class'], klass)
        _count(result['by_dc_class'].setdefault(dc, {}), klass)
        if host['status'] == 'failed':
            result['failed_hosts'].append({'host': host['name'], 'reason': host['failure']})
        elif host['status'] == 'quarantined':
            result['quarantined_hosts'].append({'host': host['name'], 'reason': host['failure']})
        elif host['status'] == 'unknown':
            result['unknown_hosts'].append({'host': host['name'], 'reason': '; '.join(host['missing'] + host['problems'])})
        topology = host['topology']
        if topology:
            if not topology['gpus']:
                result['hosts_without_gpus'].append(host['name'])
            if topology['driver']:
                _count(result['drivers'], topology['driver'])
            if topology['cuda']:
                _count(result['cuda'], topology['cuda'])
            for gpu in topology['gpus']:
                result['gpus'] += 1
                model = result['gpus_by_model'].setdefault(gpu['model'], {'gpus': 0, 'mig_enabled': 0, 'mig_instances': 0, 'profiles': {}})
                model['gpus'] += 1
                if gpu['mig']:
                    model['mig_enabled'] += 1
                    model['mig_instances'] += len(gpu['instances'])
                    result['mig_instances'] += len(gpu['instances'])
                    for instance in gpu['instances']:
                        _count(model['profiles'], instance['profile'])
        for service in host['services']:
            result['services'] += 1
            result['services_passed'] += service['audit']['state'] in ('pass', 'pass-remote')
            result['mps_shares'] += service['mps_device'] is not None
            result['cross_node_services'] += service['cross_node']
            if service['audit']['state'] in ('fail', 'missing'):
                result['failed_audits'].append({'host': host['name'], 'service': service['name'],
                                                'remote_fraction': service['audit']['remote_fraction'],
                                                'reasons': service['audit']['reasons']})
    return result


def build_report(hosts, generated_at=''):
    """The report's data from the hosts' inputs (see the module's doc); FleetReportError for input that is not a
    list of named hosts."""
    if not isinstance(hosts, list):
        raise FleetReportError('hosts must be a list with one dict per host (name, topology, plan, audit, ...), got %s'
                               % type(hosts).__name__)
    problems, names = [], set()
    for position, raw in enumerate(hosts, 1):
        if not isinstance(raw, dict) or not isinstance(raw.get('name'), str) or not raw['name']:
            problems.append('hosts entry %d has no name (each entry needs name, the inventory hostname)' % position)
        elif raw['name'] in names:
            problems.append('host %s is listed twice; list each host once' % raw['name'])
        else:
            names.add(raw['name'])
    if problems:
        raise FleetReportError('; '.join(problems))
    # By name: the order hosts come in (play hosts, a union of lists) is not stable from run to run.
    models = sorted((host_model(raw) for raw in hosts), key=lambda host: host['name'])
    return {'version': REPORT_VERSION, 'generated_at': _text(generated_at), 'summary': summary(models), 'hosts': models}


def comparable(data):
    """The data without when it was made: two runs that found the same fleet give the same value."""
    return dict((key, value) for key, value in data.items() if key != 'generated_at') if isinstance(data, dict) else data


# -- the previous report and what changed --------------------------------------------------------------------------


def read_previous(text, where):
    """(data, None) from a previous report's JSON text, or (None, what is wrong with it, in words)."""
    if text is None:
        return None, 'there is no previous report (%s); this is the first one' % where
    try:
        data = json.loads(text)
    except ValueError as exc:
        return None, 'the previous report %s is not JSON (%s), so the changes cannot be shown this time; the next ' \
                     'report compares with this one' % (where, exc)
    if not isinstance(data, dict) or not isinstance(data.get('hosts'), list):
        return None, 'the previous report %s is not a fleet report (no hosts list)' % where
    if data.get('version') != REPORT_VERSION:
        return None, 'the previous report %s has version %r; this release reads version %d' % (
            where, data.get('version'), REPORT_VERSION)
    if not all(isinstance(host, dict) and isinstance(host.get('name'), str) for host in data['hosts']):
        return None, 'the previous report %s has hosts without a name' % where
    return data, None


def _layout(host):
    """A host's hardware layout in short lines, to compare across reports."""
    topology = host.get('topology')
    if not isinstance(topology, dict):
        return []
    lines = ['node %s: CPUs %s, %s' % (node.get('id'), node.get('cpulist') or 'none', _gib(node.get('memory_mb')))
             for node in topology.get('nodes') or [] if isinstance(node, dict)]
    for gpu in topology.get('gpus') or []:
        if isinstance(gpu, dict):
            mig = ', MIG %s' % ' '.join('%s@%s' % (item.get('profile'), item.get('memory_start'))
                                        for item in gpu.get('instances') or []) if gpu.get('mig') else ''
            lines.append('%s %s on node %s%s' % (gpu.get('label'), gpu.get('model'), gpu.get('node'), mig))
    return lines


def _placement(service):
    devices = ' '.join(device.get('label', '?') for device in service.get('devices') or []) or 'no GPU'
    share = ' (MPS %s%%)' % service['mps_percentage'] if service.get('mps_device') else ''
    return 'CPUs %s, memory %s, %s%s' % (service.get('cpulist') or 'none', format_cpulist(service.get('mems') or []) or '-',
                                         devices, share)


def _audit_words(audit):
    audit = audit or {}
    state = audit.get('state')
    fraction = audit.get('remote_fraction')
    remote = ' (%.1f%% remote)' % (fraction * 100) if isinstance(fraction, (int, float)) else ''
    return {'pass': 'passed', 'pass-remote': 'passed', 'fail': 'FAILED', 'missing': 'not covered'}.get(state, 'not audited') + remote


def diff_reports(previous, current, problem=None):
    """What changed between two reports' data: hosts added and removed, status, layouts, placements, audits."""
    changes = {'previous': {'found': previous is not None, 'problem': problem or '',
                            'generated_at': _text((previous or {}).get('generated_at'))},
               'hosts_added': [], 'hosts_removed': [], 'status': [], 'layouts': [], 'placements': [], 'audits': []}
    if previous is None:
        return changes
    before = dict((host['name'], host) for host in previous['hosts'])
    after = dict((host['name'], host) for host in current['hosts'])
    changes['hosts_added'] = [name for name in after if name not in before]
    changes['hosts_removed'] = sorted(name for name in before if name not in after)
    for name, host in after.items():
        old = before.get(name)
        if old is None:
            continue
        if old.get('status') != host['status']:
            changes['status'].append({'host': name, 'before': _text(old.get('status')), 'after': host['status']})
        old_layout, new_layout = _layout(old), _layout(host)
        if old_layout != new_layout:
            changes['layouts'].append({'host': name, 'removed': [line for line in old_layout if line not in new_layout],
                                       'added': [line for line in new_layout if line not in old_layout]})
        old_services = dict((item.get('name'), item) for item in old.get('services') or [] if isinstance(item, dict))
        new_services = dict((item['name'], item) for item in host['services'])
        for service in list(new_services) + sorted(set(old_services) - set(new_services)):
            was, now = old_services.get(service), new_services.get(service)
            was_text, now_text = _placement(was) if was else None, _placement(now) if now else None
            if was_text != now_text:
                changes['placements'].append({'host': name, 'service': service, 'before': was_text, 'after': now_text})
            if was and now and _audit_words(was.get('audit')) != _audit_words(now['audit']):
                changes['audits'].append({'host': name, 'service': service, 'before': _audit_words(was.get('audit')),
                                          'after': _audit_words(now['audit'])})
    return changes


def _ordered(services):
    """Services across nodes first: their links then stay short and cross no other service's row."""
    return sorted(services, key=lambda service: not service['cross_node'])


def change_count(changes):
    return sum(len(changes[key]) for key in ('hosts_added', 'hosts_removed', 'status', 'layouts', 'placements', 'audits'))


# -- the drawing ---------------------------------------------------------------------------------------------------

FONT = 11
SMALL = 9
# The drawing's text is monospace, so its width is known here: DejaVu Sans Mono's advance is 0.602 em. Each text
# also gets textLength, so a browser with another font still keeps it inside its box.
CHAR = 0.61
WIDTH = 660
PAD = 10
GAP = 10


def _width(text, size):
    return len(text) * size * CHAR


def _fit(text, size, room):
    """TEXT cut with an ellipsis to fit ROOM pixels at SIZE."""
    most = int(room // (size * CHAR))
    if len(text) <= most:
        return text
    return text[:max(most - 1, 0)] + '\u2026' if most > 0 else ''


def _n(value):
    return ('%.2f' % value).rstrip('0').rstrip('.')


class Canvas:
    """An SVG drawing that knows each element's box, so that it can say whether all of them fit where they belong."""

    def __init__(self, width):
        self.width = width
        self.height = 0
        self.parts = []
        self.overflows = []

    def _check(self, box, within, what):
        x, y, w, h = box
        self.height = max(self.height, y + h)
        if x < -0.01 or y < -0.01 or x + w > self.width + 0.01:
            self.overflows.append(what + ' (outside the drawing)')
        if within is not None:
            bx, by, bw, bh = within
            if x < bx - 0.01 or y < by - 0.01 or x + w > bx + bw + 0.01 or y + h > by + bh + 0.01:
                self.overflows.append(what)

    def open(self, cls, box=None, **data):
        attrs = ''.join(' data-%s="%s"' % (key.replace('_', '-'), escape(_text(value), True)) for key, value in sorted(data.items()))
        if box is not None:
            attrs += ' data-box="%s"' % ' '.join(_n(value) for value in box)
        self.parts.append('<g class="%s"%s>' % (cls, attrs))

    def close(self):
        self.parts.append('</g>')

    def rect(self, box, cls, within=None, title=None, rx=0):
        x, y, w, h = box
        self._check(box, within, 'rect %s' % cls)
        tip = '<title>%s</title>' % escape(title) if title else ''
        corner = ' rx="%s"' % _n(rx) if rx else ''
        self.parts.append('<rect class="%s" x="%s" y="%s" width="%s" height="%s"%s>%s</rect>' % (
            cls, _n(x), _n(y), _n(w), _n(h), corner, tip))

    def text(self, x, y, text, room, within=None, size=FONT, cls='', anchor='start'):
        """TEXT with its baseline at y, cut to ROOM pixels; x is its start, middle or end by ANCHOR."""
        text = _fit(text, size, room)
        if not text:
            return
        width = _width(text, size)
        left = {'start': x, 'middle': x - width / 2.0, 'end': x - width}[anchor]
        self._check((left, y - size * 0.8, width, size), within, 'text %r' % text)
        self.parts.append('<text class="%s" x="%s" y="%s" font-size="%s" text-anchor="%s" textLength="%s" '
                          'lengthAdjust="spacingAndGlyphs">%s</text>'
                          % (cls, _n(x), _n(y), size, anchor, _n(width), escape(text)))

    def line(self, points, cls, within=None):
        xs, ys = [p[0] for p in points], [p[1] for p in points]
        self._check((min(xs), min(ys), max(xs) - min(xs), max(ys) - min(ys)), within, 'path %s' % cls)
        self.parts.append('<path class="%s" d="M%s"/>' % (cls, ' L'.join('%s %s' % (_n(x), _n(y)) for x, y in points)))

    def svg(self, label, counts):
        height = math.ceil(self.height + PAD)
        view = (0, 0, self.width, height)
        data = ''.join(' data-%s="%s"' % (key.replace('_', '-'), value) for key, value in sorted(counts.items()))
        return ('<svg class="topology" viewBox="0 0 %d %d" width="%d" height="%d" '
                'role="img" aria-label="%s"%s data-overflows="%d">%s</svg>' % (
                    view[2], view[3], view[2], view[3], escape(label), data, len(self.overflows), ''.join(self.parts)))


def _audit_class(service):
    return 'audit-' + service['audit']['state']


def _service_title(service):
    audit = service['audit']
    words = _audit_words(audit)
    reasons = ('; ' + '; '.join(audit['reasons'])) if audit['reasons'] else ''
    return '%s: %s; audit %s%s' % (service['name'], _placement(service), words, reasons)


def _columns(topology):
    """One column per NUMA node, and one for GPUs whose node nobody knows."""
    columns = [{'node': node['id'], 'data': node} for node in topology['nodes']]
    if any(gpu['node'] is None for gpu in topology['gpus']):
        columns.append({'node': None, 'data': None})
    return columns


def _gpu_height(gpu):
    return 58 if gpu['mig'] else 40


def draw_host(host):
    """The host's SVG: sockets, NUMA nodes with CPUs and memory, GPUs with MIG slices and MPS shares, services."""
    topology = host['topology']
    services = host['services']
    if topology is None:
        canvas = Canvas(WIDTH)
        box = (PAD, PAD, WIDTH - 2 * PAD, 44)
        canvas.rect(box, 'missing', rx=4)
        canvas.text(PAD * 2, PAD + 18, 'No topology facts for %s' % host['name'], box[2] - 2 * PAD, box)
        canvas.text(PAD * 2, PAD + 34, '; '.join(host['missing'] + ([host['failure']] if host['failure'] else [])),
                    box[2] - 2 * PAD, box, size=SMALL)
        return canvas.svg('%s: no topology facts' % host['name'],
                          {'host': escape(host['name'], True), 'nodes': 0, 'gpus': 0, 'mig-instances': 0,
                           'mps-shares': 0, 'services': 0, 'cross-links': 0})
    columns = _columns(topology)
    width = max(WIDTH, len(columns) * 160 + 2 * PAD)
    canvas = Canvas(width)
    col_w = (width - 2 * PAD - (len(columns) - 1) * GAP) / float(len(columns))
    for position, column in enumerate(columns):
        column['x'] = PAD + position * (col_w + GAP)
    # Sockets: the fact counts them; nodes go to sockets in order when the count divides evenly (one or more
    # nodes per socket), which is how the kernel numbers them. Otherwise the count is only written.
    cpu_columns = [column for column in columns if column['data'] and column['data']['cpus']]
    sockets = topology['sockets'] or 0
    top = PAD
    if sockets and cpu_columns and len(cpu_columns) % sockets == 0:
        per = len(cpu_columns) // sockets
        for socket in range(sockets):
            group = cpu_columns[socket * per:(socket + 1) * per]
            box = (group[0]['x'] - 4, top, group[-1]['x'] + col_w - group[0]['x'] + 8, 0)
            group[0]['socket_start'] = socket
            group[0]['socket_box'] = box
    else:
        canvas.text(PAD, top + 11, '%s socket(s); which node is on which is not in the facts' % (sockets or '?'),
                    width - 2 * PAD, (0, 0, width, 10000), size=SMALL, cls='note')
    node_top = top + 18
    # Each column: header (2 lines), CPU grid, memory bar, then its GPUs.
    layout = []
    for column in columns:
        node = column['data']
        cpus = node['cpus'] if node else []
        per_row = max(1, min(32, len(cpus))) if cpus else 1
        cell = min(12.0, (col_w - 12) / per_row)
        rows = int(math.ceil(len(cpus) / float(per_row))) if cpus else 0
        gpus = [gpu for gpu in topology['gpus'] if gpu['node'] == column['node']]
        height = 36 + (rows * cell + 6 if rows else 14) + (16 if node else 0) + sum(_gpu_height(gpu) + 6 for gpu in gpus) + 4
        layout.append((column, node, cpus, per_row, cell, rows, gpus, height))
    node_height = max(item[-1] for item in layout)
    owner = {}
    for service in services:
        for cpu in service['cpus']:
            owner.setdefault(cpu, service)
    # Devices -> the services on them (MPS shares share one device).
    on_device = {}
    for service in services:
        for device in service['devices']:
            on_device.setdefault(device['uuid'], []).append(service)
    for column in columns:
        if 'socket_box' in column:
            x, y, w, _h = column['socket_box']
            box = (x, y, w, node_height + 22)
            canvas.rect(box, 'socket', rx=6)
            canvas.text(x + 6, y + 12, 'socket %d' % column['socket_start'], w - 12, box, size=SMALL, cls='label')
    gpu_count = mig_count = mps_count = 0
    node_count = 0
    for column, node, cpus, per_row, cell, rows, gpus, _height in layout:
        x = column['x']
        box = (x, node_top, col_w, node_height)
        column['box'] = box
        inner = col_w - 12
        if node is not None:
            node_count += 1
            canvas.open('numa-node', box, node=node['id'], cpus=len(cpus), reserved=len(node['reserved']))
            canvas.rect(box, 'node' if cpus else 'node memory-only', rx=4)
            canvas.text(x + 6, node_top + 14, 'node %d' % node['id'], inner / 2.0, box, cls='title')
            canvas.text(x + col_w - 6, node_top + 14, '%s' % _gib(node['memory_mb']), inner / 2.0, box, anchor='end')
            reserved = ' (reserved %s)' % format_cpulist(node['reserved']) if node['reserved'] else ''
            canvas.text(x + 6, node_top + 28, ('CPUs %s%s' % (node['cpulist'], reserved)) if cpus else 'no CPUs (memory only)',
                        inner, box, size=SMALL)
        else:
            canvas.open('numa-node unknown', box, node='unknown')
            canvas.rect(box, 'node unknown', rx=4)
            canvas.text(x + 6, node_top + 14, 'node unknown', inner, box, cls='title')
            canvas.text(x + 6, node_top + 28, 'GPUs whose NUMA node no one reports', inner, box, size=SMALL)
        y = node_top + 36
        if cpus:
            for position, cpu in enumerate(cpus):
                cx = x + 6 + (position % per_row) * cell
                cy = y + (position // per_row) * cell
                service = owner.get(cpu)
                if service is not None:
                    cls, title = 'cpu ' + _audit_class(service), 'CPU %d: %s' % (cpu, service['name'])
                elif cpu in node['reserved']:
                    cls, title = 'cpu reserved', 'CPU %d: reserved' % cpu
                else:
                    cls, title = 'cpu free', 'CPU %d: free' % cpu
                canvas.rect((cx, cy, cell - 1, cell - 1), cls, box, title)
            y += rows * cell + 6
        elif node is not None:
            y += 14
        if node is not None:
            # Free memory is left out: it changes from run to run, and the report must not when the fleet does not.
            canvas.rect((x + 6, y, inner, 8), 'memory', box, 'memory of node %d: %s' % (node['id'], _gib(node['memory_mb'])))
            y += 16
        for gpu in gpus:
            gpu_count += 1
            gbox = (x + 6, y, inner, _gpu_height(gpu))
            canvas.open('gpu', gbox, uuid=gpu['uuid'], index=gpu['index'] if gpu['index'] is not None else '',
                        mig_instances=len(gpu['instances']))
            canvas.rect(gbox, 'gpu', box, '%s %s %s (%s)' % (gpu['label'], gpu['model'], gpu['uuid'], _gib(gpu['memory_mb'])), rx=3)
            canvas.text(gbox[0] + 5, y + 13, '%s %s %s' % (gpu['label'], gpu['model'].replace('NVIDIA ', ''), _gib(gpu['memory_mb'])),
                        inner - 10, gbox)
            bar_w = inner - 10
            if gpu['mig']:
                for row, (slices, key_start, key_size, word) in enumerate(
                        ((COMPUTE_SLICES, 'compute_start', 'compute_slices', 'compute'),
                         (MEMORY_SLICES, 'memory_start', 'memory_slices', 'memory'))):
                    by = y + 19 + row * 18
                    slot = bar_w / float(slices)
                    for number in range(slices):
                        canvas.rect((gbox[0] + 5 + number * slot, by, slot - 1, 14), 'slot', gbox,
                                    '%s slice %d of %d' % (word, number + 1, slices))
                    for instance in gpu['instances']:
                        ibox = (gbox[0] + 5 + instance[key_start] * slot, by, instance[key_size] * slot - 1, 14)
                        canvas.rect(ibox, 'mig-instance' if row == 0 else 'mig-memory', gbox,
                                    '%s@%d (%s slices %d-%d)' % (instance['profile'], instance['memory_start'], word,
                                                                 instance[key_start] + 1, instance[key_start] + instance[key_size]))
                        users = [s for uuid in instance['uuids'] for s in on_device.get(uuid, [])] if row == 0 else []
                        if users:
                            mps_count += _draw_users(canvas, ibox, users, gbox)
                        else:
                            canvas.text(ibox[0] + ibox[2] / 2.0, by + 10, instance['profile'], ibox[2] - 2, ibox,
                                        size=SMALL, anchor='middle', cls='on-fill')
                    if row == 0:
                        mig_count += len(gpu['instances'])
            else:
                users = on_device.get(gpu['uuid'], [])
                ibox = (gbox[0] + 5, y + 19, bar_w, 14)
                canvas.rect(ibox, 'whole-gpu', gbox)
                mps_count += _draw_users(canvas, ibox, users, gbox)
                if not users:
                    canvas.text(ibox[0] + 4, y + 29, 'free', bar_w - 8, ibox, size=SMALL, cls='label')
            canvas.close()
            y += _gpu_height(gpu) + 6
        canvas.close()
    # Services: one row each, under the columns it touches; a cross-node link joins the nodes it spans.
    y = node_top + node_height + 30
    index = dict((column['node'], column) for column in columns)
    links = 0
    for service in _ordered(services):
        touched = [index[node] for node in service['nodes'] if node in index]
        if not touched:
            touched = [columns[0]]
        left = min(column['x'] for column in touched)
        right = max(column['x'] + col_w for column in touched)
        sbox = (left, y, right - left, 18)
        canvas.open('service', sbox, service=service['name'], audit=service['audit']['state'],
                    nodes=format_cpulist(service['nodes']), cross_node=str(service['cross_node']).lower())
        canvas.rect(sbox, 'service-chip ' + _audit_class(service), None, _service_title(service), rx=9)
        fraction = service['audit']['remote_fraction']
        state = {'pass': '\u2713', 'pass-remote': '\u2713', 'fail': '\u2717 FAILED', 'missing': '? not audited',
                 'none': 'not audited'}[service['audit']['state']]
        tail = '%s%s' % (state, ' %.1f%% remote' % (fraction * 100) if fraction is not None else '')
        devices = ' '.join(device['label'] for device in service['devices']) or 'no GPU'
        share = ' MPS %d%%' % service['mps_percentage'] if service['mps_device'] else ''
        tail_room = min(_width(tail, SMALL) + 2, sbox[2] / 2.0)
        canvas.text(left + 9, y + 13, '%s  CPUs %s  %s%s' % (service['name'], service['cpulist'] or '-', devices, share),
                    sbox[2] - tail_room - 22, sbox, size=SMALL, cls='on-fill')
        canvas.text(right - 9, y + 13, tail, tail_room, sbox, size=SMALL, cls='on-fill', anchor='end')
        if service['cross_node'] and len(touched) > 1:
            links += 1
            points = []
            for column in sorted(touched, key=lambda item: item['x']):
                cx = column['x'] + col_w / 2.0
                points.append((cx, node_top + node_height))
                points.append((cx, y))
                points.append((cx, node_top + node_height))
            canvas.line(points, 'cross-link', (0, 0, width, y + 18))
        canvas.close()
        y += 24
    if not services:
        canvas.text(PAD, y + 10, 'no services planned on this host', width - 2 * PAD, (0, 0, width, y + 20), size=SMALL, cls='note')
    counts = {'host': escape(host['name'], True), 'nodes': node_count, 'gpus': gpu_count, 'mig-instances': mig_count,
              'mps-shares': mps_count, 'services': len(services), 'cross-links': links}
    return canvas.svg('%s: %d NUMA nodes, %d GPUs, %d services' % (host['name'], node_count, gpu_count, len(services)), counts)


def _draw_users(canvas, box, users, within):
    """Services on one device side by side: MPS shares by their thread percentage, services that share the device
    (exclusive: false) in equal parts. Returns the number of MPS shares drawn."""
    x, y, w, h = box
    shares = [service for service in users if service['mps_device']]
    total = float(max(100, sum(service['mps_percentage'] for service in shares)))
    cursor = x
    for service in users:
        part = w * service['mps_percentage'] / total if service['mps_device'] else w / float(len(users))
        part_box = (cursor, y, max(part - 0.5, 1), h)
        cls = 'use mps-share ' if service['mps_device'] else 'use '
        canvas.rect(part_box, cls + _audit_class(service), within, _service_title(service))
        label = service['name'] + (' %d%%' % service['mps_percentage'] if service['mps_device'] else '')
        canvas.text(cursor + 3, y + 10, label, part - 6, part_box, size=SMALL, cls='on-fill')
        cursor += part
    return len(shares)


# -- the page ------------------------------------------------------------------------------------------------------

STYLE = '''
body{font:14px/1.4 "DejaVu Sans",Arial,sans-serif;margin:0;background:#f4f6f9;color:#1d2330}
header,section{padding:12px 24px}header{background:#1d2330;color:#fff}h1{margin:0;font-size:22px}
h2{font-size:18px;margin:18px 0 8px}h3{font-size:15px;margin:10px 0 4px}
table{border-collapse:collapse;background:#fff;margin:4px 0 10px}td,th{border:1px solid #d5dae3;padding:3px 8px;
text-align:left;vertical-align:top;font-size:13px}th{background:#e9edf3}
.cards{display:flex;flex-wrap:wrap;gap:16px}.tables{display:flex;flex-wrap:wrap;gap:24px}
.host{background:#fff;border:1px solid #d5dae3;border-radius:6px;padding:10px 12px;flex:1 1 640px;max-width:100%;
box-sizing:border-box;min-width:0}
.host svg{max-width:100%;height:auto;display:block}.host h3{display:flex;gap:10px;align-items:baseline}
.status{font-size:12px;padding:1px 8px;border-radius:9px;background:#2e9d5b;color:#fff}
.status-failed,.status-audit-failed{background:#c73a3a}.status-quarantined{background:#b26a00}
.status-unknown{background:#6b7385}.meta{color:#4a5366;font-size:13px;margin:0 0 6px}
.missing{color:#8a4b00;font-size:13px;margin:4px 0}.problems{color:#a02c2c}
.bad{color:#c73a3a;font-weight:bold}.ok{color:#2e7d4f}
text{font-family:"DejaVu Sans Mono",Menlo,Consolas,monospace;fill:#1d2330}
text.title{font-weight:bold}text.note,text.label{fill:#4a5366}text.on-fill{fill:#10151f}
rect.socket{fill:none;stroke:#9aa3b5;stroke-dasharray:4 3}rect.node{fill:#f7f9fc;stroke:#9aa3b5}
rect.memory-only{fill:#f1eefa}rect.unknown{fill:#fff7ea;stroke:#d9a441}rect.missing{fill:#fff1f1;stroke:#c73a3a}
rect.cpu.free{fill:#dfe4ec}rect.cpu.reserved{fill:#4a5366}rect.memory{fill:#8ea3c4}
rect.gpu{fill:#ffffff;stroke:#6b7385}rect.slot{fill:#eef1f6;stroke:#c5ccd8}rect.whole-gpu{fill:#eef1f6}
rect.mig-instance,rect.mig-memory{fill:#d8e2f3;stroke:#4f6fa8}
.audit-pass{fill:#5dbb7a}.audit-pass-remote{fill:#c3d65a}.audit-fail{fill:#e26d6d}
.audit-missing,.audit-none{fill:#b7c0d0}rect.mps-share{stroke:#ffffff;stroke-width:1}
rect.service-chip{stroke:#4a5366;stroke-width:.5}
path.cross-link{fill:none;stroke:#c73a3a;stroke-width:2;stroke-dasharray:5 3}
.legend span{display:inline-block;width:12px;height:12px;margin:0 4px 0 12px;vertical-align:middle;border-radius:2px}
'''


def _e(value):
    return escape(_text(value), True)


def _table(head, rows):
    return '<table><tr>%s</tr>%s</table>' % (''.join('<th>%s</th>' % _e(cell) for cell in head), ''.join(
        '<tr>%s</tr>' % ''.join('<td>%s</td>' % _e(cell) for cell in row) for row in rows))


def _summary_html(data):
    found = data['summary']
    classes = sorted(found['by_class'])
    dc_rows = [[dc] + [found['by_dc_class'][dc].get(klass, 0) for klass in classes] + [found['by_dc'][dc]]
               for dc in sorted(found['by_dc_class'])]
    dc_rows.append(['all'] + [found['by_class'][klass] for klass in classes] + [found['hosts']])
    gpu_rows = [[model, item['gpus'], item['mig_enabled'], item['mig_instances'],
                 ', '.join('%s x%d' % (name, count) for name, count in sorted(item['profiles'].items())) or '-']
                for model, item in sorted(found['gpus_by_model'].items())]
    versions = [['driver', ', '.join('%s (%d)' % item for item in sorted(found['drivers'].items())) or '-'],
                ['CUDA', ', '.join('%s (%d)' % item for item in sorted(found['cuda'].items())) or '-']]
    counts = [['hosts', found['hosts']], ['GPUs', found['gpus']], ['MIG instances', found['mig_instances']],
              ['services', found['services']], ['audits passed', '%d of %d' % (found['services_passed'], found['services'])],
              ['MPS shares', found['mps_shares']], ['services across NUMA nodes', found['cross_node_services']],
              ['failed hosts', len(found['failed_hosts'])], ['quarantined hosts', len(found['quarantined_hosts'])],
              ['hosts without facts', len(found['unknown_hosts'])], ['hosts without GPUs', len(found['hosts_without_gpus'])],
              ['hosts not in this run', len(found['not_in_run'])]]
    parts = ['<section id="summary"><h2>Fleet summary</h2><div class="tables">',
             '<div><h3>Hosts by data centre and class</h3>%s</div>' % _table(['data centre'] + classes + ['hosts'], dc_rows),
             '<div><h3>GPUs by model</h3>%s</div>' % _table(['model', 'GPUs', 'MIG on', 'MIG instances', 'profiles'], gpu_rows),
             '<div><h3>Versions</h3>%s</div>' % _table(['', 'versions (hosts)'], versions),
             '<div><h3>Counts</h3>%s</div>' % _table(['', ''], counts), '</div>']
    problems = ([['failed', item['host'], item['reason']] for item in found['failed_hosts']]
                + [['quarantined', item['host'], item['reason']] for item in found['quarantined_hosts']]
                + [['no facts', item['host'], item['reason']] for item in found['unknown_hosts']])
    audits = [[item['host'], item['service'], '%.1f%%' % (item['remote_fraction'] * 100) if item['remote_fraction'] is not None else '-',
               '; '.join(item['reasons'])] for item in found['failed_audits']]
    parts.append('<h3>Hosts failed, quarantined or unread</h3>%s' % (
        _table(['', 'host', 'why'], problems) if problems else '<p class="ok">none</p>'))
    parts.append('<h3 id="failed-audits">Failed audits</h3>%s' % (
        _table(['host', 'service', 'remote', 'reasons'], audits) if audits else '<p class="ok">none</p>'))
    if found['not_in_run']:
        parts.append('<h3 id="not-in-run">Not in this run</h3><p class="meta">Shown as an earlier report found them: %s</p>' % _e(
            ', '.join('%s (%s)' % (item['host'], item['as_of']) for item in found['not_in_run'])))
    parts.extend('<p class="missing problems">%s</p>' % _e(problem) for problem in found['not_drawn'])
    return ''.join(parts) + '</section>'


def _changes_html(changes):
    previous = changes['previous']
    parts = ['<section id="changes"><h2>What changed since the previous report</h2>']
    if not previous['found']:
        parts.append('<p class="missing" data-previous="missing">%s</p></section>' % _e(previous['problem']))
        return ''.join(parts)
    parts.append('<p class="meta" data-previous="found" data-changes="%d">Compared with the report of %s.</p>' % (
        change_count(changes), _e(previous['generated_at'] or 'an unknown time')))
    if not change_count(changes):
        parts.append('<p class="ok">Nothing changed.</p>')
    if changes['hosts_added'] or changes['hosts_removed']:
        parts.append(_table(['hosts added', 'hosts removed'],
                            [[', '.join(changes['hosts_added']) or '-', ', '.join(changes['hosts_removed']) or '-']]))
    if changes['status']:
        parts.append('<h3>Status</h3>' + _table(['host', 'before', 'now'], [
            [item['host'], item['before'], item['after']] for item in changes['status']]))
    if changes['layouts']:
        parts.append('<h3>Layouts</h3>' + _table(['host', 'gone', 'new'], [
            [item['host'], '; '.join(item['removed']) or '-', '; '.join(item['added']) or '-'] for item in changes['layouts']]))
    if changes['placements']:
        parts.append('<h3>Placements</h3>' + _table(['host', 'service', 'before', 'now'], [
            [item['host'], item['service'], item['before'] or '(new)', item['after'] or '(removed)'] for item in changes['placements']]))
    if changes['audits']:
        parts.append('<h3>Audit results</h3>' + _table(['host', 'service', 'before', 'now'], [
            [item['host'], item['service'], item['before'], item['after']] for item in changes['audits']]))
    return ''.join(parts) + '</section>'


def _host_html(host):
    topology = host['topology']
    labels = 'data centre %s, rack %s, class %s' % (host['dc'] or '-', host['rack'] or '-', host['class'] or '-')
    if topology:
        labels += '; %s; driver %s, CUDA %s' % (topology['cpu_model'] or 'CPU model unknown', topology['driver'] or '-',
                                                topology['cuda'] or '-')
    status = host['status'].replace(' ', '-')
    as_of = host.get('as_of')
    as_of_attribute = ' data-as-of="%s"' % _e(as_of) if as_of is not None else ''
    article = '<article class="host" id="host-%s" data-host="%s" data-status="%s"%s>' % (
        _e(host['name']), _e(host['name']), _e(status), as_of_attribute)
    parts = [article,
             '<h3>%s <span class="status status-%s">%s</span></h3>' % (_e(host['name']), _e(status), _e(host['status'])),
             '<p class="meta">%s</p>' % _e(labels)]
    if as_of is not None:
        parts.append('<p class="missing" data-missing="run">Not in this run: drawn as the report of %s found it.</p>' % _e(as_of))
    if host['failure']:
        parts.append('<p class="problems">%s: %s</p>' % ('Quarantined' if host['status'] == 'quarantined' else 'Failed', _e(host['failure'])))
    parts.extend('<p class="missing" data-missing="%s">Missing: %s</p>' % (_e(item.split(' ')[0]), _e(item)) for item in host['missing'])
    parts.extend('<p class="missing problems">%s</p>' % _e(problem) for problem in host['problems'])
    parts.append(draw_host(host))
    if host['services']:
        rows = [[service['name'], service['cpulist'] or '-', format_cpulist(service['mems']) or '-',
                 ' '.join(device['label'] for device in service['devices']) or '-',
                 _audit_words(service['audit']), '; '.join(service['audit']['reasons'])] for service in host['services']]
        parts.append(_table(['service', 'CPUs', 'memory', 'GPU', 'audit', 'reasons'], rows))
    return ''.join(parts) + '</article>'


def render_html(data, changes):
    """The page: one self-contained HTML document (inline style and SVG; no script, and nothing fetched)."""
    found = data['summary']
    bad = len(found['failed_hosts']) + len(found['quarantined_hosts']) + len(found['failed_audits'])
    legend = ''.join('<span class="%s" style="background:%s"></span>%s' % (cls, colour, _e(words)) for cls, colour, words in (
        ('pass', '#5dbb7a', 'audit passed'), ('pass-remote', '#c3d65a', 'passed, remote pages >= 1%'),
        ('fail', '#e26d6d', 'audit failed'), ('none', '#b7c0d0', 'not audited'), ('reserved', '#4a5366', 'reserved CPU'),
        ('free', '#dfe4ec', 'free CPU'), ('mig', '#d8e2f3', 'MIG instance')))
    return ''.join([
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        '<title>gpufleet report</title><style>%s</style></head><body>' % STYLE,
        '<header><h1>gpufleet report</h1><p>%s &middot; %d host(s) &middot; %s</p></header>' % (
            _e(data['generated_at'] or 'time unknown'), found['hosts'],
            '<span class="bad">%d problem(s)</span>' % bad if bad else 'no problems'),
        _summary_html(data), _changes_html(changes),
        '<section id="hosts"><h2>Hosts</h2><p class="meta legend">%s; a dashed red line: a service across NUMA nodes. '
        'MIG instances on the 7 compute (upper) and 8 memory (lower) slices.</p><div class="cards">' % legend,
        ''.join(_host_html(host) for host in data['hosts']),
        '</div></section></body></html>\n'])


def report_json(data):
    return json.dumps(data, indent=1, sort_keys=True) + '\n'


# -- the files -----------------------------------------------------------------------------------------------------

HTML_NAME = 'fleet-report.html'
JSON_NAME = 'fleet-report.json'
PREVIOUS_NAME = 'fleet-report.previous.json'


def _carried(old, current, fleet):
    """Hosts of the previous report that are in the fleet but not in this run (a run with --limit), as that report
    has them, marked with when they were found (``as_of``); and, in words, those that report holds too damaged to
    draw."""
    present = set(host['name'] for host in current['hosts'])
    kept, problems = [], []
    for host in old['hosts']:
        if host['name'] not in fleet or host['name'] in present:
            continue
        host = dict(host, as_of=_text(host.get('as_of') or old.get('generated_at') or 'an unknown time'))
        try:  # written by this code, but read back from disk: a hand-edited file must not stop the page
            summary([host])
            _host_html(host)
        except (KeyError, TypeError, ValueError, AttributeError, IndexError) as exc:
            problems.append('%s is not in this run, and the previous report\'s data on it cannot be drawn (%s: %s)' % (
                host['name'], type(exc).__name__, exc))
            continue
        kept.append(host)
    return kept, problems


def plan_report(hosts, generated_at, found, fleet=None):
    """What to write: {'write': {file name: text}, 'data', 'changes'}.

    ``found`` holds the texts now in the report directory by file name (None for a missing file). The previous
    report is the JSON there; when the fleet is as it describes, nothing but a stale page is written and the page
    keeps comparing with the report before it, so a second run changes nothing. Otherwise the JSON there becomes
    the previous report, kept as it is, even when it is corrupt (the page says so).
    ``fleet`` names every host the report covers (the inventory's, whatever the run's limit): a host of the previous
    report that is in it but not in ``hosts`` stays on the page as that report found it. A host not in it is gone.
    """
    data = build_report(hosts, generated_at)
    # Named as it is kept: the JSON there now becomes the previous report when this one is written.
    old, problem = read_previous(found.get(JSON_NAME), PREVIOUS_NAME)
    if old is not None and fleet:
        kept, damaged = _carried(old, data, set(fleet))
        if kept or damaged:
            data['hosts'] = sorted(data['hosts'] + kept, key=lambda host: host['name'])
            data['summary'] = summary(data['hosts'])
            data['summary']['not_drawn'] = damaged
    text = report_json(data)
    write = {}
    if old is not None and comparable(old) == comparable(json.loads(text)):
        data['generated_at'] = old.get('generated_at', '')
        base, base_problem = read_previous(found.get(PREVIOUS_NAME), PREVIOUS_NAME)
        changes = diff_reports(base, data, base_problem)
    else:
        changes = diff_reports(old, data, problem)
        write[JSON_NAME] = text
        if found.get(JSON_NAME) is not None:
            write[PREVIOUS_NAME] = found[JSON_NAME]
    page = render_html(data, changes)
    if page != found.get(HTML_NAME):
        write[HTML_NAME] = page
    return {'write': write, 'data': data, 'changes': changes}
