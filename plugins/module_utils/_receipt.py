# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.core contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""State receipts: what a stage of the site playbook converged a host to, and whether the host is still there.

A stage's receipt, /var/lib/gpufleet/receipts/<stage>.json, holds the digest of the stage's inputs (the variables
its roles read and the plan, digested where they are known: on the controller), what the stage owns on the host
(``owns``: packages, package holds, files, units, the MIG layout, MPS daemons) and the fingerprint of that state
when the stage converged it. A check reads the same things again: the stage is current when its inputs have the
recorded digest and its state the recorded fingerprint; anything else is drift, named item by item.

Pure: the host is read through ReceiptHost (_receipt_host.py), which tests replace. A private module: its API may
change without notice.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import hashlib
import json
import os
import re
import time

from ansible_collections.gpufleet.core.plugins.module_utils._diff import make_diff
from ansible_collections.gpufleet.core.plugins.module_utils._errors import GpufleetError
from ansible_collections.gpufleet.core.plugins.module_utils._mig_slots import is_device_name
from ansible_collections.gpufleet.core.plugins.module_utils._values import is_path, is_unit_name, shown

RECEIPT_VERSION = 1
RECEIPT_DIR = '/var/lib/gpufleet/receipts'
DRIFT_METRICS_FILE = 'gpufleet-drift.prom'
STAGE_NAME = re.compile(r'[a-z][a-z0-9_]{0,31}')
# Debian policy's package name; a name with an architecture (libfoo:amd64) is one too.
PACKAGE_NAME = re.compile(r'[a-z0-9][a-z0-9+.-]+(:[a-z0-9-]+)?')
OWNS_KEYS = ('packages', 'holds', 'files', 'units', 'enabled', 'mig', 'mps')
# What a fingerprint item reads when the thing is not there.
ABSENT = 'absent'


class ReceiptError(GpufleetError):
    """A receipt or an input is not what this collection writes: the message names it and the fix."""


def inputs_digest(inputs):
    """The sha256 of a stage's inputs as canonical JSON (sorted keys), so the same values give the same digest."""
    try:
        text = json.dumps(inputs, sort_keys=True, separators=(',', ':'))
    except (TypeError, ValueError) as exc:
        raise ReceiptError('the inputs are not JSON data (%s); give the variables\' values, not objects' % exc)
    return hashlib.sha256(text.encode('utf-8')).hexdigest()


def _list_problems(where, value, rule, what):
    if not isinstance(value, list):
        return ['%s: %s is not a list; give a list of %s' % (where, shown(value), what)]
    return ['%s: %s is not %s' % (where, shown(item), what) for item in value
            if not isinstance(item, str) or not rule(item)]


def _mps_problems(where, value):
    if not isinstance(value, list):
        return ['%s: %s is not a list; give the MPS daemons as {pipe_directory, devices}' % (where, shown(value))]
    problems = []
    for position, daemon in enumerate(value):
        here = '%s[%d]' % (where, position)
        if not isinstance(daemon, dict) or set(daemon) != {'pipe_directory', 'devices'}:
            problems.append('%s: %s; give {pipe_directory: /run/gpufleet-mps/<name>, devices: [<name>]}'
                            % (here, shown(daemon)))
            continue
        if not isinstance(daemon['pipe_directory'], str) or not is_path(daemon['pipe_directory']):
            problems.append('%s.pipe_directory: %s is not an absolute path' % (here, shown(daemon['pipe_directory'])))
        problems.extend(_list_problems(here + '.devices', daemon['devices'],
                                       is_device_name,
                                       'a GPU UUID or a MIG slot (GPU-UUID:PROFILE:START:ORDINAL)'))
    return problems


def stage_name_problems(stage):
    if not isinstance(stage, str) or not STAGE_NAME.fullmatch(stage):
        return ['stage %s is not a stage name such as drivers (lower case, digits, _)' % shown(stage)]
    return []


def owns_problems(stage, owns):
    """Every problem of a stage's name and of what it owns, each naming the value and the fix; [] when good."""
    problems = stage_name_problems(stage)
    where = 'stages.%s.owns' % stage
    if not isinstance(owns, dict):
        return problems + ['%s: %s is not a mapping of %s' % (where, shown(owns), ', '.join(OWNS_KEYS))]
    unknown = sorted(set(owns) - set(OWNS_KEYS))
    if unknown:
        problems.append('%s: unknown keys %s; the keys are %s' % (where, ', '.join(unknown), ', '.join(OWNS_KEYS)))
    for key, rule, what in (('packages', PACKAGE_NAME.fullmatch, 'a Debian package name'),
                            ('holds', PACKAGE_NAME.fullmatch, 'a Debian package name'),
                            ('files', is_path, 'an absolute path'),
                            ('units', is_unit_name, 'a systemd unit name such as gpufleet-mig.service'),
                            ('enabled', is_unit_name, 'a systemd unit name such as gpufleet-mig.service')):
        if key in owns:
            problems.extend(_list_problems('%s.%s' % (where, key), owns[key], rule, what))
    if 'mig' in owns and not isinstance(owns['mig'], bool):
        problems.append('%s.mig: %s is not true or false' % (where, shown(owns['mig'])))
    if 'mps' in owns:
        problems.extend(_mps_problems(where + '.mps', owns['mps']))
    return problems


