# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""gpufleet.core.state_receipt and the helper bundle's drift command: a receipt recorded, then each kind of drift
(a unit file edited, a package hold removed, daemon.json changed, a MIG instance destroyed, an MPS limit changed, a
service stopped) seen by the module's check and by the drift command's metric.

dpkg-query and systemctl are a double (System); files are real files under tmp_path, NVML the simulator, the MPS
control daemon tests/mps_sim's.
"""

from __future__ import absolute_import, division, print_function

import json
import os

import pynvml
import pytest

from ansible.module_utils import basic
from ansible_collections.gpufleet.core.plugins.module_utils import _helper_drift, _helpers_main
from ansible_collections.gpufleet.core.plugins.module_utils._host import run_argv
from ansible_collections.gpufleet.core.plugins.module_utils._receipt import (
    ReceiptError, drift_metrics, inputs_digest, parse_receipt)
from ansible_collections.gpufleet.core.plugins.module_utils._receipt_host import ReceiptHost
from ansible_collections.gpufleet.core.plugins.modules import state_receipt

from ...conftest import ModuleFail
from ...support.sim import BARE_HOST, MPS_CONTROL, gpu_uuid, mps_control_daemon
from ..module_utils.test_nvml import MIG_A, MIG_B, mig_gpus

DRIVER = 'nvidia-driver-550-server'


class System:
    """dpkg-query -W and systemctl show as a test double; the MPS control program is tests/mps_sim's."""

    def __init__(self):
        # name: (version, selection, state) as dpkg keeps them
        self.packages = {DRIVER: ('550.127.05-0ubuntu1', 'hold', 'installed'),
                         'nvidia-container-toolkit': ('1.17.3-1', 'install', 'installed')}
        self.units = {'gpufleet-svc-llm.service': ('enabled', 'active'), 'docker.service': ('enabled', 'active')}
        self.calls = []

    def __call__(self, argv, data=None, environ_update=None, **_kwargs):
        self.calls.append(argv[0])
        if argv[0] == 'dpkg-query':
            names = argv[argv.index('--') + 1:]
            lines = ['%s\t%s\t%s\t%s\n' % ((name,) + self.packages[name]) for name in names if name in self.packages]
            missing = [name for name in names if name not in self.packages]
            return (1 if missing else 0), ''.join(lines), ''.join('dpkg-query: no packages found matching %s\n' % name
                                                                  for name in missing)
        if argv[:2] == ['systemctl', 'show']:
            blocks = []
            for name in argv[argv.index('--') + 1:]:
                if name in self.units:
                    blocks.append('LoadState=loaded\nUnitFileState=%s\nActiveState=%s\n' % self.units[name])
                else:
                    blocks.append('LoadState=not-found\nUnitFileState=\nActiveState=inactive\n')
            return 0, '\n'.join(blocks), ''
        if argv[0] == 'nvidia-cuda-mps-control':
            return run_argv([MPS_CONTROL] + argv[1:], data, environ_update)
        raise AssertionError('unexpected command %s' % argv)


@pytest.fixture
def host(tmp_path, sim_hosts, monkeypatch):
    """A host with one A100 in MIG mode (two 3g.40gb), one MPS daemon, the files and units of four stages."""
    sim_hosts.described(dict(BARE_HOST, gpus=mig_gpus()))
    system = System()
    monkeypatch.setattr(basic.AnsibleModule, 'run_command', lambda _self, argv, **kw: system(argv, **kw))
    etc = tmp_path / 'etc'
    etc.mkdir()
    (etc / 'daemon.json').write_text('{"runtimes": {"nvidia": {"path": "nvidia-container-runtime"}}}\n')
    (etc / 'gpufleet-svc-llm.service').write_text('[Service]\nCPUAffinity=0-15\nNUMAPolicy=bind\nNUMAMask=0\n')
    (etc / 'mig-layout.json').write_text('{"layouts": {"all": ["3g.40gb", "3g.40gb"]}}\n')
    with mps_control_daemon(tmp_path / 'mps') as daemon:
        daemon['send']('set_default_active_thread_percentage 40')
        stages = {
            'drivers': {'inputs': {'nvidia_driver_version': '550.127.05-0ubuntu1'},
                        'owns': {'packages': [DRIVER, 'nvidia-container-toolkit'], 'holds': [DRIVER],
                                 'files': [str(etc / 'daemon.json')], 'units': ['docker.service']}},
            'partition': {'inputs': {'mig_layouts': {'all': ['3g.40gb', '3g.40gb']}},
                          'owns': {'files': [str(etc / 'mig-layout.json')], 'mig': True,
                                   'mps': [{'pipe_directory': daemon['pipe'], 'devices': [gpu_uuid(0)]}]}},
            'services': {'inputs': {'services': ['llm']},
                         'owns': {'files': [str(etc / 'gpufleet-svc-llm.service')],
                                  'units': ['gpufleet-svc-llm.service']}},
        }
        yield {'system': system, 'etc': etc, 'mps': daemon, 'stages': stages,
               'receipts': str(tmp_path / 'receipts'), 'textfiles': str(tmp_path / 'textfiles')}


