# SPDX-License-Identifier: GPL-3.0-or-later
"""Benchmark: what topology_facts' search for MPS daemons costs on a busy host, against the system-call floor.

topology_facts finds MPS control daemons and servers by reading the name (comm) of every process in /proc, so its
cost grows with the processes a host runs: inference hosts with containers, data-loader workers and exporters run
hundreds to thousands. This script starts N idle processes (sleep) beside what this machine already runs and times,
on the live /proc, median of --passes:
  - find_mps_processes: the collection's code (HostFiles.process_names, then cmdline for the names that match);
  - before: the same search as topology_facts made it until 2026-12-02, each name read with open();
  - floor: one os.open, os.read and os.close per process, without reading to the end, decoding or matching.

usage: .venv/bin/python bench/process_scan.py [--counts 0,500,2000,5000] [--passes 15] [--output FILE]
"""

import argparse
import datetime
import os
import platform
import statistics
import subprocess
import sys
import time

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), '..'))
sys.path[:0] = [os.path.join(REPO, 'build', 'collections')]

from ansible_collections.gpufleet.core.plugins.module_utils._host import HostFiles  # noqa: E402
from ansible_collections.gpufleet.core.plugins.module_utils._sysfs_topology import find_mps_processes  # noqa: E402


def pids():
    return [entry for entry in os.listdir('/proc') if entry.isdigit()]


def read_with_open(path):
    """A file's text as HostFiles read it until 2026-12-02: Python's open(), None when absent or gone."""
    try:
        with open(path, 'rb') as handle:
            return handle.read().decode('utf-8', 'replace')
    except (IOError, OSError):
        return None


def before(programs=('nvidia-cuda-mps-control', 'nvidia-cuda-mps-server')):
    """find_processes as it was until 2026-12-02: each name read with open()."""
    found = dict((program, []) for program in programs)
    prefixes = tuple(program[:15] for program in programs)
    for entry in sorted(os.listdir('/proc')):
        if not entry.isdigit():
            continue
        comm = (read_with_open(os.path.join('/proc', entry, 'comm')) or '').strip()
        if not comm.startswith(prefixes):
            continue
        argv0 = (read_with_open(os.path.join('/proc', entry, 'cmdline')) or '').split('\0')[0]
        program = argv0.rsplit('/', 1)[-1]
        if program in found:
            found[program].append(int(entry))
    return dict((program, sorted(found_pids)) for program, found_pids in found.items())


def floor():
    """The system calls alone: open, read and close each comm."""
    for entry in os.listdir('/proc'):
        if not entry.isdigit():
            continue
        try:
            handle = os.open('/proc/' + entry + '/comm', os.O_RDONLY)
        except OSError:
            continue
        try:
            os.read(handle, 64)
        except OSError:
            pass
        os.close(handle)


def median_ms(function, passes):
    times = []
    for dummy in range(passes):
        start = time.perf_counter()
        function()
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1e3


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--counts', default='0,500,2000,5000')
    parser.add_argument('--passes', type=int, default=15)
    parser.add_argument('--output')
    args = parser.parse_args()
    counts = [int(count) for count in args.counts.split(',')]
    files = HostFiles('/sys', '/proc')
    load_before = os.getloadavg()[0]
    rows = []
    for count in counts:
        sleepers = [subprocess.Popen(['sleep', '3600']) for dummy in range(count)]
        try:
            total = len(pids())
            # Interleaved so that a change of load moves all three alike.
            results = {'mps': [], 'before': [], 'floor': []}
            for dummy in range(3):
                results['mps'].append(median_ms(lambda: find_mps_processes(files), args.passes))
                results['before'].append(median_ms(before, args.passes))
                results['floor'].append(median_ms(floor, args.passes))
        finally:
            for sleeper in sleepers:
                sleeper.kill()
            for sleeper in sleepers:
                sleeper.wait()
        row = (total,) + tuple(statistics.median(results[key]) for key in ('mps', 'before', 'floor'))
        rows.append(row)
        print('%5d processes: find_mps_processes %.2f ms, before %.2f ms, floor %.2f ms' % row)
        sys.stdout.flush()
    load_after = os.getloadavg()[0]

    lines = [
        '# Benchmark: the search for MPS daemons on a busy host',
        '',
        'Made by `.venv/bin/python bench/process_scan.py --counts %s --passes %d` (%s), Python %s, %d CPUs; load '
        'average %.1f before and %.1f after. Processes are this machine\'s own plus idle `sleep` processes; each '
        'figure is the median of three interleaved medians of %d passes over the live `/proc`.' % (
            args.counts, args.passes, datetime.date.today().isoformat(), platform.python_version(),
            os.cpu_count(), load_before, load_after, args.passes),
        '',
        '| processes | `find_mps_processes` | per process | before (until 2026-12-02) | floor (system calls) |',
        '| ---: | ---: | ---: | ---: | ---: |',
    ]
    for total, mps, former, bare in rows:
        lines.append('| %d | %.2f ms | %.1f us | %.2f ms | %.2f ms |' % (total, mps, 1e3 * mps / total, former, bare))
    total, mps, former, bare = rows[-1]
    lines += ['', '## Reading the figures', '',
              '- At %d processes the search costs %.1f ms: %.2f times the floor of the system calls it must make, '
              'and %.1f times less than before (%.1f ms).' % (total, mps, mps / bare, former / mps, former),
              '- The cost grows with the processes a host runs, about %.1f us each here, and it is paid on every '
              'play that gathers the fact; the only way below the floor is to read fewer processes, which would '
              'miss daemons started by hand with their own pipe directories.' % (1e3 * mps / total),
              ''] + ABOUT
    text = '\n'.join(lines) + '\n'
    print(text)
    if args.output:
        with open(args.output, 'w') as handle:
            handle.write(text)


ABOUT = [
    'What the columns are: `find_mps_processes` is the collection\'s code as topology_facts runs it (every '
    'process\'s name through `HostFiles.process_names`, which reads each file to its end with bare system calls, '
    'then the command line of the few whose name matches); "before" is the same search as topology_facts made it '
    'until 2026-12-02, each file read with Python\'s `open()`; the floor is one open, read and close per process '
    'with nothing done with the bytes (the collection reads once more, to be sure of the end of the file).',
]


if __name__ == '__main__':
    main()
