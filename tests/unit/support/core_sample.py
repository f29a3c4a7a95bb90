# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""Which rows of a table of ansible-playbook runs the oldest ansible-core runs (tests/run.sh, stage units-oldest).

A row of such a table differs from the others in the values it hands the collection's Python rules, which are the same
code on every ansible-core and run in full on the newest (stage units). What the oldest core must show is that its
side of each run works: it parses the inventory, templates and coerces the values, runs the action and reports the
failure. So on the oldest core a table runs every row that ansible-core templates (a value with "{{"), every row
that passes (each is a form of a value that ansible-core hands over: a digit string, a yes, an IPv6 address), and
every SAMPLE-th of the others, by position, so that each rule family is still asked. GPUFLEET_CORE_SAMPLE=N sets N;
unset (or 1), every row runs.
"""

from __future__ import absolute_import, division, print_function

import os

ENVIRONMENT = 'GPUFLEET_CORE_SAMPLE'


def sample_every():
    """N from GPUFLEET_CORE_SAMPLE (1: every row)."""
    value = os.environ.get(ENVIRONMENT, '1')
    if not value.isdigit() or int(value) < 1:
        raise ValueError('%s=%r: give a whole number of at least 1 (1 runs every row)' % (ENVIRONMENT, value))
    return int(value)


def templated(value):
    """Whether a value, or a value an edit function closes over, holds a Jinja expression."""
    if isinstance(value, str):
        return '{{' in value or '{%' in value
    if isinstance(value, dict):
        return any(templated(key) or templated(item) for key, item in value.items())
    if isinstance(value, (list, tuple, set)):
        return any(templated(item) for item in value)
    if callable(value) and getattr(value, '__closure__', None):
        return any(templated(cell.cell_contents) for cell in value.__closure__)
    return False


def rows_to_run(accepted, refused, every=None, always=()):
    """The (accepted, refused) rows to run: every row when EVERY is 1, else as the module's docstring says, and the rows
    whose ids are in ALWAYS (another test of the table reads their outcome). A row is (id, edits, ...)."""
    every = sample_every() if every is None else every
    if every == 1:
        return list(accepted), list(refused)
    return list(accepted), [row for index, row in enumerate(refused)
                            if index % every == 0 or templated(row[1]) or row[0] in always]
