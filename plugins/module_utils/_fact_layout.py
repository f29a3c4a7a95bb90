# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.core contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The layout version of the gpufleet_topology fact: written by topology_facts, read by _topology.Topology.

A module of its own so that topology_facts, which runs on every host, does not compile the topology model to learn
one number. The layouts themselves are documented in topology_facts' RETURN and docs/topology_facts.md.
This is a private module: its API may change without notice.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

# Bumped on incompatible changes. Version 2 carries CPU sets as the kernel's CPU-list strings only (node cpulist, GPU
# local_cpulist, cpu online_cpulist and offline_cpulist), where version 1 also carried them as integer lists.
FACT_VERSION = 2
# What the model reads: a fact cached by an earlier release still plans.
READABLE_FACT_VERSIONS = (1, 2)
