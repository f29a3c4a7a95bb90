# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""The watchdog's decisions on crafted readings: each Xid bucket, the memory budget's boundary, the rate limit,
dry run, a missing or corrupt plan, a planned service the host does not have, and a per-service budget on a service
placed by the planner's default of one GPU."""

from __future__ import absolute_import, division, print_function

import json

import pytest

from ansible_collections.gpufleet.core.plugins.module_utils import _watchdog as wd
from ansible_collections.gpufleet.core.plugins.module_utils import _xid_catalog as catalog
from ansible_collections.gpufleet.core.plugins.module_utils._watchdog_config import WatchdogError, check_config
from ansible_collections.gpufleet.core.plugins.module_utils._watchdog_report import journal_lines, metrics
from ansible_collections.gpufleet.core.plugins.module_utils._watchdog_state import fresh_state, read_state
from ansible_collections.gpufleet.core.plugins.module_utils._watchdog_xids import parse_kernel_xid
from ansible_collections.gpufleet.core.plugins.module_utils._plan import read_plan
from ansible_collections.gpufleet.core.plugins.plugin_utils._placement import plan_services

from ...support.topology import gpu, node, topology

GPU0 = 'GPU-00000000-0000-4000-8000-000000000000'
GPU1 = 'GPU-00000000-0000-4000-8000-000000000001'
MIG1 = 'MIG-00000000-0000-5000-8000-000000000011'
MIG2 = 'MIG-00000000-0000-5000-8000-000000000012'
GIB = 1024 ** 3
NOW = 1000000.0


def entry(name, devices, parents, mps=None):
    return {'name': name, 'gpus': devices, 'gpu_uuids': parents, 'unit': 'gpufleet-svc-%s.service' % name,
            'mps': {'device': mps} if mps else None, 'cpulist': '0-1', 'memlist': '0', 'memory_policy': 'bind'}


# llm and chat share GPU 0; embed and rerank have a MIG device each on GPU 1.
PLAN = {'version': 1, 'services': [
    entry('llm', [GPU0], [GPU0]), entry('chat', [GPU0], [GPU0]),
    entry('embed', [MIG1], [GPU1]), entry('rerank', [MIG2], [GPU1])]}
PIDS = {'llm': 101, 'chat': 102, 'embed': 103, 'rerank': 104}
DEVICE_OF = {'llm': GPU0, 'chat': GPU0, 'embed': MIG1, 'rerank': MIG2}


def config(**changes):
    return check_config(dict(changes))


def readings(used_gib=None, xids=(), lost=(), missing=(), inactive=(), drift=None, uptime=7200.0):
    """80 GiB GPU 0 and two 40 GiB MIG devices; every service uses 1 GiB unless used_gib says otherwise."""
    used_gib = dict(used_gib or {})
    devices = {GPU0: {'gpu': GPU0, 'memory_total_bytes': 80 * GIB, 'processes': {}},
               MIG1: {'gpu': GPU1, 'memory_total_bytes': 40 * GIB, 'processes': {}},
               MIG2: {'gpu': GPU1, 'memory_total_bytes': 40 * GIB, 'processes': {}}}
    for name, pid in PIDS.items():
        devices[DEVICE_OF[name]]['processes'][pid] = int(used_gib.get(name, 1) * GIB)
    gpus = [{'index': 0, 'uuid': GPU0, 'pci_bus_id': '00000000:17:00.0', 'lost': False},
            {'index': 1, 'uuid': GPU1, 'pci_bus_id': '00000000:18:00.0', 'lost': False}]
    for index in lost:
        gpus[index] = {'index': index, 'uuid': None, 'pci_bus_id': None, 'lost': True}
        devices = dict((k, v) for k, v in devices.items() if v['gpu'] != [GPU0, GPU1][index])
    running = {'LoadState': 'loaded', 'ActiveState': 'active', 'SubState': 'running'}
    units = dict(('gpufleet-svc-%s.service' % name, dict(running)) for name in PIDS)
    for name in missing:
        units['gpufleet-svc-%s.service' % name] = {'LoadState': 'not-found', 'ActiveState': 'inactive',
                                                   'SubState': 'dead'}
    for name in inactive:
        units['gpufleet-svc-%s.service' % name] = {'LoadState': 'loaded', 'ActiveState': 'failed',
                                                   'SubState': 'failed'}
    services = dict((name, {'pids': [pid], 'binding_problems': [], 'remote_fraction': 0.0})
                    for name, pid in PIDS.items())
    for name, problems in (drift or {}).items():
        services[name]['binding_problems'] = problems
    return {'gpus': gpus, 'devices': devices, 'units': units, 'services': services, 'xids': list(xids),
            'uptime_sec': uptime, 'boot_id': 'boot-1'}


