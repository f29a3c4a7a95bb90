# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""Every public exception our module_utils define derives from GpufleetError, so one except clause catches our refusals."""

from __future__ import absolute_import, division, print_function

import importlib
import inspect
import os

import pytest

from ansible_collections.gpufleet.core.plugins.module_utils import _errors
from ansible_collections.gpufleet.core.plugins.module_utils._errors import GpufleetError

PACKAGE = 'ansible_collections.gpufleet.core.plugins.module_utils'
MODULE_UTILS = os.path.dirname(os.path.abspath(_errors.__file__))


def module_utils_modules():
    return sorted(name[:-len('.py')] for name in os.listdir(MODULE_UTILS)
                  if name.endswith('.py') and name != '__init__.py')


def public_exceptions(module):
    return [value for name, value in sorted(vars(module).items())
            if inspect.isclass(value) and issubclass(value, BaseException) and not name.startswith('_')
            and value.__module__ == module.__name__]


def test_every_public_exception_derives_from_gpufleet_error():
    offenders = []
    for name in module_utils_modules():
        module = importlib.import_module('%s.%s' % (PACKAGE, name))
        offenders.extend('%s.%s(%s)' % (name, cls.__name__, ', '.join(base.__name__ for base in cls.__bases__))
                         for cls in public_exceptions(module) if not issubclass(cls, GpufleetError))
    assert not offenders, 'exceptions that do not derive from GpufleetError: ' + '; '.join(offenders)


def test_the_walk_finds_exceptions():
    # Guards the test above against passing because it found nothing.
    found = [cls.__name__ for name in module_utils_modules()
             for cls in public_exceptions(importlib.import_module('%s.%s' % (PACKAGE, name)))]
    assert {'GpufleetError', 'CpuListError', 'MigError', 'NvmlError', 'OpenPgpError'} <= set(found)


@pytest.mark.parametrize('module, name, old_base', [
    ('_cpulist', 'CpuListError', ValueError),
    ('_mig_plan', 'LayoutError', ValueError),
    ('_openpgp', 'OpenPgpError', ValueError),
    ('_host', 'HostFilesError', Exception),
    ('_compute_mode', 'ComputeModeError', Exception),
    ('_mig', 'MigError', Exception),
    ('_mig', 'MigApplyError', Exception),
    ('_mps_control', 'MpsControlError', Exception),
    ('_nvml', 'NvmlError', Exception),
    ('_sysfs_topology', 'TopologyReadError', Exception),
])
def test_callers_that_catch_the_old_base_still_catch_it(module, name, old_base):
    cls = getattr(importlib.import_module('%s.%s' % (PACKAGE, module)), name)
    with pytest.raises(old_base):
        raise cls('refused')
    with pytest.raises(GpufleetError):
        raise cls('refused')
