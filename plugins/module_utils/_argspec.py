# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.core contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Argument-spec fragments shared by the collection's modules.

Each fragment matches a doc fragment in plugins/doc_fragments/ of the same name.
This is a private module: its API may change without notice.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

HOST_ROOTS = {
    'sysfs_root': {'type': 'path', 'default': '/sys'},
    'procfs_root': {'type': 'path', 'default': '/proc'},
}


def argument_spec(*fragments, **own):
    """Merge fragments and a module's own options into one argument_spec."""
    spec = {}
    for fragment in fragments:
        spec.update(fragment)
    spec.update(own)
    return spec
