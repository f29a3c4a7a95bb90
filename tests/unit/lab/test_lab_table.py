# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""tests/lab/lab.sh refuses a hosts table with a mistake (GPUFLEET_LAB_HOSTS) before it makes or changes anything."""

from __future__ import absolute_import, division, print_function

import os
import shutil
import subprocess

import pytest

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), '..', '..', '..'))
LAB_SH = os.path.join(REPO, 'tests', 'lab', 'lab.sh')
CHECK_TOOLS = ('dirname', 'grep', 'awk', 'cat')


def lab_up(table, tmp_path):
    path = tmp_path / 'hosts.table'
    path.write_text(table)
    # A PATH with only what lab.sh needs to read and check the table: past the check, the first command it runs
    # (apt, podman, ssh-keygen) is missing, so a table that passes by mistake cannot change this machine.
    tools = tmp_path / 'bin'
    tools.mkdir()
    for tool in CHECK_TOOLS:
        os.symlink(shutil.which(tool), str(tools / tool))
    env = dict(os.environ, GPUFLEET_LAB_HOSTS=str(path), PATH=str(tools))
    return subprocess.run(['/bin/bash', LAB_SH, 'up'], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          universal_newlines=True, check=False)


@pytest.mark.parametrize('line, expected', [
    ('one two', '6 columns expected'),
    ('Bad_Name 10.213.7.40 dc_hk1 hk1_rack_a a100_pcie_4x reference-a100', 'host name'),
    ('h1 10.213.8.40 dc_hk1 hk1_rack_a a100_pcie_4x reference-a100', 'address: 10.213.7.2 to 10.213.7.254'),
    ('h1 10.213.7.1 dc_hk1 hk1_rack_a a100_pcie_4x reference-a100', '.1 is its gateway'),
    ('h1 10.213.7.400 dc_hk1 hk1_rack_a a100_pcie_4x reference-a100', 'address: 10.213.7.2 to 10.213.7.254'),
    ('h1 10.213.7.40 dc-hk1 hk1_rack_a a100_pcie_4x reference-a100', 'group names'),
    ('h1 10.213.7.40 dc_hk1 hk1_rack_a a100_4x reference-a100', 'class: a100_pcie_4x'),
    ('h1 10.213.7.40 dc_hk1 hk1_rack_a a100_pcie_4x no-such-host', 'tests/nvml_sim/hosts/no-such-host.json'),
    ('h1 10.213.7.40 dc_hk1 hk1_rack_a a100_pcie_4x ../hosts/reference-a100', 'no host description'),
])
def test_a_bad_line_is_named_with_its_fix(line, expected, tmp_path):
    good = 'h0 10.213.7.30 dc_hk1 hk1_rack_a a100_pcie_4x reference-a100\n'
    result = lab_up('# a comment\n' + good + line + '\n', tmp_path)
    assert result.returncode == 1
    assert 'has mistakes; fix them' in result.stderr
    assert 'line 2 (%s): ' % line in result.stderr and expected in result.stderr
    assert 'line 1' not in result.stderr  # the good line is not blamed


def test_names_and_addresses_are_unique(tmp_path):
    table = ('h0 10.213.7.30 dc_hk1 hk1_rack_a a100_pcie_4x reference-a100\n'
             'h0 10.213.7.31 dc_hk1 hk1_rack_a a100_pcie_4x reference-a100\n'
             'h2 10.213.7.30 dc_hk1 hk1_rack_a a100_pcie_4x reference-a100\n')
    result = lab_up(table, tmp_path)
    assert result.returncode == 1
    assert 'host h0 is listed twice' in result.stderr
    assert 'address 10.213.7.30 is listed twice' in result.stderr


def test_an_empty_table_is_refused(tmp_path):
    result = lab_up('# only a comment\n\n', tmp_path)
    assert result.returncode == 1 and 'the table has no host' in result.stderr


def test_a_good_table_passes_the_check(tmp_path):
    result = lab_up('h0 10.213.7.30 dc_hk1 hk1_rack_a a100_pcie_4x reference-a100\n'
                    'h1 10.213.7.31 dc_hk2 hk2_rack_c cpu_only cpu-only\n', tmp_path)
    # It gets past the check to the first command it needs, which this PATH lacks.
    assert 'has mistakes' not in result.stderr
    assert result.returncode != 0 and 'command not found' in result.stderr
