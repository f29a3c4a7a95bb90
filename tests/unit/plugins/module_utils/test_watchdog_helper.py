# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""The watchdog program (gpufleet-helpers watchdog) on a simulated host: NVML is the simulator, the kernel log is
its journalctl stand-in, and systemd a double that records what the watchdog asked of it."""

from __future__ import absolute_import, division, print_function

import builtins
import io
import json
import os
import threading

import pytest

import pynvml
import simctl

from ansible_collections.gpufleet.core.plugins.module_utils import _helper_watchdog, _helpers_main
from ansible_collections.gpufleet.core.plugins.module_utils._watchdog_host import WatchdogHost
from ansible_collections.gpufleet.core.plugins.module_utils._host import HostFiles, run_argv

from ...conftest import SIM_DIR
from ...support.sim import BARE_HOST, make_gpus
from .test_nvml import MIG_A, MIG_B, Recorded, mig_gpus

GPU0 = 'GPU-00000000-0000-4000-8000-000000000000'
GPU1 = 'GPU-00000000-0000-4000-8000-000000000001'
PIDS = {'llm': 4101, 'chat': 4102, 'embed': 4103}
ON = {'llm': GPU0, 'chat': GPU0, 'embed': GPU1}
MIB = 1024 ** 2


class Systemd:
    """systemctl show/restart/stop/start/reboot as a test double; every other command runs for real."""

    def __init__(self, units):
        self.units = dict((unit, {'LoadState': 'loaded', 'ActiveState': 'active', 'SubState': 'running',
                                  'ControlGroup': '/system.slice/%s' % unit}) for unit in units)
        self.done = []

    def __call__(self, argv):
        if argv[0] != 'systemctl':
            return run_argv(argv)
        if argv[1] == 'show':
            props = self.units.get(argv[-1], {'LoadState': 'not-found', 'ActiveState': 'inactive',
                                              'SubState': 'dead', 'ControlGroup': ''})
            return 0, ''.join('%s=%s\n' % item for item in sorted(props.items())), ''
        self.done.append(tuple(argv[1:2] + argv[-1:]) if argv[1] != 'reboot' else ('reboot',))
        return 0, '', ''


@pytest.fixture
def host(sim_hosts, tmp_path):
    """Two A100s; llm and chat share GPU 0, embed has GPU 1; each service one process, 1 GiB used."""
    served = sim_hosts.with_gpus('A100-80GB-PCIe', 2)
    pynvml.nvmlInit()  # the simulator writes its state on first use; simctl then acts on it
    pynvml.nvmlShutdown()
    sysfs, procfs = tmp_path / 'sys', tmp_path / 'proc'
    plan = {'version': 1, 'services': []}
    for name, pid in PIDS.items():
        unit = 'gpufleet-svc-%s.service' % name
        cgroup = sysfs / 'fs' / 'cgroup' / 'system.slice' / unit
        cgroup.mkdir(parents=True)
        (cgroup / 'cgroup.procs').write_text('%d\n' % pid)
        (procfs / str(pid)).mkdir(parents=True)
        (procfs / str(pid) / 'status').write_text('Name:\tpython3\nCpus_allowed_list:\t0-1\nMems_allowed_list:\t0\n')
        (procfs / str(pid) / 'numa_maps').write_text('7f0000000000 bind:0 anon=10 dirty=10 N0=10 kernelpagesize_kB=4\n')
        simctl.add_process(served['state_file'], ON[name], pid, used_memory_mb=1024)
        plan['services'].append({'name': name, 'unit': unit, 'gpus': [ON[name]], 'gpu_uuids': [ON[name]], 'mps': None,
                                 'cpulist': '0-1', 'memlist': '0', 'memory_policy': 'bind'})
    (procfs / 'uptime').write_text('7200.00 100.00\n')
    (procfs / 'sys' / 'kernel' / 'random').mkdir(parents=True)
    (procfs / 'sys' / 'kernel' / 'random' / 'boot_id').write_text('boot-1\n')
    (tmp_path / 'placement.json').write_text(json.dumps(plan))
    systemd = Systemd(['gpufleet-svc-%s.service' % name for name in PIDS])
    watchdog = WatchdogHost(pynvml, run=systemd, journalctl=os.path.join(SIM_DIR, 'journalctl'),
                            files=HostFiles(str(sysfs), str(procfs)))
    watchdog.out = io.StringIO()
    config = {'version': 1, 'plan_file': str(tmp_path / 'placement.json'), 'state_file': str(tmp_path / 'state.json'),
              'textfile_dir': str(tmp_path / 'textfile'), 'xid_event_wait_ms': 0}
    return dict(served, watchdog=watchdog, systemd=systemd, config=config, tmp=tmp_path)


def check(host, **config):
    path = host['tmp'] / 'watchdog.json'
    path.write_text(json.dumps(dict(host['config'], **config)))
    host['watchdog'].out = io.StringIO()
    rc = _helper_watchdog.main(['watchdog', str(path)], host=host['watchdog'])
    return rc, host['watchdog'].out.getvalue().splitlines()


def state(host):
    return json.loads((host['tmp'] / 'state.json').read_text())


def metrics(host):
    return (host['tmp'] / 'textfile' / 'gpufleet_watchdog.prom').read_text()


def test_a_service_over_budget_is_restarted_once_and_its_neighbour_is_not(host):
    assert check(host) == (0, [])
    simctl.set_process_memory(host['state_file'], PIDS['chat'], 70000)  # 85.4% of 80 GiB
    rc, lines = check(host)
    assert rc == 0 and host['systemd'].done == [('restart', 'gpufleet-svc-chat.service')]
    assert lines[0].startswith('ACT restart: restart gpufleet-svc-chat.service: GPU memory 85.45% of ' + GPU0)
    assert '"pids": [%d]' % PIDS['chat'] in lines[0]
    # Its restart replaced the process: the new one is within budget, so nothing more happens.
    simctl.remove_process(host['state_file'], PIDS['chat'])
    simctl.add_process(host['state_file'], GPU0, PIDS['chat'], used_memory_mb=1024)
    assert check(host) == (0, [])
    assert host['systemd'].done == [('restart', 'gpufleet-svc-chat.service')]
    assert 'gpufleet_watchdog_actions_total{kind="restart"} 1' in metrics(host)


def test_the_rate_limit_holds_after_n_restarts(host):
    simctl.set_process_memory(host['state_file'], PIDS['llm'], 79000)
    for _check in range(4):
        rc, lines = check(host, rate_limit_restarts=2)
    assert host['systemd'].done == [('restart', 'gpufleet-svc-llm.service')] * 2
    assert lines[0].startswith('SKIP restart') and 'rate limit: 2 restarts' in lines[0]
    assert 'gpufleet_watchdog_service_rate_limited{service="llm"} 1' in metrics(host)
    assert len(state(host)['restarts']['llm']) == 2


def test_a_gpu_that_falls_off_the_bus_is_quarantined_once_never_in_a_loop(host):
    assert check(host)[0] == 0  # the first check starts reading the kernel log from here
    simctl.lose_gpu(host['host_file'], host['state_file'], GPU1)
    rc, lines = check(host, allow_reboot=True, min_uptime_sec=3600)
    assert rc == 0
    assert [line.split(':')[0] for line in lines] == ['ACT quarantine', 'ACT reboot']
    assert '"xid": 79' in lines[0] and '"sources": ["kernel"]' in lines[0] and '"nvml": "GPU_IS_LOST"' in lines[0]
    assert host['systemd'].done == [('reboot',)]
    for _check in range(3):  # still lost (the simulated reboot did not happen): no second quarantine, no reboot
        rc, lines = check(host, allow_reboot=True, min_uptime_sec=3600)
        assert [line.split(':')[0] for line in lines] == ['REPORT report', 'SKIP reboot']
    assert host['systemd'].done == [('reboot',)]
    assert 'cooldown' in lines[-1]
    assert list(state(host)['quarantined']) == [GPU1]
    assert 'gpufleet_watchdog_quarantined 1' in metrics(host)
    # The operator clears it.
    path = host['tmp'] / 'watchdog.json'
    assert _helper_watchdog.main(['watchdog', str(path), '--clear-quarantine'], host=host['watchdog']) == 0
    assert state(host)['quarantined'] == {}


def test_an_xid_nvml_delivers_during_the_check_restarts_the_services_on_that_gpu(host):
    assert check(host)[0] == 0
    later = threading.Timer(0.3, simctl.inject_xid, (host['host_file'], host['state_file'], GPU0, 13))
    later.start()
    rc, lines = check(host, xid_event_wait_ms=2000)
    later.join()
    assert rc == 0
    assert sorted(host['systemd'].done) == [('restart', 'gpufleet-svc-chat.service'),
                                            ('restart', 'gpufleet-svc-llm.service')]
    # The kernel log has the same Xid, read after the wait: one event, one restart per service.
    assert '"sources": ["kernel", "nvml"]' in lines[0] and len(lines) == 2
    assert check(host) == (0, [])


def test_nvml_readings_name_a_mig_devices_xid_by_its_mig_uuid_and_read_past_a_lost_gpu(sim_hosts):
    """GPU 0 in MIG mode (two devices), GPU 1 lost, GPU 2 whole; two Xids come while the check waits."""
    gpus = mig_gpus()
    gpus += make_gpus('A100-80GB-PCIe', 3)[1:]
    served = sim_hosts.described(dict(BARE_HOST, gpus=gpus))
    pynvml.nvmlInit()
    pynvml.nvmlShutdown()
    gpu2 = gpus[2]['uuid']
    simctl.add_process(served['state_file'], GPU0, 501, 1, 0, used_memory_mb=1000)
    simctl.lose_gpu(served['host_file'], served['state_file'], GPU1)

    def wait(event_set, timeout_ms):
        if library.calls.count('nvmlEventSetWait_v2') == 1:  # the set is registered: these are its events
            simctl.inject_xid(served['host_file'], served['state_file'], GPU0, 43, 2, 0)
            simctl.inject_xid(served['host_file'], served['state_file'], gpu2, 13)
        return pynvml.nvmlEventSetWait_v2(event_set, timeout_ms)

    library = Recorded(pynvml, nvmlEventSetWait_v2=wait)
    gpus_read, devices, events, error = WatchdogHost(library).nvml_readings(300)
    assert error is None
    assert gpus_read == [{'index': 0, 'uuid': GPU0, 'pci_bus_id': '00000000:17:00.0', 'lost': False},
                         {'index': 1, 'uuid': None, 'pci_bus_id': None, 'lost': True},
                         {'index': 2, 'uuid': gpu2, 'pci_bus_id': '00000000:19:00.0', 'lost': False}]
    assert devices == {
        MIG_A: {'gpu': GPU0, 'memory_total_bytes': 40192 * MIB, 'processes': {501: 1000 * MIB}},
        MIG_B: {'gpu': GPU0, 'memory_total_bytes': 40192 * MIB, 'processes': {}},
        gpu2: {'gpu': gpu2, 'memory_total_bytes': 81920 * MIB, 'processes': {}}}
    assert events == [
        {'gpu': GPU0, 'device': MIG_B, 'xid': 43, 'source': 'nvml', 'message': 'NVML Xid event 43 on %s' % MIG_B},
        {'gpu': gpu2, 'device': None, 'xid': 13, 'source': 'nvml', 'message': 'NVML Xid event 13 on %s' % gpu2}]


def test_kernel_history_from_before_the_first_check_is_reported_not_acted_on(host):
    simctl.inject_xid(host['host_file'], host['state_file'], GPU0, 13)
    rc, lines = check(host)
    assert rc == 0 and host['systemd'].done == []
    assert lines == ["REPORT report: 1 Xid line(s) in the kernel log from before the watchdog's first check were not "
                     "acted on evidence={}"]
    simctl.inject_xid(host['host_file'], host['state_file'], GPU1, 31)
    check(host)
    assert host['systemd'].done == [('restart', 'gpufleet-svc-embed.service')]


def test_a_reset_xid_with_allow_reset_stops_resets_and_starts(host):
    check(host)
    simctl.inject_xid(host['host_file'], host['state_file'], GPU1, 48)
    rc, lines = check(host, allow_reset=True, gpu_reset_command=['true'], mig_unit='')
    assert rc == 0 and lines[0].startswith('ACT reset')
    assert host['systemd'].done == [('stop', 'gpufleet-svc-embed.service'), ('start', 'gpufleet-svc-embed.service')]


def test_a_missing_or_corrupt_plan_or_a_vanished_unit_means_no_action(host):
    simctl.set_process_memory(host['state_file'], PIDS['llm'], 79000)
    del host['systemd'].units['gpufleet-svc-embed.service']
    rc, lines = check(host)
    assert rc == 0 and host['systemd'].done == []
    assert lines[0].startswith('REPORT report: no action this check: the plan names embed (gpufleet-svc-embed.service)')
    assert 'gpufleet_watchdog_plan_ok 0' in metrics(host)
    (host['tmp'] / 'placement.json').write_text('{not json')
    rc, lines = check(host)
    assert rc == 0 and host['systemd'].done == [] and 'is not JSON' in lines[0]
    os.unlink(str(host['tmp'] / 'placement.json'))
    rc, lines = check(host)
    assert rc == 0 and host['systemd'].done == [] and 'cannot be read' in lines[0]


def test_dry_run_only_reports(host):
    simctl.set_process_memory(host['state_file'], PIDS['llm'], 79000)
    rc, lines = check(host, dry_run=True)
    assert rc == 0 and host['systemd'].done == [] and '(not done: dry run)' in lines[0]


def test_a_bad_configuration_is_refused_and_nothing_is_read(host, capsys):
    path = host['tmp'] / 'bad.json'
    path.write_text(json.dumps({'version': 1, 'memory_budget_percent': 120}))
    assert _helpers_main.main(['gpufleet-helpers', 'watchdog', '--check-config', str(path)]) == 1
    assert 'memory_budget_percent must be a percentage from 1 to 100 (got 120)' in capsys.readouterr().err
    assert not os.path.exists(host['config']['state_file'])
    assert _helpers_main.main(['gpufleet-helpers', 'watchdog']) == 2


def test_a_cursor_the_journal_lost_restarts_from_the_end_of_the_log_without_acting(host):
    check(host)
    simctl.inject_xid(host['host_file'], host['state_file'], GPU1, 31)
    document = state(host)
    document['kernel_cursor'] = 's=gone;i=1'
    (host['tmp'] / 'state.json').write_text(json.dumps(document))
    rc, lines = check(host)
    assert rc == 0 and host['systemd'].done == []
    assert 'Failed to seek to cursor' in lines[0] and '1 Xid line(s) of this boot were not acted on' in lines[0]
    assert state(host)['kernel_cursor'].endswith('i=1')


class _Prometheus:
    """A stand-in for Prometheus's query API on 127.0.0.1: answers each query with the next of `answers`."""

    def __init__(self, answers):
        import http.server

        self.answers, self.queries = list(answers), []
        outer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self):
                outer.queries.append(self.path)
                body = json.dumps(outer.answers.pop(0)).encode()
                self.send_response(200)
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *_):
                pass

        self.server = http.server.HTTPServer(('127.0.0.1', 0), Handler)
        self.url = 'http://127.0.0.1:%d' % self.server.server_port
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()


