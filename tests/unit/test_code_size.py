# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""No file under plugins/ is over 450 lines and no function over 120, except those docs/architecture.md names with
why (in its "Sizes" section): a file or function that does five jobs is split by job, not grown."""

from __future__ import absolute_import, division, print_function

import ast
import os
import re

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), '..', '..'))
PLUGINS = os.path.join(REPO, 'plugins')
ARCHITECTURE = os.path.join(REPO, 'docs', 'architecture.md')
MAX_FILE_LINES = 450
MAX_FUNCTION_LINES = 120


def oversized(root=PLUGINS):
    """'path' for each file over the limit, 'path:function' for each function over it."""
    found = {}
    for directory, _dirs, files in os.walk(root):
        for name in sorted(files):
            if not name.endswith('.py'):
                continue
            path = os.path.join(directory, name)
            with open(path) as handle:
                source = handle.read()
            where = os.path.relpath(path, REPO)
            lines = source.count('\n')
            if lines > MAX_FILE_LINES:
                found[where] = lines
            for node in ast.walk(ast.parse(source)):
                if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    length = node.end_lineno - node.lineno + 1
                    if length > MAX_FUNCTION_LINES:
                        found['%s:%s' % (where, node.name)] = length
    return found


def explained():
    """The names docs/architecture.md's "Sizes" section lists, each on a line of its own with its reason."""
    with open(ARCHITECTURE) as handle:
        text = handle.read()
    section = re.search(r'^## Sizes\n(.*?)(?=^## |\Z)', text, re.MULTILINE | re.DOTALL)
    assert section, 'docs/architecture.md has no "## Sizes" section'
    return set(re.findall(r'^- `([^`]+)`: \S', section.group(1), re.MULTILINE))


def test_no_file_or_function_is_oversized_without_a_reason():
    unexplained = dict((name, size) for name, size in oversized().items() if name not in explained())
    assert unexplained == {}, 'split these by job, or say why in docs/architecture.md ("## Sizes"): %s' % unexplained


def test_every_reason_given_is_still_needed():
    stale = explained() - set(oversized())
    assert stale == set(), 'docs/architecture.md ("## Sizes") explains sizes the code no longer has: %s' % sorted(stale)


def test_the_measure_sees_a_long_file_and_a_long_function(tmp_path):
    (tmp_path / 'long.py').write_text('def long():\n' + '    pass\n' * MAX_FILE_LINES)
    assert sorted(oversized(str(tmp_path)).values()) == [MAX_FILE_LINES + 1, MAX_FILE_LINES + 1]
    (tmp_path / 'long.py').write_text('def long():\n' + '    pass\n' * (MAX_FUNCTION_LINES - 1))
    assert oversized(str(tmp_path)) == {}
