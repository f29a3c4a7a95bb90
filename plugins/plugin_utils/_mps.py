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
    if not isinstance(daemons, list) or not all(
            isinstance(d, dict) and isinstance(d.get('clients'), list) and 'pipe_directory' in d for d in daemons):
        raise AnsibleFilterError('gpufleet.core.mps_client_env: the input must be the list gpufleet.core.mps_plan '
                                 'returns, got %r' % (daemons,))
    if not isinstance(device, str) or not isinstance(client, str):
        raise AnsibleFilterError('gpufleet.core.mps_client_env: device and client are strings (a GPU-/MIG- UUID or '
                                 'a MIG slot, and a client name), got %r and %r' % (device, client))
    for daemon in daemons:
        if device in (daemon.get('device'), daemon.get('name')):
            try:
                return client_environment(daemon, client)
            except MpsPlanError as exc:
                raise AnsibleFilterError('gpufleet.core.mps_client_env: %s' % exc)
    raise AnsibleFilterError('gpufleet.core.mps_client_env: no MPS daemon serves %s (daemons: %s)' % (
        device, ', '.join(str(d.get('device')) for d in daemons) or 'none'))
