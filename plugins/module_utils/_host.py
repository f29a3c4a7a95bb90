# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.core contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Read-only access to a host's sysfs and procfs trees; a command and an atomic write for the helpers.

Every file the collection reads on a target goes through HostFiles, so a
captured tree (``sysfs_root``/``procfs_root``) or a test double can stand in
for the live system. The helper commands run outside Ansible, without AnsibleModule.run_command: they run programs
with run_argv, and write the files other programs read with write_atomic. This is a private module: its API may
change without notice.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import errno
import os
import subprocess
import tempfile

from ansible_collections.gpufleet.core.plugins.module_utils._errors import GpufleetError

# What surrounds a value in a sysfs attribute: whitespace, and the NULs some drivers write.
_BLANK = ' \t\n\r\x0b\x0c\x00'
# Absent, unreadable and not-supported attributes, and processes that end while they are read (ESRCH), all mean
# "no value" to callers.
_NO_VALUE = frozenset((errno.ENOENT, errno.ENOTDIR, errno.EACCES, errno.EINVAL, errno.ENODEV, errno.ENXIO,
                       errno.EIO, errno.EPERM, errno.ESRCH))


class HostFilesError(GpufleetError):
    """A tree root or a file in it that cannot be read."""


class HostFiles:
    """Reads files below a sysfs root and a procfs root."""

    def __init__(self, sysfs_root='/sys', procfs_root='/proc'):
        self.sysfs_root = sysfs_root
        self.procfs_root = procfs_root

    def check_roots(self):
        """Fail early, with the fix, when a root is not a readable directory."""
        for option, root in (('sysfs_root', self.sysfs_root), ('procfs_root', self.procfs_root)):
            if not os.path.isdir(root):
                raise HostFilesError(
                    "%s=%s is not a directory; point %s at a live or captured tree (default %s)"
                    % (option, root, option, '/sys' if option == 'sysfs_root' else '/proc'))
        if not os.path.isdir(os.path.join(self.sysfs_root, 'devices', 'system', 'cpu')):
            raise HostFilesError(
                "sysfs_root=%s has no devices/system/cpu; it does not look like a sysfs tree"
                % self.sysfs_root)

    @staticmethod
    def _read(path, errors='strict'):
        # Bare system calls: a fact gathers hundreds of attributes and the name of every process, and open() costs
        # about twice as much per file. Read to the end of the file, as procfs may return less than was asked.
        try:
            handle = os.open(path, os.O_RDONLY)
            try:
                chunks = []
                chunk = os.read(handle, 65536)
                while chunk:
                    chunks.append(chunk)
                    chunk = os.read(handle, 65536)
            finally:
                os.close(handle)
            data = b''.join(chunks)
        except (IOError, OSError) as exc:
            if exc.errno in _NO_VALUE:
                return None
            raise HostFilesError('%s cannot be read (%s); expected a readable file' % (path, exc.strerror or exc))
        try:
            return data.decode('utf-8', errors)
        except UnicodeError:
            raise HostFilesError('%s is not UTF-8 text (%r); expected what the kernel writes there, such as a '
                                 'number or a CPU list' % (path, data[:40]))

    @staticmethod
    def _list(path):
        try:
            return sorted(os.listdir(path))
        except (IOError, OSError):
            return []

    def read_sys(self, *parts):
        """Text of a sysfs attribute, stripped, or None when absent.

        Some drivers and captured trees end an attribute with NUL bytes: strip them with the whitespace, as the
        kernel's own tools do.
        """
        text = self._read(os.path.join(self.sysfs_root, *parts))
        return None if text is None else text.strip(_BLANK)

    def list_sys(self, *parts):
        return self._list(os.path.join(self.sysfs_root, *parts))

    def read_proc(self, *parts):
        """Raw text of a procfs file, or None when absent or gone.

        A process's name and arguments may be any bytes: undecodable ones become U+FFFD rather than an error.
        """
        return self._read(os.path.join(self.procfs_root, *parts), errors='replace')

    def list_proc(self, *parts):
        return self._list(os.path.join(self.procfs_root, *parts))

    def process_names(self):
        """(pid, name) of every process in procfs, by PID; the name is the kernel's comm, cut at 15 characters.

        A process that ends while it is read is left out.
        """
        names = []
        for entry in self.list_proc():
            if entry.isdigit():
                name = self.read_proc(entry, 'comm')
                if name is not None:
                    names.append((int(entry), name.strip()))
        return sorted(names)


def run_argv(argv, data=None, environ_update=None):
    """(rc, stdout, stderr) of a command, as AnsibleModule.run_command gives them (data is its standard input,
    environ_update added to the environment); a program that is not there is rc 127."""
    env = dict(os.environ, **environ_update) if environ_update else None
    try:
        # The helpers run outside Ansible, where there is no AnsibleModule.run_command to call.
        done = subprocess.run(  # pylint: disable=ansible-bad-function
            argv, input=data, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True,
            check=False)
    except OSError as exc:
        return 127, '', '%s: %s' % (argv[0], exc.strerror or exc)
    return done.returncode, done.stdout, done.stderr


def write_atomic(path, text, mode=0o644):
    """Write a file so readers (node_exporter, the next check) see the old or the new one, never half."""
    directory = os.path.dirname(path)
    if not os.path.isdir(directory):
        os.makedirs(directory, 0o755)
    fd, tmp = tempfile.mkstemp(dir=directory, prefix='.%s.' % os.path.basename(path))
    try:
        with os.fdopen(fd, 'w') as handle:
            handle.write(text)
        os.chmod(tmp, mode)
        os.rename(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
