# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.core contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The controller's way to the Xid table: the alert pack is written from the table the watchdog reads on the hosts.

This is a private module: its API may change without notice.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible.errors import AnsibleFilterError

from ansible_collections.gpufleet.core.plugins.module_utils import _xid_catalog


def alert_text(name, plugin):
    """_xid_catalog.alert_text, with a refusal in the plugin's name."""
    if not isinstance(name, str):
        raise AnsibleFilterError('%s: give the name of a piece as a string, such as reset_gpu (got %r)'
                                 % (plugin, name))
    try:
        return _xid_catalog.alert_text(name)
    except _xid_catalog.XidCatalogError as exc:
        raise AnsibleFilterError('%s: %s' % (plugin, exc))
