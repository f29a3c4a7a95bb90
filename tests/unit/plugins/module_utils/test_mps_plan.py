# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""MPS plans against a hand-written topology: every bad input is refused with its fix."""

from __future__ import absolute_import, division, print_function

import pytest

from ansible_collections.gpufleet.core.plugins.module_utils._mps import (
    MpsDaemon,
    MpsPlanError,
    client_environment,
    mps_size,
    plan,
    plan_daemons,
    share_environments,
    size_mb,
)

from ...support.topology import A100_PROFILES, gpu, mig_instance, node, topology

GPU0 = 'GPU-aaaaaaaa-0000-4000-8000-000000000000'
GPU1 = 'GPU-aaaaaaaa-0000-4000-8000-000000000001'
MIG_A = 'MIG-bbbbbbbb-0000-5000-8000-00000000000a'
MIG_B = 'MIG-bbbbbbbb-0000-5000-8000-00000000000b'

# GPU 0 whole (80 GiB); GPU 1 in MIG mode with a 3g.40gb (40192 MiB) and a 1g.10gb (9728 MiB).
TOPOLOGY = topology(
    nodes=[node(0, range(8))],
    gpus=[gpu(0, GPU0), gpu(1, GPU1, instances=[mig_instance('3g.40gb', [MIG_A]), mig_instance('1g.10gb', [MIG_B])])],
    mig_profiles=A100_PROFILES)


@pytest.mark.parametrize('text, mb', [('20G', 20480), ('512M', 512), ('1.5G', 1536), ('20GiB', 20480), ('1T', 1048576),
                                      (' 2g ', 2048), ('1024K', 1)])
def test_sizes(text, mb):
    assert size_mb(text, 'x') == mb


@pytest.mark.parametrize('text', ['twenty', '-1G', '20X', True, '', '2048', 4096, '20B', '0G', '512K', None])
def test_bad_sizes(text):
    with pytest.raises(MpsPlanError) as caught:
        size_mb(text, 'client llm')
    assert 'client llm' in str(caught.value) and 'like 20G' in str(caught.value)


def test_mps_size_prefers_whole_gigabytes():
    assert (mps_size(20480), mps_size(1536), mps_size(512)) == ('20G', '1536M', '512M')


def test_a_good_plan_and_its_client_contract():
    daemons = plan(TOPOLOGY, [
        {'device': GPU0, 'user': 'infer', 'default_active_thread_percentage': 50,
         'clients': [{'name': 'llm', 'active_thread_percentage': 40, 'pinned_mem_limit': '40G'},
                     {'name': 'sd', 'pinned_mem_limit': '20G'}]},
        {'device': MIG_A, 'user': 'infer', 'default_pinned_mem_limit': '10G',
         'clients': [{'name': 'a'}, {'name': 'b'}]},
    ])
    assert [d['pipe_directory'] for d in daemons] == ['/run/gpufleet-mps/' + GPU0, '/run/gpufleet-mps/' + MIG_A]
    assert [d['log_directory'] for d in daemons] == ['/var/log/gpufleet-mps/' + GPU0, '/var/log/gpufleet-mps/' + MIG_A]
    assert (daemons[0]['mig_device'], daemons[1]['mig_device'], daemons[1]['gpu_uuid']) == (False, True, GPU1)
    assert client_environment(daemons[0], 'llm') == {
        'CUDA_MPS_PIPE_DIRECTORY': '/run/gpufleet-mps/' + GPU0,
        'CUDA_VISIBLE_DEVICES': GPU0,
        'CUDA_MPS_ACTIVE_THREAD_PERCENTAGE': '40',
        'CUDA_MPS_PINNED_DEVICE_MEM_LIMIT': '0=40G',
    }
    # A client without its own values inherits the daemon's defaults.
    assert client_environment(daemons[0], 'sd')['CUDA_MPS_ACTIVE_THREAD_PERCENTAGE'] == '50'
    assert client_environment(daemons[1], 'b')['CUDA_MPS_PINNED_DEVICE_MEM_LIMIT'] == '0=10G'
    with pytest.raises(MpsPlanError) as caught:
        client_environment(daemons[1], 'zzz')
    assert 'no client zzz (clients: a, b)' in str(caught.value)