def xid(number, gpu=GPU0, device=None, source='nvml'):
    return {'gpu': gpu, 'device': device, 'xid': number, 'source': source, 'message': 'Xid %d' % number}


def run(cfg=None, reads=None, state=None, plan='the plan', now=NOW):
    plan = PLAN if plan == 'the plan' else plan  # None is a test's: no plan
    plan = read_plan(plan) if plan is not None else None
    return wd.decide(cfg or config(), plan, reads or readings(), state or fresh_state(), now)


def acted(decisions, kind=None):
    return [d for d in decisions if d['act'] and (kind is None or d['kind'] == kind)]


def restarted(decisions):
    return sorted(name for d in acted(decisions, wd.RESTART) for name in d['services'])


# -- a quiet host -----------------------------------------------------------------------------------------------

def test_a_healthy_host_needs_nothing():
    decisions, state, summary = run()
    assert decisions == []
    assert state['checks'] == 1 and state['gpu_index']['1']['uuid'] == GPU1
    assert summary['services']['llm']['ratio'] == pytest.approx(1 / 80 / 0.85, rel=1e-3)


# -- memory budget ------------------------------------------------------------------------------------------------

@pytest.mark.parametrize('percent, over', [(85, False), (85.01, True), (84.99, False), (100, True)])
def test_the_budget_boundary_is_strictly_over(percent, over):
    decisions = run(reads=readings(used_gib={'llm': 80 * percent / 100.0}))[0]
    assert restarted(decisions) == (['llm'] if over else [])


def test_over_budget_restarts_exactly_that_service_not_its_neighbour():
    decisions = run(reads=readings(used_gib={'embed': 39}))[0]
    assert restarted(decisions) == ['embed']
    (restart,) = acted(decisions)
    assert restart['units'] == ['gpufleet-svc-embed.service']
    evidence = restart['evidence']['memory']
    assert evidence['device'] == MIG1 and evidence['used_bytes'] == 39 * GIB and evidence['total_bytes'] == 40 * GIB
    assert evidence['pids'] == [103] and evidence['budget_percent'] == 85


def test_a_per_service_budget_overrides_the_default():
    reads = readings(used_gib={'llm': 72, 'chat': 72})  # 90% of 80 GiB each
    decisions = run(cfg=config(service_budgets={'llm': 95}), reads=reads)[0]
    assert restarted(decisions) == ['chat']


def test_memory_restarts_can_be_switched_off():
    decisions = run(cfg=config(restart_on_memory=False), reads=readings(used_gib={'llm': 79}))[0]
    (skip,) = decisions
    assert skip['kind'] == wd.RESTART and not skip['act'] and 'restart_on_memory is off' in skip['why_not']


# -- Xid buckets -------------------------------------------------------------------------------------------------

# What the watchdog does for each bucket of the Xid table, without and with a GPU reset allowed (the test's own
# statement of the decision table in docs/gpu_watchdog.md, not read from the code under test).
EXPECTED_KINDS = {
    catalog.APPLICATION: ([wd.RESTART], [wd.RESTART]),
    catalog.RESTART_APP: ([wd.RESTART], [wd.RESTART]),
    catalog.IGNORE: ([], []),
    catalog.INVESTIGATE: ([], []),
    catalog.SCHEDULE_RESET: ([wd.SCHEDULE_RESET], [wd.SCHEDULE_RESET]),
    catalog.RESET_GPU: ([wd.QUARANTINE], [wd.RESET]),
    catalog.REBOOT_HOST: ([wd.QUARANTINE, wd.REBOOT], [wd.QUARANTINE, wd.REBOOT]),
    catalog.FALLEN_OFF_BUS: ([wd.QUARANTINE, wd.REBOOT], [wd.QUARANTINE, wd.REBOOT]),
}


