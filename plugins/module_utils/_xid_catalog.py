# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.core contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""NVIDIA's Xid catalog, and what the fleet does about each Xid: the one table the alert pack and the watchdog share.

Each row is an Xid of NVIDIA's catalog for Ampere and newer GPUs (docs.nvidia.com/deploy/xid-errors/
analyzing-xid-catalog.html): its number, its mnemonic, the catalog's "Resolution Bucket (Immediate Action)" and
whether the driver treats it as fatal to the GPU's work. ``bucket()`` turns the catalog's action into the fleet's
bucket; the few rows where the fleet does something more precise than the catalog name why in ``OVERRIDES``.

The alert pack's Xid groups (filter gpufleet.core.xid_alert) and the watchdog's decisions (_watchdog.py) both
read ``BUCKETS`` and ``RMA_XIDS``; tests hold the pack and the watchdog to this table.

This is a private module: its API may change without notice.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from collections import namedtuple

from ansible_collections.gpufleet.core.plugins.module_utils._errors import GpufleetError

SOURCE = 'NVIDIA Xid catalog, Ampere and newer (docs.nvidia.com/deploy/xid-errors/analyzing-xid-catalog.html)'

# The fleet's buckets, by what is done about the Xid.
APPLICATION = 'application'        # the application faulted and is restarted by its unit: never pages, never resets
IGNORE = 'ignore'                  # the catalog says no action: recorded only
RESTART_APP = 'restart_app'        # restart the applications on that GPU (or MIG device); the GPU stays healthy
RESET_GPU = 'reset_gpu'            # stop every client of the GPU and reset it
SCHEDULE_RESET = 'schedule_reset'  # a row remap waits for the next GPU reset: reset in a quiet window
REBOOT_HOST = 'reboot_host'        # only a reboot of the host recovers the GPU
FALLEN_OFF_BUS = 'fallen_off_bus'  # the GPU no longer answers on PCIe: drain, reboot, check the hardware
INVESTIGATE = 'investigate'        # the catalog asks for support, a mechanical or software check: an operator looks
UNCLASSIFIED = 'unclassified'      # an Xid the catalog does not list: reported, as INVESTIGATE is
BUCKETS_IN_ORDER = (APPLICATION, IGNORE, RESTART_APP, RESET_GPU, SCHEDULE_RESET, REBOOT_HOST, FALLEN_OFF_BUS,
                    INVESTIGATE)

# The catalog's immediate action -> the fleet's bucket.
_BY_CATALOG_ACTION = {
    'IGNORE': IGNORE,
    'RESTART_APP': RESTART_APP,
    'RESET_GPU': RESET_GPU,
    'WORKFLOW_XID_48': RESET_GPU,      # double-bit ECC: the workflow starts with a GPU reset
    'WORKFLOW_NVLINK_ERR': RESET_GPU,  # NVLink error: reset the GPU (or reboot where the reset fails)
    'WORKFLOW_NVLINK5_ERR': RESET_GPU,
    'RESTART_BM': REBOOT_HOST,
    'RESTART_VM': REBOOT_HOST,         # on bare metal the host is the VM
    'CONTACT_SUPPORT': INVESTIGATE,
    'CHECK_MECHANICALS': INVESTIGATE,
    'UPDATE_SWFW': INVESTIGATE,
    'CHECK_UVM': INVESTIGATE,
    'FOLLOW_LINKED_XID': INVESTIGATE,  # Xid 154 repeats another Xid's recovery action: that Xid is acted on
    'WORKFLOW_XID_45': APPLICATION,
}

