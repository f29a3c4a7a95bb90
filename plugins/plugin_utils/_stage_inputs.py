# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.core contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""A stage's inputs as one digest, on the controller: every variable of its roles' argument specs as the host has
them (the defaults filled in), and the content of those roles and of the collection's host-side code.

The action gpufleet.core.state_receipt digests a stage's roles with this before the module compares the digest with
the stage's receipt on the host (docs/drift.md): a new value, or a collection version whose roles or modules differ,
makes the stage run. This is a private module: its API may change without notice.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import hashlib
import json
import os

from ansible_collections.gpufleet.core.plugins.plugin_utils._role_vars import ROLES_DIR

COLLECTION_DIR = os.path.dirname(ROLES_DIR)
# The collection's code that runs on the hosts, besides the roles: a new version of it may converge differently.
HOST_CODE_DIRS = (os.path.join('plugins', 'modules'), os.path.join('plugins', 'module_utils'))
_CONTENT = {}


def tree_digest(relative_dirs):
    """The sha256 of every file under the collection's RELATIVE_DIRS, by path and content (once per process)."""
    key = tuple(relative_dirs)
    if key not in _CONTENT:
        digest = hashlib.sha256()
        for relative in key:
            top = os.path.join(COLLECTION_DIR, relative)
            for root, dirs, files in os.walk(top):
                dirs[:] = sorted(d for d in dirs if d != '__pycache__')
                for name in sorted(files):
                    if name.endswith('.pyc'):
                        continue
                    path = os.path.join(root, name)
                    with open(path, 'rb') as handle:
                        content = handle.read()
                    digest.update(os.path.relpath(path, COLLECTION_DIR).encode('utf-8') + b'\0')
                    digest.update(hashlib.sha256(content).digest())
        _CONTENT[key] = digest.hexdigest()
    return _CONTENT[key]


def roles_digest(values_by_role):
    """One digest for a stage's roles: {role: {variable: value}} (every variable of the role's argument spec that has
    a value) with the content of the roles and the host-side code."""
    roles = sorted(values_by_role)
    text = json.dumps({'variables': values_by_role,
                       'content': tree_digest([os.path.join('roles', role) for role in roles] + list(HOST_CODE_DIRS))},
                      sort_keys=True, separators=(',', ':'), default=str)
    return hashlib.sha256(text.encode('utf-8')).hexdigest()