@pytest.mark.parametrize('number', sorted(catalog.CATALOG) + [163, 999])
@pytest.mark.parametrize('allow_reset', [False, True], ids=['no-reset', 'reset-allowed'])
def test_every_xid_of_the_table_gets_its_buckets_decision(number, allow_reset):
    bucket = catalog.bucket(number)
    expected = EXPECTED_KINDS[catalog.INVESTIGATE if bucket == catalog.UNCLASSIFIED else bucket][allow_reset]
    decisions = run(cfg=config(allow_reset=allow_reset, allow_reboot=True), reads=readings(xids=[xid(number)]))[0]
    if expected == [wd.RESTART]:  # llm and chat, the services on GPU 0, in one decision each
        assert restarted(decisions) == ['chat', 'llm']
        assert {d['evidence']['xid']['bucket'] for d in decisions} == {bucket}
    else:
        assert [d['kind'] for d in acted(decisions)] == expected
        assert decisions[0]['evidence']['bucket'] == bucket
    if not expected:
        assert [(d['kind'], d['act']) for d in decisions] == [(wd.REPORT, False)]


@pytest.mark.parametrize('number', [13, 31, 43, 45])
def test_an_application_xid_never_resets_or_quarantines_even_when_allowed(number):
    decisions = run(cfg=config(allow_reset=True, allow_reboot=True), reads=readings(xids=[xid(number)] * 3))[0]
    assert not [d for d in decisions if d['kind'] in (wd.RESET, wd.QUARANTINE, wd.REBOOT)]
    assert restarted(decisions) == ['chat', 'llm']


@pytest.mark.parametrize('number', catalog.xids_in(catalog.RESET_GPU))
def test_every_reset_class_xid_resets_the_gpu_with_its_clients_stopped(number):
    decisions = run(cfg=config(allow_reset=True), reads=readings(xids=[xid(number)]))[0]
    (reset,) = acted(decisions)
    assert reset['kind'] == wd.RESET and reset['gpu'] == GPU0
    assert reset['units'] == ['gpufleet-svc-llm.service', 'gpufleet-svc-chat.service']


def test_an_application_xid_on_a_mig_device_restarts_only_its_service():
    decisions = run(reads=readings(xids=[xid(43, gpu=GPU1, device=MIG2)]))[0]
    assert restarted(decisions) == ['rerank']


def test_a_kernel_line_is_matched_to_its_gpu_by_pci_address_and_merged_with_nvmls():
    line = 'NVRM: Xid (PCI:0000:18:00): 13, pid=103, name=python3, Graphics Exception'
    event = dict(parse_kernel_xid(line), source='kernel', message=line)
    assert event['pci_bus_id'] == '0000:18:00' and event['pid'] == 103
    decisions = run(reads=readings(xids=[event, xid(13, gpu=GPU1, device=MIG1)]))[0]
    assert restarted(decisions) == ['embed']  # NVML named the MIG device; the kernel line is the same error
    assert decisions[0]['evidence']['xid']['sources'] == ['kernel', 'nvml']


def test_a_reset_xid_without_allow_reset_quarantines_the_gpu():
    decisions, state, summary = run(reads=readings(xids=[xid(48)]))
    assert [d['kind'] for d in acted(decisions)] == [wd.QUARANTINE]
    assert 'allow_reset is off' in decisions[0]['reason']
    assert list(state['quarantined']) == [GPU0] and summary['quarantined'] == [GPU0]
    assert restarted(decisions) == []  # the GPU is quarantined, not its services restarted


