#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.core contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r'''
---
module: fleet_report
short_description: Write the fleet report, one self-contained HTML page and its JSON, with what changed since the last
version_added: 0.1.0
description:
  - Writes, on the controller, C(fleet-report.html) and C(fleet-report.json) into O(dest). The page draws every host
    (sockets, NUMA nodes with their CPUs and memory, reserved CPUs, GPUs with their MIG instances on the 7 compute and
    8 memory slices, MPS shares, and each placed service on its CPUs and its GPU or slice, coloured by its audit),
    and sums up the fleet (hosts by data centre and class, GPUs by model and MIG use, driver and CUDA versions,
    failed and quarantined hosts, failed audits). See C(docs/report.md).
  - The page holds its style and drawings inline and no script; it fetches nothing, so it opens from disk.
  - The JSON already there is the previous report. When the fleet has changed, it is kept as
    C(fleet-report.previous.json) and the page says what changed against it (hosts, layouts, placements, audit
    results). When nothing has changed, no file is written.
  - A host without facts, GPUs, plan or audit, and a missing or corrupt previous report, never stop the report; the
    page says what is missing. Only O(hosts) entries that are not inventory host names, or name a host twice, are
    refused, before anything is written.
  - This is an action plugin; nothing runs on a host. It reads what the run found on each host of O(hosts) from
    hostvars; C(playbooks/report.yml) gathers what is missing first.
author:
  - gpufleet.core developers (@gpufleet)
extends_documentation_fragment:
  - gpufleet.core.attributes
attributes:
  check_mode:
    support: full
    details: Says what would be written and writes nothing.
  diff_mode:
    support: full
    details: The JSON before and after.
  action:
    description: Runs on the controller only.
    support: full
options:
  dest:
    description: The directory on the controller the report is written into; created if it is missing.
    type: path
    required: true
  hosts:
    description:
      - The inventory names of the hosts to draw, each once. Each host's values are read from hostvars.
      - Labels are C(gpufleet_dc), C(gpufleet_rack), and the class, the host's group in C(monitoring_class_groups)
        (empty takes C(gpufleet_class_groups)) else its C(gpufleet_expected_gpus.model), as the monitoring targets
        label it; reserved CPUs are C(gpu_services_reserved_cpus).
      - The topology is its C(gpufleet_topology) fact; the plan the one the C(gpufleet.core.gpu_services) role made
        in this run (C(__gpu_services_planned)), else the plan file C(playbooks/report.yml) read
        (C(__gpufleet_report_plan)); the audit the site's verify stage's (C(__gpufleet_audit)), else the report's own
        M(gpufleet.core.numa_audit) (C(__gpufleet_report_audit)).
      - A host failed in the run by its C(_gpufleet_failure) (else C(_gpufleet_preflight_failure)), is quarantined
        in the C(gpufleet_quarantine) group, and was lost in its stage (C(_gpufleet_stage)) when it never reached
        the report (C(_gpufleet_report_reached)).
    type: list
    elements: raw
    required: true
  generated_at:
    description: When the report was made, as shown on the page. Default is now, in UTC.
    type: str
  fleet:
    description:
      - Every host the report covers, whatever the run's limit (the inventory's hosts of the fleet).
      - A host of the previous report that is in this list but not in O(hosts), because a run with C(--limit) left
        it out, stays on the page as that report found it, marked as not in this run. A host of the previous report
        that is not in this list is shown as removed.
      - Default is O(hosts) only.
    type: list
    elements: str
  mode:
    description: The permissions of the files written.
    type: raw
    default: '0644'
seealso:
  - module: gpufleet.core.topology_facts
  - module: gpufleet.core.numa_audit
  - module: gpufleet.core.service_plan
'''

EXAMPLES = r'''
- name: Write the fleet report
  gpufleet.core.fleet_report:
    dest: "{{ playbook_dir }}/reports"
    hosts: "{{ ansible_play_hosts_all }}"
    fleet: "{{ query('ansible.builtin.inventory_hostnames', 'fleet') }}"
  register: __report

- name: Say where it is
  ansible.builtin.debug:
    msg: "{{ __report.line }}"
'''

RETURN = r'''
html:
  description: The page's path.
  returned: success
  type: str
  sample: /srv/reports/fleet-report.html
json:
  description: The path of the report's data.
  returned: success
  type: str
  sample: /srv/reports/fleet-report.json
previous:
  description: The path of the previous report's data, when there is one; else null.
  returned: success
  type: str
  sample: /srv/reports/fleet-report.previous.json
written:
  description: The files written (in check mode, those that would be); empty when nothing changed.
  returned: success
  type: list
  elements: str
changes:
  description: How many changes the page lists since the previous report (0 without a previous report).
  returned: success
  type: int
  sample: 2
previous_problem:
  description: Why there are no changes to show (no previous report, or a corrupt one); null otherwise.
  returned: success
  type: str
  sample: null
hosts:
  description: The number of hosts in the report.
  returned: success
  type: int
  sample: 5
failed_hosts:
  description: Hosts that failed in the run.
  returned: success
  type: list
  elements: str
quarantined_hosts:
  description: Hosts preflight quarantined.
  returned: success
  type: list
  elements: str
failed_audits:
  description: C(host/service) for each service whose audit failed or did not cover it.
  returned: success
  type: list
  elements: str
  sample: [hk1-a100-02/imagegen]
not_in_run:
  description: Hosts of O(fleet) that are not in O(hosts), kept on the page as the previous report found them.
  returned: success
  type: list
  elements: str
  sample: [hk2-h100-01]
line:
  description: The report in one line, as the site playbook's summary prints it.
  returned: success
  type: str
  sample: "Fleet report: /srv/reports/fleet-report.html (written; 5 host(s); 2 change(s) since the previous report; failed audits: none)"
'''
