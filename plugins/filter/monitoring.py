# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.core contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import absolute_import, division, print_function

__metaclass__ = type


# Imported on first use, as in placement.py: loading one filter loads every filter file.
def monitoring_host_values(*args, **kwargs):
    from ansible_collections.gpufleet.core.plugins.plugin_utils._monitoring import monitoring_host_values as run
    return run(*args, **kwargs)


def monitoring_targets(*args, **kwargs):
    from ansible_collections.gpufleet.core.plugins.plugin_utils._monitoring import monitoring_targets as run
    return run(*args, **kwargs)


def monitoring_problems(*args, **kwargs):
    from ansible_collections.gpufleet.core.plugins.plugin_utils._monitoring import monitoring_problems as run
    return run(*args, **kwargs)


def monitoring_counter_problems(*args, **kwargs):
    from ansible_collections.gpufleet.core.plugins.plugin_utils._monitoring import monitoring_counter_problems as run
    return run(*args, **kwargs)


def monitoring_report(*args, **kwargs):
    from ansible_collections.gpufleet.core.plugins.plugin_utils._monitoring import monitoring_report as run
    return run(*args, **kwargs)


def hardware_class(*args, **kwargs):
    from ansible_collections.gpufleet.core.plugins.plugin_utils._monitoring import hardware_class as run
    return run(*args, **kwargs)


class FilterModule:
    """The fleet hosts' values the monitoring role reads; the role's targets, their problems (the alert pack's missing counters among them) and Prometheus's
    report; a host's hardware class."""

    def filters(self):
        return {
            'monitoring_host_values': monitoring_host_values,
            'monitoring_targets': monitoring_targets,
            'monitoring_problems': monitoring_problems,
            'monitoring_counter_problems': monitoring_counter_problems,
            'monitoring_report': monitoring_report,
            'hardware_class': hardware_class,
        }
