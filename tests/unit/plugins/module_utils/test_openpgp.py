# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""Fingerprints computed here must equal gpg's own, for keys gpg makes in the test."""

from __future__ import absolute_import, division, print_function

import pytest

from ansible_collections.gpufleet.core.plugins.module_utils._openpgp import (
    OpenPgpError,
    dearmor,
    normalise,
    primary_fingerprints,
)


def test_fingerprints_match_gpg(keys):
    for key in keys.values():
        assert primary_fingerprints(key['armored'])[1] == [key['fingerprint']]
        assert primary_fingerprints(key['binary'])[1] == [key['fingerprint']]


def test_dearmor_gives_what_gpg_exports_in_binary(keys):
    for key in keys.values():
        assert dearmor(key['armored']) == key['binary']


def test_a_keyring_with_two_keys_lists_both(keys):
    both = b''.join(key['binary'] for key in keys.values())
    assert sorted(primary_fingerprints(both)[1]) == sorted(key['fingerprint'] for key in keys.values())


@pytest.mark.parametrize('data', [b'', b'hello', b'-----BEGIN PGP PUBLIC KEY BLOCK-----\n\n!!!\n-----END PGP'])
def test_not_a_key(data):
    with pytest.raises(OpenPgpError):
        primary_fingerprints(data)


def test_normalise():
    assert normalise('eb69 3b30 35cd 5710') == 'EB693B3035CD5710'
