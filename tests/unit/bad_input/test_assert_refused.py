# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""The suite's one assertion fails on each kind of bad outcome, so the tables built on it can fail."""

from __future__ import absolute_import, division, print_function

import pytest

from ..support.bad_input import assert_refused, snapshot


def test_a_clear_refusal_that_changed_nothing_passes():
    assert_refused(True, "services[0].name: 'web\\n' is not a service name", ['services[0].name', 'web'], 3, 3)


@pytest.mark.parametrize('failed, message, names, before, after, why', [
    (False, '', ['x'], None, None, 'accepted silently'),
    (True, 'Traceback (most recent call last):\n  File "x.py", line 3', ['x'], None, None, 'a traceback'),
    (True, "KeyError: 'devices'", ['devices'], None, None, 'a traceback'),
    (True, 'something is wrong', ['devices'], None, None, 'does not name'),
    (True, 'devices: expected all or a list', ['devices'], 0, 1, 'changed something'),
])
def test_each_bad_outcome_is_caught(failed, message, names, before, after, why):
    with pytest.raises(AssertionError, match=why):
        assert_refused(failed, message, names, before, after)


def test_snapshot_sees_a_changed_byte_and_a_changed_mode(tmp_path):
    (tmp_path / 'a').write_bytes(b'1')
    first = snapshot(tmp_path)
    (tmp_path / 'a').write_bytes(b'2')
    assert snapshot(tmp_path) != first
    (tmp_path / 'a').write_bytes(b'1')
    assert snapshot(tmp_path) == first
    (tmp_path / 'a').chmod(0o600)
    assert snapshot(tmp_path) != first