def receipt(run_module, host, state='check', stages=None, **options):
    return run_module(state_receipt, dict(options, state=state, stages=stages or host['stages'],
                                          receipt_dir=host['receipts']))


def drift_command(host):
    """The helper's drift command on this host; returns (exit code, {stage: metric value})."""
    code = _helper_drift.main(['drift', host['receipts'], host['textfiles']],
                              host=ReceiptHost(host['system'], pynvml))
    with open(os.path.join(host['textfiles'], 'gpufleet-drift.prom')) as handle:
        text = handle.read()
    values = dict((line.split('"')[1], int(line.rsplit(' ', 1)[1]))
                  for line in text.splitlines() if line.startswith('gpufleet_drift{'))
    return code, values


def destroy_mig_instance(gpu_instance_id):
    pynvml.nvmlInit()
    try:
        gpu = pynvml.nvmlDeviceGetHandleByIndex(0)
        gi = pynvml.nvmlDeviceGetGpuInstanceById(gpu, gpu_instance_id)
        pynvml.nvmlComputeInstanceDestroy(pynvml.nvmlGpuInstanceGetComputeInstanceById(gi, 0))
        pynvml.nvmlGpuInstanceDestroy(gi)
    finally:
        pynvml.nvmlShutdown()


def test_recorded_stages_are_current_and_recording_again_changes_nothing(run_module, host):
    first = receipt(run_module, host, 'record')
    assert first['changed'] is True
    assert sorted(os.listdir(host['receipts'])) == ['drivers.json', 'partition.json', 'services.json']
    partition = json.loads(open(os.path.join(host['receipts'], 'partition.json')).read())
    mig = [value for item, value in partition['fingerprint'].items() if item.startswith('mig ')]
    # By slot (profile, placement, compute instances), not by UUID: a layout made again at boot is the same layout.
    assert mig == ['MIG on: 3g.40gb@0[3c] 3g.40gb@4[3c]']
    assert partition['inputs'] == inputs_digest({'mig_layouts': {'all': ['3g.40gb', '3g.40gb']}})
    assert receipt(run_module, host, 'record')['changed'] is False
    checked = receipt(run_module, host)
    assert checked['changed'] is False
    assert checked['current'] == ['drivers', 'partition', 'services']
    assert all(result['drift'] == [] for result in checked['stages'].values())
    assert drift_command(host) == (0, {'drivers': 0, 'partition': 0, 'services': 0})


def remake_mig_instances():
    """What the boot unit does after a reboot: the same two 3g.40gb made again, in the other order, with new UUIDs."""
    pynvml.nvmlInit()
    try:
        gpu = pynvml.nvmlDeviceGetHandleByIndex(0)
        uuids = []
        for gpu_instance_id in (1, 2):
            gi = pynvml.nvmlDeviceGetGpuInstanceById(gpu, gpu_instance_id)
            ci = pynvml.nvmlGpuInstanceGetComputeInstanceById(gi, 0)
            pynvml.nvmlComputeInstanceDestroy(ci)
            pynvml.nvmlGpuInstanceDestroy(gi)
        profile = pynvml.nvmlDeviceGetGpuInstanceProfileInfo(gpu, pynvml.NVML_GPU_INSTANCE_PROFILE_3_SLICE)
        for start in (0, 4):
            placement = pynvml.c_nvmlGpuInstancePlacement_t()
            placement.start, placement.size = start, 4
            gi = pynvml.nvmlDeviceCreateGpuInstanceWithPlacement(gpu, profile.id, placement)
            pynvml.nvmlGpuInstanceCreateComputeInstance(gi, pynvml.NVML_COMPUTE_INSTANCE_PROFILE_3_SLICE)
        for index in range(pynvml.nvmlDeviceGetMaxMigDeviceCount(gpu)):
            try:
                uuids.append(pynvml.nvmlDeviceGetUUID(pynvml.nvmlDeviceGetMigDeviceHandleByIndex(gpu, index)))
            except pynvml.NVMLError_NotFound:
                pass
        return uuids
    finally:
        pynvml.nvmlShutdown()


