# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""The map's layering (docs/architecture.md): module_utils never imports a module, a filter or ansible-core (it also
runs inside the helper bundle, where ansible-core is absent), a module is its documentation and a short main(), its
logic in module_utils, and a filter is thin: it reaches the model through plugin_utils and imports nothing else."""

from __future__ import absolute_import, division, print_function

import ast
import os

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), '..', '..'))
MODULE_UTILS = os.path.join(REPO, 'plugins', 'module_utils')
MODULES = os.path.join(REPO, 'plugins', 'modules')
FILTERS = os.path.join(REPO, 'plugins', 'filter')
# main() builds the AnsibleModule (its argument spec is most of it), calls module_utils and reports.
MAX_MAIN_LINES = 40
PLUGIN_UTILS = 'ansible_collections.gpufleet.core.plugins.plugin_utils'
FORBIDDEN = ('ansible.', 'ansible_collections.gpufleet.core.plugins.modules',
             'ansible_collections.gpufleet.core.plugins.filter', 'ansible_collections.gpufleet.core.plugins.action',
             PLUGIN_UTILS)


def _sources(directory):
    for name in sorted(os.listdir(directory)):
        if name.endswith('.py') and name != '__init__.py':
            with open(os.path.join(directory, name)) as handle:
                yield name, ast.parse(handle.read())


def imported_names(tree):
    """The names of the modules a file imports."""
    names = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.extend(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.append(node.module)
    return names


def forbidden_imports(directory=MODULE_UTILS):
    return ['%s imports %s' % (name, imported) for name, tree in _sources(directory)
            for imported in imported_names(tree)
            if imported == 'ansible' or imported.startswith(FORBIDDEN)]


def filter_imports(directory=FILTERS):
    """What a filter file imports besides __future__ and the collection's plugin_utils (the adapters that turn the
    model's errors into AnsibleFilterError): a filter that needs more is holding logic of its own."""
    return ['%s imports %s' % (name, imported) for name, tree in _sources(directory)
            for imported in imported_names(tree)
            if imported != '__future__' and not imported.startswith(PLUGIN_UTILS + '.')]


def long_mains(directory=MODULES):
    return dict((name, node.end_lineno - node.lineno + 1) for name, tree in _sources(directory)
                for node in tree.body if isinstance(node, ast.FunctionDef) and node.name == 'main'
                and node.end_lineno - node.lineno + 1 > MAX_MAIN_LINES)


def test_module_utils_imports_nothing_above_it():
    assert forbidden_imports() == []


def test_filters_reach_the_model_through_plugin_utils_only():
    assert filter_imports() == [], 'move the logic into module_utils, reached through a plugins/plugin_utils adapter'


def test_every_module_main_is_short():
    assert long_mains() == {}, 'move the logic into a private plugins/module_utils/_*.py'


def test_the_checks_see_what_they_refuse(tmp_path):
    (tmp_path / '_a.py').write_text('import json\nfrom ansible.module_utils.urls import fetch_url\n'
                                    'from ansible_collections.gpufleet.core.plugins.modules import mig\n')
    assert forbidden_imports(str(tmp_path)) == [
        '_a.py imports ansible.module_utils.urls', '_a.py imports ansible_collections.gpufleet.core.plugins.modules']
    filters = tmp_path / 'filter'
    filters.mkdir()
    (filters / 'f.py').write_text('from __future__ import absolute_import\n'
                                  'from ansible.errors import AnsibleFilterError\n'
                                  'def f():\n'
                                  '    from ansible_collections.gpufleet.core.plugins.module_utils import _values\n'
                                  '    from ansible_collections.gpufleet.core.plugins.plugin_utils._fleet import run\n'
                                  '    import ansible_collections.gpufleet.core.plugins.plugin_utils._mps\n')
    assert filter_imports(str(filters)) == [
        'f.py imports ansible.errors', 'f.py imports ansible_collections.gpufleet.core.plugins.module_utils']
    (tmp_path / 'm.py').write_text('def main():\n' + '    pass\n' * MAX_MAIN_LINES)
    assert long_mains(str(tmp_path)) == {'m.py': MAX_MAIN_LINES + 1}
    (tmp_path / 'm.py').write_text('def main():\n' + '    pass\n' * (MAX_MAIN_LINES - 1))
    assert long_mains(str(tmp_path)) == {}