# Where the fleet's bucket is not the catalog's action mapped above, and why.
OVERRIDES = {
    13: (APPLICATION, 'an application fault (out-of-range access, illegal instruction): its unit restarts it'),
    31: (APPLICATION, 'a GPU memory page fault, nearly always an illegal address in the application'),
    43: (APPLICATION, 'the application hit a software-induced fault and was stopped; the GPU stays healthy'),
    45: (APPLICATION, 'preemptive cleanup of an application that was stopped (Ctrl-C, kill, another error)'),
    63: (SCHEDULE_RESET, 'a row remap (or page retirement) is recorded; it takes effect at the next GPU reset'),
    79: (FALLEN_OFF_BUS, 'the GPU is gone from PCIe: a reset cannot reach it, and the hardware needs a look'),
}

# Hardware faults of memory or bus: one is reset; a repeat within RMA_WINDOW_SEC makes the GPU a candidate for
# return (RMA), whichever of these Xids repeats.
RMA_XIDS = (48, 64, 79, 95, 140)
RMA_REPEATS = 2
RMA_WINDOW_SEC = 7 * 24 * 3600
# dcgm-exporter's DCGM_EXP_XID_ERRORS_COUNT counts each Xid over this window (its xid-count-window-size default);
# summing one sample per window counts each event once.
EXPORTER_XID_WINDOW_SEC = 300

Xid = namedtuple('Xid', 'number name catalog_action fatal bucket source')

