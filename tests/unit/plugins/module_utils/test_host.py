# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""HostFiles' process scan and find_processes on procfs trees written here, and on this machine's live /proc."""

from __future__ import absolute_import, division, print_function

import os
import subprocess
import sys

import pytest

from ansible_collections.gpufleet.core.plugins.module_utils._host import HostFiles, HostFilesError
from ansible_collections.gpufleet.core.plugins.module_utils._sysfs_topology import find_mps_processes, find_processes


def write_process(proc, pid, comm=None, cmdline=None):
    os.makedirs(str(proc / str(pid)))
    if comm is not None:
        (proc / str(pid) / 'comm').write_bytes(comm)
    if cmdline is not None:
        (proc / str(pid) / 'cmdline').write_bytes(cmdline)


@pytest.fixture
def proc(tmp_path):
    root = tmp_path / 'proc'
    root.mkdir()
    (root / 'meminfo').write_text(u'MemTotal: 1 kB\n')
    (root / 'self').mkdir()
    return root


def test_process_names_by_pid_with_names_stripped(proc):
    write_process(proc, 9, b'systemd\n')
    write_process(proc, 10, b'nvidia-cuda-mps\n')
    write_process(proc, 100, b'python3\n')
    # Sorted as numbers: 9 before 10 before 100, where the directory listing gives '10', '100', '9'.
    expected = [(9, 'systemd'), (10, 'nvidia-cuda-mps'), (100, 'python3')]
    assert HostFiles(procfs_root=str(proc)).process_names() == expected


def test_a_process_that_ended_while_read_is_left_out(proc):
    write_process(proc, 7, b'sshd\n')
    write_process(proc, 8)  # its directory is still listed, its comm is gone
    assert HostFiles(procfs_root=str(proc)).process_names() == [(7, 'sshd')]


def test_a_name_that_is_not_utf8_is_kept_with_replacement_characters(proc):
    write_process(proc, 5, b'w\xffrker\n')
    assert HostFiles(procfs_root=str(proc)).process_names() == [(5, u'w\ufffdrker')]


def test_an_unexpected_read_error_names_the_file(proc):
    write_process(proc, 6)
    (proc / '6' / 'comm').mkdir()  # reading a directory: EISDIR, which no process gives
    with pytest.raises(HostFilesError, match=r'/6/comm cannot be read .*expected a readable file'):
        HostFiles(procfs_root=str(proc)).process_names()


def test_find_processes_decides_by_cmdline_among_the_names_that_match(proc):
    write_process(proc, 4242, b'nvidia-cuda-mps\n', b'/usr/bin/nvidia-cuda-mps-control\0-d\0')
    write_process(proc, 4243, b'nvidia-cuda-mps\n', b'nvidia-cuda-mps-server\0')
    # The same 15-character name, another program: not an MPS daemon.
    write_process(proc, 4300, b'nvidia-cuda-mps\n', b'/opt/nvidia-cuda-mps-probe\0')
    # The name does not match, so the cmdline (which would) is never read.
    write_process(proc, 4400, b'bash\n', b'nvidia-cuda-mps-control\0')
    write_process(proc, 42, b'nvidia-cuda-mps\n', b'/usr/bin/nvidia-cuda-mps-control\0')
    files = HostFiles(procfs_root=str(proc))
    assert find_processes(files, ('nvidia-cuda-mps-control', 'nvidia-cuda-mps-server')) == {
        'nvidia-cuda-mps-control': [42, 4242], 'nvidia-cuda-mps-server': [4243]}
    assert find_mps_processes(files) == {'control_daemon_running': True, 'control_pids': [42, 4242],
                                         'server_pids': [4243]}


def test_process_names_on_the_live_proc_finds_this_process_and_a_child():
    child = subprocess.Popen([sys.executable, '-c', 'import sys; print("ready"); sys.stdout.flush(); sys.stdin.read()'],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    try:
        assert child.stdout.readline().strip() == b'ready'  # past exec, so its name is its own
        names = dict(HostFiles().process_names())
        assert os.getpid() in names and child.pid in names
        # The kernel names a process after the file it executed, cut at 15 characters.
        assert names[child.pid] == os.path.basename(sys.executable)[:15]
    finally:
        child.communicate()