def test_a_reset_xid_with_allow_reset_resets_with_every_client_stopped():
    plan = {'version': 1, 'services': PLAN['services'] + [entry('share', [GPU0], [GPU0], mps=GPU0)]}
    reads = readings(xids=[xid(95)])
    reads['units']['gpufleet-svc-share.service'] = reads['units']['gpufleet-svc-llm.service']
    cfg = config(allow_reset=True, reset_stop_units=['gpufleet-dcgm-exporter.service'])
    decisions, state, _summary = run(cfg=cfg, reads=reads, plan=plan)
    (reset,) = acted(decisions)
    assert reset['kind'] == wd.RESET and reset['gpu'] == GPU0
    assert reset['units'] == ['gpufleet-svc-llm.service', 'gpufleet-svc-chat.service', 'gpufleet-svc-share.service',
                              'gpufleet-mps@%s.service' % GPU0, 'gpufleet-dcgm-exporter.service']
    assert state['resets'][GPU0] == [NOW]


def test_xid_63_schedules_a_reset_once_and_a_reboot_clears_it():
    decisions, state, summary = run(reads=readings(xids=[xid(63)]))
    assert [d['kind'] for d in acted(decisions)] == [wd.SCHEDULE_RESET] and summary['reset_pending'] == [GPU0]
    again = run(reads=readings(xids=[xid(63)]), state=state)[0]
    assert acted(again) == []
    rebooted = dict(readings(), boot_id='boot-2')
    assert run(reads=rebooted, state=state)[1]['reset_pending'] == {}


def test_a_first_xid_64_resets_and_a_repeat_within_the_window_asks_for_an_rma():
    cfg = config(allow_reset=True)
    decisions, state, _summary = run(cfg=cfg, reads=readings(xids=[xid(64)]))
    (reset,) = acted(decisions)
    assert reset['kind'] == wd.RESET and not reset['evidence']['rma_candidate']
    later = NOW + catalog.RMA_WINDOW_SEC - 60
    decisions, state, _summary = run(cfg=cfg, reads=readings(xids=[xid(64)]), state=state, now=later)
    (rma,) = acted(decisions)
    assert rma['kind'] == wd.QUARANTINE and rma['evidence']['rma_candidate']
    assert 'memory or bus fault number 2 within 7 days' in rma['reason'] and 'RMA' in rma['reason']


def test_a_repeat_outside_the_window_is_reset_again_not_returned():
    cfg = config(allow_reset=True)
    state = run(cfg=cfg, reads=readings(xids=[xid(64)]))[1]
    decisions, state, _summary = run(cfg=cfg, reads=readings(xids=[xid(64)]), state=state,
                                     now=NOW + catalog.RMA_WINDOW_SEC + 60)
    assert [d['kind'] for d in acted(decisions)] == [wd.RESET]
    assert state['rma_events'][GPU0] == [NOW + catalog.RMA_WINDOW_SEC + 60]  # the old one aged out


def test_different_memory_faults_on_one_gpu_count_together_other_gpus_do_not():
    cfg = config(allow_reset=True)
    state = run(cfg=cfg, reads=readings(xids=[xid(48)]))[1]
    decisions, state, _summary = run(cfg=cfg, reads=readings(xids=[xid(95, gpu=GPU1)]), state=state, now=NOW + 60)
    assert [d['kind'] for d in acted(decisions)] == [wd.RESET]  # GPU 1's first
    decisions = run(cfg=cfg, reads=readings(xids=[xid(95)]), state=state, now=NOW + 120)[0]
    assert [(d['kind'], d['evidence']['rma_candidate']) for d in acted(decisions)] == [(wd.QUARANTINE, True)]


def test_a_reset_class_xid_that_is_not_a_memory_fault_never_asks_for_an_rma():
    cfg = config(allow_reset=True)
    state = fresh_state()
    for check in range(3):
        decisions, state, _summary = run(cfg=cfg, reads=readings(xids=[xid(119)]), state=state, now=NOW + 600 * check)
        assert [d['kind'] for d in decisions] == [wd.RESET]
    assert state['quarantined'] == {}


# -- lost GPU, Xid 79, reboot -----------------------------------------------------------------------------------

def test_xid_79_quarantines_and_never_loops():
    decisions, state, _summary = run(reads=readings(xids=[xid(79)]))
    assert [d['kind'] for d in acted(decisions)] == [wd.QUARANTINE]
    assert restarted(decisions) == []
    for _check in range(3):  # the GPU stays lost: reported, never acted on again
        decisions, state, _summary = run(reads=readings(lost=[0], xids=[xid(79)]), state=state)
        assert acted(decisions) == []
        assert all(d['why_not'] == 'already quarantined' for d in decisions)


