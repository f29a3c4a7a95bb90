# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.core contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""What a state receipt reads on a host, and where it is kept: dpkg's package states, file digests, systemd's unit
states, the live MIG layout (through Nvml) and the MPS daemons' defaults (through MpsControl).

The one door to the system for _receipt.py; tests replace it. run_command is AnsibleModule.run_command, or
_host.run_argv in the helper. A private module: its API may change without notice.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import hashlib
import os

from ansible_collections.gpufleet.core.plugins.module_utils._host import write_atomic
from ansible_collections.gpufleet.core.plugins.module_utils._mps_control import MpsControl, MpsControlError, read_state
from ansible_collections.gpufleet.core.plugins.module_utils._nvml import Nvml
from ansible_collections.gpufleet.core.plugins.module_utils._receipt import ABSENT, ReceiptError, mig_text

# dpkg's own view: "hold" is the selection apt-mark hold sets, "installed" the package's state.
# dpkg-query expands \t and \n in its format itself.
_DPKG_FORMAT = r'${Package}\t${Version}\t${db:Status-Want}\t${db:Status-Status}\n'
_UNIT_PROPERTIES = ('LoadState', 'UnitFileState', 'ActiveState')


class ReceiptHost:
    """dpkg-query, systemctl, files, NVML and the MPS control daemons of this host."""

    def __init__(self, run_command, nvml_library=None, mps_control='nvidia-cuda-mps-control'):
        self.run_command = run_command
        self.nvml_library = nvml_library
        self.mps_control = mps_control

    def _output(self, argv, ok=(0,)):
        rc, out, err = self.run_command(argv)
        if rc not in ok:
            raise ReceiptError('"%s" failed (rc=%d): %s' % (' '.join(argv), rc, (err or out or '').strip()))
        return out

    def packages(self, names):
        """{name: {'version', 'held'}} of the installed packages among names (dpkg-query; rc 1: some are not)."""
        out = self._output(['dpkg-query', '-W', '-f', _DPKG_FORMAT,
                            '--'] + [name.split(':')[0] for name in names], ok=(0, 1))
        found = {}
        for line in out.splitlines():
            fields = line.split('\t')
            if len(fields) == 4 and fields[3] in ('installed', 'half-configured', 'unpacked', 'half-installed'):
                found[fields[0]] = {'version': fields[1] if fields[3] == 'installed' else '%s (%s)' % (
                    fields[1], fields[3]), 'held': fields[2] == 'hold'}
        return dict((name, found[name.split(':')[0]]) for name in names if name.split(':')[0] in found)

    @staticmethod
    def file_digest(path):
        """sha256:<hex> of a file's content; None when it is not there."""
        digest = hashlib.sha256()
        try:
            with open(path, 'rb') as handle:
                for block in iter(lambda: handle.read(1 << 16), b''):
                    digest.update(block)
        except (IOError, OSError) as exc:
            if os.path.isdir(path):
                raise ReceiptError('%s is a directory; a receipt owns files, list the files in it' % path)
            if not os.path.lexists(path):
                return None
            raise ReceiptError('%s cannot be read: %s' % (path, exc.strerror or exc))
        return 'sha256:' + digest.hexdigest()

    def units(self, names):
        """{unit: 'enabled, active'} (its unit-file state and active state), 'absent' for a unit systemd lacks."""
        out = self._output(['systemctl', 'show', '--property=%s' % ','.join(_UNIT_PROPERTIES), '--'] + list(names))
        blocks = [dict(line.split('=', 1) for line in block.splitlines() if '=' in line)
                  for block in out.strip('\n').split('\n\n')]
        if len(blocks) != len(names):
            raise ReceiptError('"systemctl show" answered %d units for %d: %s' % (len(blocks), len(names), out[:200]))
        return dict((name, ABSENT if props.get('LoadState') == 'not-found' else '%s, %s' % (
            props.get('UnitFileState') or 'no unit file state', props.get('ActiveState') or 'unknown'))
            for name, props in zip(names, blocks))

    def mig_layouts(self):
        """{GPU UUID: its MIG layout as text, or 'MIG off'} for every GPU NVML sees."""
        if self.nvml_library is None:
            raise ReceiptError('the MIG layout cannot be read: nvidia-ml-py (pynvml) is not installed on the host')
        layouts = {}
        with Nvml(self.nvml_library) as nvml:
            for handle in nvml.device_handles():
                uuid = nvml.identity(handle)['uuid']
                if not nvml.mig_enabled(handle):
                    layouts[uuid] = 'MIG off'
                    continue
                layouts[uuid] = 'MIG on: ' + mig_text(nvml.gpu_instances(handle, nvml.mig_profiles(handle)))
        return layouts

    def mps_settings(self, pipe_directory, devices):
        """An MPS daemon's defaults as text (active thread percentage, pinned memory limit per device), its devices by
        name (a GPU's UUID or a MIG slot, which a reboot keeps): the daemon sees them as ordinals 0, 1, ..."""
        control = MpsControl(self.run_command, self.mps_control, pipe_directory)
        try:
            if not control.running():
                return 'no daemon'
            state = read_state(control, [str(ordinal) for ordinal in range(len(devices))])
        except MpsControlError as exc:
            raise ReceiptError(str(exc))
        percentage = state['default_active_thread_percentage']
        limits = state['default_pinned_mem_limits']
        return 'active threads %s, pinned memory %s' % (
            'unset' if percentage is None else '%g%%' % percentage,
            ', '.join('%s=%s' % (device, limits[str(ordinal)] or 'unset')
                      for ordinal, device in sorted(enumerate(devices), key=lambda pair: pair[1])) or 'no devices')

    @staticmethod
    def read(path):
        """A file's text, None when it is not there."""
        try:
            with open(path) as handle:
                return handle.read()
        except (IOError, OSError) as exc:
            if os.path.lexists(path):
                raise ReceiptError('%s cannot be read: %s' % (path, exc.strerror or exc))
            return None

    @staticmethod
    def list_dir(path):
        try:
            return sorted(os.listdir(path))
        except (IOError, OSError):
            return []

    @staticmethod
    def remove(path):
        try:
            os.unlink(path)
        except (IOError, OSError) as exc:
            if os.path.lexists(path):
                raise ReceiptError('cannot remove %s: %s' % (path, exc.strerror or exc))

    @staticmethod
    def write(path, text):
        try:
            write_atomic(path, text)
        except (IOError, OSError) as exc:
            raise ReceiptError('cannot write %s: %s' % (path, exc.strerror or exc))
