# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.core contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The apt_keyring module's work: a repository key installed as a keyring only when its fingerprints are pinned.

Every input is checked before anything is read or written; ``KeyringFiles`` is the one door to the host (the key's
source, the keyring file). This is a private module: its API may change without notice.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import tempfile

from ansible_collections.gpufleet.core.plugins.module_utils._diff import make_diff
from ansible_collections.gpufleet.core.plugins.module_utils._errors import GpufleetError
from ansible_collections.gpufleet.core.plugins.module_utils._openpgp import OpenPgpError, pinned_fingerprints, primary_fingerprints


class KeyringError(GpufleetError):
    """A refusal; ``result`` holds what the failed result returns besides msg (dest, fingerprints)."""

    def __init__(self, msg, **result):
        super(KeyringError, self).__init__(msg)
        self.result = result


class KeyringFiles:
    """The module's door to the host: where the key comes from and the keyring file it writes.

    ``module`` is the AnsibleModule (its atomic_move and file attributes), ``fetch_url`` ansible-core's: module_utils
    imports nothing of ansible-core, as it also runs in the helper bundle."""

    def __init__(self, module, fetch_url):
        self.module = module
        self.fetch_url = fetch_url

    @staticmethod
    def is_dir(path):
        return os.path.isdir(path)

    @staticmethod
    def read(path):
        """The file's bytes, or None where it cannot be read (there is no keyring yet)."""
        try:
            with open(path, 'rb') as handle:
                return handle.read()
        except (IOError, OSError):
            return None

    @staticmethod
    def read_source(path):
        """The key file's bytes; KeyringError where it cannot be read."""
        try:
            with open(path, 'rb') as handle:
                return handle.read()
        except (IOError, OSError) as exc:
            raise KeyringError('src=%s cannot be read: %s' % (path, exc))

    def download(self, url, timeout):
        response, info = self.fetch_url(self.module, url, timeout=timeout)
        if response is None or info.get('status', 200) not in (200, -1) and not url.startswith('file:'):
            raise KeyringError('cannot download the key from %s: %s' % (url, info.get('msg')))
        return response.read()

    @staticmethod
    def remove(path):
        os.remove(path)

    def write(self, path, data):
        """Write the keyring whole (apt never reads half of one), then root-owned, mode 0644."""
        fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path) or '.', prefix='.gpufleet-keyring-')
        with os.fdopen(fd, 'wb') as handle:
            handle.write(data)
        os.chmod(tmp, 0o644)
        self.module.atomic_move(tmp, path)

    def settle_attributes(self, path, changed):
        """Root-owned, mode 0644, as apt requires; True where that or CHANGED changed the file."""
        return self.module.set_fs_attributes_if_different(
            {'path': path, 'owner': 'root', 'group': 'root', 'mode': '0644', 'secontext': [None, None, None],
             'attributes': None}, changed)


def _check_dest(files, dest, state):
    """Refuse, before reading anything, a dest that cannot be a keyring file: nothing is written then."""
    if files.is_dir(dest):
        raise KeyringError('dest=%s is a directory; expected the path of the keyring file to write, such as '
                           '%s/nvidia-cuda.gpg' % (dest, dest.rstrip('/')), dest=dest)
    directory = os.path.dirname(dest) or '.'
    if state == 'present' and not files.is_dir(directory):
        raise KeyringError('dest=%s: its directory %s does not exist; expected a keyring path in an existing '
                           'directory such as /usr/share/keyrings (create the directory first)' % (dest, directory),
                           dest=dest)


def _read_key(files, params):
    """(the key's bytes, where they came from) from content, src or url."""
    if params['content'] is not None:
        return params['content'].encode('utf-8'), 'content'
    if params['src'] is not None:
        return files.read_source(params['src']), params['src']
    return files.download(params['url'], params['timeout']), params['url']


def converge(files, params, check_mode, with_diff):
    """The module's result for its parameters; raises KeyringError, having changed nothing, for any refusal."""
    dest = params['dest']
    try:
        pinned = pinned_fingerprints(params['fingerprints'])
    except OpenPgpError as exc:
        raise KeyringError(str(exc), dest=dest)
    if not pinned and params['state'] == 'present':
        raise KeyringError('fingerprints is empty: pin the repository key\'s fingerprint (fail closed)')
    _check_dest(files, dest, params['state'])
    existing = files.read(dest)
    if params['state'] == 'absent':
        if existing is not None and not check_mode:
            files.remove(dest)
        return {'changed': existing is not None, 'dest': dest}
    data, origin = _read_key(files, params)
    try:
        binary, found = primary_fingerprints(data)
    except OpenPgpError as exc:
        raise KeyringError('%s is not a usable OpenPGP public key: %s' % (origin, exc))
    unpinned = [fingerprint for fingerprint in found if fingerprint not in pinned]
    if unpinned:
        raise KeyringError('refusing the key from %s: it has fingerprint %s, which is not pinned (pinned: %s). The '
                           'repository key may have rotated, or the mirror serves another key: check the key, then '
                           'update the pinned fingerprints' % (origin, ', '.join(unpinned), ', '.join(pinned)),
                           fingerprints=found)
    changed = existing != binary
    if not check_mode:
        if changed:
            files.write(dest, binary)
        changed = files.settle_attributes(dest, changed)
    result = {'changed': changed, 'dest': dest, 'fingerprints': found}
    if with_diff:
        result['diff'] = make_diff(['absent' if existing is None else 'keyring %d bytes' % len(existing)],
                                   ['keyring %d bytes, fingerprints %s' % (len(binary), ', '.join(found))])
    return result
