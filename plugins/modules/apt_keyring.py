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

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.urls import fetch_url

from ansible_collections.gpufleet.core.plugins.module_utils._apt_keyring import KeyringError, KeyringFiles, converge


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
    try:
        result = converge(KeyringFiles(module, fetch_url), module.params, module.check_mode, module._diff)
    except KeyringError as exc:
        module.fail_json(msg=str(exc), **exc.result)
    module.exit_json(**result)


if __name__ == '__main__':
    main()
