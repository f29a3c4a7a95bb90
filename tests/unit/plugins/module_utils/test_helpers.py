# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""The host helpers (gpufleet-helpers COMMAND ...) against the NVML simulator, through their main(argv)."""

from __future__ import absolute_import, division, print_function

import json

import pytest

from ansible_collections.gpufleet.core.plugins.module_utils import _helper_compute_mode, _helper_mig_apply, _helpers_main

from ...support.sim import load_host

GPU0 = 'GPU-5c6f7a2e-1b3d-4e8f-9a0b-1c2d3e4f5a60'
MIG0 = 'MIG-1a2b3c4d-5e6f-5a7b-8c9d-0e1f2a3b4c01'
LAYOUT = {'layouts': [{'gpus': 'all', 'layout': ['3g.40gb', {'profile': '1g.10gb', 'count': 2}]}]}


@pytest.fixture
def layout_file(tmp_path):
    def write(declared):
        path = tmp_path / 'mig-layout.json'
        path.write_text(json.dumps(declared))
        return str(path)
    return write


def test_mig_apply_creates_the_layout_then_finds_nothing_to_do(sim_host, layout_file, capsys):
    sim_host('single-h200')
    declared = {'layouts': [{'gpus': 'all', 'layout': ['3g.71gb', {'profile': '1g.18gb', 'count': 2}]}]}
    assert _helper_mig_apply.main(['mig-apply', layout_file(declared)]) == 0
    out = capsys.readouterr().out.splitlines()
    # The operations, then one line per GPU with its layout.
    assert out[:-1] and all(line.startswith('GPU 0 (GPU-0d2f4b6a-8c0e-4a1c-b3d5-e7f9a1b3c5d7, NVIDIA H200): ')
                            for line in out[:-1])
    assert out[-1] == 'GPU 0 GPU-0d2f4b6a-8c0e-4a1c-b3d5-e7f9a1b3c5d7: 1g.18gb@2, 1g.18gb@3, 3g.71gb@4'
    assert _helper_mig_apply.main(['mig-apply', layout_file(declared)]) == 0
    assert capsys.readouterr().out.splitlines() == out[-1:]


def test_mig_apply_refuses_a_layout_that_does_not_fit(sim_host, layout_file, capsys):
    sim_host('single-h200')
    declared = {'layouts': [{'gpus': 'all', 'layout': [{'profile': '3g.71gb', 'count': 3}]}]}
    assert _helper_mig_apply.main(['mig-apply', layout_file(declared)]) == 1
    captured = capsys.readouterr()
    assert captured.out == '' and captured.err.startswith('gpufleet-mig-apply: ')


@pytest.fixture
def ampere_waiting_for_reset(sim_hosts):
    """One A100 of the reference host whose MIG mode change waits for a reset that nvidia-persistenced blocks."""
    description = load_host('reference-a100')
    description['gpus'] = [dict(description['gpus'][0], mig_mode=0, reset_blocked_by=['nvidia-persistenced'])]
    return sim_hosts.described(description)


def test_mig_apply_reports_a_mode_change_that_waits_for_a_reset(ampere_waiting_for_reset, layout_file, capsys):
    assert _helper_mig_apply.main(['mig-apply', layout_file(LAYOUT)]) == 1
    err = capsys.readouterr().err
    assert 'gpufleet-mig-apply: a MIG mode change waits for a GPU reset: ' in err
    # Never an empty list after the colon: either the blockers or that nothing blocks it.
    assert err.split('waits for a GPU reset: ', 1)[1].strip()


def test_mig_apply_does_not_print_waiting_instances_as_done(ampere_waiting_for_reset, layout_file, capsys):
    # Issue 12: only the steps that ran are printed as done; the instances wait for the reset and are named so.
    assert _helper_mig_apply.main(['mig-apply', layout_file(LAYOUT)]) == 1
    captured = capsys.readouterr()
    done = captured.out.splitlines()[:-1]
    assert len(done) == 1 and done[0].endswith(': enable MIG mode')
    waiting = [line for line in captured.err.splitlines() if 'not run until after the reset: ' in line]
    assert len(waiting) == 3 and all('create ' in line for line in waiting)


def test_mig_apply_usage(capsys):
    assert _helper_mig_apply.main(['mig-apply']) == 2
    assert capsys.readouterr().err == 'usage: gpufleet-helpers mig-apply LAYOUT.json\n'


def test_compute_mode_sets_the_mode_and_says_what_it_was(sim_host, capsys):
    sim_host('reference-a100')
    assert _helper_compute_mode.main(['compute-mode', GPU0, 'exclusive_process']) == 0
    assert _helper_compute_mode.main(['compute-mode', GPU0, 'exclusive_process']) == 0
    assert capsys.readouterr().out.splitlines() == [
        GPU0 + ': compute mode exclusive_process (was default)', GPU0 + ': compute mode exclusive_process']


def test_compute_mode_refuses_a_mig_device(sim_host, capsys):
    sim_host('reference-a100')
    assert _helper_compute_mode.main(['compute-mode', MIG0, 'exclusive_process']) == 1
    err = capsys.readouterr().err
    assert err.startswith('gpufleet-compute-mode: ') and 'MIG devices have no compute mode of their own' in err


def test_compute_mode_usage(capsys):
    assert _helper_compute_mode.main(['compute-mode', GPU0]) == 2
    assert capsys.readouterr().err == \
        'usage: gpufleet-helpers compute-mode GPU-UUID default|exclusive_process|prohibited\n'


@pytest.mark.parametrize('helper, argv, program', [
    (_helper_compute_mode, ['compute-mode', GPU0, 'default'], 'gpufleet-compute-mode'),
    (_helper_mig_apply, ['mig-apply', '/nonexistent.json'], 'gpufleet-mig-apply'),
])
def test_without_nvidia_ml_py(monkeypatch, capsys, helper, argv, program):
    monkeypatch.setattr(helper, 'pynvml', None)
    assert helper.main(argv) == 1
    assert capsys.readouterr().err == '%s: nvidia-ml-py (pynvml) is not installed\n' % program


def test_the_dispatcher_hands_the_command_its_arguments(monkeypatch):
    seen = []
    monkeypatch.setattr(_helper_compute_mode, 'main', lambda argv: seen.append(argv) or 7)
    assert _helpers_main.main(['gpufleet-helpers', 'compute-mode', GPU0, 'default']) == 7
    assert seen == [['compute-mode', GPU0, 'default']]


def test_the_dispatcher_lists_its_commands(capsys):
    assert _helpers_main.main(['gpufleet-helpers', '--help']) == 0
    out = capsys.readouterr().out
    assert out.startswith('usage: gpufleet-helpers COMMAND')
    assert [line.split()[0] for line in out.splitlines()[2:]] == sorted(_helpers_main.COMMANDS)


@pytest.mark.parametrize('argv, err', [
    (['gpufleet-helpers'], ''),
    (['gpufleet-helpers', 'reboot-everything'], "gpufleet-helpers: unknown command 'reboot-everything'\n"),
])
def test_the_dispatcher_refuses_what_it_does_not_know(capsys, argv, err):
    assert _helpers_main.main(argv) == 2
    assert capsys.readouterr().err == err + _helpers_main.usage()


def test_the_dispatcher_names_its_version(capsys):
    assert _helpers_main.main(['gpufleet-helpers', '--version'], version='1.2.3') == 0
    assert capsys.readouterr().out == 'gpufleet-helpers 1.2.3\n'
