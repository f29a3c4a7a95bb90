# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import absolute_import, division, print_function

import os
import stat

import pytest

from ansible_collections.gpufleet.core.plugins.modules import apt_keyring

from ...conftest import ModuleFail

RSA = 'repo-rsa@gpufleet.invalid'
ED = 'repo-ed@gpufleet.invalid'


def test_installs_a_pinned_key_once(run_module, keys, tmp_path):
    key = tmp_path / 'key.asc'
    key.write_bytes(keys[RSA]['armored'])
    dest = tmp_path / 'keyring.gpg'
    fpr = keys[RSA]['fingerprint']
    spaced = ' '.join(fpr[i:i + 4] for i in range(0, len(fpr), 4)).lower()
    checked = run_module(apt_keyring, {'src': str(key), 'dest': str(dest), 'fingerprints': [spaced],
                                       '_ansible_check_mode': True})
    assert checked['changed'] is True and not dest.exists()
    first = run_module(apt_keyring, {'url': 'file://%s' % key, 'dest': str(dest), 'fingerprints': [fpr]})
    assert first['changed'] is True and first['fingerprints'] == [fpr]
    assert dest.read_bytes() == keys[RSA]['binary']
    assert stat.S_IMODE(os.stat(str(dest)).st_mode) == 0o644
    again = run_module(apt_keyring, {'src': str(key), 'dest': str(dest), 'fingerprints': [fpr]})
    assert again['changed'] is False


def test_a_wrong_key_fails_closed_and_changes_nothing(run_module, keys, tmp_path):
    dest = tmp_path / 'keyring.gpg'
    dest.write_bytes(keys[RSA]['binary'])
    with pytest.raises(ModuleFail) as failed:
        run_module(apt_keyring, {'content': keys[ED]['armored'].decode(), 'dest': str(dest),
                                 'fingerprints': [keys[RSA]['fingerprint']]})
    msg = failed.value.result['msg']
    assert 'refusing the key from content: it has fingerprint %s, which is not pinned' % keys[ED]['fingerprint'] in msg
    assert dest.read_bytes() == keys[RSA]['binary']


def test_a_keyring_with_an_extra_unpinned_key_is_refused(run_module, keys, tmp_path):
    both = tmp_path / 'both.gpg'
    both.write_bytes(keys[RSA]['binary'] + keys[ED]['binary'])
    with pytest.raises(ModuleFail) as failed:
        run_module(apt_keyring, {'src': str(both), 'dest': str(tmp_path / 'k.gpg'),
                                 'fingerprints': [keys[RSA]['fingerprint']]})
    assert keys[ED]['fingerprint'] in failed.value.result['msg']


def test_no_pinned_fingerprint_is_refused(run_module, keys, tmp_path):
    with pytest.raises(ModuleFail) as failed:
        run_module(apt_keyring, {'content': keys[RSA]['armored'].decode(), 'dest': str(tmp_path / 'k.gpg')})
    assert 'fail closed' in failed.value.result['msg']


def test_absent_removes_the_keyring(run_module, keys, tmp_path):
    dest = tmp_path / 'keyring.gpg'
    dest.write_bytes(keys[RSA]['binary'])
    assert run_module(apt_keyring, {'dest': str(dest), 'state': 'absent'})['changed'] is True
    assert not dest.exists()
    assert run_module(apt_keyring, {'dest': str(dest), 'state': 'absent'})['changed'] is False
