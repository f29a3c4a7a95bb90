# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.core contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The gpu_watchdog role's check of the plan on the host, through the plan's one reader (``_plan.parse_plan``).

This is a private module: its API may change without notice.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import base64
import binascii
from collections.abc import Mapping

from ansible.errors import AnsibleFilterError

from ansible_collections.gpufleet.core.plugins.module_utils._plan import PlanError, parse_plan
from ansible_collections.gpufleet.core.plugins.module_utils._watchdog_config import check_budgets_name_services

FILTER = 'gpufleet.core.watchdog_plan_problems'


def watchdog_plan_problems(content, plan_file, service_budgets):
    """The role's refusals for the plan file on the host (``content`` as ansible.builtin.slurp gives it, base64):
    [] or one sentence each, naming the variable and the fix."""
    if not isinstance(content, str) or not isinstance(plan_file, str) or not isinstance(service_budgets, Mapping):
        raise AnsibleFilterError('%s: give the plan file\'s content as ansible.builtin.slurp reads it, the plan file\'s '
                                 'path and the per-service budgets, such as __plan.content | %s(gpu_watchdog_plan_file, '
                                 'gpu_watchdog_service_budgets)' % (FILTER, FILTER))
    try:
        text = base64.b64decode(content, validate=True).decode('utf-8', 'replace')
    except (binascii.Error, ValueError) as exc:
        raise AnsibleFilterError('%s: the content is not base64, as ansible.builtin.slurp gives it (%s)' % (FILTER, exc))
    try:
        plan = parse_plan(text, 'gpu_watchdog_plan_file %s' % plan_file)
    except PlanError as exc:
        return ["%s; or point gpu_watchdog_plan_file at the gpu_services role's gpu_services_plan_file." % exc]
    unplanned = check_budgets_name_services({'service_budgets': dict(service_budgets)}, plan)
    if unplanned:
        return ['gpu_watchdog_service_budgets names %s, which %s does not place (it places: %s); fix the name or remove '
                'the entry.' % (', '.join(unplanned), plan_file, ', '.join(plan.names()) or 'no service')]
    return []
