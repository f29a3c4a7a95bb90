# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""Plans are byte-identical to those recorded before _placement.py was split.

fixtures/placement_golden.json holds the inputs and results (plan or error message) of every place() call made by
the placement tests, a sample of the property tests' cases, and a sweep of service sets over every simulated host,
all recorded with the code as it was before the split. It is never regenerated from the current code.
"""

from __future__ import absolute_import, division, print_function

import json
import os
import re

import pytest

from ansible_collections.gpufleet.core.plugins.module_utils._placement import PlacementError, place

from ...support.mps_names import named_by_slot

with open(os.path.join(os.path.dirname(__file__), 'fixtures', 'placement_golden.json')) as _handle:
    GOLDEN = json.load(_handle)


# Recorded cases whose outcome changed on purpose, by position in the fixture: what the new outcome must say, and why.
CHANGED_ON_PURPOSE = {
    # Issue 12: an MPS client can only lower its daemon's limits; MPS itself would give this client 2G, not 4G.
    373: "pinned_mem_limit 4G is above the daemon's default_pinned_mem_limit 2G; a client can only lower",
}


def _case_id(case):
    return case['origin']


@pytest.mark.parametrize('position', sorted(CHANGED_ON_PURPOSE))
def test_a_deliberately_changed_case_is_refused_with_the_new_reason(position):
    case = GOLDEN['cases'][position]
    inputs = dict(case['inputs'])
    topology = GOLDEN['topologies'][inputs.pop('topology')]
    assert 'plan' in case, 'the recorded case was a plan; this list is for plans now refused'
    with pytest.raises(PlacementError, match=re.escape(CHANGED_ON_PURPOSE[position])):
        place(topology, **inputs)


@pytest.mark.parametrize('case', [case for position, case in enumerate(GOLDEN['cases'])
                                  if position not in CHANGED_ON_PURPOSE], ids=_case_id)
def test_the_plan_or_error_is_the_recorded_one(case):
    inputs = dict(case['inputs'])
    topology = GOLDEN['topologies'][inputs.pop('topology')]
    try:
        plan = place(topology, **inputs)
    except PlacementError as exc:
        assert 'error' in case, 'refused a placement that used to work: %s' % exc
        assert (type(exc).__name__, str(exc)) == (case['error']['type'], case['error']['message'])
    else:
        assert 'plan' in case, 'placed what used to fail with: %s' % case['error']['message']
        # Byte-identical: the same JSON text, key order and all (MPS daemons named by slot since issue 42).
        assert json.dumps(plan) == named_by_slot(json.dumps(case['plan']), topology)
