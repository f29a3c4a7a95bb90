# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.core contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The GPU watchdog's one door to the system: WatchdogHost, which tests replace.

NVML readings (through ``_nvml.Nvml``), the kernel log's Xid lines (journalctl -k), systemctl, the reboot, the reset
command, /proc, the plan, state and metrics files, the clock and the fleet's Prometheus. ``_watchdog_check`` runs one
check with it.
This is a private module: its API may change without notice.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import sys
import time

from ansible_collections.gpufleet.core.plugins.module_utils._device_env import resolve_entries
from ansible_collections.gpufleet.core.plugins.module_utils._errors import GpufleetError
from ansible_collections.gpufleet.core.plugins.module_utils._host import HostFiles
from ansible_collections.gpufleet.core.plugins.module_utils._numa_audit import ServiceHost
from ansible_collections.gpufleet.core.plugins.module_utils._nvml import GpuLostError, Nvml, NvmlError
from ansible_collections.gpufleet.core.plugins.module_utils._plan import load_plan as read_plan_file
from ansible_collections.gpufleet.core.plugins.module_utils._host import run_argv, write_atomic
from ansible_collections.gpufleet.core.plugins.module_utils._prometheus import PrometheusError, query
from ansible_collections.gpufleet.core.plugins.module_utils._watchdog_config import FLEET_QUARANTINED_QUERY
from ansible_collections.gpufleet.core.plugins.module_utils._watchdog_xids import parse_kernel_xid


class _UnitCache(ServiceHost):
    """numa_audit's door to the system, asking systemd about each unit once per check."""

    def __init__(self, *args, **kwargs):
        ServiceHost.__init__(self, *args, **kwargs)
        self._units = {}

    def unit_properties(self, unit):
        if unit not in self._units:
            self._units[unit] = ServiceHost.unit_properties(self, unit)
        return self._units[unit]

    def known_units(self):
        return dict(self._units)


