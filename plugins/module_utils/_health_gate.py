# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.core contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The rollout's health gate between batches: which hosts a batch had, whether its canary failed, and the verdict on
the GPU alert pack's alerts firing for them in the monitoring host's Prometheus. Pure code (the action
gpufleet.core.health_gate asks Prometheus through _prometheus.query); a private module: its API may change without
notice.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.gpufleet.core.plugins.module_utils._prometheus import one_of, string
from ansible_collections.gpufleet.core.plugins.module_utils._values import and_list

# The pack's alerts (label pack), firing, for the batch's hosts; info alerts (GpuHostDrained) only say what is planned.
_QUERY = 'ALERTS{alertstate="firing", pack="gpufleet", severity!="info", host=~%s}'
# The labels that say where an alert is, shown after its name when present.
_WHERE = ('gpu', 'UUID', 'xid', 'service')


def batch_hosts(rollout_hosts, gated, entered):
    """The hosts of the batch that just ran: those of the rollout, in its order, that entered a stage (``entered``)
    and no earlier gate saw (``gated``)."""
    seen = set(gated)
    return [host for host in rollout_hosts if host in entered and host not in seen]


def alerts_query(hosts):
    """The PromQL that finds the pack's alerts firing for these hosts."""
    return _QUERY % string(one_of(hosts))


def firing_alerts(result):
    """'ALERT on HOST (gpu 2, xid 79)' for each alert of a query result, sorted, each once."""
    found = set()
    for sample in result:
        labels = sample.get('metric') if isinstance(sample, dict) else None
        if not isinstance(labels, dict):
            continue
        where = ', '.join('%s %s' % (name, labels[name]) for name in _WHERE if labels.get(name))
        found.add('%s on %s%s' % (labels.get('alertname', 'an alert'), labels.get('host', 'a host'),
                                  ' (%s)' % where if where else ''))
    return sorted(found)


def verdict(number, hosts, canary, failed, firing=None, problem=None, required=False, soak=0):
    """The gate after batch ``number``: {'batch', 'hosts', 'checked', 'passed', 'firing', 'line'}.

    ``failed``: the batch's hosts that failed a stage or were lost (a canary with one stops the rollout);
    ``firing``: firing_alerts' list, or None with ``problem`` when Prometheus could not be asked (or there is none).
    """
    head = 'Health gate after batch %d%s (%s): ' % (number, ', the canary' if canary else '', ', '.join(hosts))
    checked = firing is not None
    stop = []
    if canary and failed:
        stop.append('the canary %s failed' % and_list(sorted(failed)))
    if firing:
        stop.append('%s firing' % '; '.join(firing))
    if not checked and required:
        stop.append('its health could not be asked (%s) and gpufleet_health_gate_required is true' % problem)
    if stop:
        line = head + 'STOPPED the rollout: %s. No later batch was changed; fix the hosts (or roll back, ' \
                      'docs/upgrades.md) and run again.' % '; '.join(stop)
    elif checked:
        line = head + 'passed: no alert of the pack firing for its hosts after a %d s soak' % soak
    else:
        line = head + 'not checked: %s' % problem
    return {'batch': number, 'hosts': list(hosts), 'checked': checked, 'passed': not stop, 'firing': list(firing or []),
            'line': line}
