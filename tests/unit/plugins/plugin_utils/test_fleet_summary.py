# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""The fleet summary from the trail of facts a site playbook run leaves: every way a host can end."""

from __future__ import absolute_import, division, print_function

from ansible_collections.gpufleet.core.plugins.plugin_utils._fleet_summary import FleetRun

HOSTS = ['a1', 'a2', 'a3', 'a4', 'a5', 'a6', 'a7']


def _run():
    run = FleetRun()
    run.facts('a1', {'_gpufleet_preflight': {'run_hosts': HOSTS, 'failures': {'a6': 'layout does not fit',
                                                                              'a7': 'unreachable'}},
                     '_gpufleet_rollout': {'hosts': ['a1', 'a2', 'a3', 'a4', 'a5']}})
    run.quarantine('a6')
    for host in ('a1', 'a2', 'a3', 'a4'):
        run.facts(host, {'_gpufleet_stage': 'drivers'})
    run.facts('a1', {'_gpufleet_stage': 'verify'})
    run.facts('a1', {'_gpufleet_audit': {'passed': True, 'services': ['llm', 'imagegen'], 'failed_services': []}})
    run.facts('a1', {'_gpufleet_stage': 'done'})
    run.facts('a2', {'_gpufleet_stage': 'partition'})
    run.facts('a2', {'_gpufleet_failure': {'stage': 'partition', 'task': 'Apply the layout', 'reason': 'NVML said no'}})
    run.facts('a3', {'_gpufleet_stage': 'services'})
    run.lost('a3', 'Connection timed out during banner exchange')
    run.facts('a4', {'_gpufleet_stage': 'verify'})
    run.facts('a4', {'_gpufleet_audit': {'passed': False, 'services': ['llm'], 'failed_services': ['llm']}})
    run.facts('a4', {'_gpufleet_failure': {'stage': 'verify', 'task': 'Every service runs where its plan says',
                                           'reason': 'llm: 40% of pages on remote nodes'}})
    return run


def test_each_host_of_the_run_is_named_with_what_became_of_it():
    run = _run()
    results = run.results()
    assert list(results) == HOSTS
    assert dict((host, result) for host, (result, _line) in results.items()) == {
        'a1': 'converged', 'a2': 'failed', 'a3': 'failed', 'a4': 'failed', 'a5': 'not_changed',
        'a6': 'quarantined', 'a7': 'failed'}
    lines = run.lines()
    assert lines[0] == 'a1: converged; audit passed: llm, imagegen'
    assert lines[1] == ('a2: FAILED in the partition stage (Apply the layout): NVML said no; its GPU services may be '
                        'stopped until a later run converges it')
    assert lines[2] == 'a3: UNREACHABLE during the services stage: Connection timed out during banner exchange'
    # A failed audit is a failure of the verify stage: the services run, not where planned; nothing is stopped.
    assert lines[3] == ('a4: FAILED in the verify stage (Every service runs where its plan says): llm: 40% of pages '
                        'on remote nodes')
    assert lines[4] == 'a5: not changed (the rollout stopped before its batch)'
    assert lines[5] == 'a6: QUARANTINED by preflight, not changed: layout does not fit'
    assert lines[6] == 'a7: FAILED preflight, not changed: unreachable'
    # Ansible runs no later play once a batch went over its failure limit: the summary says how to get the report.
    assert lines[7] == ('Fleet report: not written (its stage did not run: --tags left it out, or the run stopped first); '
                        'ansible-playbook gpufleet.core.report writes it')
    assert lines[8] == '7 host(s): 1 converged, 4 failed, 1 quarantined, 1 not changed'


def test_a_run_stopped_in_validate_names_the_refused_hosts_and_changes_nothing():
    run = FleetRun()
    run.refusal('b2', 'validate', 'b2: gpufleet_management_address 192.168.9.9 is not inside ...')
    run.refusal('b2', 'validate', 'a later failure of the same host is not the reason')
    assert run.lines() == ['b2: FAILED validate, not changed: b2: gpufleet_management_address 192.168.9.9 is not '
                           'inside ...', '1 host(s): 1 failed']


def test_nothing_is_printed_for_a_playbook_that_is_not_the_site_playbook():
    run = FleetRun()
    run.facts('x', {'ansible_distribution': 'Ubuntu'})
    assert run.lines() == []


def test_long_reasons_are_shortened_to_one_line():
    run = FleetRun()
    run.facts('c', {'_gpufleet_preflight': {'run_hosts': ['c'], 'failures': {'c': 'word\n' * 400}}})
    line = run.lines()[0]
    assert '\n' not in line and line.endswith('...') and len(line) < 500


def test_hosts_lost_before_preflight_recorded_the_run_are_still_named():
    run = FleetRun()
    run.lost('d1', 'Connection refused')
    assert run.lines() == ['d1: UNREACHABLE during the run: Connection refused', '1 host(s): 1 failed']


def test_the_monitoring_hosts_prometheus_report_comes_before_the_total():
    run = FleetRun()
    run.facts('localhost', {'_gpufleet_preflight': {'run_hosts': ['g1', 'mon'], 'failures': {}},
                            '_gpufleet_rollout': {'hosts': ['g1', 'mon']}})
    for host in ('g1', 'mon'):
        run.facts(host, {'_gpufleet_stage': 'done'})
    line = 'Prometheus at http://10.0.0.5:9090/: 2 of 3 targets up (gpufleet_dcgm_exporter 1/2, prometheus 1/1)'
    run.facts('mon', {'_gpufleet_monitoring': {'line': line, 'up': 2, 'targets': 3}})
    report = 'Fleet report: /srv/reports/fleet-report.html (2 host(s); 0 change(s) since the previous report)'
    run.facts('localhost', {'_gpufleet_report': {'line': report, 'html': '/srv/reports/fleet-report.html'}})
    assert run.lines() == ['g1: converged (no services to audit)', 'mon: converged (no services to audit)',
                           'mon: ' + line, report, '2 host(s): 2 converged']


def test_a_run_stopped_before_the_rollout_has_no_report_line():
    run = FleetRun()
    run.facts('localhost', {'_gpufleet_preflight': {'run_hosts': ['e1'], 'failures': {'e1': 'no fit'}}})
    assert run.lines() == ['e1: FAILED preflight, not changed: no fit', '1 host(s): 1 failed']


def test_no_prometheus_line_without_a_report():
    lines = _run().lines()
    assert not [line for line in lines if 'Prometheus' in line]


def test_the_health_gates_follow_the_hosts_in_batch_order_each_once():
    run = _run()
    stopped = {'batch': 2, 'line': 'Health gate after batch 2 (a2, a3): STOPPED the rollout: GpuFallenOffBus on a2 firing.'}
    run.gate(stopped)
    run.gate({'batch': 1, 'line': 'Health gate after batch 1, the canary (a1): passed: no alert of the pack firing'})
    run.gate(stopped)  # a failed run_once task is reported for each host of the batch
    run.gate({'line': 'not a gate'})
    lines = run.lines()
    first = lines.index('Health gate after batch 1, the canary (a1): passed: no alert of the pack firing')
    assert lines[first + 1] == stopped['line'] and lines[first - 1].startswith('a7: ')
    assert sum(1 for line in lines if line.startswith('Health gate')) == 2