# (number, mnemonic, catalog immediate action, fatal): every Xid of the catalog.
_CATALOG = (
    (1, 'ROBUST_CHANNEL_FIFO_ERROR_FIFO_METHOD', 'CONTACT_SUPPORT', True),
    (2, 'ROBUST_CHANNEL_FIFO_ERROR_SW_METHOD', 'CONTACT_SUPPORT', True),
    (3, 'ROBUST_CHANNEL_FIFO_ERROR_UNK_METHOD', 'CONTACT_SUPPORT', True),
    (4, 'ROBUST_CHANNEL_FIFO_ERROR_CHANNEL_BUSY', 'CONTACT_SUPPORT', True),
    (5, 'ROBUST_CHANNEL_FIFO_ERROR_RUNOUT_OVERFLOW', 'CONTACT_SUPPORT', True),
    (6, 'ROBUST_CHANNEL_FIFO_ERROR_PARSE_ERR', 'CONTACT_SUPPORT', True),
    (7, 'ROBUST_CHANNEL_FIFO_ERROR_PTE_ERR', 'CONTACT_SUPPORT', True),
    (8, 'ROBUST_CHANNEL_FIFO_ERROR_IDLE_TIMEOUT', 'RESTART_APP', False),
    (9, 'ROBUST_CHANNEL_GR_ERROR_INSTANCE', 'CONTACT_SUPPORT', True),
    (10, 'ROBUST_CHANNEL_GR_ERROR_SINGLE_STEP', 'CONTACT_SUPPORT', True),
    (11, 'ROBUST_CHANNEL_GR_ERROR_MISSING_HW', 'RESTART_APP', False),
    (12, 'ROBUST_CHANNEL_GR_ERROR_SW_METHOD', 'CONTACT_SUPPORT', True),
    (13, 'ROBUST_CHANNEL_GR_EXCEPTION/ROBUST_CHANNEL_GR_ERROR_SW_NOTIFY', 'RESTART_APP', False),
    (14, 'ROBUST_CHANNEL_FAKE_ERROR', 'IGNORE', False),
    (15, 'ROBUST_CHANNEL_SCANLINE_TIMEOUT', 'CONTACT_SUPPORT', True),
    (16, 'ROBUST_CHANNEL_VBLANK_CALLBACK_TIMEOUT', 'CONTACT_SUPPORT', True),
    (17, 'ROBUST_CHANNEL_PARAMETER_ERROR', 'CONTACT_SUPPORT', True),
    (18, 'ROBUST_CHANNEL_BUS_MASTER_TIMEOUT_ERROR', 'CONTACT_SUPPORT', True),
    (19, 'ROBUST_CHANNEL_DISP_MISSED_NOTIFIER', 'CONTACT_SUPPORT', True),
    (20, 'ROBUST_CHANNEL_MPEG_ERROR_SW_METHOD', 'CONTACT_SUPPORT', True),
    (21, 'ROBUST_CHANNEL_ME_ERROR_SW_METHOD', 'CONTACT_SUPPORT', True),
    (22, 'ROBUST_CHANNEL_VP_ERROR_SW_METHOD', 'CONTACT_SUPPORT', True),
    (23, 'ROBUST_CHANNEL_RC_LOGGING_ENABLED', 'CONTACT_SUPPORT', True),
    (24, 'ROBUST_CHANNEL_GR_SEMAPHORE_TIMEOUT', 'CONTACT_SUPPORT', True),
    (25, 'ROBUST_CHANNEL_GR_ILLEGAL_NOTIFY', 'RESTART_APP', False),
    (26, 'ROBUST_CHANNEL_FIFO_ERROR_FBISTATE_TIMEOUT', 'CONTACT_SUPPORT', True),
    (27, 'ROBUST_CHANNEL_VP_ERROR', 'CONTACT_SUPPORT', True),
    (28, 'ROBUST_CHANNEL_VP2_ERROR', 'CONTACT_SUPPORT', True),
    (29, 'ROBUST_CHANNEL_BSP_ERROR', 'CONTACT_SUPPORT', True),
    (30, 'ROBUST_CHANNEL_BAD_ADDR_ACCESS', 'CONTACT_SUPPORT', True),
    (31, 'ROBUST_CHANNEL_FIFO_ERROR_MMU_ERR_FLT', 'RESTART_APP', False),
    (32, 'ROBUST_CHANNEL_PBDMA_ERROR', 'RESTART_APP', False),
    (33, 'ROBUST_CHANNEL_SEC_ERROR', 'CONTACT_SUPPORT', True),
    (34, 'ROBUST_CHANNEL_MSVLD_ERROR', 'CONTACT_SUPPORT', True),
    (35, 'ROBUST_CHANNEL_MSPDEC_ERROR', 'CONTACT_SUPPORT', True),
    (36, 'ROBUST_CHANNEL_MSPPP_ERROR', 'CONTACT_SUPPORT', True),
    (37, 'ROBUST_CHANNEL_FECS_ERR_UNIMP_FIRMWARE_METHOD', 'IGNORE', False),
    (38, 'ROBUST_CHANNEL_FECS_ERR_WATCHDOG_TIMEOUT', 'IGNORE', False),
    (39, 'ROBUST_CHANNEL_CE0_ERROR', 'RESTART_APP', False),
    (40, 'ROBUST_CHANNEL_CE1_ERROR', 'RESTART_APP', False),
    (41, 'ROBUST_CHANNEL_CE2_ERROR', 'RESTART_APP', False),
    (42, 'ROBUST_CHANNEL_VIC_ERROR', 'CONTACT_SUPPORT', True),
    (43, 'ROBUST_CHANNEL_RESETCHANNEL_VERIF_ERROR', 'IGNORE', False),
    (44, 'ROBUST_CHANNEL_GR_FAULT_DURING_CTXSW', 'IGNORE', False),
    (45, 'ROBUST_CHANNEL_PREEMPTIVE_REMOVAL', 'WORKFLOW_XID_45', False),
    (46, 'ROBUST_CHANNEL_GPU_TIMEOUT_ERROR', 'RESET_GPU', True),
    (47, 'ROBUST_CHANNEL_NVENC0_ERROR', 'CONTACT_SUPPORT', True),
    (48, 'ROBUST_CHANNEL_GPU_ECC_DBE', 'WORKFLOW_XID_48', True),
    (49, 'SILENT_RUNNING_CONSTANT_LEVEL_SET_BY_REGISTRY', 'CONTACT_SUPPORT', True),
    (50, 'SILENT_RUNNING_LEVEL_TRANSITION_DUE_TO_RC_ERROR', 'CONTACT_SUPPORT', True),
    (51, 'SILENT_RUNNING_STRESS_TEST_FAILURE', 'CONTACT_SUPPORT', True),
    (52, 'SILENT_RUNNING_LEVEL_TRANS_DUE_TO_TEMP_RISE', 'CONTACT_SUPPORT', True),
    (53, 'SILENT_RUNNING_TEMP_REDUCED_CLOCKING', 'CONTACT_SUPPORT', True),
    (54, 'SILENT_RUNNING_PWR_REDUCED_CLOCKING', 'CHECK_MECHANICALS', True),
    (55, 'SILENT_RUNNING_TEMPERATURE_READ_ERROR', 'CONTACT_SUPPORT', True),
    (56, 'DISPLAY_CHANNEL_EXCEPTION', 'CONTACT_SUPPORT', True),
    (57, 'FB_LINK_TRAINING_FAILURE_ERROR', 'CONTACT_SUPPORT', True),
    (58, 'FB_MEMORY_ERROR', 'CONTACT_SUPPORT', True),
    (59, 'PMU_ERROR', 'CONTACT_SUPPORT', True),
    (60, 'ROBUST_CHANNEL_SEC2_ERROR', 'RESTART_APP', False),
    (61, 'PMU_BREAKPOINT', 'CONTACT_SUPPORT', True),
    (62, 'PMU_HALT_ERROR', 'RESET_GPU', True),
    (63, 'INFOROM_DRAM_RETIREMENT_EVENT', 'IGNORE', False),
    (64, 'INFOROM_DRAM_RETIREMENT_FAILURE', 'RESET_GPU', True),
    (65, 'ROBUST_CHANNEL_NVENC1_ERROR', 'CONTACT_SUPPORT', True),
    (66, 'ROBUST_CHANNEL_FECS_ERR_REG_ACCESS_VIOLATION', 'IGNORE', False),
    (67, 'ROBUST_CHANNEL_FECS_ERR_VERIF_VIOLATION', 'IGNORE', False),
    (68, 'ROBUST_CHANNEL_NVDEC0_ERROR', 'RESTART_APP', False),
    (69, 'ROBUST_CHANNEL_GR_CLASS_ERROR', 'RESTART_APP', False),
    (70, 'ROBUST_CHANNEL_CE3_ERROR', 'RESTART_APP', False),
    (71, 'ROBUST_CHANNEL_CE4_ERROR', 'RESTART_APP', False),
    (72, 'ROBUST_CHANNEL_CE5_ERROR', 'RESTART_APP', False),
    (73, 'ROBUST_CHANNEL_NVENC2_ERROR', 'CONTACT_SUPPORT', True),
    (74, 'NVLINK_ERROR', 'WORKFLOW_NVLINK_ERR', True),
    (75, 'ROBUST_CHANNEL_CE6_ERROR', 'RESTART_APP', False),
    (76, 'ROBUST_CHANNEL_CE7_ERROR', 'RESTART_APP', False),
    (77, 'ROBUST_CHANNEL_CE8_ERROR', 'RESTART_APP', False),
    (78, 'VGPU_START_ERROR', 'UPDATE_SWFW', True),
    (79, 'ROBUST_CHANNEL_GPU_HAS_FALLEN_OFF_THE_BUS', 'RESTART_BM', True),
    (80, 'PBDMA_PUSHBUFFER_CRC_MISMATCH', 'RESTART_APP', False),
    (81, 'ROBUST_CHANNEL_VGA_SUBSYSTEM_ERROR', 'CONTACT_SUPPORT', True),
    (82, 'ROBUST_CHANNEL_NVJPG0_ERROR', 'RESTART_APP', False),
    (83, 'ROBUST_CHANNEL_NVDEC1_ERROR', 'RESTART_APP', False),
    (84, 'ROBUST_CHANNEL_NVDEC2_ERROR', 'RESTART_APP', False),
    (85, 'ROBUST_CHANNEL_CE9_ERROR', 'RESTART_APP', False),
    (86, 'ROBUST_CHANNEL_OFA0_ERROR', 'RESTART_APP', False),
    (87, 'NVTELEMETRY_DRIVER_REPORT', 'CONTACT_SUPPORT', True),
    (88, 'ROBUST_CHANNEL_NVDEC3_ERROR', 'RESTART_APP', False),
    (89, 'ROBUST_CHANNEL_NVDEC4_ERROR', 'RESTART_APP', False),
    (90, 'LTC_ERROR', 'CONTACT_SUPPORT', True),
    (91, 'RESERVED_XID', 'CONTACT_SUPPORT', True),
    (92, 'EXCESSIVE_SBE_INTERRUPTS', 'IGNORE', False),
    (93, 'INFOROM_ERASE_LIMIT_EXCEEDED', 'IGNORE', False),
    (94, 'ROBUST_CHANNEL_CONTAINED_ERROR', 'RESTART_APP', False),
    (95, 'ROBUST_CHANNEL_UNCONTAINED_ERROR', 'RESET_GPU', True),
    (96, 'ROBUST_CHANNEL_NVDEC5_ERROR', 'RESTART_APP', False),
    (97, 'ROBUST_CHANNEL_NVDEC6_ERROR', 'RESTART_APP', False),
    (98, 'ROBUST_CHANNEL_NVDEC7_ERROR', 'RESTART_APP', False),
    (99, 'ROBUST_CHANNEL_NVJPG1_ERROR', 'RESTART_APP', False),
    (100, 'ROBUST_CHANNEL_NVJPG2_ERROR', 'RESTART_APP', False),
    (101, 'ROBUST_CHANNEL_NVJPG3_ERROR', 'RESTART_APP', False),
    (102, 'ROBUST_CHANNEL_NVJPG4_ERROR', 'RESTART_APP', False),
    (103, 'ROBUST_CHANNEL_NVJPG5_ERROR', 'RESTART_APP', False),
    (104, 'ROBUST_CHANNEL_NVJPG6_ERROR', 'RESTART_APP', False),
    (105, 'ROBUST_CHANNEL_NVJPG7_ERROR', 'RESTART_APP', False),
    (106, 'SMBPBI_TEST_MESSAGE', 'IGNORE', False),
    (107, 'SMBPBI_TEST_MESSAGE_SILENT', 'IGNORE', False),
    (108, 'DESTINATION_FLA_TRANSLATION_ERROR', 'CONTACT_SUPPORT', True),
    (109, 'ROBUST_CHANNEL_CTXSW_TIMEOUT_ERROR', 'RESET_GPU', True),
    (110, 'SEC_FAULT_ERROR', 'RESET_GPU', True),
    (111, 'BUNDLE_ERROR_EVENT', 'CONTACT_SUPPORT', True),
    (112, 'DISP_SUPERVISOR_ERROR', 'CONTACT_SUPPORT', True),
    (113, 'DP_LT_FAILURE', 'CONTACT_SUPPORT', True),
    (114, 'HEAD_RG_UNDERFLOW', 'CONTACT_SUPPORT', True),
    (115, 'CORE_CHANNEL_REGS', 'CONTACT_SUPPORT', True),
    (116, 'WINDOW_CHANNEL_REGS', 'CONTACT_SUPPORT', True),
    (117, 'CURSOR_CHANNEL_REGS', 'CONTACT_SUPPORT', True),
    (118, 'HEAD_REGS', 'CONTACT_SUPPORT', True),
    (119, 'GSP_RPC_TIMEOUT', 'RESET_GPU', True),
    (120, 'GSP_ERROR', 'RESET_GPU', True),
    (121, 'C2C_ERROR', 'IGNORE', False),
    (122, 'SPI_PMU_RPC_READ_FAIL', 'CONTACT_SUPPORT', True),
    (123, 'SPI_PMU_RPC_WRITE_FAIL', 'CONTACT_SUPPORT', True),
    (124, 'SPI_PMU_RPC_ERASE_FAIL', 'CONTACT_SUPPORT', True),
    (125, 'INFOROM_FS_ERROR', 'CONTACT_SUPPORT', True),
    (126, 'ROBUST_CHANNEL_CE10_ERROR', 'RESTART_APP', False),
    (127, 'ROBUST_CHANNEL_CE11_ERROR', 'RESTART_APP', False),
    (128, 'ROBUST_CHANNEL_CE12_ERROR', 'RESTART_APP', False),
    (129, 'ROBUST_CHANNEL_CE13_ERROR', 'RESTART_APP', False),
    (130, 'ROBUST_CHANNEL_CE14_ERROR', 'RESTART_APP', False),
    (131, 'ROBUST_CHANNEL_CE15_ERROR', 'RESTART_APP', False),
    (132, 'ROBUST_CHANNEL_CE16_ERROR', 'RESTART_APP', False),
    (133, 'ROBUST_CHANNEL_CE17_ERROR', 'RESTART_APP', False),
    (134, 'ROBUST_CHANNEL_CE18_ERROR', 'RESTART_APP', False),
    (135, 'ROBUST_CHANNEL_CE19_ERROR', 'RESTART_APP', False),
    (136, 'ALI_TRAINING_FAIL', 'RESET_GPU', True),
    (137, 'NVLINK_FLA_PRIV_ERR', 'IGNORE', False),
    (138, 'ROBUST_CHANNEL_DLA_ERROR', 'CONTACT_SUPPORT', True),
    (139, 'ROBUST_CHANNEL_OFA1_ERROR', 'RESTART_APP', False),
    (140, 'UNRECOVERABLE_ECC_ERROR_ESCAPE', 'RESET_GPU', True),
    (141, 'ROBUST_CHANNEL_FAST_PATH_ERROR', 'IGNORE', False),
    (142, 'ROBUST_CHANNEL_NVENC3_ERROR', 'CONTACT_SUPPORT', True),
    (143, 'GPU_INIT_ERROR', 'RESET_GPU', True),
    (144, 'NVLINK_SAW_ERROR', 'WORKFLOW_NVLINK5_ERR', True),
    (145, 'NVLINK_RLW_ERROR', 'WORKFLOW_NVLINK5_ERR', True),
    (146, 'NVLINK_TLW_ERROR', 'WORKFLOW_NVLINK5_ERR', True),
    (147, 'NVLINK_TREX_ERROR', 'WORKFLOW_NVLINK5_ERR', True),
    (148, 'NVLINK_NVLPW_CTRL_ERROR', 'WORKFLOW_NVLINK5_ERR', True),
    (149, 'NVLINK_NETIR_ERROR', 'WORKFLOW_NVLINK5_ERR', True),
    (150, 'NVLINK_MSE_ERROR', 'WORKFLOW_NVLINK5_ERR', True),
    (151, 'ROBUST_CHANNEL_KEY_ROTATION_ERROR', 'RESTART_VM', True),
    (152, 'ROBUST_CHANNEL_DLA_SMMU_ERROR', 'IGNORE', False),
    (153, 'ROBUST_CHANNEL_DLA_TIMEOUT', 'IGNORE', False),
    (154, 'GPU_RECOVERY_ACTION_CHANGED', 'FOLLOW_LINKED_XID', False),
    (155, 'NVLINK_SW_DEFINED_ERROR', 'RESET_GPU', True),
    (156, 'RESOURCE_RETIREMENT_EVENT', 'RESET_GPU', True),
    (157, 'RESOURCE_RETIREMENT_FAILURE', 'IGNORE', False),
    (158, 'GPU_FATAL_TIMEOUT', 'RESET_GPU', True),
    (159, 'ROBUST_CHANNEL_CHI_NON_DATA_ERROR', 'CHECK_UVM', False),
    (160, 'CHANNEL_RETIREMENT_EVENT', 'RESTART_BM', True),
    (161, 'CHANNEL_RETIREMENT_FAILURE', 'IGNORE', False),
    (162, None, 'RESET_GPU', True),
)