def mig_text(gpu_instances):
    """A GPU's MIG layout as fingerprint text: each GPU instance's profile, placement and compute instance sizes,
    which are its devices' slots (_mig_slots). Not their UUIDs: the boot unit makes the instances again after a
    reboot, maybe with new UUIDs, and the services find theirs by slot (_device_env), so that is not drift."""
    return ' '.join('%s@%d[%s]' % (gi['profile'], gi['placement']['start'],
                                   '+'.join('%dc' % ci['slice_count'] for ci in gi['compute_instances']))
                    for gi in sorted(gpu_instances, key=lambda gi: gi['placement']['start'])) or 'no instances'


def fingerprint(host, owns):
    """The state a stage owns, read from the host now: {item: text}, one item for each thing owned."""
    items = {}
    packages = sorted(set(owns.get('packages', ())) | set(owns.get('holds', ())))
    installed = host.packages(packages) if packages else {}
    for name in owns.get('packages', ()):
        items['package %s' % name] = installed.get(name, {}).get('version') or ABSENT
    for name in owns.get('holds', ()):
        items['hold %s' % name] = 'held' if installed.get(name, {}).get('held') else 'not held'
    for path in owns.get('files', ()):
        items['file %s' % path] = host.file_digest(path) or ABSENT
    # A unit that runs at boot only (the MIG layout's) is owned by its unit-file state alone: whether it is active
    # now says when it last ran, not whether the host drifted.
    units = list(owns.get('units', ()))
    enabled = [name for name in owns.get('enabled', ()) if name not in units]
    for unit, state in sorted((host.units(units + enabled) if units or enabled else {}).items()):
        items['unit %s' % unit] = state.split(', ')[0] if unit in enabled else state
    if owns.get('mig'):
        for uuid, layout in sorted(host.mig_layouts().items()):
            items['mig %s' % uuid] = layout
    for daemon in owns.get('mps', ()):
        items['mps %s' % daemon['pipe_directory']] = host.mps_settings(daemon['pipe_directory'], daemon['devices'])
    return items


def make_receipt(stage, digest, owns, items):
    return {'version': RECEIPT_VERSION, 'stage': stage, 'inputs': digest, 'owns': owns, 'fingerprint': items}


def receipt_text(receipt):
    return json.dumps(receipt, indent=1, sort_keys=True) + '\n'


def parse_receipt(text, path):
    """A receipt from its file's text; refuses one of another version or form with the fix."""
    try:
        receipt = json.loads(text)
    except ValueError as exc:
        raise ReceiptError('%s is not JSON (%s); remove it, and the next run of the site playbook writes it again'
                           % (path, exc))
    if not isinstance(receipt, dict) or receipt.get('version') != RECEIPT_VERSION:
        raise ReceiptError('%s is a receipt of version %s, this collection reads version %d; remove it, and the '
                           'next run of the site playbook writes it again'
                           % (path, shown(receipt.get('version') if isinstance(receipt, dict) else receipt),
                              RECEIPT_VERSION))
    missing = [key for key in ('stage', 'inputs', 'owns', 'fingerprint') if key not in receipt]
    problems = owns_problems(receipt.get('stage'), receipt.get('owns'))
    if missing or problems or not isinstance(receipt['fingerprint'], dict):
        raise ReceiptError('%s is not a receipt this collection wrote (%s); remove it, and the next run of the site '
                           'playbook writes it again' % (path, '; '.join(
                               (['no %s' % ', '.join(missing)] if missing else []) + problems) or 'no fingerprint'))
    return receipt


def differences(recorded, current):
    """What changed between two fingerprints, one line per item, in item order: 'item: recorded -> now'."""
    lines = []
    for item in sorted(set(recorded) | set(current)):
        before, after = recorded.get(item, 'not recorded'), current.get(item, 'not owned now')
        if before != after:
            lines.append('%s: %s -> %s' % (item, before, after))
    return lines


def receipt_path(receipt_dir, stage):
    return os.path.join(receipt_dir, '%s.json' % stage)


