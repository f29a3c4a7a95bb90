# SPDX-License-Identifier: GPL-3.0-or-later
"""Benchmark: the rollout's batch planning (_fleet_rollout.rollout_plan) by fleet size and failure domains.

Each fleet has N GPU hosts spread over D failure domains (gpufleet_batch_by), a tenth of them failed in preflight,
and a canary of 1. Reports the controller CPU time of one plan (the median of --repeat), and the time per host,
which stays flat when the planning is linear in the hosts whatever the number of domains.

usage: .venv/bin/python bench/rollout_plan.py [--repeat 5]
"""

import argparse
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', 'build', 'collections'))

from ansible_collections.gpufleet.core.plugins.module_utils._fleet_rollout import rollout_plan  # noqa: E402

SIZES = [(1000, 50), (1000, 1000), (10000, 100), (10000, 10000)]
SETTINGS = {'gpufleet_batch_by': 'gpufleet_rack', 'gpufleet_canary': 1, 'gpufleet_serial': [1],
            'gpufleet_max_fail_percentage': 0}


def plan_seconds(hosts, domains, repeat):
    names = ['gpu-%05d' % number for number in range(hosts)]
    domain_of = dict((name, 'rack-%05d' % (number % domains)) for number, name in enumerate(names))
    failed = dict((name, 'unreachable') for name in names[::10])
    times = []
    for _pass in range(repeat):
        started = time.process_time()
        plan = rollout_plan(names, failed, domain_of, SETTINGS, names)
        times.append(time.process_time() - started)
    assert len(plan['hosts']) == hosts - len(failed) and sum(plan['serial']) == len(plan['hosts'])
    return statistics.median(times)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split('\n', maxsplit=1)[0])
    parser.add_argument('--repeat', type=int, default=5)
    args = parser.parse_args()
    print('| hosts | failure domains | plan (CPU, median of %d) | per host |' % args.repeat)
    print('| ---: | ---: | ---: | ---: |')
    for hosts, domains in SIZES:
        seconds = plan_seconds(hosts, domains, args.repeat)
        print('| %d | %d | %.2f ms | %.2f us |' % (hosts, domains, 1000 * seconds, 1e6 * seconds / hosts))
    print('\nPython %s, load average %s' % (sys.version.split()[0], ', '.join('%.2f' % v for v in os.getloadavg())))


if __name__ == '__main__':
    main()
