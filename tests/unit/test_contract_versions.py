# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""The two contracts' versions: in a scratch copy of the collection whose plan version and fact version are bumped,
every reader of the plan file and of the topology fact refuses this release's documents, naming the version and the
fix, while the plan's writer (the gpu_services role) places every service afresh and writes its own version; and with
this release's own versions, every reader accepts them (so the refusals come from the version alone).

The readers are listed in support/contract_readers.py; a new reader of the plan or the fact is added there.
"""

from __future__ import absolute_import, division, print_function

import json
import os
import shutil
import subprocess
import sys

import pytest

from ansible_collections.gpufleet.core.plugins.module_utils._plan import plan_json

from .report.fleet import LLM, simulated_host

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), '..', '..'))
READERS = os.path.join(os.path.dirname(__file__), 'support', 'contract_readers.py')
BUMPS = [
    ('plugins/module_utils/_plan.py', 'PLAN_VERSION = 1\n', 'PLAN_VERSION = 2\n'),
    ('plugins/module_utils/_fact_layout.py', 'FACT_VERSION = 2\n', 'FACT_VERSION = 3\n'),
    ('plugins/module_utils/_fact_layout.py', 'READABLE_FACT_VERSIONS = (1, 2)\n', 'READABLE_FACT_VERSIONS = (3,)\n'),
]


@pytest.fixture(scope='module')
def documents(tmp_path_factory):
    """This release's plan file and topology fact for a simulated A100 host, as the roles write them."""
    work = tmp_path_factory.mktemp('documents')
    host = simulated_host(str(work), 'reference-a100', services=[LLM])
    plan_file, fact_file = work / 'placement.json', work / 'fact.json'
    plan = host['plan'] if isinstance(host['plan'], str) else plan_json(host['plan'])
    plan_file.write_text(plan + '\n')
    fact_file.write_text(json.dumps(host['topology']))
    return str(plan_file), str(fact_file)


def collection_copy(root, bumped):
    """A copy of the collection under root/ansible_collections/gpufleet/core, its versions bumped or not."""
    target = os.path.join(str(root), 'ansible_collections', 'gpufleet', 'core')
    shutil.copytree(os.path.join(REPO, 'plugins'), os.path.join(target, 'plugins'),
                    ignore=shutil.ignore_patterns('__pycache__'))
    for name in ('galaxy.yml', 'meta'):
        source = os.path.join(REPO, name)
        (shutil.copytree if os.path.isdir(source) else shutil.copy)(source, os.path.join(target, name))
    for path, old, new in BUMPS if bumped else ():
        with open(os.path.join(target, path)) as handle:
            text = handle.read()
        assert text.count(old) == 1, '%s no longer says %r: update BUMPS' % (path, old)
        with open(os.path.join(target, path), 'w') as handle:
            handle.write(text.replace(old, new))
    return str(root)


def readers_say(root, documents):
    environment = dict(os.environ, PYTHONPATH=os.pathsep.join([root, os.path.join(REPO, 'tests', 'nvml_sim')]))
    ran = subprocess.run([sys.executable, READERS] + list(documents), env=environment, cwd=root,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True, timeout=300, check=False)
    assert ran.returncode == 0, ran.stderr
    return json.loads(ran.stdout)


def test_every_reader_refuses_another_version_of_the_plan_and_the_fact(tmp_path, documents):
    said = readers_say(collection_copy(tmp_path, bumped=True), documents)
    assert len(said['plan']) >= 4 and len(said['fact']) >= 8
    for reader, message in said['plan'].items():
        assert 'has version 1, but this release of gpufleet.core reads version 2' in message, (reader, message)
        assert 'apply the gpufleet.core.gpu_services role of this release to write it again' in message, (reader, message)
    # The writer is the fix the readers name: it places every service afresh and writes the plan in its own version.
    assert said['writer'] == 'places every service afresh'
    for reader, message in said['fact'].items():
        assert 'fact has layout version 2, but this release of gpufleet.core reads versions 3' in message, (reader, message)
        assert 'gather it again with gpufleet.core.topology_facts' in message, (reader, message)


def test_every_reader_accepts_this_release_s_own_documents(tmp_path, documents):
    said = readers_say(collection_copy(tmp_path, bumped=False), documents)
    assert said == {'plan': dict((reader, 'accepted') for reader in said['plan']),
                    'fact': dict((reader, 'accepted') for reader in said['fact']),
                    'writer': 'keeps 1 placement(s)'}, said
