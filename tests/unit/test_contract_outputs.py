# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""Issue 30's contract: the report, the binding audit and the watchdog give byte-identical output on the simulator
fleet before and after the refactor, or each difference is explained.

tests/unit/support/contract_outputs.py makes the outputs (``collect()``); tests/unit/fixtures/contract_outputs.json.gz
holds them as the code before the refactor (0a581e4) gave them. Every entry is compared byte for byte; a difference
names the entry and its first differing line.

A deliberate change is listed in EXPLAINED: entry name -> why it changed, and the sha256 of the text it gives now
(the failure message prints it). That entry is then held to the new text instead (and fails if it still equals the
old one, or changes again). To regenerate the fixture from another base commit, see contract_outputs.py's docstring.
"""

from __future__ import absolute_import, division, print_function

import hashlib

import pytest

from .support.contract_outputs import FIXTURE, collect, read_fixture

# name -> {'why': 'the fix, in words (issue/commit)', 'sha256': 'of the entry as the code now gives it'}
EXPLAINED = {
    'audit/bad-input': {
        'why': 'numa_audit without services or plan_file audits the default plan file (_plan.PLAN_FILE) instead of '
               'refusing, so the verify stage and the report no longer repeat the path (fb7aa4a)',
        'sha256': '34e9ac9a02a6ae4cddd66926f2ad73d8232ee64f759ad8fd8c76622510771c4d'},
    'audit/unreadable-plans': {
        'why': 'a plan entry whose name is not a string ({"name": 7}) is refused by the one plan reader '
               '(_plan.read_plan), instead of being audited as unit gpufleet-svc-7.service (fb7aa4a)',
        'sha256': '81682a75cf7c0ff585dd8c0a4e3faade7adc6099bce21df7ee256646e6e0e35d'},
    'report/bad-input/fleet-report.html': {
        'why': "the report reads the plan and the fact through _plan.read_plan and _topology.Topology: their messages, "
               "a plan with a nameless entry refused whole, and a fact the model refuses not drawn in part (so its "
               "'unknown GPU' row is gone from the summary) (a173871)",
        'sha256': '09181c484b54f212f352008762c36bf2477006c1172f4626b8553ced388a2d5a'},
    'report/bad-input/fleet-report.json': {
        'why': 'as the page: the plan and fact readers\' refusals (a173871)',
        'sha256': '3a43a27dc1ed66dce386fd61f63a748e07c9486f8dc9fccfa598eedd09982bce'},
}


def sha256(text):
    return hashlib.sha256(text.encode('utf-8')).hexdigest()


def first_difference(before, after):
    """Where two texts first differ, in words: the line number and both lines."""
    old, new = before.splitlines(True), after.splitlines(True)
    for number, (left, right) in enumerate(zip(old, new), 1):
        if left != right:
            # A page is a few long lines: show where in the line, with some text around it.
            column = next((index for index, (a, b) in enumerate(zip(left, right)) if a != b), min(len(left), len(right)))
            start = max(0, column - 80)
            return 'line %d, column %d: was %r, now %r' % (number, column + 1, left[start:column + 120],
                                                           right[start:column + 120])
    if len(old) != len(new):
        number = min(len(old), len(new)) + 1
        return 'line %d: %s' % (number, 'the text now ends before it (had %d lines, now %d)' % (len(old), len(new))
                                if len(old) > len(new) else 'new lines from here (had %d lines, now %d)' % (len(old), len(new)))
    return 'same lines, different bytes'


def differences(recorded, outputs, explained):
    """One message per entry that differs from its recorded (or explained) text, or is missing or new."""
    problems = []
    for name in sorted(set(recorded) | set(outputs)):
        if name not in outputs:
            problems.append('%s: no longer produced (the fixture has it)' % name)
            continue
        if name not in recorded:
            problems.append('%s: new entry, not in the fixture (regenerate it from the base commit)' % name)
            continue
        before, now = recorded[name], outputs[name]
        if name in explained:
            if now == before:
                problems.append('%s: listed in EXPLAINED but identical to the base; remove it from EXPLAINED' % name)
            elif sha256(now) != explained[name]['sha256']:
                problems.append('%s: differs from the text EXPLAINED records (sha256 now %s); against the base, %s'
                                % (name, sha256(now), first_difference(before, now)))
        elif now != before:
            problems.append('%s: %s (sha256 now %s)' % (name, first_difference(before, now), sha256(now)))
    for name in sorted(set(explained) - set(recorded)):
        problems.append('%s: in EXPLAINED but not an entry of the fixture' % name)
    return problems


@pytest.fixture(scope='module')
def recorded():
    return read_fixture(FIXTURE)


@pytest.fixture(scope='module')
def outputs():
    return collect()


def test_every_explanation_says_why_and_what():
    for name, entry in EXPLAINED.items():
        assert sorted(entry) == ['sha256', 'why'] and entry['why'].strip(), name
        assert len(entry['sha256']) == 64, name


def test_a_changed_output_is_caught_with_its_first_differing_line():
    recorded = {'a': 'one\ntwo\nthree\n', 'b': 'same\n', 'c': 'short\n'}
    outputs = {'a': 'one\ntwo!\nthree\n', 'b': 'same\n', 'c': 'short\nlonger\n', 'd': 'new\n'}
    assert differences(recorded, outputs, {}) == [
        "a: line 2, column 4: was 'two\\n', now 'two!\\n' (sha256 now %s)" % sha256(outputs['a']),
        'c: line 2: new lines from here (had 1 lines, now 2) (sha256 now %s)' % sha256(outputs['c']),
        'd: new entry, not in the fixture (regenerate it from the base commit)']
    explained = {'a': {'why': 'a fix', 'sha256': sha256(outputs['a'])}, 'b': {'why': 'stale', 'sha256': '0' * 64}}
    assert differences(recorded, dict(outputs, c='short\n'), explained) == [
        'b: listed in EXPLAINED but identical to the base; remove it from EXPLAINED',
        'd: new entry, not in the fixture (regenerate it from the base commit)']
    changed_again = dict(outputs, a='one\ntwo?\nthree\n', c='short\n')
    assert differences(recorded, changed_again, explained)[0].startswith(
        "a: differs from the text EXPLAINED records (sha256 now %s); against the base, line 2" % sha256(changed_again['a']))
    assert differences({'a': 'x\n'}, {}, {}) == ['a: no longer produced (the fixture has it)']


def test_the_outputs_are_the_base_commits_byte_for_byte(recorded, outputs):
    problems = differences(recorded, outputs, EXPLAINED)
    assert not problems, '%d of %d entries differ from %s:\n%s' % (
        len(problems), len(recorded), FIXTURE, '\n'.join(problems))
