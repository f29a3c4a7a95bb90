# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""Shared fixtures: simulated hosts (support/sim.py, which also puts the NVML simulator on sys.path),
a module runner, and OpenPGP keys."""

from __future__ import absolute_import, division, print_function

import json
import os
import subprocess
import sys

import pytest
from hypothesis import settings

from .support import sim

# No per-example deadline: make test runs the units at the lowest priority beside the lab, where a wall-clock limit
# would measure the machine's load, not the code.
settings.register_profile('gpufleet', deadline=None)
settings.load_profile('gpufleet')

# Where the simulator and the repository are, for tests that import them from here.
REPO, SIM_DIR, HOSTS_DIR = sim.REPO, sim.SIM_DIR, sim.HOSTS_DIR

# tests/apt_repo/gnupg_home.py: a GnuPG home whose agent is stopped before the home goes.
APT_REPO_DIR = os.path.join(REPO, 'tests', 'apt_repo')
if APT_REPO_DIR not in sys.path:
    sys.path.append(APT_REPO_DIR)

from gnupg_home import gnupg_home  # noqa: E402  (from APT_REPO_DIR)


class ModuleExit(Exception):
    def __init__(self, result):
        super(ModuleExit, self).__init__(result)
        self.result = result


class ModuleFail(Exception):
    def __init__(self, result):
        super(ModuleFail, self).__init__(result.get('msg'))
        self.result = result


def _module_args_patch(args):
    try:
        from ansible.module_utils.testing import patch_module_args  # ansible-core >= 2.19
    except ImportError:
        from ansible.module_utils import basic
        from ansible.module_utils.common.text.converters import to_bytes

        class _Legacy(object):
            def __enter__(self):
                self.saved = basic._ANSIBLE_ARGS
                basic._ANSIBLE_ARGS = to_bytes(json.dumps({'ANSIBLE_MODULE_ARGS': args}))

            def __exit__(self, *exc):
                basic._ANSIBLE_ARGS = self.saved
        return _Legacy()
    return patch_module_args(args)


@pytest.fixture
def run_module(monkeypatch):
    """Run a module's main() with args; return its result or raise ModuleFail."""
    from ansible.module_utils import basic

    def exit_json(self, **result):
        raise ModuleExit(result)

    def fail_json(self, **result):
        raise ModuleFail(result)

    monkeypatch.setattr(basic.AnsibleModule, 'exit_json', exit_json)
    monkeypatch.setattr(basic.AnsibleModule, 'fail_json', fail_json)

    def run(module, args):
        with _module_args_patch(args):
            try:
                module.main()
            except ModuleExit as done:
                return done.result
        raise AssertionError('module returned without exit_json or fail_json')
    return run


@pytest.fixture
def sim_hosts(tmp_path, monkeypatch):
    """Points the simulator at a host for this test (see support/sim.py: named, described, with_gpus)."""
    return sim.SimHosts(tmp_path, monkeypatch)


@pytest.fixture
def sim_host(sim_hosts):
    """Select a simulated host by name: renders its trees and points the simulator at it.

    Returns host_file, state_file, sysfs_root and procfs_root.
    """
    return sim_hosts.named


def gpg(home, *args, **kwargs):
    return subprocess.run(['gpg', '--homedir', str(home), '--batch'] + list(args), check=True,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, **kwargs).stdout


@pytest.fixture(scope='session')
def keys(tmp_path_factory):
    """Two keys made by gpg: an RSA one like NVIDIA's, and an ed25519 one; returns armored, binary, fingerprints."""
    made = {}
    # The agent gpg starts is stopped and its home removed as soon as the keys are exported.
    with gnupg_home(tmp_path_factory.getbasetemp()) as home:
        for uid, algo in (('repo-rsa@gpufleet.invalid', 'rsa3072'), ('repo-ed@gpufleet.invalid', 'ed25519')):
            gpg(home, '--passphrase', '', '--quick-gen-key', uid, algo, 'default', 'never')
            listing = gpg(home, '--with-colons', '--fingerprint', uid).decode()
            fpr = [line.split(':')[9] for line in listing.splitlines() if line.startswith('fpr:')][0]
            made[uid] = {'fingerprint': fpr, 'armored': gpg(home, '--armor', '--export', uid),
                         'binary': gpg(home, '--export', uid)}
    return made
