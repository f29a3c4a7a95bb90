# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""gpufleet.core.drain: the mark first, then the units in order; given back in the reverse order, the mark last."""

from __future__ import absolute_import, division, print_function

import os

import pytest

from ansible_collections.gpufleet.core.plugins.module_utils import _drain
from ansible_collections.gpufleet.core.plugins.module_utils._drain import DrainError, DrainHost, check_inputs, drain, undrain

UNITS = ['gpufleet-svc-*.service', 'gpufleet-watchdog.timer', 'gpufleet-mps@*.service', 'gpufleet-dcgm-exporter.service']


class FakeSystemd:
    """systemctl's answers over a set of active units, recording every call (and when the mark was there)."""

    def __init__(self, active, mark_path=None, fail_on=None):
        self.active = set(active)
        self.calls = []
        self.mark_path = mark_path
        self.fail_on = fail_on

    def __call__(self, argv):
        verb, rest = argv[1], argv[2:]
        self.calls.append((verb, rest[-1], bool(self.mark_path) and os.path.exists(self.mark_path)))
        if verb == 'list-units':
            pattern = rest[-1]
            prefix = pattern.split('*')[0]
            suffix = pattern.split('*')[-1]
            found = sorted(unit for unit in self.active if unit == pattern
                           or ('*' in pattern and unit.startswith(prefix) and unit.endswith(suffix)))
            return 0, ''.join('%s loaded active running x\n' % unit for unit in found), ''
        if verb == 'is-active':
            return (0, 'active\n', '') if rest[-1] in self.active else (3, 'inactive\n', '')
        if rest[-1] == self.fail_on:
            return 1, '', 'Job for %s failed.' % rest[-1]
        (self.active.discard if verb == 'stop' else self.active.add)(rest[-1])
        return 0, '', ''


def host_of(systemd):
    return DrainHost(systemd, '/bin/systemctl')


def test_the_mark_is_written_first_then_each_pattern_s_active_units_stop_in_order(tmp_path):
    mark = str(tmp_path / _drain.MARK_FILE)
    systemd = FakeSystemd(['gpufleet-svc-llm.service', 'gpufleet-svc-imagegen.service', 'gpufleet-mps@GPU-a.service',
                           'gpufleet-dcgm-exporter.service', 'sshd.service'], mark)
    changed, stopped, (before, after) = drain(host_of(systemd), UNITS, 'upgrade', str(tmp_path), False)
    assert changed and before is None and after == open(mark).read()
    assert 'gpufleet_host_drained{reason="upgrade"} 1\n' in after
    assert stopped == ['gpufleet-svc-imagegen.service', 'gpufleet-svc-llm.service', 'gpufleet-mps@GPU-a.service',
                       'gpufleet-dcgm-exporter.service']
    # Every stop came after the mark was in place: Prometheus knew before anything went down.
    assert all(marked for verb, _unit, marked in systemd.calls if verb == 'stop')
    assert systemd.active == {'sshd.service'}
    # Again: nothing left to stop, the mark unchanged.
    assert drain(host_of(systemd), UNITS, 'upgrade', str(tmp_path), False)[:2] == (False, [])


def test_check_mode_says_what_it_would_stop_and_changes_nothing(tmp_path):
    systemd = FakeSystemd(['gpufleet-svc-llm.service'])
    changed, stopped, _mark = drain(host_of(systemd), UNITS, 'upgrade', str(tmp_path), True)
    assert changed and stopped == ['gpufleet-svc-llm.service']
    assert systemd.active == {'gpufleet-svc-llm.service'} and os.listdir(str(tmp_path)) == []


