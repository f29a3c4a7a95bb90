# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.core contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The collection's only door to NVML.

This file is the only one that imports ``pynvml`` (from the ``nvidia-ml-py``
package). It turns NVML's error classes into messages that name the fix, and
NVML's structures into plain Python values. This is a private module: its API
may change without notice.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import contextlib
import ctypes
import time
import traceback

from ansible_collections.gpufleet.core.plugins.module_utils._errors import GpufleetError

try:
    import pynvml
except ImportError:
    pynvml = None
    PYNVML_IMPORT_ERROR = traceback.format_exc()
else:
    PYNVML_IMPORT_ERROR = None

PYNVML_PACKAGE = 'nvidia-ml-py'

COMPUTE_MODES = {0: 'default', 1: 'exclusive_thread', 2: 'prohibited', 3: 'exclusive_process'}
# nvidia-smi topo -m labels for NVML_TOPOLOGY_* levels.
TOPOLOGY_LEVELS = {0: 'X', 10: 'PIX', 20: 'PXB', 30: 'PHB', 40: 'NODE', 50: 'SYS'}
NVLINK_DEVICE_TYPE_SWITCH = 2
# Compute-instance size in slices -> NVML_COMPUTE_INSTANCE_PROFILE_* index.
_CI_PROFILE_OF_SIZE = {1: 0, 2: 1, 3: 2, 4: 3, 7: 4, 8: 5, 6: 6}
# NVML's "no MIG device" instance id in event data.
_NO_INSTANCE = 0xFFFFFFFF

# Hints keyed by NVML error class name; looked up by name so this table needs no pynvml.
_FIXES = {
    'NVMLError_LibraryNotFound': 'libnvidia-ml.so.1 was not found: the NVIDIA driver is not installed '
                                 'on this host (install it to see its GPUs)',
    'NVMLError_DriverNotLoaded': 'the NVIDIA kernel module is not loaded: load it with "modprobe nvidia", '
                                 'or reboot after a driver install',
    'NVMLError_LibRmVersionMismatch': 'the NVML library and the loaded kernel module are different driver '
                                      'versions (typically after an unattended upgrade): reboot, and hold '
                                      'the driver packages',
    'NVMLError_NoPermission': 'NVML refused the call for lack of permission: run the task with become: true',
    'NVMLError_InsufficientSize': 'NVML needs a larger buffer for this query; upgrade nvidia-ml-py',
    'NVMLError_GpuIsLost': 'a GPU has fallen off the bus: check dmesg for Xid errors; the host needs a reboot',
    'NVMLError_FunctionNotFound': 'the driver is older than this NVML call; upgrade the driver',
}


class NvmlError(GpufleetError):
    """An NVML failure, described with the fix."""


class GpuLostError(NvmlError):
    """NVML answers GPU_IS_LOST for one GPU: it fell off the bus, and the others may still answer."""


def explain(exc):
    """One line that says what NVML reported and what to do about it."""
    name = type(exc).__name__
    fix = _FIXES.get(name)
    text = str(exc) or name
    return '%s (%s)' % (fix, text) if fix else 'NVML error: %s' % text


def _text(value):
    if isinstance(value, bytes):
        return value.decode('utf-8', 'replace')
    return value


def _instance_id(value):
    return None if value == _NO_INSTANCE else int(value)


