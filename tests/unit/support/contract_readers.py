# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""Every reader of the plan file and of the topology fact, fed one plan and one fact: what each says.

Run as a program by tests/unit/test_contract_versions.py, with a scratch copy of the collection first on sys.path
(the copy's plan and fact versions bumped), so that the documents this release writes are of "another version":

    python contract_readers.py PLAN_FILE FACT_FILE   # prints {reader: its message, or "accepted"} as JSON

Each reader is called through the entry its callers use (a module's reader, an action's or a filter's function).
"""

from __future__ import absolute_import, division, print_function

import base64
import json
import sys


def _said(call):
    try:
        call()
    except Exception as exc:  # each reader's own refusal: what matters here is its message
        return '%s: %s' % (type(exc).__name__, exc)
    return 'accepted'


def plan_readers(path):
    from ansible_collections.gpufleet.core.plugins.module_utils import _numa_audit
    from ansible_collections.gpufleet.core.plugins.module_utils._watchdog_host import WatchdogHost
    from ansible_collections.gpufleet.core.plugins.plugin_utils._report.model import host_model
    from ansible_collections.gpufleet.core.plugins.plugin_utils._watchdog import watchdog_plan_problems
    with open(path) as handle:
        text = handle.read()

    def report():
        problems = host_model({'name': 'h', 'plan': text})['problems']
        if problems:
            raise ValueError('; '.join(problems))

    def role():
        problems = watchdog_plan_problems(base64.b64encode(text.encode()).decode(), path, {})
        if problems:
            raise ValueError('; '.join(problems))

    return {
        'numa_audit (the verify stage, the report playbook)': _said(lambda: _numa_audit.load_plan(path)),
        'the watchdog (each check)': _said(lambda: WatchdogHost.load_plan(path)),
        'the gpu_watchdog role (its preflight)': _said(role),
        'the fleet report': _said(report),
    }


def plan_writer(path):
    """What the plan's writer (the gpu_services role, through service_plan's ``previous``) makes of the plan file: it
    does not refuse another version, which it is the fix for, but places every service afresh and writes its own."""
    from ansible_collections.gpufleet.core.plugins.module_utils._plan import previous_entries
    from ansible_collections.gpufleet.core.plugins.plugin_utils._placement import previous_plan
    with open(path) as handle:
        kept = previous_entries(previous_plan(handle.read(), path))
    return 'keeps %d placement(s)' % len(kept) if kept else 'places every service afresh'


def fact_readers(fact):
    from ansible_collections.gpufleet.core.plugins.filter.fleet import class_differences
    from ansible_collections.gpufleet.core.plugins.module_utils._topology import Topology
    from ansible_collections.gpufleet.core.plugins.plugin_utils._mps import mps_plan
    from ansible_collections.gpufleet.core.plugins.plugin_utils._placement import plan_services
    from ansible_collections.gpufleet.core.plugins.plugin_utils._report.model import host_model
    from ansible_collections.gpufleet.core.plugins.plugin_utils._topology import (
        gpu_numa_cpulist, topology_after_mig, topology_summary)
    gpu = fact['gpus'][0]['uuid']

    def report():
        problems = host_model({'name': 'h', 'topology': fact})['problems']
        if problems:
            raise ValueError('; '.join(problems))

    return {
        'the topology model': _said(lambda: Topology(fact)),
        'service_plan and place_services (placement)': _said(
            lambda: plan_services(fact, [{'name': 'llm', 'gpus': 1, 'cpus': 2, 'command': '/usr/bin/serve'}])),
        'class_differences (preflight)': _said(lambda: class_differences(fact, {'count': 0}, {})),
        'topology_after_mig (preflight)': _said(lambda: topology_after_mig(fact, [])),
        'topology_summary (nvidia_driver)': _said(lambda: topology_summary(fact)),
        'gpu_numa_cpulist': _said(lambda: gpu_numa_cpulist(fact, gpu)),
        'mps_plan (the mps role)': _said(lambda: mps_plan(fact, [{'device': gpu, 'user': 'gpufleet-mps'}])),
        'the fleet report': _said(report),
    }


def main(argv):
    plan_file, fact_file = argv[1:3]
    with open(fact_file) as handle:
        fact = json.load(handle)
    print(json.dumps({'plan': plan_readers(plan_file), 'fact': fact_readers(fact), 'writer': plan_writer(plan_file)},
                     indent=2, sort_keys=True))


if __name__ == '__main__':
    main(sys.argv)
