# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.core contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Kernel CPU-list and CPU-mask parsing and formatting.

The kernel writes CPU sets in two forms: lists such as ``0-3,8,10-11``
(``cpulist``, ``local_cpulist``) and comma-grouped hexadecimal masks such as
``00000000,0000ffff`` (``cpumap``, ``local_cpus``). Both forms are parsed into
sorted lists of unique ints; lists are formatted back in the kernel's style.

This is a private module: its API may change without notice.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.gpufleet.core.plugins.module_utils._errors import GpufleetError


class CpuListError(GpufleetError, ValueError):
    """A CPU list or mask that the kernel would not have written."""


def parse_cpulist(text):
    """Parse ``0-3,8,10-11`` into ``[0, 1, 2, 3, 8, 10, 11]``.

    An empty or whitespace-only string is an empty set, as the kernel writes
    for a CPU-less NUMA node.
    """
    if text is None:
        raise CpuListError("CPU list is missing (got None)")
    cpus = set()
    stripped = str(text).strip()
    if not stripped:
        return []
    for part in stripped.split(','):
        part = part.strip()
        if not part:
            raise CpuListError("malformed CPU list %r: empty element" % (text,))
        low, sep, high = part.partition('-')
        try:
            first = int(low.strip(), 10)
            last = int(high.strip(), 10) if sep else first
        except ValueError:
            raise CpuListError(
                "malformed CPU list %r: %r is not a CPU number or a range like 0-3" % (text, part))
        if first < 0 or last < first:
            raise CpuListError(
                "malformed CPU list %r: range %r must run from low to high, starting at 0 or above" % (text, part))
        cpus.update(range(first, last + 1))
    return sorted(cpus)


def format_cpulist(cpus):
    """Format CPU numbers as the kernel does: ``[0, 1, 2, 3, 8]`` -> ``0-3,8``."""
    ordered = sorted(set(int(cpu) for cpu in cpus))
    ranges = []
    start = previous = None
    for cpu in ordered:
        if cpu < 0:
            raise CpuListError("CPU numbers cannot be negative (got %d)" % cpu)
        if start is None:
            start = previous = cpu
        elif cpu == previous + 1:
            previous = cpu
        else:
            ranges.append((start, previous))
            start = previous = cpu
    if start is not None:
        ranges.append((start, previous))
    return ','.join(str(a) if a == b else '%d-%d' % (a, b) for a, b in ranges)


def parse_cpumask(text):
    """Parse a kernel hex mask such as ``00000000,0000ff0f`` into CPU numbers.

    The rightmost 32-bit group holds CPUs 0-31.
    """
    if text is None:
        raise CpuListError("CPU mask is missing (got None)")
    digits = str(text).strip().replace(',', '')
    if not digits:
        return []
    try:
        value = int(digits, 16)
    except ValueError:
        raise CpuListError("malformed CPU mask %r: expected hexadecimal groups like 0000ffff,00000000" % (text,))
    cpus = []
    bit = 0
    while value:
        if value & 1:
            cpus.append(bit)
        value >>= 1
        bit += 1
    return cpus


def cpus_from_words(words, bits_per_word=64):
    """Expand an NVML affinity array (unsigned longs, CPU 0 in word 0 bit 0)."""
    cpus = []
    for index, word in enumerate(words):
        word = int(word)
        bit = 0
        while word:
            if word & 1:
                cpus.append(index * bits_per_word + bit)
            word >>= 1
            bit += 1
    return cpus