def check_stage(host, receipt_dir, stage, digest=None, owns=None):
    """Whether a stage is current on the host: {current, inputs_changed, drift, receipt, recorded}.

    With ``owns`` (the run's), what the stage owns now is fingerprinted, and a change of what it owns is drift too;
    without it (the timer, which has no inputs), the receipt's. ``digest`` None compares no inputs. A stage without a
    receipt is not current, and says why.
    """
    path = receipt_path(receipt_dir, stage)
    text = host.read(path)
    if text is None:
        return {'current': False, 'inputs_changed': digest is not None, 'receipt': path, 'recorded': False,
                'drift': ['no receipt: the stage has not converged this host since receipts were kept']}
    receipt = parse_receipt(text, path)
    if receipt['stage'] != stage:
        raise ReceiptError('%s is the receipt of stage %s; remove it, and the next run writes it again'
                           % (path, receipt['stage']))
    drift = differences(receipt['fingerprint'], fingerprint(host, receipt['owns'] if owns is None else owns))
    inputs_changed = digest is not None and digest != receipt['inputs']
    return {'current': not drift and not inputs_changed, 'inputs_changed': inputs_changed, 'drift': drift,
            'receipt': path, 'recorded': True}


def recorded_stages(host, receipt_dir):
    """The stages with a receipt in the directory, in name order."""
    return sorted(name[:-len('.json')] for name in host.list_dir(receipt_dir)
                  if name.endswith('.json') and STAGE_NAME.fullmatch(name[:-len('.json')]))


def check_recorded(host, receipt_dir):
    """{stage: its check, or {'error': why}} for every receipt in the directory, each against what it names and with
    no inputs compared (the drift command's and the fleet report's view: the host does not know the inputs)."""
    results = {}
    for stage in recorded_stages(host, receipt_dir):
        try:
            results[stage] = check_stage(host, receipt_dir, stage)
        except GpufleetError as exc:
            results[stage] = {'error': str(exc)}
    return results


def drift_metrics(results, checked_at):
    """node_exporter textfile text: gpufleet_drift{stage} 1 where a stage drifted (or its receipt is unreadable),
    the number of drifted items, and when the check ran."""
    lines = ['# HELP gpufleet_drift 1 while what a stage of the site playbook converged has changed on this host since.',
             '# TYPE gpufleet_drift gauge']
    lines.extend('gpufleet_drift{stage="%s"} %d' % (stage, 0 if result.get('drift') == [] else 1)
                 for stage, result in sorted(results.items()))
    lines.extend(['# HELP gpufleet_drift_items Things a stage owns that differ from its receipt.',
                  '# TYPE gpufleet_drift_items gauge'])
    lines.extend('gpufleet_drift_items{stage="%s"} %d' % (stage, len(result.get('drift') or ()))
                 for stage, result in sorted(results.items()))
    lines.extend(['# HELP gpufleet_drift_checked_timestamp_seconds When the drift check last ran.',
                  '# TYPE gpufleet_drift_checked_timestamp_seconds gauge',
                  'gpufleet_drift_checked_timestamp_seconds %d' % int(checked_at)])
    return '\n'.join(lines) + '\n'


def stages_problems(stages, state='check'):
    """Every problem of the module's stages ({name: {inputs, owns}}), each naming the value and the fix. A check may
    leave out owns (what the receipt names is then fingerprinted); a removal names the stages alone."""
    if not isinstance(stages, dict) or not stages:
        return ['stages: %s; give each stage as {name: {inputs: <its variables>, owns: {packages, holds, files, '
                'units, mig, mps}}}' % shown(stages)]
    problems = []
    for name, spec in sorted(stages.items()):
        if state == 'absent' or (isinstance(spec, dict) and 'owns' not in spec):
            problems.extend(stage_name_problems(name))
        if state == 'absent':
            continue
        keys = set(spec) if isinstance(spec, dict) else None
        if keys not in ({'inputs', 'owns'}, {'inputs'} if state == 'check' else {'inputs', 'owns'}):
            problems.append('stages.%s: %s; give {inputs: <its variables>, owns: {...}}%s'
                            % (name, shown(spec), ' (a check may leave out owns)' if state == 'check' else ''))
            continue
        if 'owns' in spec:
            owns = spec['owns'] if isinstance(spec['owns'], list) and spec['owns'] else [spec['owns']]
            for part in owns:
                problems.extend(owns_problems(name, part))
    return problems


def merge_owns(owns):
    """What a stage owns, from one mapping or a list of them (one for each of its roles): the lists joined without
    repeats (two roles may write one apt source), mig true where any is."""
    if isinstance(owns, dict):
        return owns
    merged = {}
    for part in owns:
        for key, value in part.items():
            if key == 'mig':
                merged['mig'] = merged.get('mig', False) or value
                continue
            kept = merged.setdefault(key, [])
            kept.extend(item for item in value if item not in kept)
    return merged


