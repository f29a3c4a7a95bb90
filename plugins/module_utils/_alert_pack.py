# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.core contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""What the GPU alert pack reads: for each alert of roles/monitoring/templates/gpu_alerts.rules.yml.j2, the metrics
its expression needs (through the pack's own recording rules too) and where each one comes from; and, for the counters
an exporter serves, each metric it lacks, the alerts that lack blinds, and the fix.

    missing_counters(['DCGM_FI_DEV_GPU_TEMP', ...])
    -> [{'field': 'DCGM_FI_DEV_ENFORCED_POWER_LIMIT', 'alerts': ['GpuPowerOverLimit'], 'fix': 'add ... to ...'}]

The monitoring role's preflight refuses a fleet whose exporters lack a metric the pack reads
(module_utils/_monitoring_targets.py, ``counter_problems``). tests/unit/roles/test_alert_pack_inputs.py reads the
pack and fails when an alert reads a metric this table does not give it, or the table names an alert or a metric the
pack does not have. Pure code; a private module: its API may change without notice.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.gpufleet.core.plugins.module_utils._values import and_list

# Where a metric comes from.
DCGM_EXPORTER = 'dcgm-exporter'  # a DCGM field the exporter serves when its counters CSV lists it
# A metric the collection writes into node_exporter's textfile directory, served by its textfile collector: the
# gpu_watchdog role's (the watchdog's and the drift check's), and the site playbook's drain (gpufleet-drain.prom, written before a host's driver upgrade).
NODE_TEXTFILE = 'node_exporter textfile'
PROMETHEUS = 'Prometheus'  # Prometheus's own series for every scrape target

SOURCES = {
    'DCGM_EXP_XID_ERRORS_COUNT': DCGM_EXPORTER,
    'DCGM_FI_DEV_ECC_DBE_VOL_TOTAL': DCGM_EXPORTER,
    'DCGM_FI_DEV_ROW_REMAP_FAILURE': DCGM_EXPORTER,
    'DCGM_FI_DEV_FB_USED': DCGM_EXPORTER,
    'DCGM_FI_DEV_FB_FREE': DCGM_EXPORTER,
    'DCGM_FI_DEV_GPU_TEMP': DCGM_EXPORTER,
    'DCGM_FI_DEV_POWER_USAGE': DCGM_EXPORTER,
    'DCGM_FI_DEV_ENFORCED_POWER_LIMIT': DCGM_EXPORTER,
    'gpufleet_watchdog_service_remote_fraction': NODE_TEXTFILE,
    'gpufleet_host_drained': NODE_TEXTFILE,
    'gpufleet_drift': NODE_TEXTFILE,
    'up': PROMETHEUS,
}

_XID = ('DCGM_EXP_XID_ERRORS_COUNT',)
# Each alert of the pack, in the pack's order, and the metrics it reads. The series the role writes from the
# inventory (gpufleet:gpus_expected:count, gpufleet:gpu_memory_budget:ratio, fleet.rules.yml.j2) read no metric.
ALERTS = (
    ('GpuXidRestartApplication', _XID),
    ('GpuXidResetGpu', _XID),
    ('GpuXidScheduleReset', _XID),
    ('GpuXidRebootHost', _XID),
    ('GpuXidDrainAndRma', _XID),
    ('GpuFallenOffBus', _XID),
    ('GpuXidOther', _XID),
    ('GpuEccDoubleBitErrors', ('DCGM_FI_DEV_ECC_DBE_VOL_TOTAL',)),
    ('GpuRowRemapFailure', ('DCGM_FI_DEV_ROW_REMAP_FAILURE',)),
    # Through the pack's recording rule gpufleet:gpu_memory_used:ratio.
    ('GpuMemoryOverBudget', ('DCGM_FI_DEV_FB_USED', 'DCGM_FI_DEV_FB_FREE')),
    ('GpuTemperatureHigh', ('DCGM_FI_DEV_GPU_TEMP',)),
    ('GpuPowerOverLimit', ('DCGM_FI_DEV_POWER_USAGE', 'DCGM_FI_DEV_ENFORCED_POWER_LIMIT')),
    ('GpuExporterDown', ('up',)),
    ('GpusMissing', ('DCGM_FI_DEV_GPU_TEMP', 'up')),
    ('GpuServiceBindingDrift', ('gpufleet_watchdog_service_remote_fraction',)),
    # The drift check's textfile metric (gpu_watchdog's gpufleet-drift.timer).
    ('GpuHostDrifted', ('gpufleet_drift',)),
    # Planned maintenance: while it fires, Alertmanager holds back the host's other alerts.
    ('GpuHostDrained', ('gpufleet_host_drained',)),
)

# The fields dcgm-exporter serves when it is given no counters of its own: the uncommented lines of its
# etc/default-counters.csv at 4.1.3 (the version the dcgm_exporter role installs). docs/monitoring.md's table says,
# for each metric of the pack, whether it is among them.
UPSTREAM_DEFAULT_FIELDS = (
    'DCGM_FI_DEV_SM_CLOCK', 'DCGM_FI_DEV_MEM_CLOCK', 'DCGM_FI_DEV_MEMORY_TEMP', 'DCGM_FI_DEV_GPU_TEMP',
    'DCGM_FI_DEV_POWER_USAGE', 'DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION', 'DCGM_FI_DEV_PCIE_REPLAY_COUNTER',
    'DCGM_FI_DEV_GPU_UTIL', 'DCGM_FI_DEV_MEM_COPY_UTIL', 'DCGM_FI_DEV_ENC_UTIL', 'DCGM_FI_DEV_DEC_UTIL',
    'DCGM_FI_DEV_XID_ERRORS', 'DCGM_FI_DEV_FB_FREE', 'DCGM_FI_DEV_FB_USED', 'DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL',
    'DCGM_FI_DEV_VGPU_LICENSE_STATUS', 'DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS',
    'DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS', 'DCGM_FI_DEV_ROW_REMAP_FAILURE', 'DCGM_FI_DRIVER_VERSION',
    'DCGM_FI_PROF_GR_ENGINE_ACTIVE', 'DCGM_FI_PROF_PIPE_TENSOR_ACTIVE', 'DCGM_FI_PROF_DRAM_ACTIVE',
    'DCGM_FI_PROF_PCIE_TX_BYTES', 'DCGM_FI_PROF_PCIE_RX_BYTES',
)

# The fix for a field the dcgm_exporter role's list lacks, and for one a site's own exporter lacks.
ROLE_FIX = "add %s to dcgm_exporter_counters, or to your exporter's counters CSV and to monitoring_exporter_counters"
OWN_FIX = "add %s to your exporter's counters CSV and to monitoring_exporter_counters"


def alerts_reading(metric):
    """The alerts of the pack that read ``metric``, in the pack's order."""
    return [alert for alert, metrics in ALERTS if metric in metrics]


def needed(source=DCGM_EXPORTER):
    """The metrics of one source the pack reads, in the order the pack first reads them."""
    found = []
    for _alert, metrics in ALERTS:
        found.extend(metric for metric in metrics if SOURCES[metric] == source and metric not in found)
    return found


def served_fields(counters):
    """The DCGM field names of an exporter's counters: a list of names, or of mappings with a field (the
    dcgm_exporter role's dcgm_exporter_counters); None for anything that is no list (its own checker refuses it)."""
    if not isinstance(counters, (list, tuple)):
        return None
    fields = set()
    for counter in counters:
        field = counter.get('field') if isinstance(counter, dict) else counter
        if isinstance(field, str):
            fields.add(field.strip())
    return fields


def missing_counters(served, own_exporter=False):
    """Each dcgm-exporter field the pack reads that the counters ``served`` (names, or the role's mappings) lack, in
    the pack's order: [{'field', 'alerts' (the alerts it blinds), 'fix'}]. ``own_exporter``: the counters are a site's
    own exporter's (monitoring_exporter_counters), not the dcgm_exporter role's list. [] when nothing is missing or
    ``served`` is no list."""
    fields = served_fields(served)
    if fields is None:
        return []
    return [{'field': field, 'alerts': alerts_reading(field), 'fix': (OWN_FIX if own_exporter else ROLE_FIX) % field}
            for field in needed(DCGM_EXPORTER) if field not in fields]


def describe_missing(hosts, missing, variable, own_exporter=False):
    """One sentence: the hosts, the variable that lacks the fields, each field with the alerts that read it, and the
    fix for all of them. ``missing`` is missing_counters()'s answer for these hosts (not empty)."""
    fields = [item['field'] for item in missing]
    alerts = []
    for item in missing:
        alerts.extend(alert for alert in item['alerts'] if alert not in alerts)
    lacks = and_list('%s (%s %s it)' % (item['field'], and_list(item['alerts']),
                                        'reads' if len(item['alerts']) == 1 else 'read') for item in missing)
    one_alert, one_host = len(alerts) == 1, len(hosts) == 1
    if own_exporter:
        who = '%s (the counters your exporter serves on %s %s)' % (variable, 'the GPU host' if one_host else
                                                                   'the GPU hosts', and_list(hosts))
    else:
        who = '%s: %s' % (and_list(hosts), variable)
    fix = (OWN_FIX if own_exporter else ROLE_FIX) % and_list(fields)
    upstream = [field for field in fields if field not in UPSTREAM_DEFAULT_FIELDS]
    return '%s lacks %s: %s of the GPU alert pack %s blind on %s. %s%s%s.' % (
        who, lacks, 'that alert' if one_alert else 'those alerts', 'is' if one_alert else 'are',
        'this host' if one_host else 'these hosts', fix[0].upper(), fix[1:],
        " (dcgm-exporter's own default-counters.csv leaves %s out)" % (
            and_list(upstream) if upstream != fields else 'it' if len(fields) == 1 else 'them')
        if own_exporter and upstream else '')
