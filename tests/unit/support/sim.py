# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""The one way unit tests get a simulated host: the NVML simulator (tests/nvml_sim) and the host it serves.

Importing this module puts the simulator first on sys.path, so ``import pynvml`` (and ``simctl``, ``render_tree``)
load it instead of nvidia-ml-py. ``SimHosts`` then points the simulator at a host for one test: a named one from
tests/nvml_sim/hosts with its sysfs and procfs trees rendered, or one described by the test (NVML only).
tests/unit/conftest.py offers it as the ``sim_hosts`` fixture, and its ``named`` method as ``sim_host``.
"""

from __future__ import absolute_import, division, print_function

import contextlib
import json
import os
import subprocess
import sys

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), '..', '..', '..'))
SIM_DIR = os.path.join(REPO, 'tests', 'nvml_sim')
HOSTS_DIR = os.path.join(SIM_DIR, 'hosts')
GPU_MODELS_FILE = os.path.join(SIM_DIR, 'gpu_models.json')
# The host's MPS control program: a test double that speaks the real one's command language.
MPS_CONTROL = os.path.join(REPO, 'tests', 'mps_sim', 'nvidia-cuda-mps-control')

# The simulator stands in for nvidia-ml-py: it must win the import of "pynvml".
if SIM_DIR not in sys.path:
    sys.path.insert(0, SIM_DIR)

import render_tree  # noqa: E402  (from SIM_DIR)

# The smallest host the simulator serves: four CPUs on one socket and one NUMA node, and a 570 driver.
BARE_HOST = {
    'cpu': {'sockets': [{'id': 0, 'cpus': '0-3'}]},
    'numa_nodes': [{'id': 0, 'cpus': '0-3', 'memory_mb': 1024, 'distances': [10]}],
    'driver': {'version': '570.133.20', 'cuda_version': 12080, 'nvml_version': '12.570.133.20'},
}


def gpu_uuid(number):
    return 'GPU-00000000-0000-4000-8000-%012d' % number


def make_gpus(model, count=1, first_uuid=0, **settings):
    """COUNT GPUs of MODEL on NUMA node 0, on PCI buses 0x17, 0x18, ..., with UUIDs numbered from FIRST_UUID.

    SETTINGS (mig_mode, reset_blocked_by, ...) are the simulator's per-GPU keys, given to every GPU.
    """
    return [dict({'model': model, 'uuid': gpu_uuid(first_uuid + index),
                  'pci_bus_id': '00000000:%02X:00.0' % (0x17 + index), 'numa_node': 0}, **settings)
            for index in range(count)]


def load_host(name):
    """The description of tests/nvml_sim/hosts/NAME.json."""
    with open(os.path.join(HOSTS_DIR, name + '.json')) as handle:
        return json.load(handle)


class SimHosts(object):
    """Points the simulator at a host for one test, through its environment variables (undone by monkeypatch)."""

    def __init__(self, tmp_path, monkeypatch):
        self.tmp_path = tmp_path
        self.monkeypatch = monkeypatch

    def _serve(self, host_file, stem):
        state_file = str(self.tmp_path / (stem + '.state.json'))
        self.monkeypatch.setenv('GPUFLEET_NVML_SIM_HOST', host_file)
        self.monkeypatch.setenv('GPUFLEET_NVML_SIM_STATE', state_file)
        return {'host_file': host_file, 'state_file': state_file}

    def none(self):
        """No simulated host: the simulator answers as on a machine without the NVIDIA driver."""
        self.monkeypatch.delenv('GPUFLEET_NVML_SIM_HOST', raising=False)
        self.monkeypatch.delenv('GPUFLEET_NVML_SIM_STATE', raising=False)

    def named(self, name):
        """tests/nvml_sim/hosts/NAME.json, its trees rendered; returns host_file, state_file, sysfs_root, procfs_root."""
        host_file = os.path.join(HOSTS_DIR, name + '.json')
        render_tree.render(load_host(name), str(self.tmp_path / name))
        return dict(self._serve(host_file, name), sysfs_root=str(self.tmp_path / name / 'sys'),
                    procfs_root=str(self.tmp_path / name / 'proc'))

    def described(self, description, stem='host'):
        """A host from DESCRIPTION (a dict in the hosts' format), for NVML only; returns host_file and state_file."""
        path = self.tmp_path / (stem + '.json')
        path.write_text(json.dumps(description))
        return self._serve(str(path), stem)

    def with_gpus(self, model, count=1, base=None, first_uuid=0, **settings):
        """BASE (a name in tests/nvml_sim/hosts, or the bare host) with its GPUs replaced by COUNT GPUs of MODEL."""
        description = dict(load_host(base) if base else BARE_HOST,
                           gpus=make_gpus(model, count, first_uuid=first_uuid, **settings))
        return self.described(description)


@contextlib.contextmanager
def mps_control_daemon(directory):
    """A running MPS control daemon (MPS_CONTROL) with its pipe and log directories under DIRECTORY.

    Yields pipe, log and send(command) -> answer; quits the daemon afterwards (if a test has not already).
    """
    env = dict(os.environ, CUDA_MPS_PIPE_DIRECTORY=os.path.join(str(directory), 'pipe'),
               CUDA_MPS_LOG_DIRECTORY=os.path.join(str(directory), 'log'))

    def send(command):
        return subprocess.run([MPS_CONTROL], input=command, env=env, universal_newlines=True,
                              stdout=subprocess.PIPE, check=False).stdout

    subprocess.check_call([MPS_CONTROL, '-d'], env=env)
    try:
        yield {'pipe': env['CUDA_MPS_PIPE_DIRECTORY'], 'log': env['CUDA_MPS_LOG_DIRECTORY'], 'send': send}
    finally:
        send('quit')


def host_roots(paths):
    """The sysfs and procfs roots of a rendered host (SimHosts), as the modules' arguments."""
    return {'sysfs_root': paths['sysfs_root'], 'procfs_root': paths['procfs_root']}


def gathered_topology(run_module, paths):
    """The Topology that topology_facts gathers on a rendered host (SimHosts) now."""
    # Imported here: the collection's modules are importable only once the test session has set up its paths.
    from ansible_collections.gpufleet.core.plugins.module_utils._topology import Topology
    from ansible_collections.gpufleet.core.plugins.modules import topology_facts
    return Topology(run_module(topology_facts, host_roots(paths))['ansible_facts']['gpufleet_topology'])
