# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""The one assertion of the bad-input suite (tests/unit/bad_input/): refused, clearly, before any change.

Every case in the suite's tables is a plausible user mistake. Whatever runs it (a module through ``run_module``, a
filter, a role through ansible-playbook), the case must end in a refusal that:

- is a failure (not a success, not silence),
- is not a traceback (no Python exception type or frame in the message),
- names the offending input (each of ``names``: the option, the value, the file path...),
- changed nothing (the caller passes what it measured before and after: the simulator's mutation counter, a
  snapshot of files, unit states).
"""

from __future__ import absolute_import, division, print_function

import os
import re

# What a traceback or an unhandled exception leaks into a message.
_TRACEBACK = re.compile(r'Traceback \(most recent call last\)|File "[^"]+", line \d+|'
                        r'\b(KeyError|TypeError|AttributeError|IndexError|UnicodeDecodeError|NameError|'
                        r'ZeroDivisionError|RecursionError|UnboundLocalError)\b')


def assert_refused(failed, message, names, before=None, after=None):
    """FAILED: did the run fail; MESSAGE: what the user saw; NAMES: what the message must name;
    BEFORE/AFTER: any comparable measurement of the system (equal means nothing changed)."""
    assert failed, 'accepted silently; expected a refusal naming %s' % ', '.join(map(repr, names))
    text = message if isinstance(message, str) else repr(message)
    assert not _TRACEBACK.search(text), 'a traceback instead of a clear message: %s' % text
    missing = [name for name in names if str(name) not in text]
    assert not missing, 'the message does not name %s: %s' % (', '.join(map(repr, missing)), text)
    assert before == after, 'the refusal changed something: %r -> %r' % (before, after)


def snapshot(root):
    """Every file under ROOT with its bytes and mode, to compare before and after a refused run."""
    found = {}
    for folder, dirs, files in os.walk(str(root)):
        dirs.sort()
        for name in sorted(files):
            path = os.path.join(folder, name)
            if os.path.islink(path):
                found[path] = ('link', os.readlink(path))
                continue
            with open(path, 'rb') as handle:
                found[path] = (os.stat(path).st_mode, handle.read())
    return found
