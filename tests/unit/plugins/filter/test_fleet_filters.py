# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""The fleet filters (plugins/filter/fleet.py): the address rule for templates, preflight's failures, the rollout."""

from __future__ import absolute_import, division, print_function

import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.gpufleet.core.plugins.filter import fleet


@pytest.mark.parametrize('value, expected', [
    ('10.20.1.11', '10.20.1.11'), ('FD00:0:0:0:0:0:0:5', 'fd00::5'), ('10.20.1.11/24', ''), ('[fd00::5]', ''),
    ('hk1-a100-01', ''), (' 10.20.1.11', ''), (11, ''), ('', ''),
])
def test_ip_address_is_the_address_rule(value, expected):
    assert fleet.ip_address(value) == expected


def test_addresses_in_keeps_usable_addresses_inside_the_networks_once():
    found = fleet.addresses_in(['10.20.1.11', '172.17.0.1', 'fd00:20::11', 'FD00:20:0::11', '10.20.0.0', 'bogus'],
                               ['10.20.0.0/16', 'fd00:20::/64', '10.30.0.5/16', 'word'])
    assert found == ['10.20.1.11', 'fd00:20::11']
    with pytest.raises(AnsibleFilterError, match='a list of addresses and a list of networks'):
        fleet.addresses_in('10.20.1.11', ['10.20.0.0/16'])


def test_preflight_failures_name_the_reason_or_that_the_host_went_away():
    assert fleet.preflight_failures(['a', 'b', 'c'], ['a', 'b'], ['', 'no GPU', '']) == {
        'b': 'no GPU', 'c': 'unreachable, or failed before preflight could record why'}
    with pytest.raises(AnsibleFilterError, match='one reason per host'):
        fleet.preflight_failures(['a', 'b'], ['a'], [''])


# -- xid_alert ----------------------------------------------------------------------------------------------------

def test_xid_alert_writes_a_bucket_and_refuses_what_names_none():
    from ansible_collections.gpufleet.core.plugins.filter.xid import FilterModule as XidFilters
    xid_alert = XidFilters().filters()['xid_alert']
    assert xid_alert('fallen_off_bus') == '79'
    assert xid_alert('rma_range') == '[7d:5m]'
    with pytest.raises(AnsibleFilterError, match="gpufleet.core.xid_alert: 'reset' names no piece of the alert pack"):
        xid_alert('reset')
    with pytest.raises(AnsibleFilterError, match='give the name of a piece as a string, such as reset_gpu'):
        xid_alert(48)
