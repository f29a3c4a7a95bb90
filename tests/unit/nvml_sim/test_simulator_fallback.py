# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""The simulator's fixed paths, which lab hosts (tests/lab/) use instead of the environment.

Without GPUFLEET_NVML_SIM_HOST the simulator serves _FALLBACK_HOST_FILE when it exists, its state in
_FALLBACK_STATE_FILE unless GPUFLEET_NVML_SIM_STATE is set; without either it answers as a host with no driver.
Each test points both constants at its own tmp paths.
"""

from __future__ import absolute_import, division, print_function

import json
import os
import shutil
import tempfile

import pytest

import pynvml

from ..support.sim import HOSTS_DIR, load_host

TESTBED_UUID = load_host('testbed')['gpus'][0]['uuid']


@pytest.fixture
def fixed_paths(tmp_path, monkeypatch):
    """No simulator environment, the fixed paths under tmp_path (the host file not written yet), /tmp in tmp_path."""
    monkeypatch.delenv('GPUFLEET_NVML_SIM_HOST', raising=False)
    monkeypatch.delenv('GPUFLEET_NVML_SIM_STATE', raising=False)
    paths = {'host': tmp_path / 'etc' / 'gpufleet-nvml-sim' / 'host.json',
             'state': tmp_path / 'var' / 'lib' / 'gpufleet-nvml-sim' / 'state.json',
             'tmp': tmp_path / 'tmp'}
    paths['host'].parent.mkdir(parents=True)
    paths['tmp'].mkdir()
    monkeypatch.setattr(pynvml, '_FALLBACK_HOST_FILE', str(paths['host']))
    monkeypatch.setattr(pynvml, '_FALLBACK_STATE_FILE', str(paths['state']))
    # The simulator's default state for an environment-given host lives in tempfile.gettempdir().
    monkeypatch.setattr(tempfile, 'tempdir', str(paths['tmp']))
    yield paths
    while pynvml._init_count > 0:
        pynvml.nvmlShutdown()


def install(paths, name):
    shutil.copy(os.path.join(HOSTS_DIR, name + '.json'), str(paths['host']))


def uuids():
    return [pynvml.nvmlDeviceGetUUID(pynvml.nvmlDeviceGetHandleByIndex(index))
            for index in range(pynvml.nvmlDeviceGetCount())]


def test_the_fixed_paths_are_the_documented_ones():
    assert pynvml._FALLBACK_HOST_FILE == '/etc/gpufleet-nvml-sim/host.json'
    assert pynvml._FALLBACK_STATE_FILE == '/var/lib/gpufleet-nvml-sim/state.json'


def test_without_environment_or_host_file_the_library_is_missing(fixed_paths):
    with pytest.raises(pynvml.NVMLError_LibraryNotFound):
        pynvml.nvmlInit()
    with pytest.raises(RuntimeError, match='set GPUFLEET_NVML_SIM_HOST'):
        pynvml._Sim()
    assert not fixed_paths['state'].exists()


def test_the_host_file_serves_its_gpus_with_state_at_the_fixed_path(fixed_paths):
    install(fixed_paths, 'testbed')
    pynvml.nvmlInit()
    assert uuids() == [TESTBED_UUID]
    handle = pynvml.nvmlDeviceGetHandleByIndex(0)
    pynvml.nvmlDeviceSetComputeMode(handle, pynvml.NVML_COMPUTEMODE_EXCLUSIVE_PROCESS)
    pynvml.nvmlShutdown()
    state = json.loads(fixed_paths['state'].read_text())
    assert state['gpus'][TESTBED_UUID]['compute_mode'] == pynvml.NVML_COMPUTEMODE_EXCLUSIVE_PROCESS
    assert list(fixed_paths['tmp'].iterdir()) == []
    # A later process (a new session) sees the change, as it would on a GPU.
    pynvml.nvmlInit()
    assert pynvml.nvmlDeviceGetComputeMode(pynvml.nvmlDeviceGetHandleByIndex(0)) == \
        pynvml.NVML_COMPUTEMODE_EXCLUSIVE_PROCESS


def test_the_state_variable_still_wins_with_the_host_file(fixed_paths, tmp_path, monkeypatch):
    install(fixed_paths, 'testbed')
    chosen = tmp_path / 'chosen-state.json'
    monkeypatch.setenv('GPUFLEET_NVML_SIM_STATE', str(chosen))
    pynvml.nvmlInit()
    assert uuids() == [TESTBED_UUID]
    assert TESTBED_UUID in json.loads(chosen.read_text())['gpus']
    assert not fixed_paths['state'].exists()


def test_the_host_variable_wins_over_the_host_file_and_keeps_its_own_state(fixed_paths, monkeypatch):
    install(fixed_paths, 'testbed')
    monkeypatch.setenv('GPUFLEET_NVML_SIM_HOST', os.path.join(HOSTS_DIR, 'reference-a100.json'))
    pynvml.nvmlInit()
    assert uuids() == [gpu['uuid'] for gpu in load_host('reference-a100')['gpus']]
    assert not fixed_paths['state'].exists()
    # The state, and the lock its saves take (shared with the lab's stand-in driver).
    assert sorted(path.name for path in fixed_paths['tmp'].iterdir()) == [
        'gpufleet-nvml-sim-reference-a100.json', 'gpufleet-nvml-sim-reference-a100.json.lock']


def test_a_host_file_without_a_driver_means_the_library_is_missing(fixed_paths):
    install(fixed_paths, 'cpu-only')
    with pytest.raises(pynvml.NVMLError_LibraryNotFound):
        pynvml.nvmlInit()
    assert not fixed_paths['state'].exists()
