# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""The helper bundle: its file set is what the entry point really imports, it is reproducible, and it runs."""

from __future__ import absolute_import, division, print_function

import io
import json
import os
import shutil
import subprocess
import sys
import textwrap
import zipfile

import pytest

from ansible_collections.gpufleet.core.plugins.module_utils import _helpers_main
from ansible_collections.gpufleet.core.plugins.plugin_utils import _helper_bundle
from ansible_collections.gpufleet.core.plugins.plugin_utils._helper_bundle import (
    PACKAGE, HelperBundleError, build, bundle_name, bundled_modules, collection_version)

from ...conftest import SIM_DIR

VERSION = collection_version()
H200 = 'GPU-0d2f4b6a-8c0e-4a1c-b3d5-e7f9a1b3c5d7'
A100 = 'GPU-5c6f7a2e-1b3d-4e8f-9a0b-1c2d3e4f5a60'
# Only the bundle and the standard library: no site-packages (-S), no PYTHONPATH or user site (-I).
IMPORT_PROBE = textwrap.dedent('''
    import json, sys
    sys.path.insert(0, sys.argv[1])
    import %s.%s
    print(json.dumps(sorted(name for name in sys.modules
                            if name == 'ansible' or name.startswith(('ansible.', 'ansible_collections.')))))
''') % (PACKAGE, _helpers_main.__name__.rsplit('.', 1)[1])


@pytest.fixture(scope='module')
def bundle(tmp_path_factory):
    content, sources = build(VERSION)
    path = tmp_path_factory.mktemp('bundle') / bundle_name(VERSION)
    path.write_bytes(content)
    return {'path': str(path), 'content': content, 'sources': sources}


def run_bundle(bundle, *args, **env):
    # A plain interpreter without site-packages: the simulator comes in through PYTHONPATH, as on a test host.
    environment = {'PATH': os.environ.get('PATH', '/usr/bin:/bin'), 'PYTHONPATH': SIM_DIR}
    environment.update(env)
    return subprocess.run([sys.executable, '-S', bundle['path']] + list(args), env=environment,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True, check=False)


def test_the_file_set_is_what_the_entry_point_imports(bundle):
    probe = subprocess.run([sys.executable, '-I', '-S', '-c', IMPORT_PROBE, bundle['path']],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True, check=False)
    assert probe.returncode == 0, probe.stderr
    imported = json.loads(probe.stdout)
    assert 'ansible' not in imported and not [name for name in imported if name.startswith('ansible.')]
    modules = [name for name in imported if name.startswith(PACKAGE + '.')]
    assert modules == sorted('%s.%s' % (PACKAGE, '.'.join(parts)) for parts in bundled_modules())
    assert bundle['sources'] == sorted(name[len(PACKAGE) + 1:] + '.py' for name in modules)


def test_the_helpers_are_in_it(bundle):
    names = set(zipfile.ZipFile(bundle['path']).namelist())
    for helper in ('_helpers_main', '_helper_mig_apply', '_helper_compute_mode', '_helper_watchdog',
                   '_watchdog_check', '_watchdog_host'):
        assert '%s/%s.py' % (PACKAGE.replace('.', '/'), helper) in names
    assert '__main__.py' in names


def test_two_builds_are_byte_identical_whatever_the_files_dates(bundle, tmp_path):
    source = tmp_path / 'module_utils'
    shutil.copytree(_helper_bundle.MODULE_UTILS_DIR, str(source))
    for name in os.listdir(str(source)):
        os.utime(str(source / name), (1234567890, 1234567890))
    assert build(VERSION, str(source))[0] == bundle['content']
    assert build(VERSION)[0] == bundle['content']
    entries = zipfile.ZipFile(bundle['path']).infolist()
    assert [entry.filename for entry in entries] == sorted(entry.filename for entry in entries)
    assert set(entry.date_time for entry in entries) == {(1980, 1, 1, 0, 0, 0)}


