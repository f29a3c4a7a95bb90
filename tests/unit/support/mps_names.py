# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""Issue 42, on purpose: an MPS daemon is named by its device's slot where the device is a MIG device (its UUID need not
survive a reboot), so a plan recorded before gives each daemon a ``name`` first, and a MIG device's daemon directories
end in the slot instead of the UUID. ``named_by_slot`` makes that one change to a recorded plan's JSON text, and no
other, for the tests that compare plans with recordings byte for byte."""

from __future__ import absolute_import, division, print_function

import re

from ansible_collections.gpufleet.core.plugins.module_utils._device_env import device_name
from ansible_collections.gpufleet.core.plugins.module_utils._topology import Topology

# A daemon as plan() returns it (then "gpu_uuid"), and as a service's plan names it (then "pipe_directory").
_DAEMON = re.compile(r'\{"device": "((?:GPU|MIG)-[0-9A-Za-z-]+)", "(gpu_uuid|pipe_directory)"')


def named_by_slot(recorded_text, topology_fact):
    """RECORDED_TEXT (a plan as json.dumps wrote it) as a plan names its MPS daemons now, on TOPOLOGY_FACT."""
    topology = Topology(topology_fact)
    names = dict((uuid, device_name(topology, uuid)) for uuid, _next in set(_DAEMON.findall(recorded_text)))
    text = _DAEMON.sub(lambda match: '{"name": "%s", "device": "%s", "%s"' % (
        names[match.group(1)], match.group(1), match.group(2)), recorded_text)
    for uuid, name in names.items():
        if name != uuid:
            text = re.sub(r'(/[^"]*)/%s"' % re.escape(uuid), lambda match: '%s/%s"' % (match.group(1), name), text)
    return text
