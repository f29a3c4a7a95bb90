# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.core contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""How the validate stage tells each host of the run its problems (the fleet model's, _fleet_inventory.py).

One wrong value in group_vars gives every host of the group the same problem, once per role that reads it: a mirror URL
without its scheme was 56 near-identical messages for 7 hosts. A problem several hosts share is named once, in full, in
the message of the first of them by name, naming them all; the others' messages say where it is. Each host still
fails, and keeps every problem in full where the summary reads them (the action's ``hosts``). Pure code; a private
module: its API may change without notice.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.gpufleet.core.plugins.module_utils._values import and_list

# The hosts a shared problem names; the others are counted, so that a 1,000-host group stays one readable line.
MOST_NAMED = 10


def hosts_named(hosts, most=MOST_NAMED):
    """'7 hosts (a, b, c, d, e, f and g)'; past ``most``, '40 hosts (a, ..., j and 30 more)'."""
    hosts = list(hosts)
    named = hosts if len(hosts) <= most else hosts[:most] + ['%d more' % (len(hosts) - most)]
    return '%d hosts (%s)' % (len(hosts), and_list(named))


def _text(host, problem):
    """A problem without the name of its host, with which each starts ('host: ...')."""
    prefix = host + ': '
    return problem[len(prefix):] if problem.startswith(prefix) else problem


def host_messages(problems, each_its_own=None):
    """{host: [its problems, each 'host: ...']} to {host: its message} for each host with one.

    A problem two or more hosts have is named once, with every other problem the same hosts share, in the message of
    the first of them by name; the others' messages point there. ``each_its_own`` ({host: [problems]}) are told as
    they are, on every host: a shared management address names its hosts already.
    """
    hosts_of = {}
    for host, found in problems.items():
        for problem in found:
            hosts_of.setdefault(_text(host, problem), set()).add(host)
    # Sorted once per problem: a value wrong on 1,000 hosts is not sorted again for each of them.
    hosts_of = dict((text, tuple(sorted(hosts))) for text, hosts in hosts_of.items())
    shared = {}
    for text, hosts in hosts_of.items():
        if len(hosts) > 1:
            shared.setdefault(hosts, []).append(text)
    messages = {}
    for host in set(problems) | set(each_its_own or {}):
        parts, told = [], set()
        for problem in problems.get(host, []):
            hosts = hosts_of[_text(host, problem)]
            if len(hosts) == 1:
                parts.append(problem)
            elif hosts not in told:
                told.add(hosts)
                parts.append(_shared(host, hosts, shared[hosts]))
        parts.extend((each_its_own or {}).get(host, []))
        if parts:
            messages[host] = '; '.join(parts)
    return messages


def _shared(host, hosts, texts):
    what = 'the same problem' if len(texts) == 1 else 'the same %d problems' % len(texts)
    if host == hosts[0]:
        return '%s have %s, named here once: %s' % (hosts_named(hosts), what, '; '.join(texts))
    if len(hosts) == 2:
        return "%s: %s as %s, named in full in %s's message" % (host, what, hosts[0], hosts[0])
    return "%s: %s as %d other hosts, named in full in %s's message" % (host, what, len(hosts) - 1, hosts[0])