def capped(counted, error=None, **changes):
    reads = readings(xids=[xid(79)])
    reads.update(fleet_quarantined=counted, fleet_error=error)
    return run(cfg=config(fleet_max_quarantined=2, fleet_prometheus_url='http://10.0.0.5:9090', **changes), reads=reads)


@pytest.mark.parametrize('counted, quarantined', [(0, True), (1, True), (2, False), (5, False)])
def test_the_fleet_cap_holds_a_quarantine_once_enough_hosts_are(counted, quarantined):
    decisions, state, summary = capped(counted)
    decision = [d for d in decisions if d['kind'] == wd.QUARANTINE][0]
    assert decision['act'] is quarantined and bool(state['quarantined']) is quarantined
    assert decision['evidence']['fleet_quarantined'] == counted and decision['evidence']['fleet_max_quarantined'] == 2
    assert summary['quarantine_held'] is not quarantined
    assert restarted(decisions) == []  # held or not, the lost GPU's services are not restarted
    if not quarantined:
        assert decision['why_not'] == ('fleet cap: %d host(s) of the fleet are quarantined, at most 2 at once '
                                       '(gpufleet_watchdog_max_quarantined); an operator must look at them first'
                                       % counted)
        assert 'gpufleet_watchdog_quarantine_held 1' in metrics(decisions, state, summary)


def test_a_host_already_quarantined_is_not_counted_again_by_the_cap():
    state = run(reads=readings(xids=[xid(48, gpu=GPU1)]))[1]  # GPU 1 quarantined (reset needed, not allowed)
    reads = readings(xids=[xid(79)])
    reads.update(fleet_quarantined=2)
    decisions = run(cfg=config(fleet_max_quarantined=2, fleet_prometheus_url='http://p:9090'), reads=reads,
                    state=state)[0]
    assert [d['kind'] for d in acted(decisions)] == [wd.QUARANTINE]


def test_a_fleet_that_cannot_be_counted_quarantines_and_says_why():
    decisions, state, summary = capped(None, 'Prometheus at http://10.0.0.5:9090 did not answer: timed out')
    decision = acted(decisions)[0]
    assert decision['kind'] == wd.QUARANTINE and not summary['quarantine_held']
    assert decision['reason'].endswith('(the fleet cap was not checked: Prometheus at http://10.0.0.5:9090 did not '
                                       'answer: timed out)')


def test_without_a_cap_prometheus_is_not_consulted():
    decision = [d for d in run(reads=readings(xids=[xid(79)]))[0] if d['kind'] == wd.QUARANTINE][0]
    assert decision['act'] and 'fleet_quarantined' not in decision['evidence']


def test_a_gpu_nvml_calls_lost_is_quarantined_by_the_uuid_it_had():
    state = run()[1]
    decisions, state, summary = run(reads=readings(lost=[1]), state=state)
    assert [d['kind'] for d in acted(decisions)] == [wd.QUARANTINE] and summary['quarantined'] == [GPU1]
    assert restarted(decisions) == []


def test_a_reboot_needs_allow_reboot_min_uptime_and_cooldown():
    lost = readings(xids=[xid(79)], uptime=7200.0)
    assert [d['kind'] for d in run(reads=lost)[0]] == [wd.QUARANTINE]  # allow_reboot is off by default
    cfg = config(allow_reboot=True, min_uptime_sec=3600, reboot_cooldown_sec=21600)
    decisions, state, _summary = run(cfg=cfg, reads=lost)
    assert [d['kind'] for d in acted(decisions)] == [wd.QUARANTINE, wd.REBOOT] and state['reboots'] == [NOW]
    early = run(cfg=cfg, reads=readings(xids=[xid(79)], uptime=60.0))[0]
    assert not acted(early, wd.REBOOT) and 'min_uptime_sec' in early[-1]['why_not']
    # Back up after the reboot, the GPU is still lost: no second reboot within the cooldown.
    state['quarantined'] = {}
    again = run(cfg=cfg, reads=readings(lost=[0], uptime=7200.0), state=state, now=NOW + 7300)[0]
    assert not acted(again, wd.REBOOT) and 'cooldown' in again[-1]['why_not']
    later = run(cfg=cfg, reads=readings(lost=[0], uptime=7200.0), state=state, now=NOW + 21700)[0]
    assert acted(later, wd.REBOOT)