def order_problems(order, stages):
    """ORDER must name each stage of STAGES at most once; it may name stages the run does not check."""
    if not isinstance(order, list) or not all(isinstance(name, str) for name in order):
        return ['order: %s is not a list of stage names' % shown(order)]
    twice = sorted(set(name for name in order if order.count(name) > 1))
    missing = sorted(set(stages) - set(order)) if order else []
    return (['order: %s named more than once' % ', '.join(twice)] if twice else []) + (
        ['order: %s not in it; name every stage of stages, in the order they run' % ', '.join(missing)]
        if missing else [])


def check(host, receipt_dir, stages):
    """{stage: check_stage(...)} for the run's stages, each against its inputs and what it owns now (or what its
    receipt names, where the run does not say)."""
    return dict((name, check_stage(host, receipt_dir, name, inputs_digest(spec['inputs']), spec.get('owns')))
                for name, spec in sorted(stages.items()))


def skippable(order, results):
    """The stages a run can leave out: each current, and every stage before it in ORDER that is checked is current
    too - a stage that runs may change what the stages after it build on (a driver's reboot gives MIG devices new
    UUIDs, which the services' units name)."""
    skip = []
    for name in order:
        if name not in results:
            continue
        if not results[name]['current']:
            break
        skip.append(name)
    return skip


def record(host, receipt_dir, stages, check_mode):
    """Write each stage's receipt: its inputs' digest, what it owns and the fingerprint of that now.

    Returns (changed, {stage: (receipt text before or None, after)}); a receipt already so is not written again.
    """
    texts = {}
    for name, spec in sorted(stages.items()):
        path = receipt_path(receipt_dir, name)
        after = receipt_text(make_receipt(name, inputs_digest(spec['inputs']), spec['owns'],
                                          fingerprint(host, spec['owns'])))
        before = host.read(path)
        if before != after and not check_mode:
            host.write(path, after)
        texts[name] = (before, after)
    return any(before != after for before, after in texts.values()), texts


def remove(host, receipt_dir, stages, check_mode):
    """Remove the stages' receipts, so the next run does not skip them (a stage that failed part way).

    Returns (changed, {stage: (receipt text before or None, None)})."""
    texts = {}
    for name in sorted(stages):
        path = receipt_path(receipt_dir, name)
        before = host.read(path)
        if before is not None and not check_mode:
            host.remove(path)
        texts[name] = (before, None)
    return any(before is not None for before, _after in texts.values()), texts


def validated_stages(state, stages, order):
    """The module's stages with each one's owns joined (merge_owns), or None for a check of every receipt; raises
    ReceiptError naming every problem, before anything is read."""
    if stages is None:
        if state != 'check':
            raise ReceiptError('Nothing was read or changed: state=%s needs stages; give each stage by name' % state)
        return None
    problems = stages_problems(stages, state) + order_problems(order, stages)
    if problems:
        raise ReceiptError('Nothing was read or changed: %s' % '; '.join(problems))
    return dict((name, dict(spec, owns=merge_owns(spec['owns'])) if isinstance(spec, dict) and 'owns' in spec
                 else spec) for name, spec in stages.items())


def reads_mig(state, stages):
    """Whether the run reads a MIG layout through NVML: a check or record of a stage that owns one."""
    return state != 'absent' and any(spec.get('owns', {}).get('mig') for spec in (stages or {}).values())


def _current(results):
    return [name for name, result in sorted(results.items()) if result.get('current')]


def apply(host, params, stages, check_mode, with_diff):
    """state_receipt's result for its parameters and validated_stages' STAGES: a check reads, a record or an
    absent writes (not in check mode) and then, given a textfile_dir, the drift metric of every receipt again."""
    receipt_dir = params['receipt_dir']
    if params['state'] == 'check':
        results = check_recorded(host, receipt_dir) if stages is None else check(host, receipt_dir, stages)
        return {'changed': False, 'stages': results, 'current': _current(results),
                'skippable': [] if stages is None else skippable(params['order'], results)}
    write = record if params['state'] == 'record' else remove
    changed, texts = write(host, receipt_dir, stages, check_mode)
    if params['textfile_dir'] and not check_mode:
        host.write(os.path.join(params['textfile_dir'], DRIFT_METRICS_FILE),
                   drift_metrics(check_recorded(host, receipt_dir), time.time()))
    result = {'changed': changed, 'current': [], 'skippable': [],
              'stages': dict((name, {'receipt': receipt_path(receipt_dir, name)}) for name in texts)}
    if with_diff:
        result['diff'] = make_diff(*[
            [line for name in sorted(texts)
             for line in ['# ' + receipt_path(receipt_dir, name)] + (texts[name][side] or '').splitlines()]
            for side in (0, 1)])
    return result
