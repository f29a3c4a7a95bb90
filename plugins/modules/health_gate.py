#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.core contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r'''
---
module: health_gate
short_description: The rollout's health gate after a batch - the GPU alert pack's alerts in Prometheus, and the canary
version_added: 0.1.0
description:
  - Run after each batch of the site playbook's rollout. The batch's hosts are those of O(rollout_hosts) that entered
    a stage of the rollout and that no earlier gate (O(gated)) saw.
  - It waits O(soak) seconds, then asks the Prometheus at O(prometheus_url) for the alerts of the GPU alert pack
    (label C(pack="gpufleet"), severity other than C(info)) firing for those hosts. It fails, which stops the
    rollout, when one fires, naming each host and alert, or when the batch is the canary (all its hosts in
    O(canary)) and one of them failed a stage or was lost.
  - Without a Prometheus, or when it does not answer, the gate says it was not checked, and fails only with
    O(required).
  - This is an action plugin; nothing runs on the host.
author:
  - gpufleet.core developers (@gpufleet)
extends_documentation_fragment:
  - gpufleet.core.attributes
attributes:
  check_mode:
    support: full
    details: It changes nothing; in check mode it does not wait the soak time.
  diff_mode:
    support: none
    details: It changes nothing, so there is nothing to show.
  action:
    description: Runs on the controller only.
    support: full
options:
  prometheus_url:
    description: The monitoring host's Prometheus, such as V(http://10.20.3.41:9090); empty when there is none.
    type: str
    default: ""
  rollout_hosts:
    description: The rollout's hosts in batch order (C(hostvars['localhost']['_gpufleet_rollout']['hosts'])).
    type: list
    elements: str
    required: true
  canary:
    description: The canary's hosts (C(hostvars['localhost']['_gpufleet_rollout']['canary'])).
    type: list
    elements: str
    default: []
  gated:
    description: The earlier gates of this run, each RV(gate) as this action returned it.
    type: list
    elements: dict
    default: []
  soak:
    description: Seconds to wait before asking Prometheus, so that the batch's hosts are scraped and alerts settle.
    type: int
    default: 60
  required:
    description: Fail when the batch's health cannot be asked (no Prometheus, or no answer).
    type: bool
    default: false
notes:
  - Run it with C(run_once), C(delegate_to) V(localhost) and C(any_errors_fatal), as the last task of the rollout
    play, so that a failed gate stops the play before the next batch; keep each RV(gate) for the next one.
seealso:
  - module: gpufleet.core.drain
'''

EXAMPLES = r'''
- name: Health gate - the pack's alerts for the batch's hosts, after a soak
  gpufleet.core.health_gate:
    prometheus_url: "{{ hostvars['localhost']['_gpufleet_fleet']['watchdog']['prometheus_url'] }}"
    rollout_hosts: "{{ hostvars['localhost']['_gpufleet_rollout']['hosts'] }}"
    canary: "{{ hostvars['localhost']['_gpufleet_rollout']['canary'] }}"
    gated: "{{ hostvars['localhost']['_gpufleet_health_gates'] | default([]) }}"
    soak: 60
  register: __gate
  run_once: true
  delegate_to: localhost
  any_errors_fatal: true

- name: Keep the gate for the next one
  ansible.builtin.set_fact:
    _gpufleet_health_gates: "{{ hostvars['localhost']['_gpufleet_health_gates'] | default([]) + [__gate.gate] }}"
  run_once: true
  delegate_to: localhost
  delegate_facts: true
'''

RETURN = r'''
gate:
  description: This batch's gate.
  returned: always
  type: dict
  contains:
    batch:
      description: The batch's number in the run, from 1.
      type: int
    hosts:
      description: The batch's hosts.
      type: list
      elements: str
    checked:
      description: Whether Prometheus was asked.
      type: bool
    passed:
      description: Whether the rollout goes on.
      type: bool
    firing:
      description: Each firing alert, as C(ALERT on HOST (gpu 2, xid 79)).
      type: list
      elements: str
    line:
      description: The gate in one sentence, as the site playbook's summary prints it.
      type: str
      sample: "Health gate after batch 1, the canary (hk1-a100-01): passed: no alert of the pack firing for its hosts after a 60 s soak"
msg:
  description: The gate's line.
  returned: always
  type: str
'''
