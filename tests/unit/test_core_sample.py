# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""The oldest ansible-core's sample of a table (support/core_sample.py): every passing row, every templated row, and
every N-th of the others."""

from __future__ import absolute_import, division, print_function

import pytest

from .support import core_sample


def setvar(name, value):
    def edit(inventory):
        inventory[name] = value
    return edit


ACCEPTED = [('shipped', []), ('digit string', [setvar('serial', '3')])]
REFUSED = [('r%d' % index, [setvar('x', index)]) for index in range(10)]
REFUSED[5] = ('templated', [setvar('address', {'ref': ["{{ hk_mgmt }}"]})])


def test_every_row_runs_unless_sampled():
    assert core_sample.rows_to_run(ACCEPTED, REFUSED, every=1) == (ACCEPTED, REFUSED)


def test_a_sample_keeps_every_accepted_row_every_templated_row_and_every_nth_other():
    accepted, refused = core_sample.rows_to_run(ACCEPTED, REFUSED, every=4)
    assert accepted == ACCEPTED
    assert [row[0] for row in refused] == ['r0', 'r4', 'templated', 'r8']


def test_a_row_another_test_reads_always_runs():
    _accepted, refused = core_sample.rows_to_run(ACCEPTED, REFUSED, every=4, always=['r3'])
    assert [row[0] for row in refused] == ['r0', 'r3', 'r4', 'templated', 'r8']


def test_templated_reads_what_an_edit_closes_over():
    assert core_sample.templated(setvar('a', "{{ '10.20.1.' ~ 11 }}"))
    assert core_sample.templated([setvar('a', {'b': '{% if x %}1{% endif %}'})])
    assert not core_sample.templated(setvar('a', '10.20.1.11'))
    assert not core_sample.templated([setvar('a', 3), setvar('b', None)])


@pytest.mark.parametrize('value', ['0', 'four', '-2'])
def test_a_bad_sample_setting_is_refused_naming_the_fix(monkeypatch, value):
    monkeypatch.setenv(core_sample.ENVIRONMENT, value)
    with pytest.raises(ValueError, match='give a whole number of at least 1'):
        core_sample.sample_every()
