# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""Bad input for the mig module: its options, native layouts and mig-parted configs (issue 12).

One table of plain tuples (id, module arguments, names the message must hold) and one parametrized runner that
asserts with support.bad_input.assert_refused: the run fails, no traceback, the message names the input, and the
simulator counted no NVML change. The host has two A100 80GB GPUs with MIG on and instances in place, so a mistake
that slipped through would show up as destroyed instances. To add a case, add a row.

mig-parted's rules are in docs/dev/mig_parted_semantics.md; where the module refuses what mig-parted accepts
(a null mig-enabled, an unreadable device-filter, one GPU in two entries), docs/mig.md says so.
"""

from __future__ import absolute_import, division, print_function

import pytest

import simctl
from ansible_collections.gpufleet.core.plugins.modules import mig

from ..conftest import ModuleFail
from ..support.bad_input import assert_refused

ENABLED = {'devices': 'all', 'mig-enabled': True, 'mig-devices': {'1g.10gb': 1}}


def parted(*entries, **top):
    """Module arguments for a mig-parted config whose config `chosen` holds ENTRIES; TOP replaces top-level keys."""
    config = dict({'version': 'v1', 'mig-configs': {'chosen': list(entries)}}, **top)
    return {'mig_parted_config': config, 'mig_parted_name': 'chosen'}


def entry(**changes):
    """ENABLED with keys changed; a value of None given as DROP removes the key."""
    result = dict(ENABLED, **changes)
    return dict((key, value) for key, value in result.items() if value is not DROP)


def native(layout, gpus=0):
    return {'layouts': [{'gpus': gpus, 'layout': layout}]}


DROP = object()

# (id, module arguments, names the message must hold)
CASES = [
    # mig-parted: devices
    ('mig-parted devices is a bare int', parted(entry(devices=0)), ['entry 1', 'devices', 'got 0']),
    ('mig-parted devices is a dict', parted(entry(devices={0: True})), ['devices', 'a mapping']),
    ('mig-parted devices is null', parted(entry(devices=None)), ['devices', 'null']),
    ('mig-parted devices is the string "0"', parted(entry(devices='0')), ['devices', "'0'"]),
    ('mig-parted devices is ALL in capitals', parted(entry(devices='ALL')), ['devices', "'ALL'"]),
    ('mig-parted devices list holds a quoted index', parted(entry(devices=['0'])), ['devices', 'a list']),
    ('mig-parted devices list holds a boolean', parted(entry(devices=[True])), ['devices']),
    ('mig-parted devices is missing', parted(entry(devices=DROP)), ['missing required field devices']),
    # mig-parted: mig-enabled
    ('mig-parted mig-enabled is missing', parted(entry(**{'mig-enabled': DROP})),
     ['missing required field mig-enabled']),
    ('mig-parted mig-enabled is the string "true"', parted(entry(**{'mig-enabled': 'true'})),
     ['mig-enabled', "'true'"]),
    ('mig-parted mig-enabled is the string "false"', parted(entry(**{'mig-enabled': 'false', 'mig-devices': {}})),
     ['mig-enabled', "'false'"]),
    ('mig-parted mig-enabled is empty (null)', parted(entry(**{'mig-enabled': None})), ['mig-enabled', 'null']),
    ('mig-parted mig-enabled is the number 1', parted(entry(**{'mig-enabled': 1})), ['mig-enabled', 'got 1']),
    ('mig-parted mig-enabled false with mig-devices', parted(entry(**{'mig-enabled': False})),
     ['mig-devices', 'mig-enabled is false']),
    ('mig-parted mig-enabled true without mig-devices', parted(entry(**{'mig-devices': DROP})),
     ['missing required field mig-devices']),
    ('mig-parted mig-enabled true with null mig-devices', parted(entry(**{'mig-devices': None})),
     ['missing required field mig-devices']),
    # mig-parted: mig-devices
    ('mig-parted mig-devices is a list', parted(entry(**{'mig-devices': ['1g.10gb']})), ['mig-devices', 'a list']),
    ('mig-parted unknown profile', parted(entry(**{'mig-devices': {'9g.99gb': 1}})), ['9g.99gb']),
    ('mig-parted numeric profile id as a key', parted(entry(**{'mig-devices': {19: 1}})), ["mig-devices key '19'", 'numeric profile ids']),
    ('mig-parted key is not a profile name', parted(entry(**{'mig-devices': {'big': 1}})), ["'big'"]),
    ('mig-parted profile in upper case', parted(entry(**{'mig-devices': {'1G.10GB': 1}})), ["'1G.10GB'"]),
    ('mig-parted count is a quoted number', parted(entry(**{'mig-devices': {'1g.10gb': '2'}})),
     ['1g.10gb', "'2'"]),
    ('mig-parted count is negative', parted(entry(**{'mig-devices': {'1g.10gb': -1}})), ['1g.10gb', '-1']),
    ('mig-parted count is a boolean', parted(entry(**{'mig-devices': {'1g.10gb': True}})),
     ['1g.10gb', 'boolean true']),
    ('mig-parted every count is zero', parted(entry(**{'mig-devices': {'1g.10gb': 0, '2g.20gb': 0}})),
     ['all counts in mig-devices are 0']),
    ('mig-parted too many instances', parted(entry(**{'mig-devices': {'3g.40gb': 3}})),
     ['3g.40gb allows at most 2 per GPU, and 3 were asked for']),
    ('mig-parted compute instance size the GPU instance lacks', parted(entry(**{'mig-devices': {'3c.4g.40gb': 1}})),
     ['3c', '4g.40gb']),
    # mig-parted: device-filter
    ('mig-parted device-filter without 0x', parted(entry(**{'device-filter': '20B510DE'})),
     ['device-filter', "'20B510DE'"]),
    ('mig-parted device-filter is a model name', parted(entry(**{'device-filter': 'MODEL'})),
     ['device-filter', "'MODEL'"]),
    ('mig-parted device-filter has two colons', parted(entry(**{'device-filter': '0x20B510DE:0x1:0x2'})),
     ['device-filter', '0x20B510DE:0x1:0x2']),
    ('mig-parted device-filter is a bare number', parted(entry(**{'device-filter': 0x20B510DE})),
     ['device-filter', str(0x20B510DE)]),
    ('mig-parted device-filter is wider than 32 bits', parted(entry(**{'device-filter': '0x120B510DE'})),
     ['device-filter', '0x120B510DE']),
    # mig-parted: entries and the document
    ('mig-parted unknown key in an entry', parted(entry(mig_enabled=True)), ['unexpected field mig_enabled']),
    ('mig-parted entry is a string', parted('all'), ['entry 1', "'all'"]),
    ('mig-parted second entry claims a GPU again', parted(ENABLED, entry(devices=[1, 0])),
     ['entry 2', 'GPUs 0, 1 are already configured by entry 1']),
    ('mig-parted empty mig-configs', parted(ENABLED, **{'mig-configs': {}}), ['mig-configs', 'an empty mapping']),
    ('mig-parted mig-configs is a list', parted(ENABLED, **{'mig-configs': [ENABLED]}), ['mig-configs', 'a list']),
    ('mig-parted config name not in the file', dict(parted(ENABLED), mig_parted_name='chosen-typo'),
     ["no mig-configs entry 'chosen-typo'", 'chosen']),
    ('mig-parted config holds no entries', parted(**{'mig-configs': {'chosen': []}}), ['chosen', 'an empty list']),
    ('mig-parted config is a mapping, not a list', parted(**{'mig-configs': {'chosen': ENABLED}}),
     ['chosen', 'a mapping']),
    ('mig-parted version is missing', {'mig_parted_config': {'mig-configs': {'chosen': [ENABLED]}},
                                       'mig_parted_name': 'chosen'}, ["missing 'version'"]),
    ('mig-parted version is v2', parted(ENABLED, version='v2'), ["'v2'", 'v1']),
    ('mig-parted unknown top-level key', parted(ENABLED, configs={}), ['unexpected top-level key configs']),
    ('mig-parted config without a name', {'mig_parted_config': parted(ENABLED)['mig_parted_config']},
     ['mig_parted_name']),
    ('mig-parted file does not exist', {'mig_parted_file': '/nonexistent/mig.yaml', 'mig_parted_name': 'chosen'},
     ['mig_parted_file=/nonexistent/mig.yaml', 'cannot be read']),
    ('mig-parted file is not YAML', {'mig_parted_file': '{file}', 'mig_parted_name': 'chosen',
                                     '_text': 'version: v1\nmig-configs: [unclosed\n'},
     ['mig_parted_file=', 'is not valid YAML']),
    ('mig-parted file is a YAML list', {'mig_parted_file': '{file}', 'mig_parted_name': 'chosen',
                                        '_text': '- version: v1\n'}, ['mig-parted config', 'a list']),
    # native layouts
    ('layouts names a GPU index the host lacks', native(['1g.10gb'], gpus=9), ["no GPU matches '9'"]),
    ('layouts gpus is an empty list', native(['1g.10gb'], gpus=[]), ['gpus is an empty list']),
    ('layouts names a MIG UUID as a GPU', native(['1g.10gb'], gpus='MIG-1a2b3c4d-5e6f-5a7b-8c9d-0e1f2a3b4c01'),
     ['MIG-1a2b3c4d-5e6f-5a7b-8c9d-0e1f2a3b4c01']),
    ('layout is a number', native(7), ['a layout is "disabled" or a list', 'got 7']),
    ('layout is the word enabled', native('enabled'), ["got 'enabled'"]),
    ('layout entry has an unknown key', native([{'profile': '1g.10gb', 'size': 1}]), ['size']),
    ('layout entry has no profile', native([{'count': 2}]), ['an entry takes profile', 'count']),
    ('layout uses a numeric profile id', native([19]), ['profile id 19 means 1g.10gb']),
    ('layout uses a quoted numeric profile id', native(['19']), ['profile id 19 means 1g.10gb']),
    ('layout names an unknown profile', native(['1g.20gbb']), ['no MIG profile 1g.20gbb']),
    ('layout count is zero', native([{'profile': '1g.10gb', 'count': 0}]), ['count', 'got 0']),
    ('layout count is a word', native([{'profile': '1g.10gb', 'count': 'two'}]), ['count', "'two'"]),
    ('layout count is a boolean', native([{'profile': '1g.10gb', 'count': True}]), ['count', 'True']),
    ('layout compute_instances is a bare int', native([{'profile': '3g.40gb', 'compute_instances': 3}]),
     ['compute_instances', 'got 3']),
    ('layout compute instance of another profile',
     native([{'profile': '3g.40gb', 'compute_instances': ['1c.4g.40gb']}]), ["'1c.4g.40gb'"]),
    ('layout compute instances overfill the GPU instance',
     native([{'profile': '3g.40gb', 'compute_instances': ['2c', '2c']}]), ['2c+2c', '3g.40gb']),
    ('layout too many instances', native(['7g.80gb', '1g.10gb']), ['7g.80gb, 1g.10gb', 'does not fit']),
    ('layouts is a mapping', {'layouts': {'gpus': 0, 'layout': ['1g.10gb']}}, ['layouts']),
    ('layouts entry lacks layout', {'layouts': [{'gpus': 0}]}, ['layout']),
    ('layouts entry has an unknown option', {'layouts': [{'gpus': 0, 'layout': ['1g.10gb'], 'force': True}]},
     ['force']),
    ('force is a word', dict(native(['1g.10gb']), force='maybe'), ['force', 'maybe']),
    ('allow_mode_change is a word', dict(native(['1g.10gb']), allow_mode_change='sometimes'),
     ['allow_mode_change', 'sometimes']),
    ('layouts and a mig-parted config together', dict(native(['1g.10gb']), **parted(ENABLED)),
     ['mutually exclusive', 'layouts', 'mig_parted_config']),
    ('no layout at all', {}, ['layouts', 'mig_parted_config', 'mig_parted_file']),
]


@pytest.fixture
def busy_looking_host(sim_hosts, run_module):
    """Two A100 80GB GPUs, MIG on, a 3g.40gb and two 1g.10gb on each: what a bad input must not destroy."""
    paths = sim_hosts.with_gpus('A100-80GB-PCIe', 2, base='reference-a100', mig_mode=1)
    run_module(mig, {'layouts': [{'gpus': 'all', 'layout': ['3g.40gb', {'profile': '1g.10gb', 'count': 2}]}],
                     'sysfs_root': '/sys', 'procfs_root': '/proc'})
    return paths


@pytest.mark.parametrize('case_id, args, names', CASES, ids=[case[0] for case in CASES])
def test_mig_refuses(busy_looking_host, run_module, tmp_path, case_id, args, names):
    args = dict(args, sysfs_root='/sys', procfs_root='/proc')
    text = args.pop('_text', None)
    if text is not None:
        path = tmp_path / 'mig-parted.yaml'
        path.write_text(text)
        args['mig_parted_file'] = str(path)
    before = simctl.mutations(busy_looking_host['state_file'])
    try:
        run_module(mig, args)
        failed, message = False, ''
    except ModuleFail as exc:
        failed, message = True, exc.result['msg']
    assert_refused(failed, message, names, before, simctl.mutations(busy_looking_host['state_file']))


def test_the_table_is_large_and_each_id_says_the_mistake():
    assert len(CASES) >= 30
    assert len(set(case[0] for case in CASES)) == len(CASES)
