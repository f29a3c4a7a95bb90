# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.core contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Each role's value rules, one checker per role: the rules that need no host (versions, URLs, key fingerprints,
ports, counters, TLS pairing, bcrypt hashes, lists written as strings, ranges).

The site playbook's validate stage runs them for every host before any host is reached, and each role's
tasks/preflight.yml runs the same checker (both through the action gpufleet.core.validate_role_vars). The types are
the argument specs' (meta/argument_specs.yml); a checker still takes what Ansible's argument spec would convert (a
string of digits from -e for a port). Rules that need the host (its system, its addresses, its files) stay in the
role's preflight.

    check_role_values('cuda', {'cuda_default_release': 12.1, ...})
    -> ['cuda_default_release is the number 12.1; quote it, as in cuda_default_release: "12.1" ...']

Every problem names the variable, the value as given and what is allowed, with an example. A variable missing from
``values`` is not checked (the caller fills in the defaults).

This module is the one entry (CHECKERS, check_role_values); the checkers live by kind of role: the install roles' in
_install_role_checkers.py, the mig role's in _mig_role_checker.py, the MPS, services, watchdog and monitoring roles' in
_runtime_role_checkers.py, all on the machinery of _role_checker.py. Pure code. This is a private module: its API may
change without notice.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.gpufleet.core.plugins.module_utils._install_role_checkers import (
    check_container_toolkit, check_cuda, check_dcgm_exporter, check_nvidia_driver)
from ansible_collections.gpufleet.core.plugins.module_utils._mig_role_checker import check_mig
from ansible_collections.gpufleet.core.plugins.module_utils._runtime_role_checkers import (
    check_gpu_services, check_gpu_watchdog, check_monitoring, check_mps)

CHECKERS = {
    'monitoring': check_monitoring,
    'gpu_services': check_gpu_services,
    'nvidia_driver': check_nvidia_driver,
    'cuda': check_cuda,
    'container_toolkit': check_container_toolkit,
    'dcgm_exporter': check_dcgm_exporter,
    'mig': check_mig,
    'mps': check_mps,
    'gpu_watchdog': check_gpu_watchdog,
}


def check_role_values(role, values):
    """The problems of a role's variables (a dict of them, defaults filled in), [] for a role without a checker."""
    checker = CHECKERS.get(role)
    return checker(values) if checker else []