def _count(value):
    return {'status': 'success', 'data': {'resultType': 'vector', 'result': [{'metric': {}, 'value': [1, value]}]}}


def test_the_fleet_cap_counts_quarantined_hosts_through_prometheus(host):
    assert check(host)[0] == 0
    prometheus = _Prometheus([_count('2')])
    try:
        simctl.lose_gpu(host['host_file'], host['state_file'], GPU1)
        rc, lines = check(host, fleet_max_quarantined=2, fleet_prometheus_url=prometheus.url)
    finally:
        prometheus.close()
    assert rc == 0 and prometheus.queries == [
        '/api/v1/query?query=count%28max+by+%28host%29+%28gpufleet_watchdog_quarantined+%3D%3D+1%29%29']
    assert lines[0].startswith('SKIP quarantine') and 'fleet cap: 2 host(s) of the fleet are quarantined' in lines[0]
    assert state(host)['quarantined'] == {} and 'gpufleet_watchdog_quarantine_held 1' in metrics(host)


@pytest.mark.parametrize('answer, why', [
    ({'status': 'success', 'data': {'resultType': 'vector', 'result': []}}, None),  # nobody quarantined: count 0
    ({'status': 'error', 'error': 'parse error'}, 'answered parse error'),
])
def test_an_empty_or_failed_count_from_prometheus(host, answer, why):
    prometheus = _Prometheus([answer])
    try:
        counted, problem = host['watchdog'].fleet_quarantined(prometheus.url)
    finally:
        prometheus.close()
    assert (counted, problem) == ((0, None) if why is None else (None, 'Prometheus at %s %s' % (prometheus.url, why)))


