# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.core contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import absolute_import, division, print_function

__metaclass__ = type


# Imported on first use, as in placement.py: loading one filter loads every filter file.
def mps_plan(*args, **kwargs):
    from ansible_collections.gpufleet.core.plugins.plugin_utils._mps import mps_plan as run
    return run(*args, **kwargs)


def mps_client_env(*args, **kwargs):
    from ansible_collections.gpufleet.core.plugins.plugin_utils._mps import mps_client_env as run
    return run(*args, **kwargs)


class FilterModule:
    """CUDA MPS plan and client-environment filters."""

    def filters(self):
        return {'mps_plan': mps_plan, 'mps_client_env': mps_client_env}
