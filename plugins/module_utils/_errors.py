# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.core contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The one base class of every error the collection's own code raises.

Modules, filters and the boot-time helpers can catch ``GpufleetError`` to turn any refusal of ours
into a clear message, while letting real bugs (``TypeError``, ``KeyError``...) surface as tracebacks.
This is a private module: its API may change without notice.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type


class GpufleetError(Exception):
    """A refusal or failure that the message explains; never a bug."""
