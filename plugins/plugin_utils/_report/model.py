# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.core contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The fleet report's data: each host's model from what the run found on it, and the fleet's summary.

Input is one dict per host (plugin_utils/_report/hostvars.py reads it from hostvars):

    name           the inventory name (required, unique)
    dc, rack, class  inventory labels (strings; missing ones show as "-")
    topology       ansible_facts['gpufleet_topology'], or None; read through module_utils/_topology.Topology
    plan           the services plan: the plan file's text, its document, or place_services' list; or None; read
                   through module_utils/_plan (read_plan)
    audit          the gpufleet.core.numa_audit result (passed, failed_services, services), or None
    reserved_cpus  CPUs no service gets (a CPU list or a list of numbers), or None
    failure        why the host failed in the run: a string, or the site's _gpufleet_failure (stage, task, reason)
    quarantined    whether preflight quarantined the host
    problems       what could not be read from the host (strings)
    drift          what changed on the host since a stage of the site playbook converged it: {stage: [items]}

Bad data about a host never stops the report: what the topology model or the plan reader refuses, and what cannot
be drawn, is the host's problem, in words. Only input that is not a list of named hosts is refused
(FleetReportError), before anything is written.
This is a private module: its API may change without notice.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.gpufleet.core.plugins.module_utils._cpulist import CpuListError, format_cpulist, parse_cpulist
from ansible_collections.gpufleet.core.plugins.module_utils._errors import GpufleetError
from ansible_collections.gpufleet.core.plugins.module_utils._plan import PlanError, parse_plan, plan_document, read_plan
from ansible_collections.gpufleet.core.plugins.module_utils._topology import Topology
from ansible_collections.gpufleet.core.plugins.plugin_utils._report.words import text

REPORT_VERSION = 1
# A service that passed its audit but has at least this share of its pages remote is drawn in the warning colour.
REMOTE_WARNING = 0.01
# How the plan reader names the plan in its refusals.
PLAN_NAME = 'the services plan'


class FleetReportError(GpufleetError):
    """Input the report cannot be made from; the message names the fix."""


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


# -- the topology --------------------------------------------------------------------------------------------------


def _read_fact(fact, problems):
    """The fact indexed by the topology model; None, with the model's refusal as a problem, when it cannot be read."""
    if fact is None:
        return None
    try:
        return Topology(fact)
    except GpufleetError as exc:
        problems.append(str(exc))
    except (AttributeError, TypeError) as exc:
        # The model indexes a fact topology_facts wrote; a damaged one (a cache edited by hand) must not stop the page.
        problems.append('the gpufleet_topology fact is damaged (%s: %s); gather it again with '
                        'gpufleet.core.topology_facts' % (type(exc).__name__, exc))
    return None


def _label(gpu):
    """A GPU's name on the page, from the topology model's device of it."""
    index = _number(gpu['index'])
    return 'GPU%s' % (index if index is not None else '?')


def _instances(topology, gpu, label, problems):
    """A MIG GPU's instances on its compute and memory slices, as the topology model places them, in memory order;
    each one it cannot place is a problem instead."""
    instances = []
    for instance in topology.mig_instances.get(gpu['uuid']) or []:
        profile = text(instance['profile'], '?')
        if instance['start'] is None:
            problems.append('%s: MIG instance %s has no usable placement (%r)' % (label, profile, instance['placement']))
            continue
        instances.append({'profile': profile, 'memory_start': instance['start'],
                          'memory_slices': instance['memory_slices'], 'compute_start': instance['compute_start'],
                          'compute_slices': instance['compute_slices'],
                          'uuids': [text(uuid) for uuid in instance['uuids']]})
    return sorted(instances, key=lambda item: item['memory_start'])


def _gpu(topology, gpu, problems):
    """A GPU (the topology model's device of it) as drawn: its MIG instances only while it is in MIG mode."""
    raw, label = gpu['gpu'], _label(gpu)
    return {'label': label, 'index': _number(gpu['index']), 'uuid': text(gpu['uuid']),
            'model': text(raw.get('name'), 'unknown GPU'), 'memory_mb': _number(raw.get('memory_total_mb')),
            'node': _number(raw.get('numa_node')), 'mig': gpu['mig_mode'],
            'instances': _instances(topology, gpu, label, problems) if gpu['mig_mode'] else []}


