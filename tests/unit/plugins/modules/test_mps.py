# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""gpufleet.core.mps against tests/mps_sim/nvidia-cuda-mps-control, a test double of the real program."""

from __future__ import absolute_import, division, print_function

import os

import pytest

from ansible_collections.gpufleet.core.plugins.modules import mps

from ...conftest import ModuleFail
from ...support.sim import MPS_CONTROL, mps_control_daemon


@pytest.fixture
def daemon(tmp_path):
    """A running control daemon with its own pipe and log directories; quits afterwards."""
    with mps_control_daemon(tmp_path) as running:
        yield running


def run(run_module, pipe, **options):
    return run_module(mps, dict(options, pipe_directory=pipe, control_command=MPS_CONTROL))


def test_settings_converge_and_a_second_run_changes_nothing(run_module, daemon):
    first = run(run_module, daemon['pipe'], default_active_thread_percentage=40,
                default_pinned_mem_limits={'0': '20G'})
    assert first['changed'] is True
    assert first['commands'] == ['set_default_active_thread_percentage 40',
                                 'set_default_device_pinned_mem_limit 0 20G']
    assert (first['default_active_thread_percentage'], first['default_pinned_mem_limits']) == (40.0, {'0': '20G'})
    assert daemon['send']('get_default_active_thread_percentage').strip() == '40.0'
    second = run(run_module, daemon['pipe'], default_active_thread_percentage=40,
                 default_pinned_mem_limits={'0': '20G'})
    assert second['changed'] is False and second['commands'] == []
    log = open(os.path.join(daemon['log'], 'control.log')).read()
    assert log.count('Cmd:set_default_active_thread_percentage') == 1


def test_a_limit_that_reads_back_rounded_is_not_set_again(run_module, daemon):
    assert run(run_module, daemon['pipe'], default_pinned_mem_limits={'0': '1044M'})['changed'] is True
    assert daemon['send']('get_default_device_pinned_mem_limit 0').strip() == '1G'
    assert run(run_module, daemon['pipe'], default_pinned_mem_limits={'0': '1044M'})['changed'] is False


def test_check_mode_plans_and_sends_nothing(run_module, daemon):
    result = run(run_module, daemon['pipe'], default_active_thread_percentage=25, _ansible_check_mode=True,
                 _ansible_diff=True)
    assert result['changed'] is True and result['commands'] == ['set_default_active_thread_percentage 25']
    assert 'will send: set_default_active_thread_percentage 25' in result['diff']['after']
    assert daemon['send']('get_default_active_thread_percentage').strip() == '100.0'


def test_servers_and_clients_are_listed_and_a_change_waits_for_them(run_module, daemon):
    daemon['send']('start_server -uid 1000')
    result = run(run_module, daemon['pipe'], default_active_thread_percentage=50)
    assert len(result['servers']) == 1 and result['servers'][0]['clients'] == []
    assert result['restart_required'] is True


def test_absent_quits_the_daemon_once(run_module, daemon):
    result = run(run_module, daemon['pipe'], state='absent')
    assert result['changed'] is True and result['running'] is False
    assert 'Cannot find MPS control daemon process' in daemon['send']('get_server_list')
    assert run(run_module, daemon['pipe'], state='absent')['changed'] is False


def test_no_daemon_is_a_clear_error(run_module, tmp_path):
    with pytest.raises(ModuleFail) as failed:
        run(run_module, str(tmp_path / 'nowhere'), default_active_thread_percentage=40)
    msg = failed.value.result['msg']
    assert 'no MPS control daemon answers on %s' % (tmp_path / 'nowhere') in msg
    assert 'gpufleet-mps@<device>.service' in msg


@pytest.mark.parametrize('options, words', [
    ({'default_active_thread_percentage': 0}, 'must lie in 1..100, got 0.0; it limits the SMs'),
    ({'default_active_thread_percentage': 140}, 'must lie in 1..100'),
    ({'default_pinned_mem_limits': {'0': '20X'}}, "default_pinned_mem_limits[0]: '20X' is not a memory size"),
])
def test_bad_input_is_refused_before_talking_to_the_daemon(run_module, daemon, options, words):
    with pytest.raises(ModuleFail) as failed:
        run(run_module, daemon['pipe'], **options)
    assert words in failed.value.result['msg']
    log = open(os.path.join(daemon['log'], 'control.log')).read()
    assert 'Cmd:' not in log