class XidCatalogError(GpufleetError, ValueError):
    """A name that is no bucket or piece of the alert pack; the message lists the names there are."""


def _row(number, name, catalog_action, fatal):
    bucket, why = OVERRIDES.get(number, (_BY_CATALOG_ACTION[catalog_action], None))
    return Xid(number, name, catalog_action, fatal, bucket, SOURCE + ('; ' + why if why else ''))


CATALOG = dict((row[0], _row(*row)) for row in _CATALOG)
BUCKETS = dict((number, xid.bucket) for number, xid in CATALOG.items())


def bucket(number):
    """The fleet's bucket of an Xid; UNCLASSIFIED for one the catalog does not list."""
    return BUCKETS.get(number, UNCLASSIFIED)


def xids_in(name):
    """The catalog's Xids in a bucket, in order."""
    if name not in BUCKETS_IN_ORDER:
        raise XidCatalogError('%r is not an Xid bucket; use one of %s' % (name, ', '.join(BUCKETS_IN_ORDER)))
    return sorted(number for number, found in BUCKETS.items() if found == name)


def selector(name):
    """The Prometheus label regex (xid=~"...") for a bucket, 'rma' for RMA_XIDS, or 'not_investigate' for every
    Xid an operator need not look up (so that xid!~"..." matches INVESTIGATE and Xids the catalog does not list)."""
    if name == 'rma':
        numbers = sorted(RMA_XIDS)
    elif name == 'not_investigate':
        numbers = sorted(number for number, found in BUCKETS.items() if found != INVESTIGATE)
    else:
        numbers = xids_in(name)
    return '|'.join(str(number) for number in numbers)