def test_the_version_is_in_the_name_and_the_bundle(bundle):
    assert os.path.basename(bundle['path']) == 'gpufleet-helpers-%s.pyz' % VERSION
    assert build('9.9.9')[0] != bundle['content']
    done = run_bundle(bundle, '--version')
    assert (done.returncode, done.stdout) == (0, 'gpufleet-helpers %s\n' % VERSION)


def test_the_bundle_applies_a_mig_layout_with_a_plain_python(bundle, sim_host, tmp_path):
    paths = sim_host('single-h200')
    layout = tmp_path / 'mig-layout.json'
    layout.write_text(json.dumps({'layouts': [{'gpus': 'all', 'layout': ['3g.71gb', {'profile': '1g.18gb', 'count': 2}]}]}))
    env = {'GPUFLEET_NVML_SIM_HOST': paths['host_file'], 'GPUFLEET_NVML_SIM_STATE': paths['state_file']}
    done = run_bundle(bundle, 'mig-apply', str(layout), **env)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[-1] == 'GPU 0 %s: 1g.18gb@2, 1g.18gb@3, 3g.71gb@4' % H200
    again = run_bundle(bundle, 'mig-apply', str(layout), **env)
    assert (again.returncode, again.stdout) == (0, done.stdout.splitlines()[-1] + '\n')


def test_the_bundle_sets_a_compute_mode_with_a_plain_python(bundle, sim_host):
    paths = sim_host('reference-a100')
    env = {'GPUFLEET_NVML_SIM_HOST': paths['host_file'], 'GPUFLEET_NVML_SIM_STATE': paths['state_file']}
    done = run_bundle(bundle, 'compute-mode', A100, 'exclusive_process', **env)
    assert (done.returncode, done.stdout) == (0, A100 + ': compute mode exclusive_process (was default)\n')
    refused = run_bundle(bundle, 'compute-mode', A100, 'exclusive_thread', **env)
    assert refused.returncode == 1 and refused.stderr.startswith('gpufleet-compute-mode: ')


def test_the_bundle_runs_a_watchdog_check_with_a_plain_python(bundle, sim_host, tmp_path):
    paths = sim_host('reference-a100')
    plan = tmp_path / 'placement.json'
    plan.write_text(json.dumps({'version': 1, 'services': []}))
    config = tmp_path / 'watchdog.json'
    config.write_text(json.dumps({'version': 1, 'plan_file': str(plan), 'state_file': str(tmp_path / 'state.json'),
                                  'textfile_dir': str(tmp_path / 'textfile'), 'xid_event_wait_ms': 0}))
    env = {'GPUFLEET_NVML_SIM_HOST': paths['host_file'], 'GPUFLEET_NVML_SIM_STATE': paths['state_file'],
           'PATH': SIM_DIR + os.pathsep + os.environ.get('PATH', '/usr/bin:/bin')}
    assert run_bundle(bundle, 'watchdog', '--check-config', str(config), **env).returncode == 0
    done = run_bundle(bundle, 'watchdog', str(config), **env)
    assert done.returncode == 0, done.stdout + done.stderr
    assert json.loads((tmp_path / 'state.json').read_text())['checks'] == 1
    assert 'gpufleet_watchdog_plan_ok 1' in (tmp_path / 'textfile' / 'gpufleet_watchdog.prom').read_text().splitlines()


def test_without_nvidia_ml_py_the_bundle_says_so(bundle):
    done = run_bundle(bundle, 'compute-mode', A100, 'default', PYTHONPATH='')
    assert (done.returncode, done.stderr) == (1, 'gpufleet-compute-mode: nvidia-ml-py (pynvml) is not installed\n')


# The import walk on crafted module_utils trees.

def write_tree(root, files):
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))
    return str(root)


