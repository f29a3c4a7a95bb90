# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.core contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import absolute_import, division, print_function

__metaclass__ = type


def xid_alert(name):
    """A piece of the GPU alert pack's PromQL from the Xid table (plugins/module_utils/_xid_catalog.py)."""
    # Imported on first use: ansible-core imports every filter file of the collection to find any one filter.
    from ansible_collections.gpufleet.core.plugins.plugin_utils._xid import alert_text
    return alert_text(name, 'gpufleet.core.xid_alert')


class FilterModule(object):
    def filters(self):
        return {'xid_alert': xid_alert}
