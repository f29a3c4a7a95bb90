# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""The fleet report's inputs for a lab-like fleet, made by the collection's own code on the NVML simulator.

Each host is a description of tests/nvml_sim/hosts: its sysfs/procfs trees are rendered, its MIG layout applied by
the mig module's code (MigRun), its topology gathered by topology_facts' code, and its services placed by the
planner, as the site playbook does on a real host. Only the audit is made here, from the plan (the real one needs
running processes, which the lab has): every service passes with a small remote share, but those named in
``failing``, which fail with the audit's words.

    hosts = lab_fleet(workdir)                 # the report's ``hosts`` input, one dict per host
    host = simulated_host(workdir, name, ...)  # one host

Used by tests/unit/plugins/plugin_utils/test_fleet_report.py and tests/integration/report_chromium.py; needs the
collection on sys.path (tests/testbed/link-collection.sh, PYTHONPATH=build/collections).
"""

from __future__ import absolute_import, division, print_function

import json
import os
import sys

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), '..', '..', '..'))
SIM_DIR = os.path.join(REPO, 'tests', 'nvml_sim')
HOSTS_DIR = os.path.join(SIM_DIR, 'hosts')

# The simulator stands in for nvidia-ml-py: it must win the import of "pynvml".
if SIM_DIR not in sys.path:
    sys.path.insert(0, SIM_DIR)

import pynvml  # noqa: E402  (the simulator, from SIM_DIR)
import render_tree  # noqa: E402  (from SIM_DIR)

from ansible_collections.gpufleet.core.plugins.module_utils._host import HostFiles  # noqa: E402
from ansible_collections.gpufleet.core.plugins.module_utils._mig import MigRun  # noqa: E402
from ansible_collections.gpufleet.core.plugins.module_utils._placement import place  # noqa: E402
from ansible_collections.gpufleet.core.plugins.module_utils._topology_facts import gather  # noqa: E402

LLM = {'name': 'llm', 'gpus': 2, 'cpus': 16}
IMAGEGEN_A100 = {'name': 'imagegen', 'gpus': {'mig_profile': '3g.40gb', 'count': 1}, 'cpus': 8}
GATEWAY = {'name': 'gateway', 'gpus': 0, 'cpus': 4}


def _env(name, value):
    if value is None:
        os.environ.pop(name, None)
    else:
        os.environ[name] = value


def simulated_host(workdir, source, name=None, services=(), mig_layouts=None, mps_daemons=None, reserved_cpus=None,
                   failing=None, labels=None):
    """The report input of one host simulated from tests/nvml_sim/hosts/SOURCE.json (see the module's doc).

    ``failing``: service name -> remote fraction of a failed audit. ``labels``: dc, rack, class.
    """
    name = name or source
    root = os.path.join(str(workdir), name)
    host_file = os.path.join(HOSTS_DIR, source + '.json')
    with open(host_file) as handle:
        render_tree.render(json.load(handle), root)
    files = HostFiles(os.path.join(root, 'sys'), os.path.join(root, 'proc'))
    saved = dict((key, os.environ.get(key)) for key in ('GPUFLEET_NVML_SIM_HOST', 'GPUFLEET_NVML_SIM_STATE'))
    _env('GPUFLEET_NVML_SIM_HOST', host_file)
    _env('GPUFLEET_NVML_SIM_STATE', os.path.join(root, 'state.json'))
    try:
        if mig_layouts:
            MigRun(pynvml, files, layouts=mig_layouts).run(False)
        topology = gather(files, pynvml, False)
    finally:
        for key, value in saved.items():
            _env(key, value)
    plan = place(topology, [dict(spec) for spec in services], reserved_cpus, None, mps_daemons) if services else []
    found = dict(labels or {}, name=name, topology=topology, plan={'version': 1, 'services': plan},
                 audit=audit_of(plan, failing or {}) if plan else None, reserved_cpus=reserved_cpus)
    return found


def audit_of(plan, failing):
    """A numa_audit result for PLAN, in the module's RETURN layout."""
    services = []
    for entry in plan:
        fraction = failing.get(entry['name'], 0.004)
        passed = entry['name'] not in failing
        reasons = [] if passed else ['%.1f%% of pages on remote nodes (max 2.0%%)' % (fraction * 100)]
        services.append({'name': entry['name'], 'unit': 'gpufleet-svc-%s.service' % entry['name'], 'container': None,
                         'pids': [4000 + len(services)], 'cpus_allowed_list': entry['cpulist'],
                         'memory_nodes_list': entry['memlist'], 'local_nodes': entry['mems'],
                         'pages_total': 100000, 'remote_pages': int(100000 * fraction),
                         'remote_fraction': fraction, 'gpus_held': entry['gpus'], 'passed': passed,
                         'reasons': reasons})
    return {'passed': not failing, 'failed_services': sorted(failing), 'services': services}


def lab_fleet(workdir, failing=None):
    """The lab's five hosts (tests/lab/lab.sh's table) with the example fleet's MIG layouts and services, plus the
    simulator's oddest host. ``failing``: host -> {service: remote fraction}."""
    failing = failing or {}

    def labels(dc, rack, klass):
        return {'dc': dc, 'rack': rack, 'class': klass}

    a100 = dict(mig_layouts=[{'gpus': [2, 3], 'layout': ['3g.40gb', '3g.40gb']}], reserved_cpus='0,32',
                labels=labels('hk1', 'hk1-a', 'a100_pcie_4x'))
    return [
        simulated_host(workdir, 'reference-a100', 'hk1-a100-01', [LLM, IMAGEGEN_A100], failing=failing.get('hk1-a100-01'), **a100),
        simulated_host(workdir, 'reference-a100', 'hk1-a100-02', [LLM, IMAGEGEN_A100], failing=failing.get('hk1-a100-02'), **a100),
        simulated_host(workdir, 'dgx-h100', 'hk2-h100-01',
                       [LLM, IMAGEGEN_A100, {'name': 'train', 'gpus': 5, 'cpus': 16, 'allow_cross_numa': True}],
                       mig_layouts=[{'gpus': [6], 'layout': ['3g.40gb', '3g.40gb']}], reserved_cpus='0,112',
                       failing=failing.get('hk2-h100-01'), labels=labels('hk2', 'hk2-b', 'h100_sxm_8x')),
        simulated_host(workdir, 'single-h200', 'hk2-h200-01',
                       [{'name': 'llm', 'gpus': {'mig_profile': '3g.71gb', 'count': 1}, 'cpus': 16},
                        {'name': 'imagegen', 'gpus': {'mig_profile': '2g.35gb', 'count': 1}, 'cpus': 8},
                        {'name': 'embed-a', 'gpus': {'mps': {'active_thread_percentage': 30}}, 'cpus': 2},
                        {'name': 'embed-b', 'gpus': {'mps': {'active_thread_percentage': 50}}, 'cpus': 2}],
                       mps_daemons=[{'device': 'MIG-1a2b3c4d-5e6f-5a7b-8c9d-0e1f2a3b4c03', 'user': 'infer'}],
                       failing=failing.get('hk2-h200-01'), labels=labels('hk2', 'hk2-c', 'h200_nvl_1x')),
        simulated_host(workdir, 'cpu-only', 'hk2-cpu-01', [GATEWAY], failing=failing.get('hk2-cpu-01'),
                       labels=labels('hk2', 'hk2-c', 'cpu_only')),
        simulated_host(workdir, 'quirks', 'lab-quirks-01',
                       [{'name': 'a', 'gpus': 1, 'cpus': 2}, {'name': 'b', 'gpus': 1, 'cpus': 2, 'node': 2},
                        {'name': 'c', 'gpus': 0, 'cpus': 2}],
                       failing=failing.get('lab-quirks-01'), labels=labels('lab', 'lab-1', 'mixed')),
    ]