def test_mig_instances_made_again_in_their_slots_are_not_drift(run_module, host):
    receipt(run_module, host, 'record')
    uuids = remake_mig_instances()
    assert len(uuids) == 2 and not set(uuids) & {MIG_A, MIG_B}  # new devices, new UUIDs
    checked = receipt(run_module, host)
    assert checked['current'] == ['drivers', 'partition', 'services'], checked['stages']['partition']
    assert drift_command(host) == (0, {'drivers': 0, 'partition': 0, 'services': 0})


def edit_unit_file(host):
    with open(str(host['etc'] / 'gpufleet-svc-llm.service'), 'a') as handle:
        handle.write('CPUAffinity=0-63\n')


def remove_hold(host):
    host['system'].packages[DRIVER] = host['system'].packages[DRIVER][:1] + ('install', 'installed')


def change_daemon_json(host):
    (host['etc'] / 'daemon.json').write_text('{"default-runtime": "runc"}\n')


def destroy_mig(_host):
    destroy_mig_instance(1)


def change_mps_limit(host):
    host['mps']['send']('set_default_active_thread_percentage 100')


def stop_service(host):
    host['system'].units['gpufleet-svc-llm.service'] = ('enabled', 'inactive')


@pytest.mark.parametrize('inject, stage, item, before, after', [
    (edit_unit_file, 'services', 'file %(etc)s/gpufleet-svc-llm.service', 'sha256:', 'sha256:'),
    (remove_hold, 'drivers', 'hold ' + DRIVER, 'held', 'not held'),
    (change_daemon_json, 'drivers', 'file %(etc)s/daemon.json', 'sha256:', 'sha256:'),
    (destroy_mig, 'partition', 'mig ' + gpu_uuid(0), 'MIG on: 3g.40gb@0[3c] 3g.40gb@4', 'MIG on: 3g.40gb@0[3c]'),
    (change_mps_limit, 'partition', 'mps %(pipe)s', 'active threads 40%', 'active threads 100%'),
    (stop_service, 'services', 'unit gpufleet-svc-llm.service', 'enabled, active', 'enabled, inactive'),
], ids=['unit-file-edited', 'hold-removed', 'daemon-json-changed', 'mig-instance-destroyed', 'mps-limit-changed',
        'service-stopped'])
def test_each_kind_of_drift_is_seen_by_the_check_and_by_the_metric_on_its_stage_only(
        run_module, host, inject, stage, item, before, after):
    receipt(run_module, host, 'record')
    inject(host)
    checked = receipt(run_module, host)
    assert checked['current'] == sorted(set(host['stages']) - {stage})
    drift = checked['stages'][stage]['drift']
    name = item % {'etc': host['etc'], 'pipe': host['mps']['pipe']}
    assert len(drift) == 1 and drift[0].startswith(name + ': '), drift
    recorded, now = drift[0][len(name) + 2:].split(' -> ')
    assert recorded.startswith(before) and now.startswith(after) and recorded != now
    assert checked['stages'][stage]['inputs_changed'] is False
    assert drift_command(host) == (0, dict((name, int(name == stage)) for name in host['stages']))


def test_changed_inputs_make_a_stage_not_current_without_drift(run_module, host):
    receipt(run_module, host, 'record')
    stages = dict(host['stages'], drivers=dict(host['stages']['drivers'],
                                               inputs={'nvidia_driver_version': '570.133.20-0ubuntu1'}))
    checked = receipt(run_module, host, stages=stages)
    assert checked['current'] == ['partition', 'services']
    assert checked['stages']['drivers'] == dict(checked['stages']['drivers'], inputs_changed=True, drift=[],
                                                current=False)


def test_a_thing_the_stage_owns_now_but_did_not_is_drift(run_module, host):
    receipt(run_module, host, 'record')
    owns = dict(host['stages']['services']['owns'], units=['gpufleet-svc-llm.service', 'gpufleet-svc-sd.service'])
    checked = receipt(run_module, host, stages={'services': dict(host['stages']['services'], owns=owns)})
    assert checked['stages']['services']['drift'] == ['unit gpufleet-svc-sd.service: not recorded -> absent']


