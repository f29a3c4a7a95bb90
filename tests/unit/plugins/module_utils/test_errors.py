# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""Every error our code raises derives from GpufleetError, so one except clause catches our refusals: every public
exception module_utils defines, and every raise statement in module_utils and plugin_utils (where an adapter may also
raise ansible-core's errors, AnsibleFilterError and AnsibleActionFail, which is how Ansible reports a refusal)."""

from __future__ import absolute_import, division, print_function

import ast
import importlib
import inspect
import os
import types

import pytest
from ansible.errors import AnsibleError

from ansible_collections.gpufleet.core.plugins.module_utils import _errors
from ansible_collections.gpufleet.core.plugins.module_utils._errors import GpufleetError

PACKAGE = 'ansible_collections.gpufleet.core.plugins.module_utils'
MODULE_UTILS = os.path.dirname(os.path.abspath(_errors.__file__))
PLUGINS = os.path.dirname(MODULE_UTILS)
# Each walked directory (under plugins/) and what its raise statements may raise.
ALLOWED_RAISES = {'module_utils': (GpufleetError,), 'plugin_utils': (GpufleetError, AnsibleError)}


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


def python_files(directory):
    """Each .py file under plugins/<directory>, subfolders included, as (module name, path)."""
    for root, folders, names in os.walk(os.path.join(PLUGINS, directory)):
        folders.sort()
        for name in sorted(names):
            if name.endswith('.py'):
                relative = os.path.relpath(os.path.join(root, name), PLUGINS)[:-len('.py')].split(os.sep)
                if relative[-1] == '__init__':
                    relative.pop()
                yield 'ansible_collections.gpufleet.core.plugins.' + '.'.join(relative), os.path.join(root, name)


def _dotted(node):
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        inner = _dotted(node.value)
        return inner and inner + '.' + node.attr
    return None


def foreign_raises(module, tree, allowed):
    """'line N raises X' for each raise statement in the module's tree whose exception is not a subclass of one of
    allowed. A bare raise re-raises what was caught and passes; a name the module does not bind (a local variable, a
    call's result) cannot be checked, so it is refused too."""
    offenders = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Raise) or node.exc is None:
            continue
        named = node.exc.func if isinstance(node.exc, ast.Call) else node.exc
        dotted, found = _dotted(named), module
        for part in (dotted or '?').split('.'):
            found = getattr(found, part, None)
        if not (inspect.isclass(found) and issubclass(found, allowed)):
            offenders.append((node.lineno, dotted or ast.dump(named)))
    return ['line %d raises %s' % offender for offender in sorted(offenders)]


@pytest.mark.parametrize('directory', sorted(ALLOWED_RAISES))
def test_every_raise_raises_our_error(directory):
    offenders = []
    for name, path in python_files(directory):
        with open(path) as handle:
            tree = ast.parse(handle.read())
        offenders.extend('%s: %s' % (os.path.relpath(path, PLUGINS), offender)
                         for offender in foreign_raises(importlib.import_module(name), tree, ALLOWED_RAISES[directory]))
    assert not offenders, 'raise a GpufleetError subclass instead: ' + '; '.join(offenders)


def test_the_raise_walk_sees_what_it_refuses():
    source = ('from ansible_collections.gpufleet.core.plugins.module_utils import _errors\n'
              'class Mine(_errors.GpufleetError):\n    pass\n'
              'def f(x):\n'
              '    if x == 1:\n        raise ValueError("no")\n'
              '    if x == 2:\n        raise Mine("ok")\n'
              '    if x == 3:\n        raise _errors.GpufleetError\n'
              '    if x == 4:\n        raise KeyError\n'
              '    try:\n        pass\n    except Mine as exc:\n        raise\n'
              '    raise exc\n')
    module = types.ModuleType('walked')
    exec(compile(source, 'walked.py', 'exec'), module.__dict__)
    assert foreign_raises(module, ast.parse(source), (GpufleetError,)) == [
        'line 6 raises ValueError', 'line 12 raises KeyError', 'line 17 raises exc']
    found = [name for directory in ALLOWED_RAISES for name, path in python_files(directory)]
    assert PACKAGE + '._xid_catalog' in found
    assert 'ansible_collections.gpufleet.core.plugins.plugin_utils._report.model' in found


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
    ('_xid_catalog', 'XidCatalogError', ValueError),
])
def test_callers_that_catch_the_old_base_still_catch_it(module, name, old_base):
    cls = getattr(importlib.import_module('%s.%s' % (PACKAGE, module)), name)
    with pytest.raises(old_base):
        raise cls('refused')
    with pytest.raises(GpufleetError):
        raise cls('refused')
