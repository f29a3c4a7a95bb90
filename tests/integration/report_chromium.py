# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""The fleet report in a real browser (tests/integration/report_chromium.sh runs this).

usage: python3 report_chromium.py OUT_DIR

Renders the report for the lab-like fleet (tests/unit/report/fleet.py: the lab's five hosts on the simulator's
descriptions, with the example fleet's MIG layouts and services, plus the quirky host; hk1-a100-02's imagegen
fails its audit) into OUT_DIR, then with headless Chromium:

- a screenshot at 1400 px width (OUT_DIR/fleet-report.png) that is a non-empty PNG;
- the DOM Chromium builds (--dump-dom): one drawing per host with the numbers of nodes, GPUs, MIG instances, MPS
  shares and services its facts and plan have, no element outside its drawing or its box, and the failed audit
  shown as failed;
- no network request: the page's markup has nothing that fetches, and Chromium's net log, with every host name
  mapped to nowhere, shows no request made by the page. A control page with one image proves the net-log check sees
  a page's request.
Exits non-zero, naming each failure.
"""

from __future__ import absolute_import, division, print_function

import json
import os
import shutil
import struct
import subprocess
import sys
import tempfile

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), '..', '..'))
sys.path.insert(0, REPO)

from ansible_collections.gpufleet.core.plugins.plugin_utils._report.files import HTML_NAME, JSON_NAME, plan_report  # noqa: E402
from tests.unit.report import dom  # noqa: E402
from tests.unit.report.fleet import lab_fleet  # noqa: E402

WIDTH = 1400
HEIGHT = 3000
FAILING = {'hk1-a100-02': {'imagegen': 0.418}}
# Chromium's own traffic (updates, sign-in, time) is switched off where a switch exists; what is left is not the
# page's and is told apart in the net log by its initiator.
CHROMIUM = ['chromium', '--headless', '--no-sandbox', '--disable-gpu', '--hide-scrollbars', '--no-first-run',
            '--disable-background-networking', '--disable-component-update', '--disable-sync', '--disable-default-apps',
            '--host-resolver-rules=MAP * ~NOTFOUND']


def chromium(profile, *args):
    # A guard against a hang, not a speed test: under make test this runs at the lowest priority beside the lab.
    ran = subprocess.run(CHROMIUM + ['--user-data-dir=' + profile] + list(args), stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, universal_newlines=True, timeout=300, check=False)
    if ran.returncode != 0:
        raise SystemExit('chromium %s failed (%d): %s' % (' '.join(args), ran.returncode, ran.stderr[-2000:]))
    return ran.stdout


def page_requests(net_log):
    """URLs the page asked for, from Chromium's net log: requests the browser makes for itself have no origin."""
    with open(net_log) as handle:
        log = json.load(handle)
    start = log['constants']['logEventTypes']['URL_REQUEST_START_JOB']
    found = []
    for event in log['events']:
        params = event.get('params') or {}
        url = params.get('url')
        if event['type'] == start and url and params.get('initiator') != 'not an origin' \
                and not url.startswith(('file:', 'data:')):
            found.append(url)
    return found


def png_size(path):
    with open(path, 'rb') as handle:
        head = handle.read(24)
    if head[:8] != b'\x89PNG\r\n\x1a\n':
        return None
    return struct.unpack('>II', head[16:24])


def expected(host):
    topology, plan = host['topology'], host['plan']['services']
    return {'nodes': len(topology['numa_nodes']), 'gpus': len(topology['gpus']),
            'mig-instances': sum(len(gpu['mig']['gpu_instances']) for gpu in topology['gpus']
                                 if gpu['mig']['mode_current'] == 'enabled'),
            'mps-shares': len([entry for entry in plan if entry['mps']]), 'services': len(plan)}


