# SPDX-License-Identifier: GPL-3.0-or-later
"""Where a lab run's time goes: the site runs a lab test kept (GPUFLEET_LAB_LOGS=DIR tests/run.sh lab), summed by
play, by stage and by role, and the tasks that took longest.

Each run's output has the example's per-task times (ansible.posix.profile_tasks): the line under a task's header
gives, in parentheses, how long the task before it took. A task's time is the wall time of the task across the
batch's hosts, so a sum is wall time of the run, not CPU.

usage: .venv/bin/python bench/lab_time.py DIR [--top 25]
"""

import argparse
import collections
import os
import re
import sys

HEADER = re.compile(r'^(TASK|PLAY|RUNNING HANDLER) \[(.*)\] \*+$')
STAMP = re.compile(r'^\w+ \d+ \w+ \d+\s+[\d:]+ [+-]\d+ \((\d+):(\d+):([\d.]+)\)')
INCLUDED = re.compile(r'^included: \S+/playbooks/fleet/tasks/(\w+)\.yml for ')


def seconds(match):
    return int(match.group(1)) * 3600 + int(match.group(2)) * 60 + float(match.group(3))


def tasks_of(text):
    """[(play, stage, task name, seconds)] of one run's output, in order."""
    found = []
    play, stage, current = '', '', None
    for line in text.splitlines():
        header = HEADER.match(line)
        stamp = STAMP.match(line)
        included = INCLUDED.match(line)
        if stamp and current is not None:
            found.append(current + (seconds(stamp),))
            current = None
        if included:
            stage = included.group(1)
        if header:
            if header.group(1) == 'PLAY':
                play, stage = header.group(2), ''
                current = None
            else:
                name = header.group(2)
                if name.startswith(('Variables of', 'Which stages are converged', 'The host went through',
                                    'Give the drained host back', 'Health gate', 'Keep the gate')):
                    stage = ''
                current = (play, stage, name)
    return found


def role_of(task):
    return task.split(' : ', 1)[0] if ' : ' in task else '(playbook)'


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__.split('\n', 1)[0])
    parser.add_argument('directory')
    parser.add_argument('--top', type=int, default=25)
    args = parser.parse_args(argv)
    by_play, by_stage, by_role, by_task = collections.Counter(), collections.Counter(), collections.Counter(), collections.Counter()
    runs = sorted(name for name in os.listdir(args.directory) if name.endswith('.log'))
    print('each run (its command line after the playbook, and its time in tasks):')
    for name in runs:
        with open(os.path.join(args.directory, name)) as handle:
            text = handle.read()
        found = tasks_of(text)
        command = text.split('\n', 1)[0]
        print('  %7.1f s  %s  %s' % (sum(task[3] for task in found), name, command.split('site.yml', 1)[-1][:150]))
        for play, stage, task, spent in found:
            by_play[play[:60]] += spent
            by_stage[stage or '(outside a stage)'] += spent
            by_role[role_of(task)] += spent
            by_task['%s / %s' % (play[:30], task[:90])] += spent
    total = sum(by_play.values())
    print('\n%d site runs, %.0f s in tasks' % (len(runs), total))
    for title, counter, limit in (('play', by_play, None), ('stage (rollout)', by_stage, None),
                                  ('role', by_role, None), ('task', by_task, args.top)):
        print('\nby %s:' % title)
        for key, spent in counter.most_common(limit):
            print('  %7.1f s  %4.1f%%  %s' % (spent, 100.0 * spent / total if total else 0, key))
    return 0


if __name__ == '__main__':
    sys.exit(main(sys.argv[1:]))
