# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""Bad input for the topology side: topology_facts over broken sysfs trees, the CPU-list and topology filters,
apt_keyring and numa_audit's options (issue 12).

Each table is a list of plain tuples (id, input, names the message must hold); each runner is one parametrized test
asserting with support.bad_input.assert_refused. To add a case, add a row.
"""

from __future__ import absolute_import, division, print_function

import copy
import json
import os

import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.gpufleet.core.plugins.filter.topology import FilterModule
from ansible_collections.gpufleet.core.plugins.modules import apt_keyring, numa_audit, topology_facts

from ..conftest import ModuleFail
from ..support.bad_input import assert_refused, snapshot
from ..support.topology import gpu, node, topology

GPU_DIR = 'bus/pci/devices/0000:17:00.0'
NODE1 = 'devices/system/node/node1'

# (id, {sysfs path: bytes to write, None to delete, or a dict to turn the file into a directory}, names)
BROKEN_TREES = [
    ('node cpulist is not UTF-8', {NODE1 + '/cpulist': b'\xff\xfe32-63\n'}, [NODE1 + '/cpulist', 'UTF-8']),
    ('online CPU list has a letter', {'devices/system/cpu/online': b'0-6x\n'},
     ['devices/system/cpu/online', "'0-6x'"]),
    ('node cpulist range runs backwards', {NODE1 + '/cpulist': b'63-32\n'}, [NODE1 + '/cpulist', "'63-32'"]),
    ('node cpulist names a CPU no kernel has', {NODE1 + '/cpulist': b'32-99999999\n'},
     [NODE1 + '/cpulist', '99999999']),
    ('node cpulist uses non-ASCII digits', {NODE1 + '/cpulist': u'\u0663\u0662\n'.encode('utf-8')},
     [NODE1 + '/cpulist', 'is not a CPU number']),
    ('SMT sibling list is a word', {'devices/system/cpu/cpu0/topology/thread_siblings_list': b'none\n'},
     ['cpu0/topology/thread_siblings_list', "'none'"]),
    ('local_cpus mask is not hexadecimal', {GPU_DIR + '/local_cpulist': None, GPU_DIR + '/local_cpus': b'zzzz,0000\n'},
     [GPU_DIR + '/local_cpus', 'zzzz', 'hexadecimal']),
    ('local_cpus mask is not UTF-8', {GPU_DIR + '/local_cpulist': None, GPU_DIR + '/local_cpus': b'\xff\xff\n'},
     [GPU_DIR + '/local_cpus', 'UTF-8']),
    ('node distance holds a word', {'devices/system/node/node0/distance': b'10 far\n'},
     ['devices/system/node/node0/distance', "'10 far'", 'expected a list of numbers']),
    ('an attribute is a directory', {'devices/system/cpu/online': {}}, ['devices/system/cpu/online', 'cannot be read']),
]


def _break(sysfs_root, changes):
    for relpath, content in changes.items():
        path = os.path.join(sysfs_root, relpath)
        if os.path.exists(path):
            os.remove(path)
        if isinstance(content, dict):
            os.makedirs(path)
        elif content is not None:
            with open(path, 'wb') as handle:
                handle.write(content)


@pytest.mark.parametrize('changes, names', [case[1:] for case in BROKEN_TREES], ids=[case[0] for case in BROKEN_TREES])
def test_topology_facts_refuses_a_broken_tree(run_module, sim_host, changes, names):
    paths = sim_host('reference-a100')
    _break(paths['sysfs_root'], changes)
    before = snapshot(os.path.dirname(paths['sysfs_root']))
    with pytest.raises(ModuleFail) as failed:
        run_module(topology_facts, {'sysfs_root': paths['sysfs_root'], 'procfs_root': paths['procfs_root']})
    assert_refused(True, failed.value.result['msg'], names, before, snapshot(os.path.dirname(paths['sysfs_root'])))


def test_nul_terminated_attributes_read_as_the_kernel_tools_read_them(run_module, sim_host):
    """Captured trees end some files with NULs: the fact is the one of the clean tree."""
    paths = sim_host('reference-a100')
    args = {'sysfs_root': paths['sysfs_root'], 'procfs_root': paths['procfs_root']}
    clean = run_module(topology_facts, args)['ansible_facts']['gpufleet_topology']
    for relpath in ('devices/system/cpu/online', NODE1 + '/cpulist', GPU_DIR + '/numa_node', GPU_DIR + '/vendor',
                    'devices/system/node/node0/distance'):
        path = os.path.join(paths['sysfs_root'], relpath)
        with open(path, 'rb') as handle:
            text = handle.read()
        with open(path, 'wb') as handle:
            handle.write(text + b'\x00')
    os.remove(os.path.join(paths['sysfs_root'], GPU_DIR, 'local_cpulist'))
    with open(os.path.join(paths['sysfs_root'], GPU_DIR, 'local_cpus'), 'ab') as handle:
        handle.write(b'\x00\x00')
    assert run_module(topology_facts, args)['ansible_facts']['gpufleet_topology'] == clean


# -- filters --------------------------------------------------------------------------------------------------

FACT = topology(nodes=[node(0, range(0, 4)), node(1, range(4, 8)), node(2, [])],
                gpus=[gpu(0, 'GPU-a', bus='17', node=0), gpu(1, 'GPU-b', bus='18', node=None),
                      gpu(2, 'GPU-c', bus='19', node=2)])

# (id, (filter, arguments), names)
FILTER_CASES = [
    ('cpulist_expand of None', ('cpulist_expand', [None]), ['cpulist_expand', 'None']),
    ('cpulist_expand of a dict', ('cpulist_expand', [{'cpus': '0-3'}]),
     ['cpulist_expand', "{'cpus': '0-3'}", 'expected a CPU list']),
    ('cpulist_expand of a list', ('cpulist_expand', [[0, 1]]), ['cpulist_expand', '[0, 1]', 'expected a CPU list']),
    ('cpulist_expand with a trailing comma', ('cpulist_expand', ['0-3,']), ["'0-3,'", 'empty element']),
    ('cpulist_expand with a newline inside', ('cpulist_expand', ['0-3\n4']), ['0-3', 'is not a CPU number']),
    ('cpulist_expand with a plus sign', ('cpulist_expand', ['+3']), ["'+3'", 'is not a CPU number']),
    ('cpulist_expand of a huge range', ('cpulist_expand', ['0-4294967296']), ['4294967296', 'above']),
    ('cpulist_compact of a dict', ('cpulist_compact', [{'a': 1}]), ['cpulist_compact', "{'a': 1}"]),
    ('cpulist_compact with None in the list', ('cpulist_compact', [[0, None]]), ['None', 'expected CPU numbers']),
    ('cpulist_compact with a word in the list', ('cpulist_compact', [[0, 'x']]), ["'x'", 'expected CPU numbers']),
    ('cpulist_compact with a negative CPU', ('cpulist_compact', [[0, -1]]), ['-1', 'negative']),
    ('cpulist_compact with a boolean', ('cpulist_compact', [[True]]), ['True', 'expected CPU numbers']),
    ('cpulist_compact with a nested list', ('cpulist_compact', [[[0, 1]]]), ['[0, 1]', 'expected CPU numbers']),
    ('gpu_numa_cpulist of a GPU index the host lacks', ('gpu_numa_cpulist', [FACT, 7]), ['no GPU 7', 'GPU-a']),
    ('gpu_numa_cpulist of an unknown UUID', ('gpu_numa_cpulist', [FACT, 'GPU-nope']), ['GPU-nope']),
    ('gpu_numa_cpulist of a GPU without a node', ('gpu_numa_cpulist', [FACT, 'GPU-b']), ['GPU-b', 'unknown']),
    ('gpu_numa_cpulist of a GPU on a memory-only node', ('gpu_numa_cpulist', [FACT, 2]), ['GPU-c', 'no CPUs']),
    ('gpu_numa_cpulist of a list instead of the fact', ('gpu_numa_cpulist', [[FACT], 0]), ['gpufleet_topology']),
    ('gpu_numa_cpulist of a fact with None among a node\'s CPUs',
     ('gpu_numa_cpulist', [dict(FACT, numa_nodes=[{'id': 0, 'cpus': [0, None]}]), 0]), ["'cpus': [0, None]"]),
    ('gpu_numa_cpulist of a fact of another version', ('gpu_numa_cpulist', [dict(FACT, version=9), 0]),
     ['version 9', 'gather it again']),
]


@pytest.mark.parametrize('call, names', [case[1:] for case in FILTER_CASES], ids=[case[0] for case in FILTER_CASES])
def test_topology_filters_refuse(call, names):
    name, arguments = call
    before = copy.deepcopy(arguments)
    with pytest.raises(AnsibleFilterError) as failed:
        FilterModule().filters()[name](*arguments)
    assert_refused(True, str(failed.value), names, before, arguments)


# -- apt_keyring ----------------------------------------------------------------------------------------------

ARMORED_GARBAGE = '-----BEGIN PGP PUBLIC KEY BLOCK-----\n\n@@@@ not base64\n-----END PGP PUBLIC KEY BLOCK-----\n'
PIN = ['EB693B3035CD5710E231E123A4B469963BF863CC']

# (id, (args, files to create under tmp: name -> bytes, or None for a directory), names); {tmp} is the test's folder
KEYRING_CASES = [
    ('a one-byte key file (new packet format)', ({'src': '{tmp}/key.gpg', 'dest': '{tmp}/k.gpg'}, {'key.gpg': b'\xc6'}),
     ['{tmp}/key.gpg', 'truncated']),
    ('a one-byte key file (old packet format)', ({'src': '{tmp}/key.gpg', 'dest': '{tmp}/k.gpg'}, {'key.gpg': b'\x99'}),
     ['{tmp}/key.gpg', 'truncated']),
    ('an empty key file', ({'src': '{tmp}/key.gpg', 'dest': '{tmp}/k.gpg'}, {'key.gpg': b''}),
     ['{tmp}/key.gpg', 'no OpenPGP public key']),
    ('a public-key packet of length zero', ({'src': '{tmp}/key.gpg', 'dest': '{tmp}/k.gpg'}, {'key.gpg': b'\xc6\x00'}),
     ['{tmp}/key.gpg', 'empty']),
    ('a two-byte length cut short', ({'src': '{tmp}/key.gpg', 'dest': '{tmp}/k.gpg'}, {'key.gpg': b'\xc6\xc5'}),
     ['{tmp}/key.gpg', 'truncated']),
    ('text that is not a key', ({'content': 'hello', 'dest': '{tmp}/k.gpg'}, {}), ['content', 'packet header']),
    ('an armored block that is not base64', ({'content': ARMORED_GARBAGE, 'dest': '{tmp}/k.gpg'}, {}),
     ['content', 'base64']),
    ('a key file that is a directory', ({'src': '{tmp}/keys', 'dest': '{tmp}/k.gpg'}, {'keys': None}),
     ['src={tmp}/keys']),
    ('a key file that does not exist', ({'src': '{tmp}/nope.asc', 'dest': '{tmp}/k.gpg'}, {}), ['src={tmp}/nope.asc']),
    ('dest in a missing directory', ({'content': 'x', 'dest': '{tmp}/missing/k.gpg'}, {}),
     ['dest={tmp}/missing/k.gpg', '{tmp}/missing does not exist']),
    ('dest is a directory', ({'content': 'x', 'dest': '{tmp}/keyrings'}, {'keyrings': None}),
     ['dest={tmp}/keyrings', 'is a directory']),
    ('state absent with dest a directory', ({'state': 'absent', 'dest': '{tmp}/keyrings'}, {'keyrings': None}),
     ['dest={tmp}/keyrings', 'is a directory']),
    # Issue 29: a key id pins nothing; it is refused as one before the key is read (src does not exist here).
    ('a short key id as the fingerprint', ({'src': '{tmp}/nope.asc', 'dest': '{tmp}/k.gpg', 'fingerprints': ['3BF863CC']},
                                           {}),
     ['fingerprints has the string "3BF863CC", a key id, not a fingerprint', 'give the full 40-digit fingerprint',
      'gpg --show-keys']),
    ('a long key id with 0x as the fingerprint', ({'content': 'x', 'dest': '{tmp}/k.gpg',
                                                   'fingerprints': PIN + ['0xa4b4 6996 3bf8 63cc']}, {}),
     ['"0xa4b4 6996 3bf8 63cc", a key id, not a fingerprint']),
    ('a fingerprint one digit short', ({'content': 'x', 'dest': '{tmp}/k.gpg', 'fingerprints': [PIN[0][:-1]]}, {}),
     ['"%s", which is not a key fingerprint' % PIN[0][:-1], '40-digit']),
    ('a fingerprint with a trailing word', ({'content': 'x', 'dest': '{tmp}/k.gpg', 'fingerprints': [PIN[0] + ' old']},
                                            {}),
     ['which is not a key fingerprint']),
    ('a key id with state absent leaves the keyring', ({'state': 'absent', 'dest': '{tmp}/k.gpg',
                                                        'fingerprints': ['3BF863CC']}, {'k.gpg': b'keyring'}),
     ['a key id, not a fingerprint']),
]


def _fill(value, tmp):
    return value.replace('{tmp}', tmp) if isinstance(value, str) else value


@pytest.mark.parametrize('setup, names', [case[1:] for case in KEYRING_CASES], ids=[case[0] for case in KEYRING_CASES])
def test_apt_keyring_refuses(run_module, tmp_path, setup, names):
    args, files = setup
    tmp = str(tmp_path)
    for name, content in files.items():
        if content is None:
            os.makedirs(os.path.join(tmp, name))
        else:
            (tmp_path / name).write_bytes(content)
    args = dict((key, _fill(value, tmp)) for key, value in args.items())
    args.setdefault('fingerprints', PIN)
    before = snapshot(tmp)
    with pytest.raises(ModuleFail) as failed:
        run_module(apt_keyring, args)
    assert_refused(True, failed.value.result['msg'], [_fill(name, tmp) for name in names], before, snapshot(tmp))


# -- numa_audit -----------------------------------------------------------------------------------------------

PID_ONE = {'name': 'web', 'pid': 1}

# (id, (services or None, plan file content or None[, other options]), names); a plan content is written to
# {tmp}/placement.json
AUDIT_CASES = [
    ('expected CPUs as a dict', ([dict(PID_ONE, expect={'cpus': {'a': 1}})], None), ['expect.cpus', "{'a': 1}"]),
    ('None in the expected CPUs', ([dict(PID_ONE, expect={'cpus': [0, None]})], None), ['expect.cpus', 'None']),
    ('expected CPUs as a malformed list', ([dict(PID_ONE, expect={'cpus': '0-x'})], None), ['expect.cpus', "'0-x'"]),
    ('negative expected memory nodes', ([dict(PID_ONE, expect={'mems': [-1]})], None), ['expect.mems', '-1']),
    ('expected GPUs by index', ([dict(PID_ONE, expect={'gpus': [3]})], None), ['expect.gpus', '3 is not a GPU']),
    ('a GPU UUID with a trailing newline', ([dict(PID_ONE, expect={'gpus': ['GPU-a\n']})], None),
     ['expect.gpus', 'GPU-a']),
    ('an unknown memory policy', ([dict(PID_ONE, expect={'memory_policy': 'local'})], None),
     ['memory_policy', 'local', 'bind, preferred, interleave']),
    ('an endless context-switch sample', ([PID_ONE], None, {'sample_seconds': float('inf')}),
     ['sample_seconds=inf', 'expected a number of seconds']),
    ('a context-switch sample of NaN seconds', ([PID_ONE], None, {'sample_seconds': float('nan')}),
     ['sample_seconds=nan']),
    ('a remote fraction above 1', ([PID_ONE], None, {'max_remote_fraction': 2}), ['max_remote_fraction=2']),
    ('a plan file that is not JSON', (None, 'version: 1\n'), ['plan_file {tmp}/placement.json', 'not JSON']),
    ('a plan file of another version', (None, json.dumps({'version': 2, 'services': []})),
     ['plan_file {tmp}/placement.json', 'version 2']),
    ('a plan file holding a list', (None, json.dumps([{'name': 'web'}])), ['plan_file {tmp}/placement.json']),
    ('a plan file whose services is a dict', (None, json.dumps({'version': 1, 'services': {'web': {}}})),
     ['plan_file {tmp}/placement.json', 'services']),
    ('a plan file that does not exist', (None, None), ['plan_file {tmp}/placement.json']),
]


@pytest.mark.parametrize('setup, names', [case[1:] for case in AUDIT_CASES], ids=[case[0] for case in AUDIT_CASES])
def test_numa_audit_refuses(run_module, sim_host, tmp_path, setup, names):
    services, plan = setup[:2]
    options = setup[2] if len(setup) > 2 else {}
    paths = sim_host('reference-a100')
    tmp = str(tmp_path)
    args = {'sysfs_root': paths['sysfs_root'], 'procfs_root': paths['procfs_root']}
    args.update(options)
    if services is not None:
        args['services'] = services
    else:
        args['plan_file'] = os.path.join(tmp, 'placement.json')
        if plan is not None:
            (tmp_path / 'placement.json').write_text(plan)
    before = snapshot(tmp)
    with pytest.raises(ModuleFail) as failed:
        run_module(numa_audit, args)
    assert_refused(True, failed.value.result['msg'], [_fill(name, tmp) for name in names], before, snapshot(tmp))


def test_the_tables_are_big_enough_and_ids_unique():
    ids = [case[0] for table in (BROKEN_TREES, FILTER_CASES, KEYRING_CASES, AUDIT_CASES) for case in table]
    assert len(ids) == len(set(ids))
    assert len(ids) >= 20
