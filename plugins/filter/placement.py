# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.core contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import absolute_import, division, print_function

__metaclass__ = type


# The planner is imported on first use: ansible-core imports every filter file of the collection to find any one
# filter, in every worker, compiling from source.
def place_services(*args, **kwargs):
    from ansible_collections.gpufleet.core.plugins.plugin_utils._placement import place_services as run
    return run(*args, **kwargs)


def service_units(*args, **kwargs):
    from ansible_collections.gpufleet.core.plugins.plugin_utils._placement import service_units as run
    return run(*args, **kwargs)


def service_specs(*args, **kwargs):
    from ansible_collections.gpufleet.core.plugins.plugin_utils._placement import service_specs as run
    return run(*args, **kwargs)


class FilterModule:
    """NUMA-aware placement of GPU services, the units and plan document the gpu_services role writes, and the
    services' specs as the one spec reader normalises them."""

    def filters(self):
        return {'place_services': place_services, 'service_units': service_units, 'service_specs': service_specs}