def test_undrain_starts_what_is_not_active_in_reverse_order_and_sets_the_mark_to_0(tmp_path):
    systemd = FakeSystemd(['gpufleet-svc-llm.service', 'gpufleet-dcgm-exporter.service'])
    drain(host_of(systemd), UNITS, 'upgrade', str(tmp_path), False)
    systemd.active.add('gpufleet-dcgm-exporter.service')  # a later stage started the exporter already
    systemd.calls = []
    changed, started, (before, after) = undrain(
        host_of(systemd), ['gpufleet-svc-llm.service', 'gpufleet-dcgm-exporter.service'], 'upgrade', str(tmp_path),
        False)
    assert changed and started == ['gpufleet-svc-llm.service'] and 'gpufleet_host_drained{reason="upgrade"} 1\n' in before
    # The series stays, at 0: the alert reads its last sample and resolves at the next scrape.
    assert 'gpufleet_host_drained{reason="upgrade"} 0\n' in after
    assert after == open(str(tmp_path / _drain.MARK_FILE)).read()
    assert [call[:2] for call in systemd.calls if call[0] == 'start'] == [('start', 'gpufleet-svc-llm.service')]
    assert os.listdir(str(tmp_path)) == [_drain.MARK_FILE]
    assert undrain(host_of(systemd), ['gpufleet-svc-llm.service'], 'upgrade', str(tmp_path), False)[:2] == (False, [])
    # Drained again: the same series goes back to 1.
    assert drain(host_of(systemd), [], 'upgrade', str(tmp_path), False)[0]
    assert 'gpufleet_host_drained{reason="upgrade"} 1\n' in open(str(tmp_path / _drain.MARK_FILE)).read()


def test_undrain_keeps_the_reason_the_mark_was_written_with(tmp_path):
    drain(host_of(FakeSystemd([])), [], 'firmware', str(tmp_path), False)
    changed, _started, (_before, after) = undrain(host_of(FakeSystemd([])), [], 'upgrade', str(tmp_path), False)
    assert changed and 'gpufleet_host_drained{reason="firmware"} 0\n' in after


def test_undrain_writes_no_mark_on_a_host_never_drained(tmp_path):
    assert undrain(host_of(FakeSystemd([])), [], 'upgrade', str(tmp_path), False) == (False, [], (None, None))
    assert os.listdir(str(tmp_path)) == []


def test_undrain_in_check_mode_changes_nothing(tmp_path):
    drain(host_of(FakeSystemd([])), [], 'upgrade', str(tmp_path), False)
    before = open(str(tmp_path / _drain.MARK_FILE)).read()
    changed, _started, (_before, after) = undrain(host_of(FakeSystemd([])), [], 'upgrade', str(tmp_path), True)
    assert changed and ' 0\n' in after and open(str(tmp_path / _drain.MARK_FILE)).read() == before


def test_undrain_takes_unit_names_not_patterns(tmp_path):
    with pytest.raises(DrainError, match='gpufleet-svc-\\*.service is a pattern; give the units the drain stopped'):
        undrain(host_of(FakeSystemd([])), ['gpufleet-svc-*.service'], 'upgrade', str(tmp_path), False)


def test_a_unit_that_will_not_stop_is_named(tmp_path):
    systemd = FakeSystemd(['gpufleet-svc-llm.service'], fail_on='gpufleet-svc-llm.service')
    with pytest.raises(DrainError, match='"systemctl stop gpufleet-svc-llm.service" failed \\(rc=1\\): Job for'):
        drain(host_of(systemd), UNITS, 'upgrade', str(tmp_path), False)


@pytest.mark.parametrize('units, reason, directory, words', [
    (['gpufleet svc.service'], 'upgrade', '/var/lib/x', "units: 'gpufleet svc.service' is not a unit name"),
    (['../../etc/passwd'], 'upgrade', '/var/lib/x', "units: '../../etc/passwd' is not a unit name"),
    (UNITS, 'Driver Upgrade', '/var/lib/x', "reason: 'Driver Upgrade'; give a short lower-case word"),
    (UNITS, 'upgrade', 'relative/dir', "textfile_dir: 'relative/dir' is not an absolute path"),
])
def test_bad_input_is_named_with_the_fix(units, reason, directory, words):
    problems = check_inputs(units, reason, directory)
    assert len(problems) == 1 and words in problems[0]


def test_good_input_has_no_problem():
    assert check_inputs(UNITS, 'upgrade', '/var/lib/prometheus/node-exporter') == []
    assert check_inputs([], 'upgrade', '') == []