def _topology(topology, reserved, problems):
    """The drawn parts of the topology model: sockets, nodes, GPUs, driver."""
    nodes = []
    for node_id in topology.nodes:
        cpus = topology.node_cpus[node_id]
        nodes.append({'id': node_id, 'cpus': list(cpus), 'cpulist': format_cpulist(cpus),
                      'reserved': [cpu for cpu in cpus if cpu in reserved],
                      'memory_mb': _number(topology.node(node_id).get('memory_total_mb'))})
    fact = topology.fact
    cpu = fact.get('cpu') if isinstance(fact.get('cpu'), dict) else {}
    nvml = fact.get('nvml') if isinstance(fact.get('nvml'), dict) else {}
    gpus = [_gpu(topology, topology.devices[raw['uuid']], problems) for raw in topology.gpus]
    known = set(topology.nodes)
    for gpu in gpus:
        if gpu['node'] is not None and gpu['node'] not in known:
            problems.append('%s is on node %s, which the fact does not list; drawn with the GPUs of unknown node' % (gpu['label'], gpu['node']))
            gpu['node'] = None
    return {'sockets': _number(cpu.get('sockets')), 'cpu_model': text(cpu.get('model')), 'nodes': nodes, 'gpus': gpus,
            'nvml_available': bool(nvml.get('available')), 'nvml_reason': text(nvml.get('reason')),
            'driver': text(nvml.get('driver_version')), 'cuda': text(nvml.get('cuda_driver_version'))}


# -- the plan and the audit ----------------------------------------------------------------------------------------


def _plan_entries(plan, problems):
    """The plan's entries (module_utils/_plan.Entry), or None when there is no plan or the plan reader refuses it."""
    if plan is None or plan == '':
        return None
    try:
        if isinstance(plan, str):
            return parse_plan(plan, PLAN_NAME).entries
        if isinstance(plan, list):  # place_services' list: the services of a document
            plan = plan_document(plan)
        return read_plan(plan, PLAN_NAME).entries
    except PlanError as exc:
        problems.append(str(exc))
        return None


def _audit_entries(audit, problems):
    if audit is None:
        return None
    if not isinstance(audit, dict) or not isinstance(audit.get('services'), list):
        problems.append('the audit result is not a gpufleet.core.numa_audit result (passed, services)')
        return None
    return dict((item['name'], item) for item in audit['services'] if isinstance(item, dict) and isinstance(item.get('name'), str))


def _mps_share(entry):
    """An MPS client's active thread percentage (1-100; 100 when the plan sets none), or None for no MPS share."""
    if not entry.mps:
        return None
    percentage = ((entry.mps.get('environment') or {}).get('CUDA_MPS_ACTIVE_THREAD_PERCENTAGE')
                  or (entry.fields.get('environment') or {}).get('CUDA_MPS_ACTIVE_THREAD_PERCENTAGE'))
    try:
        return max(1, min(100, int(str(percentage)))) if percentage is not None else 100
    except ValueError:
        return 100


def _service_audit(name, audits):
    if audits is None:
        return {'state': 'none', 'remote_fraction': None, 'reasons': []}
    found = audits.get(name)
    if found is None:
        return {'state': 'missing', 'remote_fraction': None, 'reasons': ['the audit did not cover this service']}
    fraction = found.get('remote_fraction')
    fraction = float(fraction) if isinstance(fraction, (int, float)) and not isinstance(fraction, bool) else None
    passed = found.get('passed') is True
    state = 'fail' if not passed else ('pass-remote' if fraction is not None and fraction >= REMOTE_WARNING else 'pass')
    return {'state': state, 'remote_fraction': fraction, 'reasons': [text(reason) for reason in found.get('reasons') or []]}


def _device(uuid, indexed, topology):
    """A service's device as drawn, on its GPU and MIG instance as the topology model has them; None where the page
    does not draw it (the fact lacks it, or its MIG instance is not drawn)."""
    device = indexed.devices.get(uuid) if indexed is not None else None
    gpu = [gpu for gpu in topology['gpus'] if gpu['uuid'] == device['parent']] if device else []
    if not gpu:
        return None
    gpu, instance = gpu[0], device['instance']
    if instance is None:
        return {'uuid': uuid, 'gpu': gpu['uuid'], 'gpu_label': gpu['label'], 'node': gpu['node'], 'instance': None,
                'label': gpu['label']}
    if not gpu['mig'] or instance['start'] is None:
        return None
    return {'uuid': uuid, 'gpu': gpu['uuid'], 'gpu_label': gpu['label'], 'node': gpu['node'],
            'instance': instance['start'], 'label': '%s %s@%d' % (gpu['label'], text(instance['profile'], '?'),
                                                                  instance['start'])}


