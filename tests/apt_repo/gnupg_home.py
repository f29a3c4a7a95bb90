# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""A throw-away GnuPG home whose agent is stopped before the home is removed.

gpg starts a gpg-agent that keeps its sockets (S.gpg-agent, S.gpg-agent.ssh, ...) in the home and deletes them
itself when it exits. Removing the home while the agent still runs races with that: shutil.rmtree lists a socket,
the agent unlinks it, and rmtree fails with FileNotFoundError. So: stop the agent first, and ignore entries that
vanish anyway. Used by tests/apt_repo/build.py and the unit tests' `keys` fixture.
"""

import contextlib
import shutil
import subprocess
import sys
import tempfile


def stop_agent(home):
    """Stop every GnuPG daemon of HOME and wait for it (gpgconf --kill waits); a missing gpgconf is no error."""
    try:
        subprocess.run(['gpgconf', '--homedir', str(home), '--kill', 'all'], check=False, timeout=60,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired):
        pass


def _raise_unless_vanished(error):
    if not isinstance(error, FileNotFoundError):
        raise error


def remove_tree(path):
    """shutil.rmtree that tolerates entries (or PATH itself) removed by someone else meanwhile."""
    if sys.version_info >= (3, 12):  # onerror is deprecated from 3.12 on
        shutil.rmtree(str(path), onexc=lambda function, name, error: _raise_unless_vanished(error))
    else:
        shutil.rmtree(str(path), onerror=lambda function, name, info: _raise_unless_vanished(info[1]))


@contextlib.contextmanager
def gnupg_home(parent=None):
    """Yield a new, private GnuPG home (under PARENT if given); on exit stop its agent, then remove it."""
    home = tempfile.mkdtemp(prefix='gpufleet-gnupg-', dir=None if parent is None else str(parent))
    try:
        yield home
    finally:
        stop_agent(home)
        remove_tree(home)
