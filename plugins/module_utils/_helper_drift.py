# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.core contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Check the host against every stage's receipt, and publish the result for node_exporter.

usage: gpufleet-helpers drift [RECEIPT_DIR [TEXTFILE_DIR]]

RECEIPT_DIR defaults to /var/lib/gpufleet/receipts, TEXTFILE_DIR to /var/lib/prometheus/node-exporter. Writes
gpufleet-drift.prom there (gpufleet_drift{stage} 1 for a stage whose state changed since it converged the host,
or whose receipt cannot be read) and prints each drifted item. Exits 0 when every receipt was read, drifted or not;
1 when one could not be. This is a private module: its API may change without notice.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import sys
import time

from ansible_collections.gpufleet.core.plugins.module_utils._errors import GpufleetError
from ansible_collections.gpufleet.core.plugins.module_utils._host import run_argv
from ansible_collections.gpufleet.core.plugins.module_utils._nvml import pynvml
from ansible_collections.gpufleet.core.plugins.module_utils._receipt import (
    DRIFT_METRICS_FILE, RECEIPT_DIR, check_recorded, drift_metrics)
from ansible_collections.gpufleet.core.plugins.module_utils._receipt_host import ReceiptHost

SUMMARY = 'check the host against the stages\' receipts, for the drift metric'
TEXTFILE_DIR = '/var/lib/prometheus/node-exporter'


def main(argv, host=None, clock=time.time):
    """argv[0] is the command's name, as sys.argv; returns the exit code."""
    if len(argv) > 3 or any(arg.startswith('-') for arg in argv[1:]):
        sys.stderr.write(__doc__.split('\n\n', 2)[1] + '\n')
        return 2
    receipt_dir = argv[1] if len(argv) > 1 else RECEIPT_DIR
    textfile_dir = argv[2] if len(argv) > 2 else TEXTFILE_DIR
    host = host or ReceiptHost(run_argv, pynvml)
    results = check_recorded(host, receipt_dir)
    for stage, result in sorted(results.items()):
        if 'error' in result:
            sys.stderr.write('gpufleet-drift: %s: %s\n' % (stage, result['error']))
        for item in result.get('drift') or ():
            sys.stdout.write('%s: %s\n' % (stage, item))
    try:
        host.write(os.path.join(textfile_dir, DRIFT_METRICS_FILE), drift_metrics(results, clock()))
    except GpufleetError as exc:
        sys.stderr.write('gpufleet-drift: %s\n' % exc)
        return 1
    return 1 if any('error' in result for result in results.values()) else 0