def test_a_stage_without_a_receipt_is_not_current_and_says_why(run_module, host):
    checked = receipt(run_module, host)
    assert checked['current'] == []
    assert checked['stages']['drivers']['drift'] == [
        'no receipt: the stage has not converged this host since receipts were kept']
    # the timer has nothing to report on a host no run has recorded
    assert drift_command(host) == (0, {})


def test_check_mode_records_nothing_and_the_diff_shows_the_receipts(run_module, host):
    result = receipt(run_module, host, 'record', _ansible_check_mode=True, _ansible_diff=True)
    assert result['changed'] is True and not os.path.exists(host['receipts'])
    assert result['diff']['before'].splitlines() == ['# %s/%s.json' % (host['receipts'], name)
                                                     for name in ('drivers', 'partition', 'services')]
    assert '"stage": "partition"' in result['diff']['after']


def test_bad_input_is_refused_whole_before_anything_is_read(run_module, host):
    calls = len(host['system'].calls)
    with pytest.raises(ModuleFail) as failed:
        receipt(run_module, host, 'record', stages={
            'Drivers': {'inputs': {}, 'owns': {'packages': ['nvidia driver']}},
            'services': {'inputs': {}, 'owns': {'files': ['etc/docker/daemon.json'], 'units': ['docker'],
                                                'mps': [{'pipe_directory': '/run/x', 'devices': ['0']}],
                                                'sockets': []}},
            'exporter': {'owns': {}}})
    message = failed.value.result['msg']
    for words in ('stage "Drivers" is not a stage name', '"nvidia driver" is not a Debian package name',
                  '"etc/docker/daemon.json" is not an absolute path', '"docker" is not a systemd unit name',
                  '"0" is not a GPU UUID or a MIG slot', 'unknown keys sockets', 'stages.exporter:'):
        assert words in message
    assert message.startswith('Nothing was read or changed') and not os.path.exists(host['receipts'])
    assert len(host['system'].calls) == calls


def test_a_receipt_of_another_version_is_refused_with_the_fix(run_module, host):
    receipt(run_module, host, 'record')
    path = os.path.join(host['receipts'], 'drivers.json')
    document = json.loads(open(path).read())
    with open(path, 'w') as handle:
        json.dump(dict(document, version=2), handle)
    with pytest.raises(ModuleFail) as failed:
        receipt(run_module, host)
    assert failed.value.result['msg'] == ('%s is a receipt of version 2, this collection reads version 1; remove it, '
                                          'and the next run of the site playbook writes it again' % path)
    # the timer marks the stage as drifted, says why, and fails (systemctl --failed shows it)
    assert drift_command(host) == (1, {'drivers': 1, 'partition': 0, 'services': 0})


def test_the_mig_layout_needs_nvml(run_module, host, monkeypatch):
    monkeypatch.setattr(state_receipt, 'pynvml', None)
    with pytest.raises(ModuleFail) as failed:
        receipt(run_module, host)
    assert 'nvidia-ml-py' in failed.value.result['msg'] and 'MIG layout' in failed.value.result['msg']


def test_a_receipt_that_is_not_ours_is_refused():
    with pytest.raises(ReceiptError, match='is not JSON'):
        parse_receipt('{', '/r/x.json')
    with pytest.raises(ReceiptError, match=r'not a receipt this collection wrote \(no owns, fingerprint'):
        parse_receipt('{"version": 1, "stage": "x", "inputs": "d"}', '/r/x.json')


def test_the_metric_marks_a_stage_drifted_or_unreadable_and_counts_its_items():
    text = drift_metrics({'drivers': {'drift': []}, 'partition': {'drift': ['a', 'b']}, 'services': {'error': 'e'}},
                         1700000000.5)
    samples = [line for line in text.splitlines() if not line.startswith('#')]
    assert samples == ['gpufleet_drift{stage="drivers"} 0', 'gpufleet_drift{stage="partition"} 1',
                       'gpufleet_drift{stage="services"} 1', 'gpufleet_drift_items{stage="drivers"} 0',
                       'gpufleet_drift_items{stage="partition"} 2', 'gpufleet_drift_items{stage="services"} 0',
                       'gpufleet_drift_checked_timestamp_seconds 1700000000']


def test_the_drift_command_is_in_the_bundle_and_refuses_options():
    assert _helpers_main.COMMANDS['drift'] is _helper_drift
    assert _helper_drift.main(['drift', '--all']) == 2


