# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""Fingerprints computed here must equal gpg's own, for keys gpg makes in the test."""

from __future__ import absolute_import, division, print_function

import pytest

from ansible_collections.gpufleet.core.plugins.module_utils._openpgp import (
    OpenPgpError,
    dearmor,
    fingerprint_problem,
    is_fingerprint,
    normalise,
    pinned_fingerprints,
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


FPR = 'EB693B3035CD5710E231E123A4B469963BF863CC'


@pytest.mark.parametrize('value', [FPR, FPR.lower(), 'EB69 3B30 35CD 5710 E231  E123 A4B4 6996 3BF8 63CC', 'AB' * 32])
def test_full_fingerprints_are_fingerprints(value):
    assert is_fingerprint(value) and fingerprint_problem('fingerprints', value) is None


@pytest.mark.parametrize('value, words', [
    ('3BF863CC', 'a key id, not a fingerprint'),
    ('0x3bf863cc', 'a key id, not a fingerprint'),
    ('A4B469963BF863CC', 'a key id, not a fingerprint'),
    ('0xA4B4 6996 3BF8 63CC', 'a key id, not a fingerprint'),
    (FPR[:-1], 'which is not a key fingerprint'),
    (FPR + '0', 'which is not a key fingerprint'),
    ('0x' + FPR, 'which is not a key fingerprint'),
    (FPR[:-1] + 'G', 'which is not a key fingerprint'),
    ('', 'which is not a key fingerprint'),
])
def test_anything_else_is_refused_telling_a_key_id_apart(value, words):
    assert not is_fingerprint(value)
    problem = fingerprint_problem('nvidia_key_fingerprints', value)
    assert problem.startswith('nvidia_key_fingerprints has the string "%s", %s; give the full 40-digit fingerprint'
                              % (value, words))


def test_pinned_fingerprints_are_normalised_or_every_problem_is_named():
    assert pinned_fingerprints(['eb69 3b30 35cd 5710 e231 e123 a4b4 6996 3bf8 63cc']) == [FPR]
    assert pinned_fingerprints([]) == []
    with pytest.raises(OpenPgpError) as failed:
        pinned_fingerprints([FPR, '3BF863CC', 'nope'])
    assert str(failed.value).count('fingerprints has') == 2