class Nvml:
    """One NVML session; use as a context manager so nvmlShutdown always runs."""

    def __init__(self, library=None):
        self.nv = library if library is not None else pynvml
        self._open = False

    def __enter__(self):
        try:
            self.nv.nvmlInit()
        except self.nv.NVMLError as exc:
            raise NvmlError(explain(exc))
        self._open = True
        return self

    def __exit__(self, *exc_info):
        if self._open:
            try:
                self.nv.nvmlShutdown()
            except self.nv.NVMLError:
                pass
            self._open = False
        return False

    def _optional(self, call, *args):
        """Run a query whose absence is normal on some GPUs (NotSupported, NotFound)."""
        try:
            return call(*args)
        except (self.nv.NVMLError_NotSupported, self.nv.NVMLError_NotFound,
                self.nv.NVMLError_InvalidArgument, self.nv.NVMLError_FunctionNotFound):
            return None

    def _required(self, call, *args):
        try:
            return call(*args)
        except self.nv.NVMLError as exc:
            raise NvmlError('%s: %s' % (call.__name__, explain(exc)))

    @contextlib.contextmanager
    def _explained(self):
        """Turns NVML's errors in the block into GpuLostError (a GPU off the bus) or NvmlError, worded by explain alone.

        The readings that use it catch inside it what is normal for each call (an empty MIG slot, a GPU without MIG,
        the end of a wait), which _optional's one list cannot say; the message is one line, like the session's own.
        """
        try:
            yield
        except self.nv.NVMLError_GpuIsLost as exc:
            raise GpuLostError(explain(exc))
        except self.nv.NVMLError as exc:
            raise NvmlError(explain(exc))

    # System -----------------------------------------------------------------

    def system(self):
        cuda = self._optional(self.nv.nvmlSystemGetCudaDriverVersion)
        return {
            'driver_version': _text(self._required(self.nv.nvmlSystemGetDriverVersion)),
            'nvml_version': _text(self._optional(self.nv.nvmlSystemGetNVMLVersion)),
            'cuda_driver_version': '%d.%d' % (cuda // 1000, (cuda % 1000) // 10) if cuda else None,
        }

    def device_handles(self):
        count = self._required(self.nv.nvmlDeviceGetCount)
        return [self._required(self.nv.nvmlDeviceGetHandleByIndex, index) for index in range(count)]

    # The watchdog's readings ---------------------------------------------------
    # One GPU at a time: a GPU off the bus fails with GpuLostError, so that the watchdog reports it lost and reads
    # the others, and keeps what it read before any other failure.

    def gpu_count(self):
        """How many GPUs NVML counts, lost ones included."""
        with self._explained():
            return self.nv.nvmlDeviceGetCount()

    def gpu_at(self, index):
        """(handle, uuid, pci_bus_id) of the GPU at index."""
        with self._explained():
            handle = self.nv.nvmlDeviceGetHandleByIndex(index)
            return handle, _text(self.nv.nvmlDeviceGetUUID(handle)), _text(self.nv.nvmlDeviceGetPciInfo(handle).busId)

    def mig_enabled(self, handle):
        """Whether the GPU runs in MIG mode now (not a pending mode); False for a GPU without MIG."""
        with self._explained():
            try:
                return bool(self.nv.nvmlDeviceGetMigMode(handle)[0])
            except (self.nv.NVMLError_NotSupported, self.nv.NVMLError_FunctionNotFound):
                return False

    def memory_use(self, handle):
        """(memory total in bytes, {pid: bytes it uses, None where NVML does not say}) of a GPU or a MIG device."""
        with self._explained():
            total = int(self.nv.nvmlDeviceGetMemoryInfo(handle).total)
            processes = self.nv.nvmlDeviceGetComputeRunningProcesses(handle)
            return total, dict((int(p.pid), None if p.usedGpuMemory is None else int(p.usedGpuMemory))
                               for p in processes)

    def mig_device_handles(self, handle):
        """Yields (handle, uuid, gpu_instance_id, compute_instance_id) of each MIG device of a GPU, slot by slot.

        Each is read when the caller asks for it, so a caller that fails part-way has the ones before.
        """
        with self._explained():
            count = self.nv.nvmlDeviceGetMaxMigDeviceCount(handle)
        for index in range(count):
            with self._explained():
                try:
                    mig = self.nv.nvmlDeviceGetMigDeviceHandleByIndex(handle, index)
                except self.nv.NVMLError_NotFound:
                    continue  # an empty slot
                found = (mig, _text(self.nv.nvmlDeviceGetUUID(mig)), int(self.nv.nvmlDeviceGetGpuInstanceId(mig)),
                         int(self.nv.nvmlDeviceGetComputeInstanceId(mig)))
            yield found

    def xid_events(self, handles, wait_ms):
        """The Xid events NVML delivers for the GPUs of handles within wait_ms, in order, as {gpu, gpu_instance_id,
        compute_instance_id, xid} (the instance ids None for an event on no MIG device).

        NVML delivers only what happens while a set is registered. The timeout, or a GPU lost while waiting, ends the
        wait with what came before; the set is freed whatever happens.
        """
        nv = self.nv
        if wait_ms <= 0 or not handles:
            return []
        events = []
        with self._explained():
            event_set = nv.nvmlEventSetCreate()
            try:
                registered = 0
                for handle in handles:
                    try:
                        nv.nvmlDeviceRegisterEvents(handle, nv.nvmlEventTypeXidCriticalError, event_set)
                        registered += 1
                    except (nv.NVMLError_NotSupported, nv.NVMLError_GpuIsLost):
                        continue
                deadline = time.monotonic() + wait_ms / 1000.0
                while registered:
                    remaining = int((deadline - time.monotonic()) * 1000)
                    if remaining <= 0:
                        break
                    try:
                        data = nv.nvmlEventSetWait_v2(event_set, remaining)
                    except (nv.NVMLError_Timeout, nv.NVMLError_GpuIsLost):
                        break  # a lost GPU is seen by its handle at the next reading, and by its Xid 79 line
                    if not data.eventType & nv.nvmlEventTypeXidCriticalError:
                        continue
                    events.append({'gpu': _text(nv.nvmlDeviceGetUUID(data.device)),
                                   'gpu_instance_id': _instance_id(data.gpuInstanceId),
                                   'compute_instance_id': _instance_id(data.computeInstanceId),
                                   'xid': int(data.eventData)})
            finally:
                nv.nvmlEventSetFree(event_set)
        return events

    # One GPU ------------------------------------------------------------------

    def identity(self, handle):
        pci = self._required(self.nv.nvmlDeviceGetPciInfo, handle)
        memory = self._required(self.nv.nvmlDeviceGetMemoryInfo, handle)
        return {
            'uuid': _text(self._required(self.nv.nvmlDeviceGetUUID, handle)),
            'name': _text(self._required(self.nv.nvmlDeviceGetName, handle)),
            'pci_bus_id': _text(pci.busId),
            'pci_device_id': '0x%08X' % int(pci.pciDeviceId),
            'memory_total_mb': int(memory.total) // (1024 * 1024),
        }

    def modes(self, handle):
        persistence = self._optional(self.nv.nvmlDeviceGetPersistenceMode, handle)
        compute = self._optional(self.nv.nvmlDeviceGetComputeMode, handle)
        mig = self._optional(self.nv.nvmlDeviceGetMigMode, handle)
        return {
            'persistence_mode': None if persistence is None else bool(persistence),
            'compute_mode': COMPUTE_MODES.get(compute) if compute is not None else None,
            'mig_capable': mig is not None,
            'mig_mode_current': None if mig is None else ('enabled' if mig[0] else 'disabled'),
            'mig_mode_pending': None if mig is None else ('enabled' if mig[1] else 'disabled'),
        }

    def cpu_affinity_words(self, handle, cpu_id_span):
        words = (cpu_id_span + 63) // 64 or 1
        return self._optional(self.nv.nvmlDeviceGetCpuAffinity, handle, words)

    def memory_affinity_words(self, handle, node_id_span):
        words = (node_id_span + 63) // 64 or 1
        getter = getattr(self.nv, 'nvmlDeviceGetMemoryAffinity', None)
        if getter is None:
            return None
        return self._optional(getter, handle, words, self.nv.NVML_AFFINITY_SCOPE_NODE)

    def compute_pids(self, handle):
        processes = self._optional(self.nv.nvmlDeviceGetComputeRunningProcesses, handle)
        return sorted(set(int(process.pid) for process in processes or []))

    # MIG ----------------------------------------------------------------------

    def _placements(self, handle, profile_id):
        """nvidia-ml-py leaves the array to the caller: ask for the count, then fill."""
        count = ctypes.c_uint(0)
        call = self.nv.nvmlDeviceGetGpuInstancePossiblePlacements
        if self._optional(call, handle, profile_id, None, ctypes.byref(count)) is None or not count.value:
            return []
        placements = (self.nv.c_nvmlGpuInstancePlacement_t * count.value)()
        self._required(call, handle, profile_id, placements, ctypes.byref(count))
        return [{'start': int(p.start), 'size': int(p.size)} for p in placements[:count.value]]

    def mig_profiles(self, handle):
        """The GPU-instance profiles this GPU offers, as NVML describes them."""
        profiles = []
        for profile_index in range(self.nv.NVML_GPU_INSTANCE_PROFILE_COUNT):
            info = self._optional(self.nv.nvmlDeviceGetGpuInstanceProfileInfo, handle, profile_index)
            if info is None:
                continue
            name = _text(getattr(info, 'name', None)) or ''
            profiles.append({
                'profile_index': profile_index,
                'id': int(info.id),
                'name': name[4:] if name.startswith('MIG ') else name,
                'slice_count': int(info.sliceCount),
                'max_count': int(info.instanceCount),
                'memory_mb': int(info.memorySizeMB),
                'multiprocessor_count': int(info.multiprocessorCount),
                'placements': self._placements(handle, info.id),
            })
        return profiles

    def gpu_instances(self, handle, profiles):
        """Existing GPU instances with their compute instances, in GPU-instance id order."""
        instances = []
        for profile in profiles:
            slots = (self.nv.c_nvmlGpuInstance_t * max(profile['max_count'], 1))()
            count = ctypes.c_uint(0)
            self._required(self.nv.nvmlDeviceGetGpuInstances, handle, profile['id'], slots, ctypes.byref(count))
            for gi in slots[:count.value]:
                info = self._required(self.nv.nvmlGpuInstanceGetInfo, gi)
                instances.append({
                    'id': int(info.id),
                    'profile_id': int(info.profileId),
                    'profile': profile['name'],
                    'placement': {'start': int(info.placement.start), 'size': int(info.placement.size)},
                    'compute_instances': self._compute_instances(gi),
                })
        return sorted(instances, key=lambda item: item['id'])

    def _compute_instances(self, gi):
        found = []
        for profile_index in range(self.nv.NVML_COMPUTE_INSTANCE_PROFILE_COUNT):
            info = self._optional(self.nv.nvmlGpuInstanceGetComputeInstanceProfileInfo, gi, profile_index,
                                  self.nv.NVML_COMPUTE_INSTANCE_ENGINE_PROFILE_SHARED)
            if info is None:
                continue
            slots = (self.nv.c_nvmlComputeInstance_t * max(int(info.instanceCount), 1))()
            count = ctypes.c_uint(0)
            self._required(self.nv.nvmlGpuInstanceGetComputeInstances, gi, info.id, slots, ctypes.byref(count))
            for ci in slots[:count.value]:
                ci_info = self._required(self.nv.nvmlComputeInstanceGetInfo, ci)
                found.append({
                    'id': int(ci_info.id),
                    'profile_id': int(ci_info.profileId),
                    'slice_count': int(info.sliceCount),
                })
        return sorted(found, key=lambda item: item['id'])

    def mig_devices(self, handle):
        """(gpu_instance_id, compute_instance_id) -> {'uuid', 'pids'} of every MIG device, in one pass."""
        count = self._optional(self.nv.nvmlDeviceGetMaxMigDeviceCount, handle) or 0
        devices = {}
        for index in range(count):
            mig = self._optional(self.nv.nvmlDeviceGetMigDeviceHandleByIndex, handle, index)
            if mig is None:
                continue
            key = (int(self._required(self.nv.nvmlDeviceGetGpuInstanceId, mig)),
                   int(self._required(self.nv.nvmlDeviceGetComputeInstanceId, mig)))
            devices[key] = {'uuid': _text(self._required(self.nv.nvmlDeviceGetUUID, mig)),
                            'pids': self.compute_pids(mig)}
        return devices

    def set_compute_mode(self, handle, mode_value):
        self._required(self.nv.nvmlDeviceSetComputeMode, handle, mode_value)

    # MIG changes ------------------------------------------------------------------
    # Every change raises NvmlError on failure: a half-applied change must be reported, never skipped.

    def set_mig_mode(self, handle, enabled):
        """Returns True when the new mode is active now, False when it waits for a GPU reset."""
        mode = self.nv.NVML_DEVICE_MIG_ENABLE if enabled else self.nv.NVML_DEVICE_MIG_DISABLE
        status = self._required(self.nv.nvmlDeviceSetMigMode, handle, mode)
        current = self._required(self.nv.nvmlDeviceGetMigMode, handle)[0]
        return status == self.nv.NVML_SUCCESS and bool(current) == bool(enabled)

    def create_gpu_instance(self, handle, profile_id, start, size):
        placement = self.nv.c_nvmlGpuInstancePlacement_t()
        placement.start = start
        placement.size = size
        gi = self._required(self.nv.nvmlDeviceCreateGpuInstanceWithPlacement, handle, profile_id,
                            ctypes.byref(placement))
        return gi, int(self._required(self.nv.nvmlGpuInstanceGetInfo, gi).id)

    def gpu_instance(self, handle, gi_id):
        return self._required(self.nv.nvmlDeviceGetGpuInstanceById, handle, gi_id)

    def create_compute_instance(self, gi, size):
        info = self._required(self.nv.nvmlGpuInstanceGetComputeInstanceProfileInfo, gi, _CI_PROFILE_OF_SIZE[size],
                              self.nv.NVML_COMPUTE_INSTANCE_ENGINE_PROFILE_SHARED)
        return self._required(self.nv.nvmlGpuInstanceCreateComputeInstance, gi, info.id)

    def destroy_compute_instance(self, gi, ci_id):
        ci = self._required(self.nv.nvmlGpuInstanceGetComputeInstanceById, gi, ci_id)
        self._required(self.nv.nvmlComputeInstanceDestroy, ci)

    def destroy_gpu_instance(self, gi):
        self._required(self.nv.nvmlGpuInstanceDestroy, gi)

    # Links between GPUs -------------------------------------------------------

    def common_ancestor(self, handle_a, handle_b):
        level = self._optional(self.nv.nvmlDeviceGetTopologyCommonAncestor, handle_a, handle_b)
        return None if level is None else TOPOLOGY_LEVELS.get(int(level), str(level))

    def nvlink_peers(self, handle):
        """Active NVLinks of one GPU: (peer PCI bus ids -> link count, links to NVSwitches)."""
        peers = {}
        switch_links = 0
        for link in range(self.nv.NVML_NVLINK_MAX_LINKS):
            state = self._optional(self.nv.nvmlDeviceGetNvLinkState, handle, link)
            if state is None:
                if link == 0:
                    break  # no NVLink on this GPU at all
                continue
            if not state:
                continue
            kind = self._optional(self.nv.nvmlDeviceGetNvLinkRemoteDeviceType, handle, link)
            if kind == NVLINK_DEVICE_TYPE_SWITCH:
                switch_links += 1
                continue
            remote = self._optional(self.nv.nvmlDeviceGetNvLinkRemotePciInfo, handle, link)
            if remote is not None:
                bus_id = _text(remote.busId).lower()
                peers[bus_id] = peers.get(bus_id, 0) + 1
        return peers, switch_links