def test_every_form_of_import_is_followed(tmp_path):
    tree = write_tree(tmp_path, {
        '_helpers_main.py': '''
            import os
            from %(p)s import _a
            from . import _b
            from ._c import thing
            def later():
                import %(p)s._lazy
            try:
                import pynvml
            except ImportError:
                pynvml = None
        ''' % {'p': PACKAGE},
        '_a.py': 'from %s._sub.mod import x\n' % PACKAGE,
        '_b.py': '',
        '_c.py': 'thing = 1\n',
        '_lazy.py': '',
        '_sub/__init__.py': '',
        '_sub/mod.py': 'from .. import _b\nx = 1\n',
        '_unused.py': '',
    })
    assert bundled_modules(tree) == [('_a',), ('_b',), ('_c',), ('_helpers_main',), ('_lazy',), ('_sub',),
                                     ('_sub', 'mod')]
    names = zipfile.ZipFile(io.BytesIO(build('1.0.0', tree)[0])).namelist()
    assert '%s/_sub/__init__.py' % PACKAGE.replace('.', '/') in names


@pytest.mark.parametrize('source, words', [
    ('from ansible.module_utils.basic import AnsibleModule\n', 'imports ansible.module_utils.basic: the helpers run'),
    ('import ansible\n', 'imports ansible: the helpers run without ansible-core'),
    ('from ansible_collections.community.general.plugins.module_utils import x\n', 'imports ansible_collections.community'),
    ('from %s._missing import x\n' % PACKAGE, '_helpers_main imports %s._missing, which is not a module_utils file' % PACKAGE),
    ('from ... import x\n', 'relative import above module_utils'),
])
def test_what_cannot_travel_is_refused(tmp_path, source, words):
    tree = write_tree(tmp_path, {'_helpers_main.py': source})
    with pytest.raises(HelperBundleError) as refused:
        bundled_modules(tree)
    assert words in str(refused.value)


def test_the_version_comes_from_the_manifest_then_galaxy_yml(tmp_path):
    (tmp_path / 'galaxy.yml').write_text('namespace: gpufleet\nname: core\nversion: 1.2.3\n')
    assert collection_version(str(tmp_path)) == '1.2.3'
    (tmp_path / 'MANIFEST.json').write_text(json.dumps({'collection_info': {'version': '2.0.0'}}))
    assert collection_version(str(tmp_path)) == '2.0.0'
    assert bundle_name('2.0.0') == 'gpufleet-helpers-2.0.0.pyz'


@pytest.mark.parametrize('galaxy', ['version: ../../etc\n', 'version: "1.0 beta"\n', 'name: core\n'])
def test_a_version_that_cannot_name_a_file_is_refused(tmp_path, galaxy):
    (tmp_path / 'galaxy.yml').write_text(galaxy)
    with pytest.raises(HelperBundleError, match='not usable in a file name'):
        collection_version(str(tmp_path))


def test_without_metadata_the_version_is_unknown(tmp_path):
    with pytest.raises(HelperBundleError, match='the collection version is unknown'):
        collection_version(str(tmp_path))


def test_a_run_builds_the_bundle_once_and_every_host_gets_the_same_file(tmp_path, monkeypatch):
    builds = []
    real_build = _helper_bundle.build

    def counted(version):
        builds.append(version)
        return real_build(version)

    monkeypatch.setattr(_helper_bundle, 'build', counted)
    first = _helper_bundle.built_bundle(VERSION, str(tmp_path))
    again = _helper_bundle.built_bundle(VERSION, str(tmp_path))
    assert builds == [VERSION] and first == again
    path, modules = first
    assert os.path.basename(path) == bundle_name(VERSION)
    assert (open(path, 'rb').read(), modules) == real_build(VERSION)
    # A listing without its bundle (a run killed between the two renames) is built again.
    os.remove(path)
    assert _helper_bundle.built_bundle(VERSION, str(tmp_path)) == first and builds == [VERSION, VERSION]
    assert sorted(os.listdir(str(tmp_path))) == [bundle_name(VERSION), bundle_name(VERSION) + '.modules.json']
