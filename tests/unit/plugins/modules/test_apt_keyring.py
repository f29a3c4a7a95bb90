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


@pytest.mark.parametrize('digits', [8, 16])
def test_the_key_s_own_key_id_is_refused_as_a_key_id_not_as_unpinned(run_module, keys, tmp_path, digits):
    # Issue 29: the key's id (the fingerprint's last 8 or 16 digits) used to be compared and reported "not pinned".
    dest = tmp_path / 'keyring.gpg'
    dest.write_bytes(b'the old keyring')
    key_id = keys[RSA]['fingerprint'][-digits:]
    with pytest.raises(ModuleFail) as failed:
        run_module(apt_keyring, {'content': keys[RSA]['armored'].decode(), 'dest': str(dest),
                                 'fingerprints': [keys[RSA]['fingerprint'], key_id.lower()]})
    msg = failed.value.result['msg']
    assert msg == ('fingerprints has the string "%s", a key id, not a fingerprint; give the full 40-digit fingerprint, '
                   'as gpg --show-keys --with-fingerprint prints it, such as EB693B3035CD5710E231E123A4B469963BF863CC'
                   % key_id.lower())
    assert 'not pinned' not in msg and 'fingerprints' not in failed.value.result
    assert dest.read_bytes() == b'the old keyring'


def test_entries_that_are_not_fingerprints_are_all_named_before_the_key_is_read(run_module, tmp_path):
    missing = tmp_path / 'missing.asc'
    with pytest.raises(ModuleFail) as failed:
        run_module(apt_keyring, {'src': str(missing), 'dest': str(tmp_path / 'k.gpg'),
                                 'fingerprints': ['EB69 3B30', 'EB693B3035CD5710E231E123A4B469963BF863C', 'nvidia']})
    msg = failed.value.result['msg']
    assert msg.count('fingerprints has ') == 3
    assert '"EB69 3B30", a key id' in msg
    assert '"EB693B3035CD5710E231E123A4B469963BF863C", which is not a key fingerprint' in msg
    assert '"nvidia", which is not a key fingerprint' in msg
    assert 'cannot be read' not in msg and not (tmp_path / 'k.gpg').exists()


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


def test_the_diff_names_the_keyring_before_and_after(run_module, keys, tmp_path):
    dest = tmp_path / 'keyring.gpg'
    dest.write_bytes(b'the old keyring')
    fpr = keys[RSA]['fingerprint']
    result = run_module(apt_keyring, {'content': keys[RSA]['armored'].decode(), 'dest': str(dest),
                                      'fingerprints': [fpr], '_ansible_check_mode': True, '_ansible_diff': True})
    assert result['changed'] is True and dest.read_bytes() == b'the old keyring'
    assert result['diff']['before'] == 'keyring 15 bytes\n'
    assert result['diff']['after'] == 'keyring %d bytes, fingerprints %s\n' % (len(keys[RSA]['binary']), fpr)


def test_a_key_that_cannot_be_downloaded_changes_nothing(run_module, keys, tmp_path):
    dest = tmp_path / 'keyring.gpg'
    dest.write_bytes(keys[RSA]['binary'])
    with pytest.raises(ModuleFail) as failed:
        run_module(apt_keyring, {'url': 'file://%s/missing.asc' % tmp_path, 'dest': str(dest),
                                 'fingerprints': [keys[RSA]['fingerprint']]})
    assert failed.value.result['msg'].startswith('cannot download the key from file://%s/missing.asc: ' % tmp_path)
    assert dest.read_bytes() == keys[RSA]['binary']
