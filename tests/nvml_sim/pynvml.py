# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.core contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""NVML simulator: a drop-in ``pynvml`` for tests, driven by a host description.

Put this directory first on PYTHONPATH and set:

- ``GPUFLEET_NVML_SIM_HOST``: path of a host description (``hosts/*.json``);
- ``GPUFLEET_NVML_SIM_STATE``: path of the state file (MIG mode, instances,
  processes, injected faults). It is created on first use, so MIG changes
  persist across module runs; ``simctl.reboot`` clears what a reboot clears.

Without ``GPUFLEET_NVML_SIM_HOST``, a host that has ``_FALLBACK_HOST_FILE`` is
served from it, its state in ``_FALLBACK_STATE_FILE`` unless
``GPUFLEET_NVML_SIM_STATE`` says otherwise: a lab host (tests/lab/) then answers
every process, whatever its environment, as a real host's driver does. A host
with neither has no driver: ``nvmlInit`` raises NVML_ERROR_LIBRARY_NOT_FOUND.

The public names, signatures, constants, structures and error classes follow
nvidia-ml-py (tests/unit/nvml_sim/test_conformance.py checks them against the
real package). Calls that the collection does not use are absent, so a new use
fails loudly instead of silently passing.
"""

from __future__ import absolute_import, division, print_function

import ctypes
import fcntl
import json
import os
import string
import sys
import tempfile
import time
import uuid as _uuid

_HERE = os.path.dirname(os.path.abspath(__file__))

# A lab host's fixed description and state (tests/lab/lab.sh writes the first), used when GPUFLEET_NVML_SIM_HOST
# is unset: Ansible modules over SSH and systemd units find the simulator with no environment, as they find a
# real driver.
_FALLBACK_HOST_FILE = '/etc/gpufleet-nvml-sim/host.json'
_FALLBACK_STATE_FILE = '/var/lib/gpufleet-nvml-sim/state.json'

# ---------------------------------------------------------------------------
# Constants (values as in nvidia-ml-py)

NVML_SUCCESS = 0
NVML_ERROR_UNINITIALIZED = 1
NVML_ERROR_INVALID_ARGUMENT = 2
NVML_ERROR_NOT_SUPPORTED = 3
NVML_ERROR_NO_PERMISSION = 4
NVML_ERROR_ALREADY_INITIALIZED = 5
NVML_ERROR_NOT_FOUND = 6
NVML_ERROR_INSUFFICIENT_SIZE = 7
NVML_ERROR_INSUFFICIENT_POWER = 8
NVML_ERROR_DRIVER_NOT_LOADED = 9
NVML_ERROR_TIMEOUT = 10
NVML_ERROR_IRQ_ISSUE = 11
NVML_ERROR_LIBRARY_NOT_FOUND = 12
NVML_ERROR_FUNCTION_NOT_FOUND = 13
NVML_ERROR_CORRUPTED_INFOROM = 14
NVML_ERROR_GPU_IS_LOST = 15
NVML_ERROR_RESET_REQUIRED = 16
NVML_ERROR_OPERATING_SYSTEM = 17
NVML_ERROR_LIB_RM_VERSION_MISMATCH = 18
NVML_ERROR_IN_USE = 19
NVML_ERROR_MEMORY = 20
NVML_ERROR_NO_DATA = 21
NVML_ERROR_VGPU_ECC_NOT_SUPPORTED = 22
NVML_ERROR_INSUFFICIENT_RESOURCES = 23
NVML_ERROR_FREQ_NOT_SUPPORTED = 24
NVML_ERROR_ARGUMENT_VERSION_MISMATCH = 25
NVML_ERROR_DEPRECATED = 26
NVML_ERROR_NOT_READY = 27
NVML_ERROR_GPU_NOT_FOUND = 28
NVML_ERROR_INVALID_STATE = 29
NVML_ERROR_RESET_TYPE_NOT_SUPPORTED = 30
NVML_ERROR_UNKNOWN = 999

NVML_FEATURE_DISABLED = 0
NVML_FEATURE_ENABLED = 1

NVML_COMPUTEMODE_DEFAULT = 0
NVML_COMPUTEMODE_EXCLUSIVE_THREAD = 1
NVML_COMPUTEMODE_PROHIBITED = 2
NVML_COMPUTEMODE_EXCLUSIVE_PROCESS = 3
NVML_COMPUTEMODE_COUNT = 4

NVML_NVLINK_MAX_LINKS = 36
NVML_NVLINK_DEVICE_TYPE_GPU = 0x00
NVML_NVLINK_DEVICE_TYPE_IBMNPU = 0x01
NVML_NVLINK_DEVICE_TYPE_SWITCH = 0x02
NVML_NVLINK_DEVICE_TYPE_UNKNOWN = 0xFF

NVML_TOPOLOGY_INTERNAL = 0
NVML_TOPOLOGY_SINGLE = 10
NVML_TOPOLOGY_MULTIPLE = 20
NVML_TOPOLOGY_HOSTBRIDGE = 30
NVML_TOPOLOGY_NODE = 40
NVML_TOPOLOGY_CPU = NVML_TOPOLOGY_NODE
NVML_TOPOLOGY_SYSTEM = 50

NVML_AFFINITY_SCOPE_NODE = 0
NVML_AFFINITY_SCOPE_SOCKET = 1

NVML_DEVICE_MIG_DISABLE = 0x0
NVML_DEVICE_MIG_ENABLE = 0x1

NVML_GPU_INSTANCE_PROFILE_1_SLICE = 0x0
NVML_GPU_INSTANCE_PROFILE_2_SLICE = 0x1
NVML_GPU_INSTANCE_PROFILE_3_SLICE = 0x2
NVML_GPU_INSTANCE_PROFILE_4_SLICE = 0x3
NVML_GPU_INSTANCE_PROFILE_7_SLICE = 0x4
NVML_GPU_INSTANCE_PROFILE_8_SLICE = 0x5
NVML_GPU_INSTANCE_PROFILE_6_SLICE = 0x6
NVML_GPU_INSTANCE_PROFILE_1_SLICE_REV1 = 0x7
NVML_GPU_INSTANCE_PROFILE_2_SLICE_REV1 = 0x8
NVML_GPU_INSTANCE_PROFILE_1_SLICE_REV2 = 0x9
NVML_GPU_INSTANCE_PROFILE_COUNT = 0x12

NVML_COMPUTE_INSTANCE_PROFILE_1_SLICE = 0x0
NVML_COMPUTE_INSTANCE_PROFILE_2_SLICE = 0x1
NVML_COMPUTE_INSTANCE_PROFILE_3_SLICE = 0x2
NVML_COMPUTE_INSTANCE_PROFILE_4_SLICE = 0x3
NVML_COMPUTE_INSTANCE_PROFILE_7_SLICE = 0x4
NVML_COMPUTE_INSTANCE_PROFILE_8_SLICE = 0x5
NVML_COMPUTE_INSTANCE_PROFILE_6_SLICE = 0x6
NVML_COMPUTE_INSTANCE_PROFILE_1_SLICE_REV1 = 0x7
NVML_COMPUTE_INSTANCE_PROFILE_COUNT = 0x9
NVML_COMPUTE_INSTANCE_ENGINE_PROFILE_SHARED = 0x0
NVML_COMPUTE_INSTANCE_ENGINE_PROFILE_COUNT = 0x1

# Event types (nvmlDeviceRegisterEvents); the simulator's driver raises Xid events (simctl.inject_xid).
nvmlEventTypeSingleBitEccError = 0x0000000000000001
nvmlEventTypeDoubleBitEccError = 0x0000000000000002
nvmlEventTypePState = 0x0000000000000004
nvmlEventTypeXidCriticalError = 0x0000000000000008
nvmlEventTypeClock = 0x0000000000000010
nvmlEventTypeNone = 0x0000000000000000
_SUPPORTED_EVENT_TYPES = (nvmlEventTypeSingleBitEccError | nvmlEventTypeDoubleBitEccError | nvmlEventTypePState
                          | nvmlEventTypeXidCriticalError | nvmlEventTypeClock)
# gpuInstanceId/computeInstanceId of an event that is not a MIG device's.
_NO_INSTANCE = 0xFFFFFFFF

nvmlGpuInstanceProfileInfo_v2 = 0x02000098
nvmlComputeInstanceProfileInfo_v2 = 0x02000088

# Compute-instance size (slices) -> NVML_COMPUTE_INSTANCE_PROFILE_* (also nvidia-smi's CI profile id).
_CI_PROFILE_OF_SIZE = {1: 0, 2: 1, 3: 2, 4: 3, 7: 4, 8: 5, 6: 6}
_MEMORY_SLICES = 8
_COMPUTE_SLICES = 7

# ---------------------------------------------------------------------------
# Errors: generated exactly as nvidia-ml-py does, one subclass per NVML_ERROR_* code.

_ERROR_STRINGS = {
    NVML_ERROR_UNINITIALIZED: "Uninitialized",
    NVML_ERROR_INVALID_ARGUMENT: "Invalid Argument",
    NVML_ERROR_NOT_SUPPORTED: "Not Supported",
    NVML_ERROR_NO_PERMISSION: "Insufficient Permissions",
    NVML_ERROR_ALREADY_INITIALIZED: "Already Initialized",
    NVML_ERROR_NOT_FOUND: "Not Found",
    NVML_ERROR_INSUFFICIENT_SIZE: "Insufficient Size",
    NVML_ERROR_INSUFFICIENT_POWER: "Insufficient External Power",
    NVML_ERROR_DRIVER_NOT_LOADED: "Driver Not Loaded",
    NVML_ERROR_TIMEOUT: "Timeout",
    NVML_ERROR_IRQ_ISSUE: "Interrupt Request Issue",
    NVML_ERROR_LIBRARY_NOT_FOUND: "NVML Shared Library Not Found",
    NVML_ERROR_FUNCTION_NOT_FOUND: "Function Not Found",
    NVML_ERROR_CORRUPTED_INFOROM: "Corrupted infoROM",
    NVML_ERROR_GPU_IS_LOST: "GPU is lost",
    NVML_ERROR_RESET_REQUIRED: "GPU requires restart",
    NVML_ERROR_OPERATING_SYSTEM: "The operating system has blocked the request.",
    NVML_ERROR_LIB_RM_VERSION_MISMATCH: "RM has detected an NVML/RM version mismatch.",
    NVML_ERROR_MEMORY: "Insufficient Memory",
    NVML_ERROR_UNKNOWN: "Unknown Error",
    # Codes below have no text in nvidia-ml-py itself; the driver's nvmlErrorString supplies these.
    NVML_ERROR_IN_USE: "In use by another client",
    NVML_ERROR_NO_DATA: "No data",
    NVML_ERROR_INSUFFICIENT_RESOURCES: "Insufficient resources",
    NVML_ERROR_INVALID_STATE: "Invalid state",
}


class NVMLError(Exception):
    _valClassMapping = dict()
    _errcode_to_string = _ERROR_STRINGS

    def __new__(cls, value):
        # NVMLError(code) builds the subclass for that code, as nvidia-ml-py does.
        target = NVMLError._valClassMapping.get(value, cls) if cls is NVMLError else cls
        obj = Exception.__new__(target)
        obj.value = value
        return obj

    def __str__(self):
        return self._errcode_to_string.get(self.value, "NVML Error with code %d" % self.value)

    def __eq__(self, other):
        return self.value == other.value

    def __hash__(self):
        return hash(self.value)


def _extract_error_classes():
    this_module = sys.modules[__name__]
    for name in [n for n in dir(this_module) if n.startswith("NVML_ERROR_")]:
        class_name = "NVMLError_" + string.capwords(name.replace("NVML_ERROR_", ""), "_").replace("_", "")
        value = getattr(this_module, name)

        def gen_new(val):
            def new(typ, *args):
                obj = NVMLError.__new__(typ, val)
                return obj
            return new
        new_class = type(class_name, (NVMLError,), {'__new__': gen_new(value)})
        new_class.__module__ = __name__
        setattr(this_module, class_name, new_class)
        NVMLError._valClassMapping[value] = new_class


_extract_error_classes()


def nvmlExceptionClass(nvmlErrorCode):
    if nvmlErrorCode not in NVMLError._valClassMapping:
        raise ValueError('nvmlErrorCode %s is not valid' % nvmlErrorCode)
    return NVMLError._valClassMapping[nvmlErrorCode]


def nvmlErrorString(result):
    return _ERROR_STRINGS.get(result, "Unknown Error")

# ---------------------------------------------------------------------------
# Structures (field names and types as in nvidia-ml-py)


class _PrintableStructure(ctypes.Structure):
    """Char arrays read back as str, as in nvidia-ml-py."""

    def __getattribute__(self, name):
        value = super(_PrintableStructure, self).__getattribute__(name)
        if isinstance(value, bytes):
            return value.decode('utf-8')
        return value


class nvmlPciInfo_t(_PrintableStructure):
    _fields_ = [
        ('busIdLegacy', ctypes.c_char * 16),
        ('domain', ctypes.c_uint),
        ('bus', ctypes.c_uint),
        ('device', ctypes.c_uint),
        ('pciDeviceId', ctypes.c_uint),
        ('pciSubSystemId', ctypes.c_uint),
        ('busId', ctypes.c_char * 32),
    ]


class c_nvmlMemory_t(_PrintableStructure):
    _fields_ = [('total', ctypes.c_ulonglong), ('free', ctypes.c_ulonglong), ('used', ctypes.c_ulonglong)]


class c_nvmlGpuInstancePlacement_t(ctypes.Structure):
    _fields_ = [('start', ctypes.c_uint), ('size', ctypes.c_uint)]


class c_nvmlComputeInstancePlacement_t(ctypes.Structure):
    _fields_ = [('start', ctypes.c_uint), ('size', ctypes.c_uint)]


class c_nvmlGpuInstanceProfileInfo_t(ctypes.Structure):
    _fields_ = [
        ('id', ctypes.c_uint), ('isP2pSupported', ctypes.c_uint), ('sliceCount', ctypes.c_uint),
        ('instanceCount', ctypes.c_uint), ('multiprocessorCount', ctypes.c_uint),
        ('copyEngineCount', ctypes.c_uint), ('decoderCount', ctypes.c_uint), ('encoderCount', ctypes.c_uint),
        ('jpegCount', ctypes.c_uint), ('ofaCount', ctypes.c_uint), ('memorySizeMB', ctypes.c_ulonglong),
    ]


class c_nvmlGpuInstanceProfileInfo_v2_t(_PrintableStructure):
    _fields_ = [('version', ctypes.c_uint)] + c_nvmlGpuInstanceProfileInfo_t._fields_ + [
        ('name', ctypes.c_char * 96)]

    def __init__(self):
        super(c_nvmlGpuInstanceProfileInfo_v2_t, self).__init__(version=nvmlGpuInstanceProfileInfo_v2)


class c_nvmlComputeInstanceProfileInfo_t(ctypes.Structure):
    _fields_ = [
        ('id', ctypes.c_uint), ('sliceCount', ctypes.c_uint), ('instanceCount', ctypes.c_uint),
        ('multiprocessorCount', ctypes.c_uint), ('sharedCopyEngineCount', ctypes.c_uint),
        ('sharedDecoderCount', ctypes.c_uint), ('sharedEncoderCount', ctypes.c_uint),
        ('sharedJpegCount', ctypes.c_uint), ('sharedOfaCount', ctypes.c_uint),
    ]


class c_nvmlComputeInstanceProfileInfo_v2_t(_PrintableStructure):
    _fields_ = [('version', ctypes.c_uint)] + c_nvmlComputeInstanceProfileInfo_t._fields_ + [
        ('name', ctypes.c_char * 96)]

    def __init__(self):
        super(c_nvmlComputeInstanceProfileInfo_v2_t, self).__init__(version=nvmlComputeInstanceProfileInfo_v2)


# Handles are opaque pointers in NVML; the simulator's handles are Python objects,
# so arrays of them are arrays of py_object.
c_nvmlDevice_t = ctypes.py_object
c_nvmlGpuInstance_t = ctypes.py_object
c_nvmlComputeInstance_t = ctypes.py_object


class c_nvmlEventData_t(_PrintableStructure):
    _fields_ = [
        ('device', c_nvmlDevice_t),
        ('eventType', ctypes.c_ulonglong),
        ('eventData', ctypes.c_ulonglong),
        ('gpuInstanceId', ctypes.c_uint),
        ('computeInstanceId', ctypes.c_uint),
    ]


class c_nvmlGpuInstanceInfo_t(object):
    def __init__(self, device, gi_id, profile_id, start, size):
        self.device = device
        self.id = gi_id
        self.profileId = profile_id
        self.placement = c_nvmlGpuInstancePlacement_t(start, size)


class c_nvmlComputeInstanceInfo_t(object):
    def __init__(self, device, gpu_instance, ci_id, profile_id, start, size):
        self.device = device
        self.gpuInstance = gpu_instance
        self.id = ci_id
        self.profileId = profile_id
        self.placement = c_nvmlComputeInstancePlacement_t(start, size)


class nvmlFriendlyObject(object):
    def __init__(self, dictionary):
        for key in dictionary:
            setattr(self, key, dictionary[key])

# ---------------------------------------------------------------------------
# Simulated host


def _raise(code):
    raise NVMLError(code)


def _load_json(path):
    with open(path) as handle:
        return json.load(handle)


class _Gpu(object):
    """A physical GPU handle."""

    def __init__(self, sim, index, spec):
        self.sim = sim
        self.index = index
        self.spec = spec
        self.model = sim.models['models'][spec['model']]

    @property
    def state(self):
        return self.sim.state['gpus'][self.spec['uuid']]

    def profiles(self):
        return self.model.get('mig') or []

    def profile_by_id(self, profile_id):
        for profile in self.profiles():
            if profile['id'] == profile_id:
                return profile
        return None


class _GpuInstance(object):
    def __init__(self, gpu, gi_id):
        self.gpu = gpu
        self.id = gi_id

    def record(self):
        for gi in self.gpu.state['gpu_instances']:
            if gi['id'] == self.id:
                return gi
        _raise(NVML_ERROR_INVALID_ARGUMENT)


class _ComputeInstance(object):
    def __init__(self, gi, ci_id):
        self.gi = gi
        self.id = ci_id

    def record(self):
        for ci in self.gi.record()['compute_instances']:
            if ci['id'] == self.id:
                return ci
        _raise(NVML_ERROR_INVALID_ARGUMENT)


class _MigDevice(object):
    def __init__(self, gpu, gi_id, ci_id):
        self.gpu = gpu
        self.gi_id = gi_id
        self.ci_id = ci_id


def fresh_gpu_state(spec):
    return {
        'mig_current': int(spec.get('mig_mode', 0)),
        'mig_pending': int(spec.get('mig_mode', 0)),
        'compute_mode': int(spec.get('compute_mode', 0)),
        'persistence_mode': int(spec.get('persistence_mode', 1)),
        'gpu_instances': [dict(gi) for gi in spec.get('gpu_instances', [])],
    }


def _host_file():
    """The host description to serve and whether it is the fallback file; (None, False) on a host with no driver."""
    host_path = os.environ.get('GPUFLEET_NVML_SIM_HOST')
    if host_path:
        return host_path, False
    if os.path.exists(_FALLBACK_HOST_FILE):
        return _FALLBACK_HOST_FILE, True
    return None, False


class _Sim(object):
    def __init__(self):
        host_path, fallback = _host_file()
        if not host_path:
            raise RuntimeError('NVML simulator: set GPUFLEET_NVML_SIM_HOST to a host description file')
        self.host = _load_json(host_path)
        self.models = _load_json(os.path.join(_HERE, 'gpu_models.json'))
        if fallback:
            default_state = _FALLBACK_STATE_FILE
        else:
            default_state = os.path.join(tempfile.gettempdir(), 'gpufleet-nvml-sim-%s.json'
                                         % os.path.basename(host_path).rsplit('.', 1)[0])
        self.state_path = os.environ.get('GPUFLEET_NVML_SIM_STATE', default_state)
        self.calls = {}
        self.state = self._read_state()
        if not os.path.exists(self.state_path):
            self.save()  # so simctl can act on it between sessions
        self.gpus = [_Gpu(self, index, spec) for index, spec in enumerate(self.host.get('gpus', []))]

    def _read_state(self):
        state = None
        if os.path.exists(self.state_path):
            state = _load_json(self.state_path)
        if not state or 'uuid_seq' not in state:
            # A state file that simctl started (faults, a lost GPU) still gets the host's initial state.
            fresh = {'uuid_seq': 0, 'processes': list(self.host.get('processes', [])), 'faults': [],
                     'mutations': 0, 'gpus': {}}
            fresh.update(state or {})
            state = fresh
        for spec in self.host.get('gpus', []):
            # simctl may have marked a GPU (lost) before any session wrote its state.
            state['gpus'][spec['uuid']] = dict(fresh_gpu_state(spec), **state['gpus'].get(spec['uuid'], {}))
        return state

    def save(self):
        directory = os.path.dirname(os.path.abspath(self.state_path))
        if not os.path.isdir(directory):
            os.makedirs(directory)
        # The lab's stand-in driver (tests/lab/host/usr/local/lib/gpufleet-lab/driver) rewrites the processes under
        # this lock: without it, a save could land between its read and its rename and be lost.
        with open(self.state_path + '.lock', 'a') as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            fd, tmp = tempfile.mkstemp(dir=directory, prefix='.nvml-sim-')
            # Readable by every user, as the real driver answers queries from any user (an MPS daemon's, say).
            os.fchmod(fd, 0o644)
            with os.fdopen(fd, 'w') as handle:
                json.dump(self.state, handle, indent=1, sort_keys=True)
            os.rename(tmp, self.state_path)

    def count(self, function, mutation=False):
        """Count a call and raise an injected fault when its turn has come."""
        self.calls[function] = self.calls.get(function, 0) + 1
        if mutation:
            self.state['mutations'] = self.state.get('mutations', 0) + 1
            self.save()
        for fault in self.state.get('faults', []):
            if fault['function'] == function:
                if fault.get('skip', 0) > 0:
                    fault['skip'] -= 1
                    self.save()
                    continue
                self.state['faults'].remove(fault)
                self.save()
                _raise(fault.get('error', NVML_ERROR_UNKNOWN))


_sim = None
_init_count = 0


def _session(function, mutation=False):
    if _sim is None or _init_count == 0:
        _raise(NVML_ERROR_UNINITIALIZED)
    _sim.count(function, mutation)
    return _sim


def _gpu(handle):
    if isinstance(handle, _Gpu):
        _present(handle)
        return handle
    _raise(NVML_ERROR_INVALID_ARGUMENT)


def _present(gpu):
    """A GPU that has fallen off the bus (the host description's "lost", or simctl.lose_gpu) answers nothing."""
    if gpu.spec.get('lost') or gpu.state.get('lost'):
        _raise(NVML_ERROR_GPU_IS_LOST)
    return gpu


def _new_mig_uuid(sim, gpu, gi, ci_id, ci_start):
    """A new MIG device's UUID. NVML promises one only for the lifetime of the device, and whether a driver gives a
    device made again in the same place its old UUID is not documented: by default (simctl mig-uuids STATE new) every
    creation gets a new one; under `stable` a device made where one was (GPU, GPU instance profile and placement,
    compute instance placement) gets the same."""
    if sim.state.get('mig_uuids') == 'stable':
        name = '%s/%d@%d/%d' % (gpu.spec['uuid'], gi['profile_id'], gi['start'], ci_start)
    else:
        sim.state['uuid_seq'] += 1
        name = '%s/%d/%d/%d' % (gpu.spec['uuid'], gi['id'], ci_id, sim.state['uuid_seq'])
    return 'MIG-%s' % _uuid.uuid5(_uuid.NAMESPACE_URL, name)

# ---------------------------------------------------------------------------
# Initialisation and system queries


def nvmlInit():
    nvmlInitWithFlags(0)


def nvmlInitWithFlags(flags):
    global _sim, _init_count
    host_path = _host_file()[0]
    if not host_path:
        _raise(NVML_ERROR_LIBRARY_NOT_FOUND)
    driver = _load_json(host_path).get('driver')
    if driver is None:
        # A host without the NVIDIA driver has no libnvidia-ml.so.1.
        _raise(NVML_ERROR_LIBRARY_NOT_FOUND)
    if not driver.get('kernel_module_loaded', True):
        _raise(NVML_ERROR_DRIVER_NOT_LOADED)
    if driver.get('library_version_mismatch'):
        _raise(NVML_ERROR_LIB_RM_VERSION_MISMATCH)
    if _init_count == 0:
        _sim = _Sim()
    _init_count += 1
    _sim.count('nvmlInit')


def nvmlShutdown():
    global _init_count
    _session('nvmlShutdown')
    _init_count -= 1


def nvmlSystemGetDriverVersion():
    return _session('nvmlSystemGetDriverVersion').host['driver']['version']


def nvmlSystemGetNVMLVersion():
    return _session('nvmlSystemGetNVMLVersion').host['driver']['nvml_version']


def nvmlSystemGetCudaDriverVersion():
    return int(_session('nvmlSystemGetCudaDriverVersion').host['driver']['cuda_version'])


def nvmlSystemGetCudaDriverVersion_v2():
    return int(_session('nvmlSystemGetCudaDriverVersion_v2').host['driver']['cuda_version'])


def nvmlDeviceGetCount():
    return len(_session('nvmlDeviceGetCount').gpus)


def nvmlDeviceGetHandleByIndex(index):
    sim = _session('nvmlDeviceGetHandleByIndex')
    if not 0 <= int(index) < len(sim.gpus):
        _raise(NVML_ERROR_INVALID_ARGUMENT)
    return _present(sim.gpus[int(index)])


# ---------------------------------------------------------------------------
# Device queries


def nvmlDeviceGetUUID(handle):
    _session('nvmlDeviceGetUUID')
    if isinstance(handle, _MigDevice):
        for gi in handle.gpu.state['gpu_instances']:
            for ci in gi['compute_instances']:
                if gi['id'] == handle.gi_id and ci['id'] == handle.ci_id:
                    return ci['uuid']
        _raise(NVML_ERROR_INVALID_ARGUMENT)
    return _gpu(handle).spec['uuid']


def nvmlDeviceGetName(handle):
    _session('nvmlDeviceGetName')
    return _gpu(handle).model['name']


def nvmlDeviceGetPciInfo(handle):
    _session('nvmlDeviceGetPciInfo')
    gpu = _gpu(handle)
    bus_id = gpu.spec['pci_bus_id']
    domain, bus, rest = bus_id.split(':')
    device = rest.split('.')[0]
    legacy = '%04X:%s:%s' % (int(domain, 16), bus, rest)
    return nvmlPciInfo_t(busIdLegacy=legacy.encode(), domain=int(domain, 16), bus=int(bus, 16),
                         device=int(device, 16), pciDeviceId=int(gpu.model['pci_device_id'], 16),
                         pciSubSystemId=0, busId=bus_id.encode())


def nvmlDeviceGetMemoryInfo(handle, version=None):
    """A GPU's memory, or a MIG device's (its GPU instance's); used is what its compute processes use."""
    sim = _session('nvmlDeviceGetMemoryInfo')
    if isinstance(handle, _MigDevice):
        gpu = _present(handle.gpu)
        record = _GpuInstance(gpu, handle.gi_id).record()
        total_mb = gpu.profile_by_id(record['profile_id'])['memory_mb']
        processes = _processes_of(sim, gpu, handle.gi_id, handle.ci_id)
    else:
        gpu = _gpu(handle)
        total_mb = gpu.model['memory_mb']
        processes = _processes_of(sim, gpu)
    total = total_mb * 1024 * 1024
    used = min(sum(process.usedGpuMemory for process in processes), total)
    return c_nvmlMemory_t(total=total, free=total - used, used=used)


def nvmlDeviceGetPersistenceMode(handle):
    _session('nvmlDeviceGetPersistenceMode')
    return _gpu(handle).state['persistence_mode']


def nvmlDeviceGetComputeMode(handle):
    _session('nvmlDeviceGetComputeMode')
    return _gpu(handle).state['compute_mode']


def nvmlDeviceSetComputeMode(handle, mode):
    sim = _session('nvmlDeviceSetComputeMode', mutation=True)
    gpu = _gpu(handle)
    if mode not in (NVML_COMPUTEMODE_DEFAULT, NVML_COMPUTEMODE_PROHIBITED, NVML_COMPUTEMODE_EXCLUSIVE_PROCESS):
        _raise(NVML_ERROR_INVALID_ARGUMENT)
    if gpu.state['mig_current'] and mode == NVML_COMPUTEMODE_EXCLUSIVE_PROCESS:
        # Exclusive-process compute mode does not exist under MIG.
        _raise(NVML_ERROR_NOT_SUPPORTED)
    gpu.state['compute_mode'] = mode
    sim.save()
    return None


def _affinity_words(bits, size):
    words = (ctypes.c_ulonglong * size)()
    for bit in bits:
        if bit // 64 < size:
            words[bit // 64] |= 1 << (bit % 64)
    return words


def _node_cpus(sim, node_id):
    from_cpulist = []
    for node in sim.host['numa_nodes']:
        if node['id'] == node_id:
            for part in [p for p in node['cpus'].split(',') if p.strip()]:
                low, _sep, high = part.partition('-')
                from_cpulist.extend(range(int(low), int(high or low) + 1))
    return from_cpulist


def nvmlDeviceGetCpuAffinity(handle, cpuSetSize):
    sim = _session('nvmlDeviceGetCpuAffinity')
    gpu = _gpu(handle)
    node = gpu.spec.get('numa_node')
    cpus = _node_cpus(sim, node) if node is not None and gpu.spec.get('nvml_affinity', True) else []
    return _affinity_words(cpus, cpuSetSize)


def nvmlDeviceGetMemoryAffinity(handle, nodeSetSize, scope):
    _session('nvmlDeviceGetMemoryAffinity')
    gpu = _gpu(handle)
    node = gpu.spec.get('numa_node')
    if scope != NVML_AFFINITY_SCOPE_NODE:
        _raise(NVML_ERROR_INVALID_ARGUMENT)
    nodes = [node] if node is not None and gpu.spec.get('nvml_affinity', True) else []
    return _affinity_words(nodes, nodeSetSize)


def nvmlDeviceGetTopologyCommonAncestor(device1, device2):
    _session('nvmlDeviceGetTopologyCommonAncestor')
    a, b = _gpu(device1).spec, _gpu(device2).spec
    if a['uuid'] == b['uuid']:
        return NVML_TOPOLOGY_INTERNAL
    if a.get('pcie_switch') and a.get('pcie_switch') == b.get('pcie_switch'):
        return NVML_TOPOLOGY_SINGLE
    if a.get('host_bridge') and a.get('host_bridge') == b.get('host_bridge'):
        return NVML_TOPOLOGY_HOSTBRIDGE
    if a.get('numa_node') is not None and a.get('numa_node') == b.get('numa_node'):
        return NVML_TOPOLOGY_NODE
    return NVML_TOPOLOGY_SYSTEM


def _nvlinks(gpu):
    """The GPU's links as a list of remote bus ids, or 'switch' entries."""
    spec = gpu.spec.get('nvlink')
    if not spec:
        _raise(NVML_ERROR_NOT_SUPPORTED)
    links = ['switch'] * int(spec.get('switch_links', 0))
    for bus_id, count in sorted(spec.get('peers', {}).items()):
        links.extend([bus_id] * int(count))
    return links


def nvmlDeviceGetNvLinkState(device, link):
    _session('nvmlDeviceGetNvLinkState')
    links = _nvlinks(_gpu(device))
    if not 0 <= link < NVML_NVLINK_MAX_LINKS:
        _raise(NVML_ERROR_INVALID_ARGUMENT)
    return NVML_FEATURE_ENABLED if link < len(links) else NVML_FEATURE_DISABLED


def nvmlDeviceGetNvLinkRemoteDeviceType(handle, link):
    _session('nvmlDeviceGetNvLinkRemoteDeviceType')
    links = _nvlinks(_gpu(handle))
    if not 0 <= link < len(links):
        _raise(NVML_ERROR_INVALID_ARGUMENT)
    return NVML_NVLINK_DEVICE_TYPE_SWITCH if links[link] == 'switch' else NVML_NVLINK_DEVICE_TYPE_GPU


def nvmlDeviceGetNvLinkRemotePciInfo(device, link):
    _session('nvmlDeviceGetNvLinkRemotePciInfo')
    links = _nvlinks(_gpu(device))
    if not 0 <= link < len(links):
        _raise(NVML_ERROR_INVALID_ARGUMENT)
    remote = links[link] if links[link] != 'switch' else '00000000:00:00.0'
    return nvmlPciInfo_t(busId=remote.encode())


def _processes_of(sim, gpu, gi_id=None, ci_id=None):
    found = []
    # simctl.set_process_memory: what a process uses, kept apart from the process list the lab's driver rewrites.
    memory = sim.state.get('process_memory', {})
    for proc in sim.state.get('processes', []):
        if proc['gpu_uuid'] != gpu.spec['uuid']:
            continue
        if gi_id is not None and (proc.get('gpu_instance_id'), proc.get('compute_instance_id')) != (gi_id, ci_id):
            continue
        found.append(nvmlFriendlyObject({
            'pid': proc['pid'],
            'usedGpuMemory': memory.get(str(proc['pid']), proc.get('used_memory_mb', 0)) * 1024 * 1024,
            'gpuInstanceId': proc.get('gpu_instance_id', 0xFFFFFFFF),
            'computeInstanceId': proc.get('compute_instance_id', 0xFFFFFFFF),
        }))
    return found


def nvmlDeviceGetComputeRunningProcesses(handle):
    sim = _session('nvmlDeviceGetComputeRunningProcesses')
    if isinstance(handle, _MigDevice):
        return _processes_of(sim, _present(handle.gpu), handle.gi_id, handle.ci_id)
    return _processes_of(sim, _gpu(handle))


nvmlDeviceGetComputeRunningProcesses_v3 = nvmlDeviceGetComputeRunningProcesses

# ---------------------------------------------------------------------------
# MIG


def _mig_gpu(handle):
    gpu = _gpu(handle)
    if not gpu.profiles():
        _raise(NVML_ERROR_NOT_SUPPORTED)
    return gpu


def nvmlDeviceGetMigMode(device):
    _session('nvmlDeviceGetMigMode')
    gpu = _mig_gpu(device)
    return [gpu.state['mig_current'], gpu.state['mig_pending']]


def nvmlDeviceSetMigMode(device, mode):
    """Hopper switches at once; Ampere needs a GPU reset, which the driver tries itself."""
    sim = _session('nvmlDeviceSetMigMode', mutation=True)
    gpu = _mig_gpu(device)
    if mode not in (NVML_DEVICE_MIG_DISABLE, NVML_DEVICE_MIG_ENABLE):
        _raise(NVML_ERROR_INVALID_ARGUMENT)
    if gpu.state['gpu_instances'] and mode == NVML_DEVICE_MIG_DISABLE:
        _raise(NVML_ERROR_IN_USE)
    busy = bool(_processes_of(sim, gpu))
    gpu.state['mig_pending'] = mode
    if gpu.model['architecture'] == 'hopper':
        if busy:
            gpu.state['mig_pending'] = gpu.state['mig_current']
            sim.save()
            _raise(NVML_ERROR_IN_USE)
        gpu.state['mig_current'] = mode
        status = NVML_SUCCESS
    elif busy:
        status = NVML_ERROR_IN_USE
    elif gpu.spec.get('reset_blocked_by'):
        status = NVML_ERROR_RESET_REQUIRED
    else:
        gpu.state['mig_current'] = mode
        status = NVML_SUCCESS
    if gpu.state['mig_current'] == NVML_DEVICE_MIG_ENABLE and gpu.state['compute_mode'] == \
            NVML_COMPUTEMODE_EXCLUSIVE_PROCESS:
        gpu.state['compute_mode'] = NVML_COMPUTEMODE_DEFAULT
    sim.save()
    return status


def _profile_by_index(gpu, profile):
    for candidate in gpu.profiles():
        if candidate['profile'] == profile:
            return candidate
    _raise(NVML_ERROR_NOT_SUPPORTED)


def _fill_gi_profile(info, profile):
    info.id = profile['id']
    info.isP2pSupported = 0
    info.sliceCount = profile['compute_slices']
    info.instanceCount = profile['max_count']
    info.multiprocessorCount = profile['multiprocessor_count']
    info.copyEngineCount = profile['copy_engines']
    info.decoderCount = profile['decoders']
    info.encoderCount = profile['encoders']
    info.jpegCount = profile['jpeg']
    info.ofaCount = profile['ofa']
    info.memorySizeMB = profile['memory_mb']
    return info


def nvmlDeviceGetGpuInstanceProfileInfo(device, profile, version=2):
    _session('nvmlDeviceGetGpuInstanceProfileInfo')
    gpu = _mig_gpu(device)
    if version not in (1, 2):
        _raise(NVML_ERROR_FUNCTION_NOT_FOUND)
    if not 0 <= profile < NVML_GPU_INSTANCE_PROFILE_COUNT:
        _raise(NVML_ERROR_INVALID_ARGUMENT)
    entry = _profile_by_index(gpu, profile)
    if version == 1:
        return _fill_gi_profile(c_nvmlGpuInstanceProfileInfo_t(), entry)
    info = _fill_gi_profile(c_nvmlGpuInstanceProfileInfo_v2_t(), entry)
    info.name = ('MIG %s' % entry['name']).encode()
    return info


nvmlDeviceGetGpuInstanceProfileInfoV = nvmlDeviceGetGpuInstanceProfileInfo


def _gi_profile(gpu, profile_id):
    profile = gpu.profile_by_id(profile_id)
    if profile is None:
        _raise(NVML_ERROR_INVALID_ARGUMENT)
    return profile


def _require_mig_enabled(gpu):
    if not gpu.state['mig_current']:
        _raise(NVML_ERROR_INVALID_STATE)


def _placement_free(gpu, profile, start):
    """Whether a GPU instance of this profile fits at start, under NVML's rules."""
    size = profile['memory_slices']
    wanted = set(range(start, start + size))
    used_compute = 0
    same_profile = 0
    for gi in gpu.state['gpu_instances']:
        if wanted & set(range(gi['start'], gi['start'] + gi['size'])):
            return False
        existing = gpu.profile_by_id(gi['profile_id'])
        used_compute += existing['compute_slices']
        same_profile += 1 if gi['profile_id'] == profile['id'] else 0
    if same_profile >= profile['max_count']:
        return False
    return used_compute + profile['compute_slices'] <= _COMPUTE_SLICES


def _gi_id_for(profile, start):
    """GPU-instance ids follow the slot, as NVIDIA's driver numbers them."""
    size = profile['memory_slices']
    base = {8: 0, 4: 1, 2: 3, 1: 7}[size]
    return base + start // size


def nvmlDeviceGetGpuInstancePossiblePlacements(device, profileId, placementsRef, countRef):
    _session('nvmlDeviceGetGpuInstancePossiblePlacements')
    gpu = _mig_gpu(device)
    profile = _gi_profile(gpu, profileId)
    starts = profile['placement_starts']
    count = countRef._obj
    if placementsRef is None:
        count.value = len(starts)
        return NVML_SUCCESS
    if count.value < len(starts) or len(placementsRef) < len(starts):
        count.value = len(starts)
        _raise(NVML_ERROR_INSUFFICIENT_SIZE)
    for slot, start in enumerate(starts):
        placementsRef[slot].start = start
        placementsRef[slot].size = profile['memory_slices']
    count.value = len(starts)
    return NVML_SUCCESS


def nvmlDeviceGetGpuInstanceRemainingCapacity(device, profileId):
    _session('nvmlDeviceGetGpuInstanceRemainingCapacity')
    gpu = _mig_gpu(device)
    _require_mig_enabled(gpu)
    profile = _gi_profile(gpu, profileId)
    # How many more of this profile fit, filling placements greedily as NVML does.
    trial = [dict(gi) for gi in gpu.state['gpu_instances']]
    added = 0
    saved = gpu.state['gpu_instances']
    try:
        gpu.state['gpu_instances'] = trial
        for start in sorted(profile['placement_starts'], reverse=True):
            if _placement_free(gpu, profile, start):
                trial.append({'id': -1, 'profile_id': profile['id'], 'start': start,
                              'size': profile['memory_slices'], 'compute_instances': []})
                added += 1
    finally:
        gpu.state['gpu_instances'] = saved
    return added


def _create_gi(sim, gpu, profile, start):
    record = {'id': _gi_id_for(profile, start), 'profile_id': profile['id'], 'start': start,
              'size': profile['memory_slices'], 'compute_instances': []}
    gpu.state['gpu_instances'].append(record)
    gpu.state['gpu_instances'].sort(key=lambda gi: gi['id'])
    sim.save()
    return _GpuInstance(gpu, record['id'])


def nvmlDeviceCreateGpuInstance(device, profileId):
    sim = _session('nvmlDeviceCreateGpuInstance', mutation=True)
    gpu = _mig_gpu(device)
    _require_mig_enabled(gpu)
    profile = _gi_profile(gpu, profileId)
    # The driver takes the highest free slot, which is why small profiles created first can strand a 3g.
    for start in sorted(profile['placement_starts'], reverse=True):
        if _placement_free(gpu, profile, start):
            return _create_gi(sim, gpu, profile, start)
    _raise(NVML_ERROR_INSUFFICIENT_RESOURCES)


def nvmlDeviceCreateGpuInstanceWithPlacement(device, profileId, placement):
    sim = _session('nvmlDeviceCreateGpuInstanceWithPlacement', mutation=True)
    gpu = _mig_gpu(device)
    _require_mig_enabled(gpu)
    profile = _gi_profile(gpu, profileId)
    placement = getattr(placement, '_obj', placement)
    if placement.start not in profile['placement_starts'] or placement.size != profile['memory_slices']:
        _raise(NVML_ERROR_INVALID_ARGUMENT)
    if not _placement_free(gpu, profile, placement.start):
        _raise(NVML_ERROR_INSUFFICIENT_RESOURCES)
    return _create_gi(sim, gpu, profile, placement.start)


def nvmlDeviceGetGpuInstances(device, profileId, gpuInstancesRef, countRef):
    _session('nvmlDeviceGetGpuInstances')
    gpu = _mig_gpu(device)
    _require_mig_enabled(gpu)
    _gi_profile(gpu, profileId)
    found = [gi for gi in gpu.state['gpu_instances'] if gi['profile_id'] == profileId]
    count = countRef._obj
    if gpuInstancesRef is None or len(gpuInstancesRef) < len(found):
        count.value = len(found)
        _raise(NVML_ERROR_INSUFFICIENT_SIZE)
    for slot, gi in enumerate(found):
        gpuInstancesRef[slot] = _GpuInstance(gpu, gi['id'])
    count.value = len(found)
    return NVML_SUCCESS


def nvmlDeviceGetGpuInstanceById(device, gpuInstanceId):
    _session('nvmlDeviceGetGpuInstanceById')
    gpu = _mig_gpu(device)
    _require_mig_enabled(gpu)
    for gi in gpu.state['gpu_instances']:
        if gi['id'] == gpuInstanceId:
            return _GpuInstance(gpu, gi['id'])
    _raise(NVML_ERROR_NOT_FOUND)


def nvmlGpuInstanceGetInfo(gpuInstance):
    _session('nvmlGpuInstanceGetInfo')
    gi = gpuInstance.record()
    return c_nvmlGpuInstanceInfo_t(gpuInstance.gpu, gi['id'], gi['profile_id'], gi['start'], gi['size'])


def nvmlGpuInstanceDestroy(gpuInstance):
    sim = _session('nvmlGpuInstanceDestroy', mutation=True)
    gi = gpuInstance.record()
    if gi['compute_instances']:
        _raise(NVML_ERROR_IN_USE)
    gpuInstance.gpu.state['gpu_instances'].remove(gi)
    sim.save()
    return NVML_SUCCESS


def _ci_sizes(sim, gi_record, gpu):
    compute = gpu.profile_by_id(gi_record['profile_id'])['compute_slices']
    return compute, sim.models['compute_instance_sizes'][str(compute)]


def _ci_profile(sim, gpu_instance, profile):
    gpu = gpu_instance.gpu
    gi = gpu_instance.record()
    compute, sizes = _ci_sizes(sim, gi, gpu)
    for size in sizes:
        if _CI_PROFILE_OF_SIZE[size] == profile:
            sm_per_slice = gpu.profile_by_id(gi['profile_id'])['multiprocessor_count'] // compute
            return {'id': profile, 'size': size, 'max_count': compute // size,
                    'sm': sm_per_slice * size, 'gi_compute': compute,
                    'name': ('%dg' % compute if size == compute else '%dc.%dg' % (size, compute))}
    _raise(NVML_ERROR_NOT_SUPPORTED)


def nvmlGpuInstanceGetComputeInstanceProfileInfo(device, profile, engProfile, version=2):
    sim = _session('nvmlGpuInstanceGetComputeInstanceProfileInfo')
    if engProfile != NVML_COMPUTE_INSTANCE_ENGINE_PROFILE_SHARED:
        _raise(NVML_ERROR_NOT_SUPPORTED)
    if not 0 <= profile < NVML_COMPUTE_INSTANCE_PROFILE_COUNT:
        _raise(NVML_ERROR_INVALID_ARGUMENT)
    entry = _ci_profile(sim, device, profile)
    gi_profile = device.gpu.profile_by_id(device.record()['profile_id'])
    info = c_nvmlComputeInstanceProfileInfo_v2_t() if version == 2 else c_nvmlComputeInstanceProfileInfo_t()
    info.id = entry['id']
    info.sliceCount = entry['size']
    info.instanceCount = entry['max_count']
    info.multiprocessorCount = entry['sm']
    info.sharedCopyEngineCount = gi_profile['copy_engines']
    info.sharedDecoderCount = gi_profile['decoders']
    info.sharedEncoderCount = gi_profile['encoders']
    info.sharedJpegCount = gi_profile['jpeg']
    info.sharedOfaCount = gi_profile['ofa']
    if version == 2:
        suffix = gi_profile['name'].split('.', 1)[1]
        info.name = ('MIG %s.%s' % (entry['name'], suffix)
                     if entry['size'] != entry['gi_compute'] else 'MIG %s' % gi_profile['name']).encode()
    return info


def _ci_fits(gi, size, start):
    wanted = set(range(start, start + size))
    return not any(wanted & set(range(ci['start'], ci['start'] + ci['size'])) for ci in gi['compute_instances'])


def nvmlGpuInstanceGetComputeInstanceRemainingCapacity(gpuInstance, profileId):
    sim = _session('nvmlGpuInstanceGetComputeInstanceRemainingCapacity')
    entry = _ci_profile(sim, gpuInstance, profileId)
    gi = gpuInstance.record()
    taken = list(gi['compute_instances'])
    free = 0
    for start in range(0, entry['gi_compute'] - entry['size'] + 1, entry['size']):
        if _ci_fits({'compute_instances': taken}, entry['size'], start):
            taken.append({'start': start, 'size': entry['size']})
            free += 1
    return free


def nvmlGpuInstanceCreateComputeInstance(gpuInstance, profileId):
    sim = _session('nvmlGpuInstanceCreateComputeInstance', mutation=True)
    entry = _ci_profile(sim, gpuInstance, profileId)
    gi = gpuInstance.record()
    # Like GPU instances, compute instances take the highest free slot.
    for start in reversed(range(0, entry['gi_compute'] - entry['size'] + 1, entry['size'])):
        if _ci_fits(gi, entry['size'], start):
            used_ids = set(ci['id'] for ci in gi['compute_instances'])
            ci_id = min(i for i in range(0, 8) if i not in used_ids)
            gi['compute_instances'].append({
                'id': ci_id, 'profile_id': profileId, 'start': start, 'size': entry['size'],
                'uuid': _new_mig_uuid(sim, gpuInstance.gpu, gi, ci_id, start)})
            gi['compute_instances'].sort(key=lambda ci: ci['id'])
            sim.save()
            return _ComputeInstance(gpuInstance, ci_id)
    _raise(NVML_ERROR_INSUFFICIENT_RESOURCES)


def nvmlGpuInstanceGetComputeInstances(gpuInstance, profileId, computeInstancesRef, countRef):
    _session('nvmlGpuInstanceGetComputeInstances')
    gi = gpuInstance.record()
    found = [ci for ci in gi['compute_instances'] if ci['profile_id'] == profileId]
    count = countRef._obj
    if computeInstancesRef is None or len(computeInstancesRef) < len(found):
        count.value = len(found)
        _raise(NVML_ERROR_INSUFFICIENT_SIZE)
    for slot, ci in enumerate(found):
        computeInstancesRef[slot] = _ComputeInstance(gpuInstance, ci['id'])
    count.value = len(found)
    return NVML_SUCCESS


def nvmlGpuInstanceGetComputeInstanceById(gpuInstance, computeInstanceId):
    _session('nvmlGpuInstanceGetComputeInstanceById')
    for ci in gpuInstance.record()['compute_instances']:
        if ci['id'] == computeInstanceId:
            return _ComputeInstance(gpuInstance, ci['id'])
    _raise(NVML_ERROR_NOT_FOUND)


def nvmlComputeInstanceGetInfo(computeInstance):
    _session('nvmlComputeInstanceGetInfo')
    ci = computeInstance.record()
    return c_nvmlComputeInstanceInfo_t(computeInstance.gi.gpu, computeInstance.gi, ci['id'], ci['profile_id'],
                                       ci['start'], ci['size'])


nvmlComputeInstanceGetInfo_v2 = nvmlComputeInstanceGetInfo


def nvmlComputeInstanceDestroy(computeInstance):
    sim = _session('nvmlComputeInstanceDestroy', mutation=True)
    gi = computeInstance.gi.record()
    ci = computeInstance.record()
    if _processes_of(sim, computeInstance.gi.gpu, gi['id'], ci['id']):
        _raise(NVML_ERROR_IN_USE)
    gi['compute_instances'].remove(ci)
    sim.save()
    return NVML_SUCCESS


def nvmlDeviceGetMaxMigDeviceCount(device):
    _session('nvmlDeviceGetMaxMigDeviceCount')
    gpu = _gpu(device)
    return _COMPUTE_SLICES if gpu.profiles() else 0


def _mig_devices(gpu):
    return [(gi['id'], ci['id']) for gi in gpu.state['gpu_instances'] for ci in gi['compute_instances']]


def nvmlDeviceGetMigDeviceHandleByIndex(device, index):
    _session('nvmlDeviceGetMigDeviceHandleByIndex')
    gpu = _mig_gpu(device)
    devices = _mig_devices(gpu)
    if not 0 <= index < _COMPUTE_SLICES:
        _raise(NVML_ERROR_INVALID_ARGUMENT)
    if index >= len(devices):
        _raise(NVML_ERROR_NOT_FOUND)
    return _MigDevice(gpu, devices[index][0], devices[index][1])


def nvmlDeviceGetGpuInstanceId(device):
    _session('nvmlDeviceGetGpuInstanceId')
    if not isinstance(device, _MigDevice):
        _raise(NVML_ERROR_INVALID_ARGUMENT)
    return device.gi_id


def nvmlDeviceGetComputeInstanceId(device):
    _session('nvmlDeviceGetComputeInstanceId')
    if not isinstance(device, _MigDevice):
        _raise(NVML_ERROR_INVALID_ARGUMENT)
    return device.ci_id

# ---------------------------------------------------------------------------
# Events. The driver's record of Xid errors is a JSON-lines file beside the state (xid_log_path), appended by
# simctl.inject_xid; the kernel log line of each is there too, for the journalctl stand-in. As in NVML, a set sees
# only the events that come after a device was registered in it.


def xid_log_path(state_path):
    """Where the simulated driver records Xid errors: STATE without .json, then .xid.jsonl."""
    return os.path.splitext(state_path)[0] + '.xid.jsonl'


def read_xid_log(state_path):
    records = []
    try:
        with open(xid_log_path(state_path)) as handle:
            for line in handle:
                if line.strip():
                    records.append(json.loads(line))
    except (IOError, OSError):
        pass
    return records


class _EventSet(object):
    def __init__(self):
        self.devices = {}  # GPU UUID -> (event types, last record seq when registered)
        self.delivered = set()
        self.freed = False


def _event_set(event_set):
    if not isinstance(event_set, _EventSet) or event_set.freed:
        _raise(NVML_ERROR_INVALID_ARGUMENT)
    return event_set


def nvmlEventSetCreate():
    _session('nvmlEventSetCreate')
    return _EventSet()


def nvmlDeviceGetSupportedEventTypes(handle):
    _session('nvmlDeviceGetSupportedEventTypes')
    _gpu(handle)
    return _SUPPORTED_EVENT_TYPES


def nvmlDeviceRegisterEvents(handle, eventTypes, eventSet):
    sim = _session('nvmlDeviceRegisterEvents')
    gpu = _gpu(handle)
    event_set = _event_set(eventSet)
    if eventTypes & ~_SUPPORTED_EVENT_TYPES:
        _raise(NVML_ERROR_NOT_SUPPORTED)
    records = read_xid_log(sim.state_path)
    event_set.devices[gpu.spec['uuid']] = (eventTypes, records[-1]['seq'] if records else 0)
    return None


def _sim_gpu(sim, uuid):
    for gpu in sim.gpus:
        if gpu.spec['uuid'] == uuid:
            return gpu
    return None


def nvmlEventSetWait_v2(eventSet, timeoutms):
    """The next event of a registered device, waiting up to timeoutms; NVML_ERROR_TIMEOUT when none comes."""
    sim = _session('nvmlEventSetWait_v2')
    event_set = _event_set(eventSet)
    deadline = time.monotonic() + timeoutms / 1000.0
    while True:
        for record in read_xid_log(sim.state_path):
            types, after = event_set.devices.get(record['gpu_uuid'], (0, 0))
            if not types & nvmlEventTypeXidCriticalError or record['seq'] <= after \
                    or record['seq'] in event_set.delivered:
                continue
            event_set.delivered.add(record['seq'])
            data = c_nvmlEventData_t()
            data.device = _sim_gpu(sim, record['gpu_uuid'])
            data.eventType = nvmlEventTypeXidCriticalError
            data.eventData = record['xid']
            gi_id, ci_id = record.get('gpu_instance_id'), record.get('compute_instance_id')
            data.gpuInstanceId = _NO_INSTANCE if gi_id is None else gi_id
            data.computeInstanceId = _NO_INSTANCE if ci_id is None else ci_id
            return data
        state = _load_json(sim.state_path) if os.path.exists(sim.state_path) else sim.state
        for uuid in event_set.devices:
            if state.get('gpus', {}).get(uuid, {}).get('lost'):
                _raise(NVML_ERROR_GPU_IS_LOST)
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            _raise(NVML_ERROR_TIMEOUT)
        time.sleep(min(remaining, 0.02))


def nvmlEventSetWait(eventSet, timeoutms):
    return nvmlEventSetWait_v2(eventSet, timeoutms)


def nvmlEventSetFree(eventSet):
    _session('nvmlEventSetFree')
    _event_set(eventSet).freed = True
    return None