def test_a_boot_unit_is_owned_by_its_enablement_alone(run_module, host):
    host['system'].units['gpufleet-mig.service'] = ('enabled', 'inactive')
    stages = {'partition': {'inputs': {}, 'owns': {'enabled': ['gpufleet-mig.service']}}}
    receipt(run_module, host, 'record', stages=stages)
    host['system'].units['gpufleet-mig.service'] = ('enabled', 'active')  # it ran: not drift
    assert receipt(run_module, host, stages=stages)['current'] == ['partition']
    host['system'].units['gpufleet-mig.service'] = ('disabled', 'active')
    checked = receipt(run_module, host, stages=stages)
    assert checked['stages']['partition']['drift'] == ['unit gpufleet-mig.service: enabled -> disabled']


def test_a_check_without_owns_fingerprints_what_the_receipt_names_and_absent_forgets_it(run_module, host):
    receipt(run_module, host, 'record')
    stop_service(host)
    order = ['drivers', 'partition', 'services']
    checked = receipt(run_module, host, order=order,
                      stages=dict((name, {'inputs': spec['inputs']}) for name, spec in host['stages'].items()))
    assert checked['current'] == ['drivers', 'partition'] and checked['skippable'] == ['drivers', 'partition']
    assert checked['stages']['services']['drift'] == [
        'unit gpufleet-svc-llm.service: enabled, active -> enabled, inactive']
    # A stage that will run makes every stage after it run too, current or not.
    remove_hold(host)
    assert receipt(run_module, host, order=order)['skippable'] == []
    forgotten = receipt(run_module, host, 'absent', stages={'partition': {}})
    assert forgotten['changed'] is True and not os.path.exists(os.path.join(host['receipts'], 'partition.json'))
    assert receipt(run_module, host, 'absent', stages={'partition': {}})['changed'] is False


def test_order_and_absent_are_checked_before_anything_is_read(run_module, host):
    with pytest.raises(ModuleFail) as failed:
        receipt(run_module, host, order=['drivers', 'drivers'])
    assert 'order: drivers named more than once' in failed.value.result['msg']
    assert 'order: partition, services not in it' in failed.value.result['msg']
    with pytest.raises(ModuleFail) as failed:
        receipt(run_module, host, 'absent', stages={'../etc': {}})
    assert 'stage "../etc" is not a stage name' in failed.value.result['msg']
    assert host['system'].calls == [] and not os.path.exists(host['receipts'])


def test_without_stages_the_check_reads_every_receipt_and_a_record_clears_the_drift_metric(run_module, host):
    receipt(run_module, host, 'record')
    stop_service(host)
    assert drift_command(host) == (0, {'drivers': 0, 'partition': 0, 'services': 1})
    alone = run_module(state_receipt, dict(receipt_dir=host['receipts']))
    assert alone['changed'] is False and alone['current'] == ['drivers', 'partition']
    assert alone['stages']['services']['drift'] == [
        'unit gpufleet-svc-llm.service: enabled, active -> enabled, inactive']
    # The run that converged the stage again records it, and the metric is 0 at once.
    host['system'].units['gpufleet-svc-llm.service'] = ('enabled', 'active')
    cleared = receipt(run_module, host, 'record', stages={'services': host['stages']['services']},
                      textfile_dir=host['textfiles'])
    assert cleared['changed'] is False  # the receipt is as it was; only the metric is written again
    with open(os.path.join(host['textfiles'], 'gpufleet-drift.prom')) as handle:
        assert 'gpufleet_drift{stage="services"} 0\n' in handle.read()
    with pytest.raises(ModuleFail) as failed:
        run_module(state_receipt, dict(state='record', receipt_dir=host['receipts']))
    assert failed.value.result['msg'] == 'Nothing was read or changed: state=record needs stages; give each stage by name'


def test_the_drift_command_says_when_it_cannot_write_its_metric(run_module, host, capsys):
    receipt(run_module, host, 'record')
    blocked = os.path.join(host['receipts'], 'drivers.json', 'textfiles')  # under a file: cannot be made
    code = _helper_drift.main(['drift', host['receipts'], blocked], host=ReceiptHost(host['system'], pynvml))
    assert code == 1
    assert 'gpufleet-drift: cannot write %s' % os.path.join(blocked, 'gpufleet-drift.prom') in capsys.readouterr().err
