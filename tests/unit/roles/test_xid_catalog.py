# -*- coding: utf-8 -*-
# SPDX-License-Identifier: GPL-3.0-or-later
"""The Xid table (plugins/module_utils/_xid_catalog.py) against NVIDIA's catalog as the issue and the catalog state
it, the pieces of PromQL it writes, and the generated promtool tests kept in step with it."""

from __future__ import absolute_import, division, print_function

import os
import sys

import pytest

from ansible_collections.gpufleet.core.plugins.module_utils import _xid_catalog as catalog

from .conftest import ROLES

PROMTOOL_DIR = os.path.join(os.path.dirname(ROLES), 'tests', 'promtool')


def test_every_xid_of_the_catalog_is_in_the_table_once():
    assert sorted(catalog.CATALOG) == list(range(1, 163))
    names = [xid.name for xid in catalog.CATALOG.values() if xid.name]
    assert len(names) == len(set(names))
    assert all(xid.source.startswith(catalog.SOURCE) for xid in catalog.CATALOG.values())


@pytest.mark.parametrize('number', [13, 31, 43, 45])
def test_the_application_xids_are_applications(number):
    assert catalog.bucket(number) == catalog.APPLICATION


@pytest.mark.parametrize('number', [46, 48, 62, 64, 74, 95, 109, 110, 119, 120, 136, 140, 143, 144, 145, 146, 147, 148,
                                    149, 150, 155, 156, 158])
def test_the_catalogs_reset_class_xids_reset_the_gpu(number):
    xid = catalog.CATALOG[number]
    assert xid.bucket == catalog.RESET_GPU and xid.fatal


def test_the_buckets_named_in_the_catalog():
    assert catalog.bucket(79) == catalog.FALLEN_OFF_BUS
    assert catalog.bucket(63) == catalog.SCHEDULE_RESET
    assert catalog.bucket(94) == catalog.RESTART_APP and not catalog.CATALOG[94].fatal
    assert [catalog.bucket(n) for n in (151, 160)] == [catalog.REBOOT_HOST] * 2
    assert catalog.bucket(54) == catalog.INVESTIGATE  # CHECK_MECHANICALS
    assert catalog.bucket(92) == catalog.IGNORE
    assert catalog.bucket(999) == catalog.UNCLASSIFIED
    # An override says why it differs from the catalog's action.
    assert 'next GPU reset' in catalog.CATALOG[63].source and catalog.CATALOG[63].catalog_action == 'IGNORE'


def test_one_memory_fault_is_reset_and_only_repeats_ask_for_an_rma():
    assert catalog.RMA_REPEATS >= 2
    assert all(catalog.bucket(n) in (catalog.RESET_GPU, catalog.FALLEN_OFF_BUS) for n in catalog.RMA_XIDS)


def test_the_pieces_of_promql():
    assert catalog.alert_text('schedule_reset') == '63'
    assert catalog.alert_text('reboot_host') == '151|160'
    assert catalog.alert_text('rma') == '48|64|79|95|140'
    assert catalog.alert_text('rma_range') == '[7d:5m]'
    assert catalog.alert_text('rma_repeats') == '2'
    assert catalog.alert_text('rma_words') == 'Xid 48, 64, 79, 95 or 140 within 7 days'
    not_investigate = set(catalog.alert_text('not_investigate').split('|'))
    assert '119' in not_investigate and '13' in not_investigate and '54' not in not_investigate
    with pytest.raises(catalog.XidCatalogError, match="'reset' names no piece of the alert pack; use a bucket"):
        catalog.alert_text('reset')


def test_the_generated_promtool_tests_are_up_to_date():
    sys.path.insert(0, PROMTOOL_DIR)
    try:
        import make_xid_catalog_test
    finally:
        sys.path.remove(PROMTOOL_DIR)
    with open(make_xid_catalog_test.TARGET) as handle:
        committed = handle.read()
    assert committed == make_xid_catalog_test.render(), (
        'tests/promtool/xid_catalog_test.yml is out of date: run PYTHONPATH=build/collections .venv/bin/python '
        'tests/promtool/make_xid_catalog_test.py')
