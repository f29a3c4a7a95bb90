# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.core contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""NUMA-aware placement of GPU services: which GPUs, CPUs and memory nodes each service gets.

Pure code on a gpufleet_topology fact, shared by the place_services filter (through plugin_utils). ``place`` is the
entry point; the work is split by concern: _topology (the host, indexed), _placement_spec (validating specs),
_planner and _planner_devices (choosing devices, nodes and cores), _mps (the daemons and their shares) and _plan (the
spec's keys and policies, and the entries returned).

The rules, in the order they are applied:

1. Every spec is validated first; every problem is reported at once.
2. Services whose previous placement (``previous``) still fits their spec and the host keep it exactly,
   claimed in input order. That is what makes plans stable: adding or removing a service moves no other.
3. GPUs and MIG devices named explicitly are claimed, then count-based requests (whole GPUs, MIG profiles,
   MPS shares without a device) choose in input order: the pinned node first, then unshared devices before
   shared ones, then the node with the most free cores (lowest id on a tie), then the least shared device, then
   the lowest PCI bus id (UUID where none): never the index, which can change between boots.
4. CPUs are whole cores (SMT siblings together) packed from the low end of the node's free cores; services
   with a CPU count go before services that take ``all``. Reserved CPUs are never used, and a core with a
   reserved CPU is not used at all. Reserved CPUs the host does not have (or has offline) are refused: a typo
   there would reserve nothing.

This is a private module: its API may change without notice.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.gpufleet.core.plugins.module_utils._cpulist import CpuListError
from ansible_collections.gpufleet.core.plugins.module_utils._placement_spec import (
    PlacementError,
    check_reserved,
    parse_specs,
    reserved_cpus as parse_reserved,
)
from ansible_collections.gpufleet.core.plugins.module_utils._mps import MpsPlanError, plan_daemons, share_environments
from ansible_collections.gpufleet.core.plugins.module_utils._plan import PlanError, entry, previous_entries
from ansible_collections.gpufleet.core.plugins.module_utils._planner import plan as plan_placements
from ansible_collections.gpufleet.core.plugins.module_utils._topology import Topology, TopologyModelError

__all__ = ['PlacementError', 'place']


def place(topology, services, reserved_cpus=None, previous=None, mps_daemons=None):
    """Place services on a host; return one entry per service, in input order, or raise PlacementError.

    ``previous`` is the list place_services returned last time, or the plan document read back from the plan file.
    """
    try:
        reserved = parse_reserved(reserved_cpus)
        host = Topology(topology)
    except CpuListError as exc:
        raise PlacementError('%s; fix reserved_cpus or gather the topology again' % exc)
    except TopologyModelError as exc:
        raise PlacementError(str(exc))
    check_reserved(host, reserved)
    daemons = _planned_daemons(host, mps_daemons)
    if not isinstance(services, list):
        raise PlacementError('services must be a list of service specs (dicts with at least a name), got %r'
                             % (services,))
    try:
        previous = previous_entries(previous)
    except PlanError as exc:
        raise PlacementError(str(exc))
    specs = parse_specs(host, daemons, services)
    placed = plan_placements(host, specs, reserved, daemons, previous)
    shares = _mps_shares(daemons, specs, placed)
    return [entry(host, spec, placed[spec.position], shares.get(spec.name)) for spec in specs]


def _planned_daemons(host, mps_daemons):
    """The mps role's mps_daemons (mps_plan's output is such a list too), planned by _mps, by device."""
    if not mps_daemons:
        return {}
    if not isinstance(mps_daemons, list) or not all(isinstance(d, dict) for d in mps_daemons):
        raise PlacementError('mps_daemons must be the mps role\'s mps_daemons list (or mps_plan\'s output)')
    try:
        return dict((daemon.device, daemon) for daemon in plan_daemons(host, mps_daemons))
    except MpsPlanError as exc:
        raise PlacementError('mps_daemons: %s' % exc)


def _mps_shares(daemons, specs, placed):
    """Each MPS share's (daemon, client environment), by service name: its daemon's clients with the share among
    them, checked by _mps (a share's own limits first, else what its daemon lists for it)."""
    if not daemons:
        return {}  # without daemons, parse_specs refuses every MPS share
    shares = [(spec.name, placed[spec.position].devices[0], spec.mps.get('active_thread_percentage'),
               spec.mps.get('pinned_mem_limit')) for spec in specs if spec.mode == 'mps']
    if not shares:
        return {}
    try:
        return share_environments(list(daemons.values()), shares)
    except MpsPlanError as exc:
        raise PlacementError('The MPS shares cannot work: %s' % exc)