def _service(entry, indexed, topology, audits, problems):
    """One service of the plan (an Entry) as drawn: its CPUs and their nodes, memory nodes, devices, audit."""
    fields, name = entry.fields, entry.name
    cpus = _cpus(fields.get('cpus', fields.get('cpulist')), 'service %s\'s CPUs' % name, problems)
    node_of_cpu = dict((cpu, node['id']) for node in topology['nodes'] for cpu in node['cpus']) if topology else {}
    cpu_nodes = sorted(set(node_of_cpu[cpu] for cpu in cpus if cpu in node_of_cpu))
    mems = sorted(set(_number(mem) for mem in fields.get('mems') or [] if _number(mem) is not None))
    drawn, unknown = [], []
    for uuid in entry.devices:
        uuid = text(uuid)
        device = _device(uuid, indexed, topology)
        if device is not None:
            drawn.append(device)
        else:
            unknown.append(uuid)
    if unknown and topology:
        problems.append('service %s uses %s, which the topology fact does not have' % (name, ', '.join(unknown)))
    gpu_nodes = sorted(set(device['node'] for device in drawn if device['node'] is not None))
    touched = sorted(set(cpu_nodes) | set(gpu_nodes) | set(mems))
    # The unit as the plan writes it ('' where it names none), not the default the plan reader assumes: the report
    # shows the plan.
    return {'name': name, 'unit': text(fields.get('unit')), 'cpus': cpus, 'cpulist': format_cpulist(cpus),
            'cpu_nodes': cpu_nodes, 'mems': mems, 'memory_policy': text(fields.get('memory_policy')),
            'numa_node': _number(fields.get('numa_node')), 'devices': drawn, 'unknown_devices': unknown,
            'mps_percentage': _mps_share(entry), 'mps_device': text(entry.mps_device) if entry.mps else None,
            'nodes': touched, 'cross_node': len(touched) > 1, 'audit': _service_audit(name, audits)}


# -- a host and the fleet ------------------------------------------------------------------------------------------


def _failure_text(failure):
    if isinstance(failure, dict):
        return '%s stage (%s): %s' % (text(failure.get('stage'), 'unknown'), text(failure.get('task'), '?'),
                                      text(failure.get('reason'), 'failed'))
    return text(failure)


def _status(raw, failure, topology, failed_audits):
    if raw.get('quarantined'):
        return 'quarantined'
    if failure:
        return 'failed'
    if topology is None:
        return 'unknown'
    return 'audit failed' if failed_audits else 'ok'


def host_model(raw):
    """One host's data in the report (JSON-able): labels, status, what is missing, topology, services."""
    problems = [text(problem) for problem in raw.get('problems') or [] if problem]
    missing = []
    reserved = set(_cpus(raw.get('reserved_cpus'), 'reserved_cpus', problems))
    indexed = _read_fact(raw.get('topology'), problems)
    topology = _topology(indexed, reserved, problems) if indexed is not None else None
    failure = _failure_text(raw.get('failure')) if raw.get('failure') else ''
    if topology is None and raw.get('topology') is not None:
        missing.append('topology facts (the fact cannot be read; see below)')
    elif topology is None:
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
    services = [_service(entry, indexed, topology, audits, problems) for entry in entries or []]
    failed_audits = [service['name'] for service in services if service['audit']['state'] in ('fail', 'missing')]
    drift = _drift_entries(raw.get('drift'), problems)
    model = {'name': text(raw['name']), 'dc': text(raw.get('dc')), 'rack': text(raw.get('rack')),
             'class': text(raw.get('class')), 'status': _status(raw, failure, topology, failed_audits),
             'failure': failure, 'missing': missing, 'problems': problems, 'topology': topology, 'services': services,
             'failed_audits': failed_audits}
    if drift:  # only a host that drifted has the key: a fleet without drift gives the report it gave before
        model['drift'] = drift
    return model


def _drift_entries(drift, problems):
    """[{stage, items}] in stage order, from {stage: [items]}; a value of another shape is the host's problem."""
    if not drift:
        return []
    if not isinstance(drift, dict) or not all(isinstance(items, list) for items in drift.values()):
        problems.append('the drift found is not {stage: [items]} (state_receipt\'s check)')
        return []
    return [{'stage': text(stage), 'items': [text(item) for item in items]} for stage, items in sorted(drift.items())]


def _count(found, key):
    found[key] = found.get(key, 0) + 1


def _count_gpus(result, topology):
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


def _count_services(result, host):
    for service in host['services']:
        result['services'] += 1
        result['services_passed'] += service['audit']['state'] in ('pass', 'pass-remote')
        result['mps_shares'] += service['mps_device'] is not None
        result['cross_node_services'] += service['cross_node']
        if service['audit']['state'] in ('fail', 'missing'):
            result['failed_audits'].append({'host': host['name'], 'service': service['name'],
                                            'remote_fraction': service['audit']['remote_fraction'],
                                            'reasons': service['audit']['reasons']})


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
        # Only a host that drifted has drift (and a report before drift was kept has none).
        if host.get('drift'):
            result.setdefault('drifted_hosts', []).extend(
                {'host': host['name'], 'stage': entry['stage'], 'items': entry['items']} for entry in host['drift'])
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
            _count_gpus(result, topology)
        _count_services(result, host)
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
    return {'version': REPORT_VERSION, 'generated_at': text(generated_at), 'summary': summary(models), 'hosts': models}


def comparable(data):
    """The data without when it was made: two runs that found the same fleet give the same value."""
    return dict((key, value) for key, value in data.items() if key != 'generated_at') if isinstance(data, dict) else data