class WatchdogHost:
    """The watchdog's one door to the system: NVML, systemctl, journalctl -k, /proc, files, the clock."""

    def __init__(self, nvml_library, run=None, systemctl='systemctl', journalctl='journalctl', files=None):
        self.nv = nvml_library
        self.run = run or run_argv
        self.systemctl = systemctl
        self.journalctl = journalctl
        self.files = files or HostFiles('/sys', '/proc')
        self.out = sys.stdout

    # Clock, /proc and files -----------------------------------------------------------------------------------

    @staticmethod
    def now():
        return time.time()

    def uptime(self):
        text = self.files.read_proc('uptime')
        try:
            return float(text.split()[0])
        except (AttributeError, IndexError, ValueError):
            return None

    def boot_id(self):
        return (self.files.read_proc('sys', 'kernel', 'random', 'boot_id') or '').strip() or None

    @staticmethod
    def read_json(path):
        """(document, None), (None, None) for a file that is not there, or (None, reason)."""
        try:
            with open(path) as handle:
                return json.load(handle), None
        except (IOError, OSError) as exc:
            if not os.path.exists(path):
                return None, None
            return None, '%s cannot be read: %s' % (path, exc.strerror or exc)
        except ValueError as exc:
            return None, '%s is not JSON: %s' % (path, exc)

    # Where node_exporter and the next check read: the old file or the new one, never half.
    write_atomic = staticmethod(write_atomic)

    @staticmethod
    def load_plan(path):
        """The placement plan (``_plan.Plan``), or PlanError naming the file and the fix; each service's devices as
        its runtime file names them now (a MIG device made again at boot may have a new UUID)."""
        plan = read_plan_file(path)
        resolve_entries(plan.entries)
        return plan

    def emit(self, line):
        self.out.write(line + '\n')

    @staticmethod
    def fleet_quarantined(url):
        """(how many hosts of the fleet are quarantined, None) from the Prometheus at url, or (None, why not)."""
        try:
            result = query(url, FLEET_QUARANTINED_QUERY)
            return (int(float(result[0]['value'][1])) if result else 0), None
        except PrometheusError as exc:
            return None, str(exc)
        except (ValueError, KeyError, IndexError, TypeError) as exc:
            return None, 'Prometheus at %s did not answer: %s' % (url, exc)

    # systemd ------------------------------------------------------------------------------------------------

    def audit_host(self):
        return _UnitCache(self.files, self.run, self.systemctl, find_program=self._find_program)

    def _find_program(self, name):
        for directory in os.environ.get('PATH', '/usr/sbin:/usr/bin:/sbin:/bin').split(os.pathsep):
            path = os.path.join(directory, name)
            if os.access(path, os.X_OK):
                return path
        return None

    def systemctl_do(self, verb, unit):
        rc, out, err = self.run([self.systemctl, verb, '--', unit])
        if rc != 0:
            raise GpufleetError('systemctl %s %s failed (rc=%d): %s' % (verb, unit, rc, (err or out).strip()))

    def reboot(self):
        rc, out, err = self.run([self.systemctl, 'reboot'])
        if rc != 0:
            raise GpufleetError('systemctl reboot failed (rc=%d): %s' % (rc, (err or out).strip()))

    def run_command(self, argv):
        rc, out, err = self.run(argv)
        if rc != 0:
            raise GpufleetError('%s failed (rc=%d): %s' % (' '.join(argv), rc, (err or out).strip()))

    # NVML -----------------------------------------------------------------------------------------------------

    def nvml_readings(self, wait_ms):
        """(gpus, devices, Xid events, error): every GPU (lost ones too), the memory and processes of each device
        services use (a MIG device, or the whole GPU), and the Xid events NVML delivers while waiting wait_ms."""
        if self.nv is None:
            return [], {}, [], 'nvidia-ml-py (pynvml) is not installed'
        gpus, devices, handles, instances = [], {}, [], {}
        try:
            with Nvml(self.nv) as nvml:
                for index in range(nvml.gpu_count()):
                    try:
                        handle, uuid, bus_id = nvml.gpu_at(index)
                        self._devices(nvml, handle, uuid, devices, instances)
                    except GpuLostError:
                        gpus.append({'index': index, 'uuid': None, 'pci_bus_id': None, 'lost': True})
                        continue
                    gpus.append({'index': index, 'uuid': uuid, 'pci_bus_id': bus_id, 'lost': False})
                    handles.append(handle)
                events = self._xid_events(nvml, handles, instances, wait_ms)
        except NvmlError as exc:
            return gpus, devices, [], str(exc)
        return gpus, devices, events, None

    @staticmethod
    def _devices(nvml, handle, uuid, devices, instances):
        if not nvml.mig_enabled(handle):
            total, processes = nvml.memory_use(handle)
            devices[uuid] = {'gpu': uuid, 'memory_total_bytes': total, 'processes': processes}
            return
        for mig_handle, mig_uuid, gi_id, ci_id in nvml.mig_device_handles(handle):
            instances[(uuid, gi_id, ci_id)] = mig_uuid
            total, processes = nvml.memory_use(mig_handle)
            devices[mig_uuid] = {'gpu': uuid, 'memory_total_bytes': total, 'processes': processes}

    @staticmethod
    def _xid_events(nvml, handles, instances, wait_ms):
        """Xid events NVML delivers within wait_ms, each named by its MIG device where it has one. NVML delivers only
        what happens while a set is registered: the kernel log covers the time between checks."""
        events = []
        for event in nvml.xid_events(handles, wait_ms):
            gpu, xid = event['gpu'], event['xid']
            # An event on no MIG device has no instance ids, and no MIG device is without them.
            device = instances.get((gpu, event['gpu_instance_id'], event['compute_instance_id']))
            events.append({'gpu': gpu, 'device': device, 'xid': xid, 'source': 'nvml',
                           'message': 'NVML Xid event %d on %s' % (xid, device or gpu)})
        return events

    # The kernel log ------------------------------------------------------------------------------------------

    def kernel_xids(self, cursor):
        """(Xid events, cursor to read from next time, problem): "NVRM: Xid" lines of the kernel log after cursor
        (this boot's when None), from the journal."""
        argv = [self.journalctl, '-k', '-o', 'json', '--no-pager', '-q']
        rc, out, err = self.run(argv + (['--after-cursor=%s' % cursor] if cursor else ['-b']))
        if rc != 0 and cursor:
            # The journal no longer has the cursor (rotated, vacuumed): start again from the end of this boot's log.
            problem = 'journalctl -k could not start after the last check\'s cursor (rc=%d: %s)' % (
                rc, (err or out).strip())
            events, cursor, again = self.kernel_xids(None)
            return [], cursor, '%s; %d Xid line(s) of this boot were not acted on' % (again or problem, len(events))
        if rc != 0:
            return [], cursor, 'journalctl -k failed (rc=%d): %s' % (rc, (err or out).strip())
        events = []
        for line in out.splitlines():
            try:
                entry = json.loads(line)
            except ValueError:
                continue
            cursor = entry.get('__CURSOR', cursor)
            message = entry.get('MESSAGE')
            if isinstance(message, list):  # journalctl writes a message that is not UTF-8 as its bytes
                message = bytes(bytearray(message)).decode('utf-8', 'replace')
            found = parse_kernel_xid(message)
            if found:
                events.append(dict(found, source='kernel', message=message))
        return events, cursor, None