def alert_text(name):
    """A piece of the alert pack's PromQL, by name: a bucket's Xids or 'rma' / 'not_investigate' as a label regex
    (see selector); 'rma_range' the subquery range that sums the exporter's windows over RMA_WINDOW_SEC; 'rma_repeats'
    RMA_REPEATS; 'rma_words' the RMA Xids and the window in words, for a description."""
    if name not in BUCKETS_IN_ORDER + ('rma', 'not_investigate', 'rma_range', 'rma_repeats', 'rma_words'):
        raise XidCatalogError('%r names no piece of the alert pack; use a bucket (%s), rma, not_investigate, '
                              'rma_range, rma_repeats or rma_words' % (name, ', '.join(BUCKETS_IN_ORDER)))
    if name == 'rma_words':
        numbers = [str(number) for number in sorted(RMA_XIDS)]
        return 'Xid %s or %s within %s' % (', '.join(numbers[:-1]), numbers[-1], _words(RMA_WINDOW_SEC))
    if name == 'rma_range':
        return '[%s:%s]' % (prometheus_duration(RMA_WINDOW_SEC), prometheus_duration(EXPORTER_XID_WINDOW_SEC))
    if name == 'rma_repeats':
        return str(RMA_REPEATS)
    return selector(name)


def _words(seconds):
    for unit, size in (('day', 86400), ('hour', 3600), ('minute', 60), ('second', 1)):
        if seconds % size == 0:
            count = seconds // size
            return '%d %s%s' % (count, unit, '' if count == 1 else 's')


def prometheus_duration(seconds):
    """A whole number of seconds in Prometheus's duration form (7d, 12h, 90m, 45s)."""
    for unit, size in (('d', 86400), ('h', 3600), ('m', 60)):
        if seconds % size == 0:
            return '%d%s' % (seconds // size, unit)
    return '%ds' % seconds
