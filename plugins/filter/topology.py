# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.core contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import absolute_import, division, print_function

__metaclass__ = type


# Imported on first use, as in placement.py: loading one filter loads every filter file.
def cpulist_expand(*args, **kwargs):
    from ansible_collections.gpufleet.core.plugins.plugin_utils._topology import cpulist_expand as run
    return run(*args, **kwargs)


def cpulist_compact(*args, **kwargs):
    from ansible_collections.gpufleet.core.plugins.plugin_utils._topology import cpulist_compact as run
    return run(*args, **kwargs)


def gpu_numa_cpulist(*args, **kwargs):
    from ansible_collections.gpufleet.core.plugins.plugin_utils._topology import gpu_numa_cpulist as run
    return run(*args, **kwargs)


def topology_after_mig(*args, **kwargs):
    from ansible_collections.gpufleet.core.plugins.plugin_utils._topology import topology_after_mig as run
    return run(*args, **kwargs)


def topology_summary(*args, **kwargs):
    from ansible_collections.gpufleet.core.plugins.plugin_utils._topology import topology_summary as run
    return run(*args, **kwargs)


class FilterModule:
    """CPU-list and topology filters."""

    def filters(self):
        return {
            'cpulist_expand': cpulist_expand,
            'cpulist_compact': cpulist_compact,
            'gpu_numa_cpulist': gpu_numa_cpulist,
            'topology_after_mig': topology_after_mig,
            'topology_summary': topology_summary,
        }
