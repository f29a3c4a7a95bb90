# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.core contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Draining a GPU host before its packages change, and giving it back: the mark that tells Prometheus the host is
out on purpose (node_exporter's textfile collector, which the pack's GpuHostDrained alert reads) and the units stopped
in order (services before the daemons they use, the exporter last), started again in the reverse order.

All system access is DrainHost's (systemctl and the mark's file), which tests replace. A private module: its API may
change without notice.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import re

from ansible_collections.gpufleet.core.plugins.module_utils._errors import GpufleetError
from ansible_collections.gpufleet.core.plugins.module_utils._host import write_atomic

MARK_FILE = 'gpufleet-drain.prom'
# A unit name, or a pattern of one with systemctl's globs (gpufleet-svc-*.service): no spaces, no path.
_UNIT_PATTERN = re.compile(r'[A-Za-z0-9:_.@*?\[\]\\-]+\.(service|timer|socket|target|path)')
_REASON = re.compile(r'[a-z][a-z0-9_-]{0,31}')


class DrainError(GpufleetError):
    """A unit could not be stopped or started, or the mark not written: the message names it."""


_SAMPLE = re.compile(r'gpufleet_host_drained\{reason="(%s)"\} [01]' % _REASON.pattern)


def mark_text(reason, drained=True):
    """The mark's content: one sample of gpufleet_host_drained, 1 while the host is out (with why), 0 once it is back.

    A given-back host keeps its mark at 0 rather than losing it: the alert reads the last sample, so a 0 resolves it
    at the next scrape, where a removed file would leave the last sample at 1 until the alert's window ran out.
    """
    return ('# HELP gpufleet_host_drained 1 while the site playbook has drained this host on purpose (gpufleet.core.drain).\n'
            '# TYPE gpufleet_host_drained gauge\n'
            'gpufleet_host_drained{reason="%s"} %d\n' % (reason, 1 if drained else 0))


def marked_reason(text):
    """The reason label of a mark's sample; None when the text has no sample of ours."""
    for line in (text or '').splitlines():
        match = _SAMPLE.fullmatch(line.strip())
        if match:
            return match.group(1)
    return None


def check_inputs(units, reason, textfile_dir):
    """Every problem of the inputs, each naming the value and the fix; [] when they are good."""
    problems = ['units: %r is not a unit name or pattern such as gpufleet-svc-*.service' % unit
                for unit in units if not isinstance(unit, str) or not _UNIT_PATTERN.fullmatch(unit)]
    if not _REASON.fullmatch(reason or ''):
        problems.append('reason: %r; give a short lower-case word such as upgrade' % (reason,))
    if textfile_dir and not os.path.isabs(textfile_dir):
        problems.append('textfile_dir: %r is not an absolute path; give node_exporter\'s textfile collector '
                        'directory, such as /var/lib/prometheus/node-exporter, or an empty string for no mark'
                        % textfile_dir)
    return problems


class DrainHost:
    """systemctl and the mark's file on this host."""

    def __init__(self, run_command, systemctl):
        self.run_command = run_command
        self.systemctl = systemctl

    def _systemctl(self, *args):
        rc, out, err = self.run_command([self.systemctl] + list(args))
        if rc != 0:
            raise DrainError('"systemctl %s" failed (rc=%d): %s' % (' '.join(args), rc, (err or out or '').strip()))
        return out

    def active(self, pattern):
        """The active units that match a unit name or pattern, as systemctl lists them."""
        out = self._systemctl('list-units', '--state=active', '--plain', '--no-legend', '--no-pager', pattern)
        return [line.split()[0] for line in out.splitlines() if line.strip()]

    def is_active(self, unit):
        rc, out, _err = self.run_command([self.systemctl, 'is-active', unit])
        return rc == 0 and out.strip() == 'active'

    def stop(self, unit):
        self._systemctl('stop', unit)

    def start(self, unit):
        self._systemctl('start', unit)

    @staticmethod
    def read(path):
        try:
            with open(path) as handle:
                return handle.read()
        except (IOError, OSError):
            return None

    @staticmethod
    def write(path, text):
        try:
            write_atomic(path, text)  # node_exporter never reads half a file
        except (IOError, OSError) as exc:
            raise DrainError('cannot write the drain mark %s: %s' % (path, exc))


def drain(host, units, reason, textfile_dir, check_mode):
    """Mark the host, then stop the active units that match each of ``units``, in that order.

    Returns (changed, stopped units, (mark before, mark after)).
    """
    path = os.path.join(textfile_dir, MARK_FILE) if textfile_dir else None
    before = host.read(path) if path else None
    after = mark_text(reason) if path else None
    if path and before != after and not check_mode:
        host.write(path, after)  # first: Prometheus knows the host is out on purpose before anything stops
    stopped = []
    for pattern in units:
        for unit in host.active(pattern):
            if unit not in stopped:
                if not check_mode:
                    host.stop(unit)
                stopped.append(unit)
    return bool(stopped) or before != after, stopped, (before, after)


def undrain(host, units, reason, textfile_dir, check_mode):
    """Start the units (those a drain stopped) that are not active, in reverse order, then set the mark to 0.

    The mark keeps the reason it was written with (a change of label would be another series, and the old one's last
    sample, 1, would keep the alert firing); ``reason`` is used only where the mark has no sample of ours. Without a
    mark there is nothing to set: a host never drained gets no file.

    Returns (changed, started units, (mark before, mark after)).
    """
    started = []
    for unit in reversed(units):
        if '*' in unit or '?' in unit or '[' in unit:
            raise DrainError('units: %s is a pattern; give the units the drain stopped (its "units" result)' % unit)
        if not host.is_active(unit):
            if not check_mode:
                host.start(unit)
            started.append(unit)
    path = os.path.join(textfile_dir, MARK_FILE) if textfile_dir else None
    before = host.read(path) if path else None
    after = mark_text(marked_reason(before) or reason, drained=False) if before is not None else None
    if before != after and not check_mode:
        host.write(path, after)
    return bool(started) or before != after, started, (before, after)