def browse(page, shot, work):
    """PAGE in Chromium: a screenshot at WIDTH px into SHOT, the DOM Chromium builds (parsed), and what is wrong: a
    screenshot without content, an element outside its drawing or box, anything the page fetches or requests."""
    problems = []
    url = 'file://' + page
    if os.path.exists(shot):
        os.unlink(shot)
    chromium(os.path.join(work, 'profile-shot'), '--window-size=%d,%d' % (WIDTH, HEIGHT), '--screenshot=' + shot, url)
    size = png_size(shot) if os.path.exists(shot) else None
    if size is None or size[0] != WIDTH or os.path.getsize(shot) < 20000:
        problems.append('the screenshot %s is not a %d px wide PNG with content (size %r, %s bytes)' % (
            shot, WIDTH, size, os.path.getsize(shot) if os.path.exists(shot) else 'no'))
    net_log = os.path.join(work, 'net-log.json')
    text = chromium(os.path.join(work, 'profile-dom'), '--log-net-log=' + net_log, '--dump-dom', url)
    with open(os.path.splitext(page)[0] + '.dom.html', 'w') as handle:
        handle.write(text)
    root = dom.parse(text)
    for name, svg in sorted(dom.drawings(root).items()):
        problems.extend('%s: %s' % (name, problem) for problem in dom.geometry_problems(svg))
    with open(page) as handle:
        problems.extend('the page fetches: %s' % item for item in dom.fetches(handle.read()))
    problems.extend('the page fetches: %s' % item for item in dom.fetching_elements(root))
    problems.extend('the page requested %s' % item for item in page_requests(net_log))
    return root, problems


def control_problems(work):
    """A page with one image, whose request the net-log check must see, or it cannot be trusted."""
    control = os.path.join(work, 'control.html')
    with open(control, 'w') as handle:
        handle.write('<!DOCTYPE html><p>control</p><img src="http://report-control.invalid/x.png">')
    control_log = os.path.join(work, 'control-net-log.json')
    chromium(os.path.join(work, 'profile-control'), '--log-net-log=' + control_log, '--dump-dom', 'file://' + control)
    if 'http://report-control.invalid/x.png' not in page_requests(control_log):
        return ['the net-log check did not see the control page\'s request: it cannot be trusted']
    return []


def main(out):
    os.makedirs(out, exist_ok=True)
    work = tempfile.mkdtemp(prefix='report-chromium-')
    hosts = lab_fleet(os.path.join(work, 'hosts'), FAILING)
    written = plan_report(hosts, 'lab fleet, simulated', {})['write']
    for name in (HTML_NAME, JSON_NAME):
        with open(os.path.join(out, name), 'w') as handle:
            handle.write(written[name])
    shot = os.path.join(out, 'fleet-report.png')
    root, problems = browse(os.path.join(out, HTML_NAME), shot, work)
    drawings = dom.drawings(root)
    if sorted(drawings) != sorted(host['name'] for host in hosts):
        problems.append('drawings %s, hosts %s' % (sorted(drawings), sorted(host['name'] for host in hosts)))
    for host in hosts:
        svg = drawings.get(host['name'])
        if svg is None:
            continue
        found = dom.counts(svg)
        want = expected(host)
        if dict((key, found[key]) for key in want) != want:
            problems.append('%s: the DOM has %r, its facts and plan %r' % (host['name'], found, want))
    failed = [g.attrs.get('data-audit') for g in drawings['hk1-a100-02'].find_all('g', 'service')
              if g.attrs.get('data-service') == 'imagegen'] if 'hk1-a100-02' in drawings else []
    article = [a for a in root.find_all('article', 'host') if a.attrs.get('data-host') == 'hk1-a100-02']
    if failed != ['fail'] or not article or article[0].attrs.get('data-status') != 'audit-failed':
        problems.append('hk1-a100-02\'s failed imagegen audit does not show as failed (%r)' % failed)
    problems.extend(control_problems(work))

    for problem in problems:
        print('report_chromium: FAIL: %s' % problem, file=sys.stderr)
    if not problems:
        print('report_chromium: %d drawings checked in Chromium (%s); screenshot %s' % (
            len(drawings), ', '.join('%s: %d GPUs' % (name, dom.counts(svg)['gpus']) for name, svg in sorted(drawings.items())),
            shot))
    shutil.rmtree(work, ignore_errors=True)
    return 1 if problems else 0


if __name__ == '__main__':
    if len(sys.argv) != 2:
        raise SystemExit(__doc__)
    sys.exit(main(os.path.abspath(sys.argv[1])))