# -- rate limit and dry run --------------------------------------------------------------------------------------

def test_the_rate_limit_holds_after_n_restarts_in_the_window():
    cfg = config(rate_limit_restarts=2, rate_limit_window_sec=600, interval_sec=30)
    over = readings(used_gib={'llm': 79})
    state = fresh_state()
    verdicts = []
    for check in range(4):
        decisions, state, summary = run(cfg=cfg, reads=over, state=state, now=NOW + 30 * check)
        verdicts.append(restarted(decisions))
    assert verdicts == [['llm'], ['llm'], [], []]
    assert 'rate limit: 2 restarts' in decisions[0]['why_not'] and summary['services']['llm']['rate_limited']
    # Once the first restart leaves the window, one more is allowed.
    assert restarted(run(cfg=cfg, reads=over, state=state, now=NOW + 600)[0]) == ['llm']


def test_dry_run_decides_the_same_reports_and_changes_nothing():
    reads = readings(used_gib={'llm': 79}, xids=[xid(48, gpu=GPU1)])
    live = run(reads=reads)[0]
    decisions, state, _summary = run(cfg=config(dry_run=True), reads=reads)
    assert [(d['kind'], d['services'], d['gpu']) for d in decisions] == [
        (d['kind'], d['services'], d['gpu']) for d in live]
    assert acted(decisions) == [] and all(d['why_not'] == 'dry run' for d in decisions)
    assert state['restarts'] == {} and state['quarantined'] == {} and set(state['actions_total'].values()) == {0}


def test_several_causes_restart_a_service_once():
    decisions = run(reads=readings(used_gib={'llm': 79}, xids=[xid(13)]))[0]
    assert restarted(decisions) == ['chat', 'llm']
    llm = [d for d in decisions if d['services'] == ['llm']][0]
    assert llm['cause'] == 'xid+memory'


def test_binding_drift_is_reported_and_restarts_only_when_asked():
    reads = readings(drift={'chat': ['CPUs 2-3 allowed, plan says 0-1']})
    (report,) = run(reads=reads)[0]
    assert not report['act'] and 'binding_drift is off' in report['why_not']
    assert restarted(run(cfg=config(restart_on_binding_drift=True), reads=reads)[0]) == ['chat']


def test_an_inactive_unit_is_reported_not_started():
    (report,) = run(reads=readings(inactive=['chat'], used_gib={'chat': 79}))[0]
    assert report['kind'] == wd.REPORT and report['cause'] == 'unit'


# -- plan problems: report, no action ----------------------------------------------------------------------------

def test_without_a_plan_nothing_is_done():
    reads = dict(readings(used_gib={'llm': 79}, xids=[xid(79)]), plan_error='plan_file /x is not JSON')
    decisions, state, summary = run(plan=None, reads=reads)
    assert [(d['kind'], d['act']) for d in decisions] == [(wd.REPORT, False)]
    assert 'not JSON' in decisions[0]['reason'] and not summary['plan_ok'] and state['quarantined'] == {}


def test_a_planned_service_the_host_lacks_stops_every_action():
    decisions, state, summary = run(reads=readings(missing=['rerank'], used_gib={'llm': 79}, xids=[xid(48)]))
    assert acted(decisions) == [] and not summary['plan_ok']
    assert 'rerank (gpufleet-svc-rerank.service)' in decisions[0]['reason']
    assert all('no action this check' in d['why_not'] for d in decisions[1:])
    assert state['quarantined'] == {} and state['restarts'] == {}


# -- configuration and reporting ---------------------------------------------------------------------------------

