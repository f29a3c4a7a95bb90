# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""tests/apt_repo/gnupg_home.py: a GnuPG home goes away cleanly even while gpg-agent removes its own sockets."""

from __future__ import absolute_import, division, print_function

import os
import shutil
import subprocess

import pytest

from gnupg_home import gnupg_home, remove_tree  # tests/apt_repo, put on sys.path by conftest.py


def make_home(tree):
    (tree / 'sub').mkdir(parents=True)
    for name in ('S.gpg-agent', 'S.gpg-agent.ssh', 'sub/pubring.kbx'):
        (tree / name).write_text('x')


def test_entries_that_vanish_during_removal_are_no_error(tmp_path, monkeypatch):
    real_unlink = os.unlink
    vanished = []

    def agent_got_there_first(path, *args, **kwargs):
        # As gpg-agent does on exit: the socket is gone between rmtree's listing and its unlink.
        if os.path.basename(str(path)) == 'S.gpg-agent.ssh':
            real_unlink(path, *args, **kwargs)
            vanished.append(path)
            raise FileNotFoundError(2, 'No such file or directory', str(path))
        return real_unlink(path, *args, **kwargs)

    monkeypatch.setattr(os, 'unlink', agent_got_there_first)
    make_home(tmp_path / 'plain')
    with pytest.raises(FileNotFoundError):
        shutil.rmtree(str(tmp_path / 'plain'))  # what build.py did, and why it failed at random
    make_home(tmp_path / 'home')
    remove_tree(tmp_path / 'home')
    assert len(vanished) == 2 and not (tmp_path / 'home').exists()
    remove_tree(tmp_path / 'home')  # already gone: nothing to do


def test_other_errors_still_surface(tmp_path, monkeypatch):
    tree = tmp_path / 'home'
    tree.mkdir()
    (tree / 'pubring.kbx').write_text('x')

    def refused(path, *args, **kwargs):
        raise PermissionError(13, 'Permission denied', str(path))

    monkeypatch.setattr(os, 'unlink', refused)
    with pytest.raises(PermissionError):
        remove_tree(tree)


def test_the_agent_is_stopped_and_the_home_removed(tmp_path):
    with gnupg_home(tmp_path) as home:
        assert oct(os.stat(home).st_mode & 0o777) == oct(0o700)
        subprocess.run(['gpg', '--homedir', home, '--batch', '--passphrase', '', '--quick-gen-key',
                        'agent@gpufleet.invalid', 'ed25519', 'default', 'never'],
                       check=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        agent = subprocess.run(['gpgconf', '--homedir', home, '--list-dirs', 'agent-socket'],
                               check=True, stdout=subprocess.PIPE, universal_newlines=True).stdout.strip()
    assert not os.path.exists(home)
    assert not os.path.exists(agent)


def test_the_home_goes_when_the_body_fails(tmp_path):
    with pytest.raises(RuntimeError):
        with gnupg_home(tmp_path) as home:
            raise RuntimeError('build failed')
    assert not os.path.exists(home)


BUILD = os.path.join(os.path.dirname(__file__), '..', 'apt_repo', 'build.py')


@pytest.mark.parametrize('args, status, says', [
    (['--help'], 0, 'usage: build.py [-h] DEST'),
    ([], 2, 'the following arguments are required: DEST'),
    (['--mirror', 'x'], 2, 'unrecognized arguments: --mirror'),
])
def test_build_arguments_are_checked_before_anything_is_written(tmp_path, args, status, says):
    done = subprocess.run(['python3', os.path.abspath(BUILD)] + args, cwd=str(tmp_path), capture_output=True,
                          text=True, timeout=60, check=False)
    assert done.returncode == status, done.stderr
    assert says in done.stdout + done.stderr
    assert os.listdir(str(tmp_path)) == []  # no directory named --help, no half-built repository
