# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.core contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import absolute_import, division, print_function

__metaclass__ = type


# Imported on first use, as in placement.py: loading one filter loads every filter file.
def preflight_failures(*args, **kwargs):
    """Host -> why it failed preflight: its recorded reason, or that it went away (unreachable, or a failure the
    rescue could not catch)."""
    from ansible_collections.gpufleet.core.plugins.plugin_utils._fleet import preflight_failures as run
    return run(*args, **kwargs)


def rollout_plan(*args, **kwargs):
    """The hosts that passed preflight in batch order, with the play's serial and max_fail_percentage."""
    from ansible_collections.gpufleet.core.plugins.plugin_utils._fleet import rollout_plan as run
    return run(*args, **kwargs)


def class_differences(*args, **kwargs):
    """How a host differs from the GPUs and the NUMA shape its hardware class promises, one sentence each."""
    from ansible_collections.gpufleet.core.plugins.plugin_utils._fleet import class_differences as run
    return run(*args, **kwargs)


def ip_address(*args, **kwargs):
    """The management-address rule's verdict on one value: the address in its one canonical form (FD00::5 and
    fd00:0:0:0:0:0:0:5 are both fd00::5), or '' when it is not an IP address alone."""
    from ansible_collections.gpufleet.core.plugins.plugin_utils._fleet import ip_address as run
    return run(*args, **kwargs)


def addresses_in(*args, **kwargs):
    """The addresses (canonical, each once, in order) that a host can have inside any of the networks; entries that
    are not addresses or networks count for nothing."""
    from ansible_collections.gpufleet.core.plugins.plugin_utils._fleet import addresses_in as run
    return run(*args, **kwargs)


def receipt_check(*args, **kwargs):
    """What the state receipts of a host's stage plan are checked against: their order, roles and inputs."""
    from ansible_collections.gpufleet.core.plugins.plugin_utils._fleet import receipt_check as run
    return run(*args, **kwargs)


class FilterModule:
    """The fleet model's rollout (which hosts failed preflight, the batches of the others, what each stage's receipt is
    checked against), a host against its hardware class, and the management-address rule for templates."""

    def filters(self):
        return {'preflight_failures': preflight_failures, 'rollout_plan': rollout_plan,
                'class_differences': class_differences, 'ip_address': ip_address, 'addresses_in': addresses_in,
                'receipt_check': receipt_check}
