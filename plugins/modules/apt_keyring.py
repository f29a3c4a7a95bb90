#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.core contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r'''
---
module: apt_keyring
short_description: Install a repository signing key only if its fingerprint is pinned
version_added: 0.1.0
description:
  - Reads an OpenPGP public key (armored or binary) from a URL, a file on the target or given content,
    computes the fingerprints of its primary keys, and installs it as a binary keyring for an apt source's
    C(signed-by) only when every one of them is among O(fingerprints). Anything else fails closed, with the
    fingerprints found and pinned, and changes nothing.
  - Needs no gpg on the target. The keyring is written root-owned with mode 0644, as apt requires.
  - Use it for NVIDIA's CUDA, Container Toolkit and DCGM repositories, or for a local mirror's own key.
author:
  - gpufleet.core developers (@gpufleet)
extends_documentation_fragment:
  - gpufleet.core.attributes
attributes:
  check_mode:
    support: full
  diff_mode:
    support: full
options:
  dest:
    description:
      - The keyring file to write, for example C(/usr/share/keyrings/nvidia-cuda.gpg).
      - Its directory must exist; a O(dest) in a missing directory, or that is a directory, is refused before
        anything is read or written.
    type: path
    required: true
  url:
    description: Where to download the key (C(https://), C(http://) or C(file://)), such as a local mirror.
    type: str
  src:
    description: A key file already on the target.
    type: path
  content:
    description: The key itself, armored.
    type: str
  fingerprints:
    description:
      - The fingerprints the key must have; spaces and case do not matter. Every primary key in the data must
        be listed here. Required with O(state=present).
      - Each must be a full fingerprint as C(gpg --show-keys --with-fingerprint) prints it, 40 hex digits (64 for a
        version 5 or 6 key). A key id (8 or 16 digits) or anything else is refused, naming it, before anything is
        read or written.
    type: list
    elements: str
    default: []
  state:
    description: V(present) installs the keyring; V(absent) removes it.
    type: str
    choices: [present, absent]
    default: present
  timeout:
    description: Seconds to wait for O(url).
    type: int
    default: 30
'''

EXAMPLES = r'''
- name: NVIDIA's CUDA repository key, pinned
  gpufleet.core.apt_keyring:
    url: https://developer.download.nvidia.com/compute/cuda/repos/ubuntu2204/x86_64/3bf863cc.pub
    dest: /usr/share/keyrings/nvidia-cuda.gpg
    fingerprints: [EB693B3035CD5710E231E123A4B469963BF863CC]

- name: The same key from the site's mirror
  gpufleet.core.apt_keyring:
    url: http://mirror.hk1.example.internal/nvidia/cuda/3bf863cc.pub
    dest: /usr/share/keyrings/nvidia-cuda.gpg
    fingerprints: [EB693B3035CD5710E231E123A4B469963BF863CC]
'''

RETURN = r'''
fingerprints:
  description: The fingerprints of the primary keys found.
  returned: when state is present
  type: list
  elements: str
  sample: [EB693B3035CD5710E231E123A4B469963BF863CC]
dest:
  description: The keyring file.
  returned: always
  type: str
  sample: /usr/share/keyrings/nvidia-cuda.gpg
'''

import os
import tempfile

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.common.text.converters import to_bytes
from ansible.module_utils.urls import fetch_url

from ansible_collections.gpufleet.core.plugins.module_utils._diff import make_diff
from ansible_collections.gpufleet.core.plugins.module_utils._openpgp import OpenPgpError, pinned_fingerprints, primary_fingerprints


def read_key(module):
    params = module.params
    if params['content'] is not None:
        return to_bytes(params['content']), 'content'
    if params['src'] is not None:
        try:
            with open(params['src'], 'rb') as handle:
                return handle.read(), params['src']
        except (IOError, OSError) as exc:
            module.fail_json(msg='src=%s cannot be read: %s' % (params['src'], exc))
    response, info = fetch_url(module, params['url'], timeout=params['timeout'])
    if response is None or info.get('status', 200) not in (200, -1) and not params['url'].startswith('file:'):
        module.fail_json(msg='cannot download the key from %s: %s' % (params['url'], info.get('msg')))
    return response.read(), params['url']


def check_dest(module, dest):
    """Refuse, before reading anything, a dest that cannot be a keyring file: nothing is written then."""
    if os.path.isdir(dest):
        module.fail_json(msg='dest=%s is a directory; expected the path of the keyring file to write, such as '
                             '%s/nvidia-cuda.gpg' % (dest, dest.rstrip('/')), dest=dest)
    directory = os.path.dirname(dest) or '.'
    if module.params['state'] == 'present' and not os.path.isdir(directory):
        module.fail_json(msg='dest=%s: its directory %s does not exist; expected a keyring path in an existing '
                             'directory such as /usr/share/keyrings (create the directory first)' % (dest, directory),
                         dest=dest)


def current(path):
    try:
        with open(path, 'rb') as handle:
            return handle.read()
    except (IOError, OSError):
        return None


def main():
    module = AnsibleModule(
        argument_spec={
            'dest': {'type': 'path', 'required': True},
            'url': {'type': 'str'},
            'src': {'type': 'path'},
            'content': {'type': 'str'},
            'fingerprints': {'type': 'list', 'elements': 'str', 'default': []},
            'state': {'type': 'str', 'choices': ['present', 'absent'], 'default': 'present'},
            'timeout': {'type': 'int', 'default': 30},
        },
        mutually_exclusive=[('url', 'src', 'content')],
        required_if=[('state', 'present', ('url', 'src', 'content'), True)],
        supports_check_mode=True,
    )
    dest = module.params['dest']
    # Every input is checked before anything is read or written.
    try:
        pinned = pinned_fingerprints(module.params['fingerprints'])
    except OpenPgpError as exc:
        module.fail_json(msg=str(exc), dest=dest)
    if not pinned and module.params['state'] == 'present':
        module.fail_json(msg='fingerprints is empty: pin the repository key\'s fingerprint (fail closed)')
    check_dest(module, dest)
    existing = current(dest)
    if module.params['state'] == 'absent':
        if existing is not None and not module.check_mode:
            os.remove(dest)
        module.exit_json(changed=existing is not None, dest=dest)
    data, origin = read_key(module)
    try:
        binary, found = primary_fingerprints(data)
    except OpenPgpError as exc:
        module.fail_json(msg='%s is not a usable OpenPGP public key: %s' % (origin, exc))
    unpinned = [f for f in found if f not in pinned]
    if unpinned:
        module.fail_json(msg='refusing the key from %s: it has fingerprint %s, which is not pinned (pinned: %s). The '
                             'repository key may have rotated, or the mirror serves another key: check the key, then '
                             'update the pinned fingerprints' % (origin, ', '.join(unpinned), ', '.join(pinned)),
                         fingerprints=found)
    changed = existing != binary
    if changed and not module.check_mode:
        directory = os.path.dirname(dest) or '.'
        fd, tmp = tempfile.mkstemp(dir=directory, prefix='.gpufleet-keyring-')
        with os.fdopen(fd, 'wb') as handle:
            handle.write(binary)
        os.chmod(tmp, 0o644)
        module.atomic_move(tmp, dest)
    if os.path.exists(dest) and not module.check_mode:
        changed = module.set_fs_attributes_if_different(
            {'path': dest, 'owner': 'root', 'group': 'root', 'mode': '0644', 'secontext': [None, None, None],
             'attributes': None}, changed)
    result = {'changed': changed, 'dest': dest, 'fingerprints': found}
    if module._diff:
        result['diff'] = make_diff(['absent' if existing is None else 'keyring %d bytes' % len(existing)],
                                   ['keyring %d bytes, fingerprints %s' % (len(binary), ', '.join(found))])
    module.exit_json(**result)


if __name__ == '__main__':
    main()
