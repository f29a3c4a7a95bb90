# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.core contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Controller-side access to the MPS plan model: turns its errors into AnsibleFilterError.

This is a private module: its API may change without notice.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible.errors import AnsibleFilterError

from ansible_collections.gpufleet.core.plugins.module_utils._mps import MpsPlanError, client_environment, plan


def mps_plan(topology, daemons, pipe_root='/run/gpufleet-mps', log_root='/var/log/gpufleet-mps', time_slicing=None):
    if not isinstance(topology, dict) or 'gpus' not in topology:
        raise AnsibleFilterError('gpufleet.core.mps_plan: the input must be '
                                 "ansible_facts['gpufleet_topology'] from gpufleet.core.topology_facts")
    try:
        return plan(topology, daemons, pipe_root, log_root, time_slicing or ())
    except MpsPlanError as exc:
        raise AnsibleFilterError('gpufleet.core.mps_plan: %s' % exc)


def mps_client_env(daemons, device, client):
    for daemon in daemons or []:
        if daemon['device'] == device:
            try:
                return client_environment(daemon, client)
            except MpsPlanError as exc:
                raise AnsibleFilterError('gpufleet.core.mps_client_env: %s' % exc)
    raise AnsibleFilterError('gpufleet.core.mps_client_env: no MPS daemon serves %s (daemons: %s)' % (
        device, ', '.join(d['device'] for d in daemons or []) or 'none'))
