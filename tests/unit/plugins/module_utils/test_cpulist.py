# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import absolute_import, division, print_function

import pytest
from hypothesis import given, strategies as st

from ansible_collections.gpufleet.core.plugins.module_utils._cpulist import (
    CpuListError,
    cpus_from_words,
    format_cpulist,
    format_sorted,
    parse_cpulist,
    parse_cpulists,
    parse_cpumask,
)


@pytest.mark.parametrize('text, cpus', [
    ('0-3,8,10-11', [0, 1, 2, 3, 8, 10, 11]),
    ('0', [0]),
    ('', []),
    ('   \n', []),
    (' 0-1 , 4 \n', [0, 1, 4]),
    ('0,4,8,12', [0, 4, 8, 12]),
    ('3,1,2', [1, 2, 3]),
    ('0-1,1-2', [0, 1, 2]),
    ('1022-1023,4094', [1022, 1023, 4094]),
])
def test_parse_cpulist(text, cpus):
    assert parse_cpulist(text) == cpus


@pytest.mark.parametrize('text', ['0-', '-3', 'a', '3-1', '0,,1', '0-1-2', ',', '1.5', None])
def test_parse_cpulist_rejects_malformed_lists(text):
    with pytest.raises(CpuListError) as caught:
        parse_cpulist(text)
    assert 'CPU list' in str(caught.value)


@pytest.mark.parametrize('cpus, text', [
    ([0, 1, 2, 3, 8, 10, 11], '0-3,8,10-11'),
    ([], ''),
    ([5], '5'),
    ([0, 2, 4], '0,2,4'),
    ({3, 1, 2}, '1-3'),
    ([64, 65, 127, 4095], '64-65,127,4095'),
])
def test_format_cpulist(cpus, text):
    assert format_cpulist(cpus) == text


@pytest.mark.parametrize('cpus', [[-1, 0], [-1], [True], ['x']])
def test_format_cpulist_rejects_what_is_not_a_cpu_number_also_alone(cpus):
    # One number alone takes a shorter way (the planner's memory nodes); it must refuse what the long way refuses.
    with pytest.raises(CpuListError):
        format_cpulist(cpus)


def _ranges_one_by_one(cpus):
    """The kernel's format, the plain way: a range per run of consecutive numbers."""
    runs = []
    for cpu in sorted(set(cpus)):
        if runs and cpu == runs[-1][1] + 1:
            runs[-1][1] = cpu
        else:
            runs.append([cpu, cpu])
    return ','.join(str(low) if low == high else '%d-%d' % (low, high) for low, high in runs)


@given(st.sets(st.integers(min_value=0, max_value=300), max_size=120))
def test_format_sorted_and_format_cpulist_write_each_run_as_one_range(cpus):
    assert format_sorted(sorted(cpus)) == format_cpulist(list(cpus)) == _ranges_one_by_one(cpus)


@given(st.sets(st.integers(min_value=0, max_value=8191), max_size=300))
def test_format_then_parse_is_identity(cpus):
    assert parse_cpulist(format_cpulist(cpus)) == sorted(cpus)


@pytest.mark.parametrize('mask, cpus', [
    ('0000000f', [0, 1, 2, 3]),
    ('00000001,00000000', [32]),
    ('ffffffff,ffffffff', list(range(64))),
    ('00000000,00000000', []),
    ('', []),
    ('0000ff00\n', list(range(8, 16))),
])
def test_parse_cpumask(mask, cpus):
    assert parse_cpumask(mask) == cpus


def test_parse_cpumask_rejects_non_hex():
    with pytest.raises(CpuListError):
        parse_cpumask('0000zz00')


def test_cpus_from_words_uses_64_bit_words():
    assert cpus_from_words([0b101, 1]) == [0, 2, 64]
    assert cpus_from_words([]) == []


def test_many_short_lists_parse_as_the_general_parser_does():
    texts = ['0,64', '64,0', '5', '7,7', '0-1', '2,3,4', ' 8 , 9', '10-11,40-41']
    assert parse_cpulists(texts) == [tuple(parse_cpulist(text)) for text in texts]
    with pytest.raises(CpuListError, match="malformed CPU list '0,,1'"):
        parse_cpulists(['0,1', '0,,1'])


@given(st.sets(st.integers(min_value=0, max_value=70000), max_size=60))
def test_format_sorted_writes_numbers_past_its_table_as_the_plain_way_does(cpus):
    # Numbers below 1024 are written from a table made once; the others (and lists reaching them) without it.
    assert format_sorted(sorted(cpus)) == _ranges_one_by_one(cpus)
    assert format_sorted(sorted(cpus | {1023, 1024, 1025})) == _ranges_one_by_one(cpus | {1023, 1024, 1025})


@pytest.mark.parametrize('text, cpus', [('5,3,3', [3, 5]), ('0,65535', [0, 65535]), ('007', [7])])
def test_a_list_of_single_cpus_parses_as_the_general_parser_does(text, cpus):
    assert parse_cpulist(text) == cpus


def test_a_single_cpu_above_any_kernel_is_refused_with_the_general_message():
    with pytest.raises(CpuListError, match='CPU 65536 is above 65535'):
        parse_cpulist('1,65536')
