# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""The diff text our modules return."""

from __future__ import absolute_import, division, print_function

from ansible_collections.gpufleet.core.plugins.module_utils._diff import diff_text, make_diff, mapping_lines


def test_every_line_ends_with_a_newline_and_nothing_is_empty():
    assert diff_text(['a', 'b']) == 'a\nb\n'
    assert diff_text([]) == ''
    assert diff_text(iter(['only'])) == 'only\n'


def test_a_mapping_reads_in_key_order():
    assert mapping_lines({'GPU-b': 'default', 'GPU-a': 'exclusive_process'}) == [
        'GPU-a: exclusive_process', 'GPU-b: default']
    assert mapping_lines({}) == []


def test_make_diff():
    assert make_diff(['absent'], ['keyring 10 bytes']) == {'before': 'absent\n', 'after': 'keyring 10 bytes\n'}
    assert make_diff([], []) == {'before': '', 'after': ''}
