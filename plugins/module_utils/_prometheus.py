# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.core contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""One instant query to Prometheus's HTTP API, for the watchdog (the fleet's quarantined hosts) and the rollout's
health gate (the pack's alerts firing for a batch). http.client, not ansible-core's open_url: the watchdog runs in the
helper bundle, where ansible-core is absent. A private module: its API may change without notice.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import re
from http.client import HTTPConnection, HTTPException, HTTPSConnection
from urllib.parse import urlencode, urlsplit

from ansible_collections.gpufleet.core.plugins.module_utils._errors import GpufleetError

# What PromQL's regular expressions (RE2) treat as special: a label value is matched as itself after escaping these.
_RE2_SPECIAL = re.compile(r'([\\.+*?()|\[\]{}^$])')


class PrometheusError(GpufleetError):
    """Prometheus did not answer, or answered with an error: the message says which, with its address."""


def one_of(values):
    """A PromQL regular expression that matches exactly one of these label values."""
    return '|'.join(_RE2_SPECIAL.sub(r'\\\1', value) for value in values)


def string(value):
    """A PromQL string literal of value (backslashes and quotes escaped, as Go's strconv reads them)."""
    return '"%s"' % value.replace('\\', '\\\\').replace('"', '\\"')


def query(url, expression, timeout=3):
    """The result vector of an instant query (a list of {'metric': {...}, 'value': [time, text]}), or PrometheusError."""
    try:
        parts = urlsplit(url)
        connection = (HTTPSConnection if parts.scheme == 'https' else HTTPConnection)(parts.netloc, timeout=timeout)
        try:
            connection.request('GET', parts.path.rstrip('/') + '/api/v1/query?' + urlencode({'query': expression}))
            document = json.loads(connection.getresponse().read().decode('utf-8'))
        finally:
            connection.close()
    except (OSError, HTTPException, ValueError) as exc:
        raise PrometheusError('Prometheus at %s did not answer: %s' % (url, exc))
    result = document.get('data', {}).get('result') if isinstance(document, dict) and document.get('status') == 'success' \
        and isinstance(document.get('data'), dict) else None
    if not isinstance(result, list):
        raise PrometheusError('Prometheus at %s answered %s' % (
            url, document.get('error') or document.get('status') if isinstance(document, dict) else 'no JSON object'))
    return result
