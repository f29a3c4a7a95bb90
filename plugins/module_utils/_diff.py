# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.core contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The ``diff`` our modules return in diff mode, built one way.

Ansible shows ``before`` and ``after`` as text, line by line: every line ends with a newline (so the last
line never reads as "no newline at end of file"), and nothing to show is the empty string.
This is a private module: its API may change without notice.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type


def diff_text(lines):
    """LINES (strings without newlines) as diff text."""
    return ''.join('%s\n' % line for line in lines)


def mapping_lines(mapping):
    """A mapping as ``key: value`` lines, sorted by key, so the diff does not depend on dict order."""
    return ['%s: %s' % (key, value) for key, value in sorted(mapping.items())]


def make_diff(before_lines, after_lines):
    """The ``diff`` result of a module: before and after, each a list of lines."""
    return {'before': diff_text(before_lines), 'after': diff_text(after_lines)}