@pytest.mark.parametrize('daemons, words', [
    ([{'device': GPU0, 'user': 'u', 'clients': [{'name': 'llm', 'pinned_mem_limit': '60G'},
                                                {'name': 'sd', 'pinned_mem_limit': '30G'}]}],
     'promised 92160 MiB of pinned device memory (llm 60G + sd 30G) but the device has 81920 MiB'),
    ([{'device': MIG_B, 'user': 'u', 'default_pinned_mem_limit': '6G', 'clients': [{'name': 'a'}, {'name': 'b'}]}],
     'promised 12288 MiB'),
    ([{'device': GPU0, 'user': 'u', 'default_active_thread_percentage': 0}], 'must lie in 1..100, got 0'),
    ([{'device': GPU0, 'user': 'u', 'clients': [{'name': 'x', 'active_thread_percentage': 140}]}],
     'must lie in 1..100, got 140 (it limits SMs, not memory)'),
    ([{'device': GPU1, 'user': 'u'}], 'is in MIG mode; MPS on MIG needs one daemon per MIG device'),
    ([{'device': 'GPU-nope', 'user': 'u'}], 'no GPU or MIG device with that UUID'),
    ([{'device': GPU0, 'user': 'u'}, {'device': GPU0, 'user': 'u'}], 'daemon 1 already serves this device'),
    ([{'device': GPU0, 'user': 'u', 'pipe_directory': '/run/mps'},
      {'device': MIG_A, 'user': 'u', 'pipe_directory': '/run/mps'}], 'pipe directory /run/mps is already used by daemon 1'),
    ([{'device': GPU0, 'user': 'u', 'clients': [{'name': 'x', 'user': 'other'}]}],
     'an MPS server serves one user id at a time'),
    ([{'device': GPU0}], 'set user'),
])
def test_bad_plans_are_refused_with_the_fix(daemons, words):
    with pytest.raises(MpsPlanError) as caught:
        plan(TOPOLOGY, daemons)
    assert words in str(caught.value)


def test_mps_and_time_slicing_never_share_a_gpu():
    with pytest.raises(MpsPlanError) as caught:
        plan(TOPOLOGY, [{'device': MIG_A, 'user': 'u'}], time_slicing=[GPU1])
    assert 'use MPS or time-slicing on a GPU, never both' in str(caught.value)


def test_every_problem_is_reported_at_once():
    with pytest.raises(MpsPlanError) as caught:
        plan(TOPOLOGY, [{'device': GPU1, 'user': 'u', 'default_active_thread_percentage': 101}])
    assert str(caught.value).count(' | ') == 1


def test_plan_reads_its_own_output_so_daemons_need_one_form():
    daemons = [{'device': GPU0, 'user': 'infer', 'default_active_thread_percentage': 50,
                'default_pinned_mem_limit': '40G', 'clients': [{'name': 'llm', 'pinned_mem_limit': '4G'},
                                                               {'name': 'sd'}]},
               {'device': MIG_A, 'user': 'infer', 'pipe_directory': '/srv/mps/a', 'clients': [{'name': 'a'}]}]
    once = plan(TOPOLOGY, daemons)
    assert plan(TOPOLOGY, once) == once
    assert once[0]['clients'] == [{'name': 'llm', 'active_thread_percentage': 50, 'pinned_mem_limit_mb': 4096},
                                  {'name': 'sd', 'active_thread_percentage': 50, 'pinned_mem_limit_mb': 40960}]


@pytest.mark.parametrize('text, words', [
    ('2048', 'has no unit'), (4096, 'has no unit'), ('-1G', 'is negative'), ('512K', 'rounds down to 0 MiB'),
    ('0M', 'rounds down to 0 MiB'), ('20B', 'is not a memory size'),
])
def test_each_bad_size_says_what_is_wrong(text, words):
    with pytest.raises(MpsPlanError) as caught:
        size_mb(text, 'x')
    assert words in str(caught.value)


@pytest.mark.parametrize('daemons, words', [
    ([{'device': GPU0, 'user': 'u', 'default_active_thread_percentage': 40,
       'clients': [{'name': 'llm', 'active_thread_percentage': 60}]}],
     "client llm: active_thread_percentage 60 is above the daemon's default 40; a client can only lower"),
    ([{'device': GPU0, 'user': 'u', 'default_pinned_mem_limit': '20G',
       'clients': [{'name': 'llm', 'pinned_mem_limit': '40G'}]}],
     "client llm: pinned_mem_limit 40G is above the daemon's default_pinned_mem_limit 20G"),
    ([{'device': MIG_B, 'user': 'u', 'default_pinned_mem_limit': '10G'}],
     "default_pinned_mem_limit: '10G' (10240 MiB) is more than the device has (9728 MiB)"),
    ([{'device': GPU0, 'user': 'u', 'default_pinned_mem_limits': '20G'}],
     'unknown key default_pinned_mem_limits; did you mean default_pinned_mem_limit?'),
    ([{'device': GPU0, 'user': 'u', 'clients': [{'name': 'a', 'pinned_mem_limits': '2G'}]}],
     'client a: unknown key pinned_mem_limits; did you mean pinned_mem_limit?'),
    ([{'device': GPU0, 'user': 'a;rm -rf /'}], "user: 'a;rm -rf /' is not a plain user or group name"),
    ([{'device': GPU0, 'user': 'infer\n'}], "user: 'infer\\n' is not a plain user or group name"),
    ([{'device': GPU0, 'user': 'u', 'pipe_directory': '/run/../etc'}], "pipe_directory: '/run/../etc' is not a plain"),
    ([{'device': GPU0, 'user': 'u', 'default_active_thread_percentage': 'fifty'}],
     "default_active_thread_percentage: expected a number, got 'fifty'"),
    ([{'device': GPU0, 'user': 'u', 'default_active_thread_percentage': True}], 'expected a number, got True'),
    (['GPU0'], "MPS daemon 1: expected a dict with device, user and clients, got 'GPU0'"),
    ([{'device': GPU0, 'user': 'u', 'clients': {'name': 'a'}}], 'clients must be a list of clients'),
])
def test_new_refusals(daemons, words):
    with pytest.raises(MpsPlanError) as caught:
        plan(TOPOLOGY, daemons)
    assert words in str(caught.value)


