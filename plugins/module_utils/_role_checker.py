# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.core contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The machinery of the role value checkers (_role_values.py): RoleChecker, which collects a role's problems, and the
rules and message helpers that the install roles' checkers (_install_role_checkers.py) and the other roles' checkers
(_runtime_role_checkers.py) both use. Pure code. This is a private module: its API may change without notice.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

from ansible_collections.gpufleet.core.plugins.module_utils._values import describe, shown

# A variable the caller left out of ``values``: it is not checked.
MISSING = object()
DCGM_FIELD = re.compile(r'DCGM_(?:FI|EXP)_[A-Z0-9_]+')


def full_match(pattern, value):
    return isinstance(value, str) and re.fullmatch(pattern, value) is not None


def flow_style(value):
    """The value in YAML flow style with single-quoted strings, as a user writes it: '10.20.0.0/24', ['a'], {'a': 1};
    a string with a line break or a quote is shown as JSON, which YAML reads too."""
    if isinstance(value, str):
        return "'%s'" % value if re.fullmatch(r"[^'\n\r\\]*", value) else shown(value)
    if isinstance(value, dict):
        return '{%s}' % ', '.join('%s: %s' % (flow_style(key), flow_style(item)) for key, item in value.items())
    if isinstance(value, (list, tuple)):
        return '[%s]' % ', '.join(flow_style(item) for item in value)
    return shown(value)


def flow_described(value):
    """describe()'s words with the value in YAML flow style: "the string '10.20.0.0/24'"."""
    words = describe(value)
    if isinstance(value, (str, dict, list, tuple)) and not isinstance(value, bool):
        return '%s %s' % (' '.join(words.split(' ')[:2]), flow_style(value))
    return words


def as_list(variable, value, what, example):
    """The items of a list, or (None, the problem) for a string (write it as a list) or anything else."""
    if isinstance(value, (list, tuple)):
        return list(value), None
    if isinstance(value, str):
        items = [part.strip() for part in value.split(',') if part.strip()]
        return None, '%s is %s, but it must be a list of %s: write [%s]' % (
            variable, describe(value), what, ', '.join(shown(item) for item in items) or example)
    return None, '%s is %s; give a list of %s, such as [%s]' % (variable, describe(value), what, example)


def strings_problem(variable, value, what, example, allow_empty=True):
    """A list of strings, where a single string is the likely mistake."""
    items, problem = as_list(variable, value, what, example)
    if problem:
        return problem
    if not items and not allow_empty:
        return '%s is empty; give at least one of %s, such as [%s]' % (variable, what, example)
    bad = [item for item in items if not isinstance(item, str) or not item.strip()]
    if bad:
        return '%s has %s; each entry must be one of %s, such as [%s]' % (
            variable, ', '.join(describe(item) for item in bad), what, example)
    return None


class RoleChecker:
    """Collects a role's problems; get() reads a variable (MISSING when the caller left it out)."""

    def __init__(self, values):
        self.values = values if isinstance(values, dict) else {}
        self.problems = []

    def get(self, name):
        return self.values.get(name, MISSING)

    def has(self, *names):
        return all(name in self.values for name in names)

    def add(self, *problems):
        self.problems.extend(problem for problem in problems if problem)

    def rule(self, name, function, *args, **kwargs):
        """function(name, value, ...) -> a problem or None, for a variable that is present."""
        if name in self.values:
            self.add(function(name, self.values[name], *args, **kwargs))

    def rules(self, name, function, *args):
        """function(name, value, ...) -> a list of problems, for a variable that is present."""
        if name in self.values:
            self.add(*function(name, self.values[name], *args))
