# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.core contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import absolute_import, division, print_function

__metaclass__ = type


def watchdog_plan_problems(*args, **kwargs):
    """The gpu_watchdog role's refusals for the plan on the host (plugins/plugin_utils/_watchdog.py)."""
    # Imported on first use: ansible-core imports every filter file of the collection to find any one filter.
    from ansible_collections.gpufleet.core.plugins.plugin_utils._watchdog import watchdog_plan_problems as run
    return run(*args, **kwargs)


class FilterModule(object):
    def filters(self):
        return {'watchdog_plan_problems': watchdog_plan_problems}
