# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.core contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""What became of each host of a site playbook run, from the facts its stages set; pure code for the callback.

The site playbook's tasks leave a trail as facts: preflight's outcome and the rollout plan (``_gpufleet_preflight``,
``_gpufleet_rollout``, set on localhost), the stage a host entered (``_gpufleet_stage``), where and why it failed
(``_gpufleet_failure``), its audit (``_gpufleet_audit``) and, on a monitoring host, its Prometheus report
(``_gpufleet_monitoring``: where Prometheus is, how many of its targets are up), and where the report stage wrote the
fleet report (``_gpufleet_report``, on localhost). The callback feeds them here as they
are reported, with the failures Ansible reports itself (unreachable hosts, validate and preflight refusals), and
prints ``lines()`` when the run ends, including when Ansible stops it early (a batch over its failure limit, a whole
batch failed).
This is a private module: its API may change without notice.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.gpufleet.core.plugins.module_utils._stage_plan import SERVICE_STAGES


def _short(text, limit=400):
    text = ' '.join(str(text or '').split())
    return text if len(text) <= limit else text[:limit - 3] + '...'


class FleetRun:
    """The run's trail, host by host."""

    def __init__(self):
        self.run_hosts = []
        self.preflight_failures = {}
        self.rollout_hosts = None
        self.quarantined = set()
        self.stage = {}
        self.failure = {}
        self.audit = {}
        self.refused = {}  # host -> (stage, reason) for validate and preflight refusals Ansible reported
        self.unreachable = {}
        self.monitoring = {}  # monitoring host -> its Prometheus report (the monitoring role's)
        self.report = None  # the report stage's line: where the page is
        self.fleet_problems = []  # the validate stage's problems of the fleet as a whole (no host's)
        self.gates = {}  # batch number -> the health gate's line after it

    def facts(self, host, facts):
        """A task's ansible_facts for HOST (delegated facts of localhost included)."""
        preflight = facts.get('_gpufleet_preflight')
        if isinstance(preflight, dict):
            self.run_hosts = list(preflight.get('run_hosts') or [])
            self.preflight_failures = dict(preflight.get('failures') or {})
        verdict = facts.get('_gpufleet_fleet')
        if isinstance(verdict, dict):
            self.fleet_problems = [_short(problem, 1000) for problem in verdict.get('fleet_problems') or []]
            for name, found in sorted((verdict.get('host_problems') or {}).items()):
                self.refusal(name, 'validate', '; '.join(found))
        rollout = facts.get('_gpufleet_rollout')
        if isinstance(rollout, dict):
            self.rollout_hosts = list(rollout.get('hosts') or [])
        if '_gpufleet_stage' in facts:
            self.stage[host] = facts['_gpufleet_stage']
        if isinstance(facts.get('_gpufleet_failure'), dict):
            self.failure[host] = facts['_gpufleet_failure']
        if isinstance(facts.get('_gpufleet_audit'), dict):
            self.audit[host] = facts['_gpufleet_audit']
        if isinstance(facts.get('_gpufleet_monitoring'), dict):
            self.monitoring[host] = facts['_gpufleet_monitoring']
        if isinstance(facts.get('_gpufleet_report'), dict):
            self.report = _short(facts['_gpufleet_report'].get('line'), 1000)

    def gate(self, found):
        """A health gate's result (gpufleet.core.health_gate's ``gate``), passed or not."""
        if isinstance(found.get('batch'), int):
            self.gates[found['batch']] = _short(found.get('line'), 2000)

    def quarantine(self, host):
        self.quarantined.add(host)

    def refusal(self, host, stage, reason):
        """A failure Ansible reported in validate or preflight that no rescue kept (the first one per host)."""
        self.refused.setdefault(host, (stage, _short(reason)))

    def lost(self, host, reason):
        self.unreachable.setdefault(host, (self.stage.get(host), _short(reason)))

    def results(self):
        """Host -> (result, line), hosts in run order, then any other host a refusal or a lost connection named (a run
        that stopped before preflight recorded its hosts)."""
        hosts = list(self.run_hosts) + sorted((set(self.refused) | set(self.unreachable)) - set(self.run_hosts))
        found = {}
        for host in hosts:
            found[host] = self._result(host)
        return found

    def _result(self, host):
        if host in self.failure:
            failed = self.failure[host]
            stopped = '; its GPU services may be stopped until a later run converges it' \
                if failed.get('stage') in SERVICE_STAGES else ''
            return 'failed', '%s: FAILED in the %s stage (%s): %s%s' % (
                host, failed.get('stage'), failed.get('task'), _short(failed.get('reason')), stopped)
        if host in self.unreachable:
            stage, reason = self.unreachable[host]
            return 'failed', '%s: UNREACHABLE %s: %s' % (
                host, 'during the %s stage' % stage if stage and stage != 'done' else 'during the run', reason)
        if host in self.preflight_failures:
            if host in self.quarantined:
                return 'quarantined', '%s: QUARANTINED by preflight, not changed: %s' % (
                    host, _short(self.preflight_failures[host]))
            return 'failed', '%s: FAILED preflight, not changed: %s' % (host, _short(self.preflight_failures[host]))
        if host in self.refused:
            stage, reason = self.refused[host]
            return 'failed', '%s: FAILED %s, not changed: %s' % (host, stage, reason)
        if self.rollout_hosts is None or host not in self.rollout_hosts:
            return 'not_changed', '%s: not changed (the run stopped before the rollout)' % host
        stage = self.stage.get(host)
        audit = self.audit.get(host)
        if stage is None:
            return 'not_changed', '%s: not changed (the rollout stopped before its batch)' % host
        if stage == 'verify' and audit and audit.get('passed'):
            # Verify is the last stage: the host converged; another host of its batch stopped the run after it.
            return 'converged', '%s: converged; audit passed: %s (the run stopped after it)' % (
                host, ', '.join(audit.get('services') or []))
        if stage != 'done':
            return 'failed', '%s: stopped in the %s stage' % (host, stage)
        if audit is None:
            return 'converged', '%s: converged (no services to audit)' % host
        if audit.get('passed'):
            return 'converged', '%s: converged; audit passed: %s' % (host, ', '.join(audit.get('services') or []))
        return 'failed', '%s: audit FAILED: %s' % (host, ', '.join(audit.get('failed_services') or []))

    def lines(self):
        found = self.results()
        if not found and not self.fleet_problems:
            return []
        counts = {}
        for result, _line in found.values():
            counts[result] = counts.get(result, 0) + 1
        words = [('converged', 'converged'), ('failed', 'failed'), ('quarantined', 'quarantined'),
                 ('not_changed', 'not changed')]
        total = '%d host(s): %s' % (len(found), ', '.join('%d %s' % (counts[key], word) for key, word in words
                                                          if counts.get(key)))
        prometheus = ['%s: %s' % (host, _short(self.monitoring[host].get('line'))) for host in found
                      if host in self.monitoring]
        report = [self.report] if self.report else []
        if not report and self.rollout_hosts is not None:
            # Ansible runs no later play once a batch went over its failure limit; --tags can leave the stage out.
            report = ['Fleet report: not written (its stage did not run: --tags left it out, or the run stopped first); '
                      'ansible-playbook gpufleet.core.report writes it']
        fleet = ['FLEET: %s' % problem for problem in self.fleet_problems]
        gates = [self.gates[number] for number in sorted(self.gates)]
        return [line for _result, line in found.values()] + gates + fleet + prometheus + report + [total]
