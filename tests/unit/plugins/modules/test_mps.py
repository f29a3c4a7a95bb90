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
    ({'default_pinned_mem_limit': {'0': '20X'}}, "default_pinned_mem_limit[0]: '20X' is not a memory size"),
])
def test_bad_input_is_refused_before_talking_to_the_daemon(run_module, daemon, options, words):
    with pytest.raises(ModuleFail) as failed:
        run(run_module, daemon['pipe'], **options)
    assert words in failed.value.result['msg']
    log = open(os.path.join(daemon['log'], 'control.log')).read()
    assert 'Cmd:' not in log


def test_the_option_has_the_role_s_spelling_and_the_old_one_still_works(run_module, daemon):
    first = run(run_module, daemon['pipe'], default_pinned_mem_limit='2G')
    assert first['commands'] == ['set_default_device_pinned_mem_limit 0 2G']
    assert first['default_pinned_mem_limits'] == {'0': '2G'}
    assert run(run_module, daemon['pipe'], default_pinned_mem_limits={'0': '2G'})['changed'] is False


def test_a_percentage_from_extra_vars_is_a_number(run_module, daemon):
    result = run(run_module, daemon['pipe'], default_active_thread_percentage='50')
    assert result['commands'] == ['set_default_active_thread_percentage 50']
    assert result['default_active_thread_percentage'] == 50.0


def test_a_refused_command_fails_with_the_daemon_s_answer_and_what_was_applied(run_module, daemon):
    # The double sees one device (0), like a daemon started with one UUID in CUDA_VISIBLE_DEVICES.
    for _attempt in range(2):
        with pytest.raises(ModuleFail) as failed:
            run(run_module, daemon['pipe'], default_active_thread_percentage=30,
                default_pinned_mem_limit={'0': '1G', '3': '1G', '5': '2G'})
        result = failed.value.result
        assert 'refused "set_default_device_pinned_mem_limit 3 1G": Invalid device 3' in result['msg']
        assert result['failed_on'] == ['set_default_device_pinned_mem_limit 3 1G']
        assert result['not_run'] == ['set_default_device_pinned_mem_limit 5 2G']
    # The first run applied two commands; the second had nothing left to apply but the refused one.
    assert result['applied'] == [] and result['changed'] is False
    log = open(os.path.join(daemon['log'], 'control.log')).read()
    assert log.count('Cmd:set_default_active_thread_percentage') == 1


def test_the_first_run_of_a_refusal_reports_its_changes(run_module, daemon):
    with pytest.raises(ModuleFail) as failed:
        run(run_module, daemon['pipe'], default_active_thread_percentage=30, default_pinned_mem_limit={'7': '1G'})
    result = failed.value.result
    assert result['changed'] is True and result['applied'] == ['set_default_active_thread_percentage 30']
    assert 'already applied: set_default_active_thread_percentage 30' in result['msg']


def test_success_separates_applied_failed_and_not_run(run_module, daemon):
    checked = run(run_module, daemon['pipe'], default_active_thread_percentage=30, _ansible_check_mode=True)
    assert (checked['applied'], checked['failed_on'], checked['not_run']) == (
        [], [], ['set_default_active_thread_percentage 30'])
    done = run(run_module, daemon['pipe'], default_active_thread_percentage=30)
    assert (done['applied'], done['failed_on'], done['not_run']) == (['set_default_active_thread_percentage 30'], [], [])


def test_every_bad_limit_is_named_in_one_message(run_module, daemon):
    with pytest.raises(ModuleFail) as failed:
        run(run_module, daemon['pipe'], default_pinned_mem_limit={'0': '20', '1': '-1G', 'gpu2': '1G', 'gpu3': '2G'})
    assert failed.value.result['msg'] == (
        "default_pinned_mem_limit: 'gpu2', 'gpu3' are not a device as the daemon names it (an ordinal such as \"0\", "
        "or a GPU-/MIG- UUID)")
    with pytest.raises(ModuleFail) as failed:
        run(run_module, daemon['pipe'], default_pinned_mem_limit={'GPU-5c6f7a2e': '1G', 'MIG-GPU-5c6f7a2e/1/0': '1G'})
    assert failed.value.result['msg'].startswith("default_pinned_mem_limit: 'MIG-GPU-5c6f7a2e/1/0' is not a device")
    with pytest.raises(ModuleFail) as failed:
        run(run_module, daemon['pipe'], default_pinned_mem_limit={'0': '20', '1': '-1G'})
    assert failed.value.result['msg'] == (
        "default_pinned_mem_limit[0]: '20' has no unit; give a memory size like 20G or 512M | "
        "default_pinned_mem_limit[1]: '-1G' is negative; give a memory size like 20G or 512M")
