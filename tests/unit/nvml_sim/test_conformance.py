# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""The simulator against the real nvidia-ml-py: same names, signatures, constants and error classes.

A test is only as honest as the simulator; this keeps it from drifting from the real package.
"""

from __future__ import absolute_import, division, print_function

import importlib.machinery
import importlib.util
import inspect
import os
import sys

import pytest

import pynvml as sim

from ..support.sim import SIM_DIR


@pytest.fixture(scope='module')
def real():
    path = [entry for entry in sys.path if os.path.abspath(entry or '.') != SIM_DIR]
    spec = importlib.machinery.PathFinder.find_spec('pynvml', path)
    if spec is None:
        pytest.fail('nvidia-ml-py is not installed in the test environment; install tests/testbed/requirements.txt')
    module = importlib.util.module_from_spec(spec)
    # nvidia-ml-py attaches its error classes to sys.modules['pynvml']: let that be the real module
    # while it loads, so the simulator is left untouched.
    saved = sys.modules.get('pynvml')
    sys.modules['pynvml'] = module
    try:
        spec.loader.exec_module(module)
    finally:
        sys.modules['pynvml'] = saved
    return module


def sim_functions():
    return sorted(name for name, value in vars(sim).items()
                  if name.startswith('nvml') and callable(value) and not inspect.isclass(value))


def test_the_simulator_is_not_the_real_package(real):
    assert os.path.dirname(os.path.abspath(real.__file__)) != SIM_DIR
    assert sim.__file__.startswith(SIM_DIR)


@pytest.mark.parametrize('name', sim_functions())
def test_every_function_exists_in_nvidia_ml_py_with_the_same_parameters(real, name):
    assert hasattr(real, name), '%s is not an nvidia-ml-py function' % name
    real_params = list(inspect.signature(getattr(real, name)).parameters)
    sim_params = list(inspect.signature(getattr(sim, name)).parameters)
    assert sim_params == real_params


def test_constants_have_the_real_values(real):
    names = [name for name in vars(sim) if name.startswith('NVML_') and isinstance(getattr(sim, name), int)]
    assert len(names) > 60
    wrong = dict((name, (getattr(sim, name), getattr(real, name, 'missing')))
                 for name in names if getattr(real, name, None) != getattr(sim, name))
    assert wrong == {}


def test_error_classes_match(real):
    sim_classes = sorted(name for name in vars(sim) if name.startswith('NVMLError_'))
    real_classes = sorted(name for name in vars(real) if name.startswith('NVMLError_'))
    assert sim_classes == real_classes
    for name in sim_classes:
        assert getattr(sim, name)().value == getattr(real, name)().value
    # NVMLError(code) becomes the subclass for that code, in both.
    assert type(sim.NVMLError(sim.NVML_ERROR_NOT_SUPPORTED)).__name__ == 'NVMLError_NotSupported'
    assert type(real.NVMLError(real.NVML_ERROR_NOT_SUPPORTED)).__name__ == 'NVMLError_NotSupported'
    assert str(sim.NVMLError_LibraryNotFound()) == str(real.NVMLError_LibraryNotFound())


@pytest.mark.parametrize('struct', ['nvmlPciInfo_t', 'c_nvmlGpuInstancePlacement_t',
                                    'c_nvmlGpuInstanceProfileInfo_t', 'c_nvmlGpuInstanceProfileInfo_v2_t',
                                    'c_nvmlComputeInstanceProfileInfo_t', 'c_nvmlComputeInstanceProfileInfo_v2_t',
                                    'c_nvmlComputeInstancePlacement_t'])
def test_structures_have_the_real_fields(real, struct):
    def fields(module):
        return [(name, kind._type_ if hasattr(kind, '_length_') else kind)
                for name, kind in getattr(module, struct)._fields_]
    assert [name for name, _kind in fields(sim)] == [name for name, _kind in fields(real)]


def test_real_package_without_a_driver_raises_library_not_found(real):
    # On this machine there is no libnvidia-ml.so.1; the real package reports it the way the simulator does.
    with pytest.raises(real.NVMLError) as caught:
        real.nvmlInit()
    assert type(caught.value).__name__ == 'NVMLError_LibraryNotFound'
