#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.core contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r'''
---
module: fleet_validate
short_description: Check every host of the run, and the fleet as a whole, from the inventory alone
version_added: 0.1.0
description:
  - The site playbook's C(validate) stage in one task, run once for the whole run. It reads every host's inventory
    values through C(hostvars), with the C(gpufleet.core.gpufleet) role's defaults beneath them, and checks them with
    the collection's fleet model - the management address inside its networks, the data centre and rack labels,
    the hardware class, the expected GPUs, the rollout settings - and each role the host will run with that role's
    checker (its argument spec and its value rules).
  - The fleet's own rules are checked across hosts - no two hosts share a management address (IPv6 written two ways
    is one address), each host is in exactly one rack group, data-centre group and hardware-class group when
    C(gpufleet_rack_groups), C(gpufleet_dc_groups) and C(gpufleet_class_groups) name them, a rack is in one data
    centre, the run's settings are the same on every host, and no inventory host is left out of every stage by a
    misspelt class group.
  - No host is contacted and nothing changes. The results say what is wrong; the tasks after it fail the hosts and
    the run.
  - This is an action plugin; nothing runs on the host.
author:
  - gpufleet.core developers (@gpufleet)
extends_documentation_fragment:
  - gpufleet.core.attributes
attributes:
  check_mode:
    support: full
    details: It changes nothing, in any mode.
  diff_mode:
    support: none
    details: It changes nothing, so there is nothing to show.
  action:
    description: Runs on the controller only.
    support: full
options: {}
notes:
  - Run it with C(run_once), and C(delegate_to) V(localhost) with C(delegate_facts) so that the fleet's verdict is
    kept on localhost for the later stages.
seealso:
  - module: gpufleet.core.validate_role_vars
'''

EXAMPLES = r'''
- name: Check every host's inventory values and role variables, and the fleet's rules
  gpufleet.core.fleet_validate:
  register: __gpufleet_validate
  run_once: true
  delegate_to: localhost
  delegate_facts: true
'''

RETURN = r'''
hosts:
  description:
    - Every host of the run to its problems, each naming the host, the variable, the value and the fix; each host's in
      full, as the summary lists them (see RV(messages)).
  returned: always
  type: dict
  sample: {"hk1-a100-01": ["hk1-a100-01: gpufleet_rack is the integer 2; give a string, the rack (letters, digits, _ . -), such as \"hk1-a\""]}
messages:
  description:
    - Every host with problems to what its failure says - its problems, each named once - a problem that several hosts
      share (one value in C(group_vars)) is named in full, with every host that has it, in the message of the first
      of them by name, and the others' messages say where.
  returned: always
  type: dict
  sample:
    hk1-a100-01: >-
      2 hosts (hk1-a100-01 and hk1-a100-02) have the same problem, named here once: gpufleet_rack is the integer 2;
      give a string, the rack (letters, digits, _ . -), such as "hk1-a"
    hk1-a100-02: "hk1-a100-02: the same problem as hk1-a100-01, named in full in hk1-a100-01's message"
failed_hosts:
  description: The hosts with problems.
  returned: always
  type: list
  elements: str
fleet:
  description: The problems of the fleet as a whole, each naming every host involved.
  returned: always
  type: list
  elements: str
  sample: ["hk1-a100-01 and hk1-a100-02 have the same gpufleet_management_address 10.20.1.11; give each host its own address"]
roles:
  description: Every host of the run to the collection's roles the site playbook will run there, its stage plan's (whose variables were checked).
  returned: always
  type: dict
  sample: {"hk2-cpu-01": ["gpu_services", "monitoring"]}
ansible_facts:
  description: The fleet's verdict for the later stages.
  returned: always
  type: dict
  contains:
    _gpufleet_fleet:
      description:
        - C(settings), the run's settings normalised; C(models), every host's model (address, networks, dc, rack and
          their groups, hardware class, whether it is a GPU host, its expected GPUs, its batch domain);
          C(fleet_problems); C(watchdog), the fleet-wide quarantine cap as a number of hosts and the Prometheus
          that counts them.
        - C(stages), every host of the run to its stage plan, the stages it goes through in order, each a dict of
          C(name), C(roles) (the roles it runs there), C(receipt) (a state receipt records it), C(topology) (its
          receipt holds the host's GPUs and NUMA nodes) and C(stops_services) (its failure can leave the services
          stopped); the rollout runs exactly these.
        - C(handed_down), each role variable the site playbook sets from one of its own knobs, to that knob's
          normalised value.
      type: dict
      returned: always
msg:
  description: How many hosts were checked and which have problems.
  returned: always
  type: str
'''