def test_a_prometheus_that_does_not_answer_leaves_the_quarantine_to_the_host(host):
    assert check(host)[0] == 0
    simctl.lose_gpu(host['host_file'], host['state_file'], GPU1)
    rc, lines = check(host, fleet_max_quarantined=1, fleet_prometheus_url='http://127.0.0.1:9')
    assert rc == 0 and lines[0].startswith('ACT quarantine')
    assert '(the fleet cap was not checked: Prometheus at http://127.0.0.1:9 did not answer: ' in lines[0]
    assert list(state(host)['quarantined']) == [GPU1]


def test_a_check_reads_the_plan_once_and_measures_the_binding_from_its_entries(host, monkeypatch):
    """The audit's services come from the Plan the check read (_numa_audit.plan_service), not from a second read."""
    opened = []
    real_open = builtins.open

    def counting_open(path, *args, **kwargs):
        if str(path) == host['config']['plan_file']:
            opened.append(path)
        return real_open(path, *args, **kwargs)
    monkeypatch.setattr(builtins, 'open', counting_open)
    simctl.set_process_memory(host['state_file'], PIDS['chat'], 70000)
    rc, lines = check(host)
    assert rc == 0 and len(opened) == 1
    assert [line.split(':')[0] for line in lines] == ['ACT restart']
    assert 'gpufleet_watchdog_service_remote_fraction{service="embed"} 0.0' in metrics(host)