def test_numbers_from_extra_vars_are_numbers():
    daemons = plan(TOPOLOGY, [{'device': GPU0, 'user': 'u', 'default_active_thread_percentage': '50',
                               'clients': [{'name': 'a', 'active_thread_percentage': ' 12.5 '}]}])
    assert daemons[0]['default_active_thread_percentage'] == 50
    assert daemons[0]['clients'][0]['active_thread_percentage'] == 12.5


def test_pipe_and_log_roots_must_be_plain():
    with pytest.raises(MpsPlanError) as caught:
        plan(TOPOLOGY, [], pipe_root='/run/../etc', log_root='relative')
    assert "pipe_root: '/run/../etc' is not a plain absolute directory" in str(caught.value)
    assert "log_root: 'relative' is not a plain absolute directory" in str(caught.value)


def test_a_planned_daemon_is_one_type_whose_dict_is_the_plan():
    declared = [{'device': GPU0, 'user': 'infer', 'default_pinned_mem_limit': '40G', 'clients': [{'name': 'llm'}]}]
    daemons = plan_daemons(TOPOLOGY, declared)
    assert all(isinstance(daemon, MpsDaemon) for daemon in daemons)
    assert [daemon.as_dict() for daemon in daemons] == plan(TOPOLOGY, declared)
    assert daemons[0].client_names() == ['llm']
    assert daemons[0].client_environment('llm') == client_environment(daemons[0].as_dict(), 'llm')


def test_a_bare_number_is_a_size_without_a_unit_even_in_a_plan():
    """Only the explicit *_mb keys hold MiB: a daemon is never read differently for having plan()'s other keys."""
    planned = plan(TOPOLOGY, [{'device': GPU0, 'user': 'infer', 'clients': [{'name': 'llm'}]}])
    planned[0]['clients'] = [{'name': 'llm', 'pinned_mem_limit': 4096}]
    with pytest.raises(MpsPlanError) as caught:
        plan(TOPOLOGY, planned)
    assert "pinned_mem_limit: 4096 has no unit" in str(caught.value)


def test_shares_join_their_daemon_s_clients_and_take_its_listed_limits():
    daemons = plan_daemons(TOPOLOGY, [
        {'device': GPU0, 'user': 'infer', 'default_active_thread_percentage': 50,
         'clients': [{'name': 'listed', 'pinned_mem_limit': '10G'}, {'name': 'other', 'pinned_mem_limit': '60G'}]},
        {'device': MIG_A, 'user': 'infer', 'clients': []}])
    found = share_environments(daemons, [('listed', GPU0, None, None), ('mine', MIG_A, 30, '20G')])
    assert found['listed'][1]['CUDA_MPS_PINNED_DEVICE_MEM_LIMIT'] == '0=10G'
    assert found['listed'][1]['CUDA_MPS_ACTIVE_THREAD_PERCENTAGE'] == '50'
    assert found['mine'][1]['CUDA_MPS_PINNED_DEVICE_MEM_LIMIT'] == '0=20G'
    assert found['mine'][0]['device'] == MIG_A and [c['name'] for c in found['mine'][0]['clients']] == ['mine']
    with pytest.raises(MpsPlanError) as caught:
        share_environments(daemons, [('big', GPU0, 60, '30G')])
    text = str(caught.value)
    assert 'MPS daemon 1 (%s), client big: active_thread_percentage 60 is above the daemon\'s default 50' % GPU0 in text
    assert 'promised 102400 MiB of pinned device memory (listed 10G + other 60G + big 30G)' in text