@pytest.mark.parametrize('changes, named', [
    ({'memory_budget_percent': 0}, 'memory_budget_percent'),
    ({'memory_budget_percent': 100.5}, 'memory_budget_percent'),
    ({'service_budgets': {'llm': 101}}, "service_budgets['llm']"),
    ({'rate_limit_window_sec': 20, 'interval_sec': 30}, 'rate_limit_window_sec (20) is shorter'),
    ({'plan_file': 'relative.json'}, 'plan_file'),
    ({'dry_run': 'yes'}, 'dry_run'),
    ({'surprise': 1}, 'unknown settings surprise'),
    ({'reset_stop_units': ['exporter']}, 'reset_stop_units'),
    ({'fleet_max_quarantined': -1}, 'fleet_max_quarantined'),
    ({'fleet_prometheus_url': 'http://prometheus:9090/'}, 'fleet_prometheus_url'),
    ({'fleet_prometheus_url': 'prometheus:9090'}, 'fleet_prometheus_url'),
])
def test_bad_configuration_is_refused_naming_the_setting(changes, named):
    with pytest.raises(WatchdogError) as caught:
        check_config(changes)
    assert named in str(caught.value)


def test_an_unreadable_state_starts_afresh_and_says_so():
    assert read_state({'version': 99}) == (fresh_state(), True)
    assert read_state(None) == (fresh_state(), False)


def test_journal_lines_and_metrics_carry_the_evidence():
    decisions, state, summary = run(reads=readings(used_gib={'embed': 39}, xids=[xid(48, gpu=GPU0)]))
    lines = journal_lines(decisions)
    assert lines[0].startswith('ACT quarantine: Xid 48') and '"count_on_gpu": 1' in lines[0]
    assert lines[1].startswith('ACT restart: restart gpufleet-svc-embed.service: GPU memory 97.50%')
    text = metrics(decisions, state, summary)
    assert 'gpufleet_watchdog_actions_total{kind="restart"} 1' in text
    assert 'gpufleet_watchdog_quarantined 1' in text
    assert 'gpufleet_watchdog_gpu_quarantined{gpu="%s"} 1' % GPU0 in text
    assert 'gpufleet_watchdog_service_memory_budget_ratio{service="embed"} 1.1471' in text
    assert 'gpufleet_watchdog_service_remote_fraction{service="llm"} 0.0' in text
    assert 'gpufleet_watchdog_last_check_decisions{kind="restart",acted="true"} 1' in text


def test_a_quarantined_gpus_services_are_left_alone():
    state = run(reads=readings(xids=[xid(48)]))[1]
    decisions = run(reads=readings(used_gib={'llm': 79, 'embed': 39}), state=state)[0]
    assert restarted(decisions) == ['embed']
    assert [d for d in decisions if not d['act']] == []  # llm is over, on the quarantined GPU: not acted on


def test_an_application_xid_with_a_reset_xid_on_the_same_gpu_restarts_nothing_there():
    decisions = run(reads=readings(xids=[xid(13), xid(48)]))[0]
    assert restarted(decisions) == [] and [d['kind'] for d in acted(decisions)] == [wd.QUARANTINE]
    assert [d['why_not'] for d in decisions if d['kind'] == wd.REPORT] == ['GPU handled', 'GPU handled']


def test_a_service_that_leaves_gpus_out_is_held_to_its_own_budget():
    # The planner gives llm, which asks for no gpus, one whole GPU (its default): the plan the role writes names that
    # GPU, so llm's per-service budget applies to it, as the alert pack's does (test_monitoring_targets.py).
    fact = topology(nodes=[node(0, [0, 1, 2, 3])], gpus=[gpu(0, GPU0, bus='17', node=0)])
    planned = json.loads(plan_services(fact, [{'name': 'llm', 'cpus': 1, 'command': '/opt/llm/serve'}])['plan_json'])
    assert [(entry['name'], entry['gpus']) for entry in planned['services']] == [('llm', [GPU0])]
    reads = readings(used_gib={'llm': 48})  # 60% of the 80 GiB GPU: under the default 85, over llm's own 50
    assert restarted(run(cfg=config(service_budgets={'llm': 50}), reads=reads, plan=planned)[0]) == ['llm']
    assert restarted(run(cfg=config(), reads=reads, plan=planned)[0]) == []
