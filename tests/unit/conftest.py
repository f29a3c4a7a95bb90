# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""Shared fixtures: the NVML simulator on sys.path, rendered host trees, and a module runner."""

from __future__ import absolute_import, division, print_function

import json
import os
import subprocess
import sys

import pytest

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), '..', '..'))
SIM_DIR = os.path.join(REPO, 'tests', 'nvml_sim')
HOSTS_DIR = os.path.join(SIM_DIR, 'hosts')

# The simulator stands in for nvidia-ml-py: it must win the import of "pynvml".
if SIM_DIR not in sys.path:
    sys.path.insert(0, SIM_DIR)

import render_tree  # noqa: E402  (from SIM_DIR)


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
def sim_host(tmp_path, monkeypatch):
    """Select a simulated host: renders its trees and points the simulator at it."""
    def select(name):
        host_file = os.path.join(HOSTS_DIR, name + '.json')
        with open(host_file) as handle:
            render_tree.render(json.load(handle), str(tmp_path / name))
        monkeypatch.setenv('GPUFLEET_NVML_SIM_HOST', host_file)
        monkeypatch.setenv('GPUFLEET_NVML_SIM_STATE', str(tmp_path / (name + '.state.json')))
        return {
            'host_file': host_file,
            'state_file': str(tmp_path / (name + '.state.json')),
            'sysfs_root': str(tmp_path / name / 'sys'),
            'procfs_root': str(tmp_path / name / 'proc'),
        }
    return select


def gpg(home, *args, **kwargs):
    return subprocess.run(['gpg', '--homedir', str(home), '--batch'] + list(args), check=True,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, **kwargs).stdout


@pytest.fixture(scope='session')
def keys(tmp_path_factory):
    """Two keys made by gpg: an RSA one like NVIDIA's, and an ed25519 one; returns armored, binary, fingerprints."""
    home = tmp_path_factory.mktemp('gnupg')
    os.chmod(str(home), 0o700)
    made = {}
    for uid, algo in (('repo-rsa@gpufleet.invalid', 'rsa3072'), ('repo-ed@gpufleet.invalid', 'ed25519')):
        gpg(home, '--passphrase', '', '--quick-gen-key', uid, algo, 'default', 'never')
        listing = gpg(home, '--with-colons', '--fingerprint', uid).decode()
        fpr = [line.split(':')[9] for line in listing.splitlines() if line.startswith('fpr:')][0]
        made[uid] = {'fingerprint': fpr, 'armored': gpg(home, '--armor', '--export', uid),
                     'binary': gpg(home, '--export', uid)}
    return made
