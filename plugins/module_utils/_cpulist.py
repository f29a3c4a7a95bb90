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

import re

from ansible_collections.gpufleet.core.plugins.module_utils._errors import GpufleetError


class CpuListError(GpufleetError, ValueError):
    """A CPU list or mask that the kernel would not have written."""


# A list element: a CPU number or a low-high range, ASCII digits only (int() would also take '+3' and other scripts).
_ELEMENT = re.compile(r'\s*([0-9]+)\s*(?:-\s*([0-9]+)\s*)?', re.ASCII)
# A whole list as the kernel writes it (no spaces): the common case, parsed without a match per element.
_PLAIN_LIST = re.compile(r'[0-9]+(?:-[0-9]+)?(?:,[0-9]+(?:-[0-9]+)?)*', re.ASCII)
# Far above any kernel's NR_CPUS: a larger number is a typo, and expanding it would exhaust memory.
MAX_CPU = 65535


def _kind(value):
    return type(value).__name__


def parse_cpulist(text):
    """Parse ``0-3,8,10-11`` into ``[0, 1, 2, 3, 8, 10, 11]``.

    An empty or whitespace-only string is an empty set, as the kernel writes
    for a CPU-less NUMA node.
    """
    if isinstance(text, str) and _PLAIN_LIST.fullmatch(text):
        found = _parse_plain(text)
        if found is not None:
            return found
    if text is None:
        raise CpuListError("CPU list is missing (got None)")
    if isinstance(text, bool) or not isinstance(text, (str, int)):
        raise CpuListError("expected a CPU list such as '0-3,8' (a string), got %r (a %s)" % (text, _kind(text)))
    cpus = set()
    stripped = str(text).strip()
    if not stripped:
        return []
    for part in stripped.split(','):
        if not part.strip():
            raise CpuListError("malformed CPU list %r: empty element" % (text,))
        match = _ELEMENT.fullmatch(part)
        if match is None:
            raise CpuListError(
                "malformed CPU list %r: %r is not a CPU number or a range like 0-3" % (text, part.strip()))
        first = int(match.group(1))
        last = int(match.group(2)) if match.group(2) is not None else first
        if last < first:
            raise CpuListError(
                "malformed CPU list %r: range %r must run from low to high, starting at 0 or above" % (text, part.strip()))
        if last > MAX_CPU:
            raise CpuListError("malformed CPU list %r: CPU %d is above %d, more than any kernel supports"
                               % (text, last, MAX_CPU))
        cpus.update(range(first, last + 1))
    return sorted(cpus)


def _parse_plain(text):
    """A list _PLAIN_LIST matched, parsed; None when a range is backwards or too high, for parse_cpulist to word."""
    if '-' not in text:  # single CPUs only (reserved_cpus, mostly): converted in one go
        cpus = set(map(int, text.split(',')))
        return sorted(cpus) if max(cpus) <= MAX_CPU else None
    cpus = set()
    for part in text.split(','):
        first, dash, last = part.partition('-')
        first = int(first)
        last = int(last) if dash else first
        if last < first or last > MAX_CPU:
            return None
        if dash:
            cpus.update(range(first, last + 1))
        else:
            cpus.add(first)
    return sorted(cpus)


def parse_cpulists(texts):
    """Many short CPU lists (a host's SMT sibling lists, one per core: '0,64', '5'), each as a sorted tuple.

    The kernel's usual forms, one or two CPUs, skip the general parser, which costs four times as much and would be
    a fifth of planning a host; anything else goes through parse_cpulist and its messages.
    """
    groups = []
    append = groups.append
    for text in texts:
        if isinstance(text, str) and text.isascii():
            parts = text.split(',')
            if len(parts) == 2 and parts[0].isdigit() and parts[1].isdigit():
                low, high = int(parts[0]), int(parts[1])
                append((low, high) if low < high else (high, low) if high < low else (low,))
                continue
            if len(parts) == 1 and text.isdigit():
                append((int(text),))
                continue
        append(tuple(parse_cpulist(text)))
    return groups


def _cpu_number(cpu):
    """One CPU of a list given to format_cpulist: an int, or a string of digits as ``-e`` passes numbers."""
    if isinstance(cpu, str) and re.fullmatch(r'[0-9]+', cpu.strip(), re.ASCII):
        return int(cpu)
    if isinstance(cpu, bool) or not isinstance(cpu, int):
        raise CpuListError("expected CPU numbers (whole numbers, 0 or above), got %r (a %s)" % (cpu, _kind(cpu)))
    if cpu < 0:
        raise CpuListError("CPU numbers cannot be negative (got %d)" % cpu)
    return cpu


def _plain_numbers(cpus):
    """Are these ints of 0 or above? The class test leaves out bools, which _cpu_number refuses. A loop, not all() over
    a generator, which costs more than the formatting of the planner's short lists."""
    for cpu in cpus:
        if cpu.__class__ is not int or cpu < 0:
            return False
    return True


def format_cpulist(cpus):
    """Format CPU numbers as the kernel does: ``[0, 1, 2, 3, 8]`` -> ``0-3,8``."""
    if cpus.__class__ is list and len(cpus) == 1 and cpus[0].__class__ is int and cpus[0] >= 0:
        return str(cpus[0])  # the planner's memory nodes, mostly: one list per service, which this saves two thirds
    if isinstance(cpus, (str, bytes, dict)) or not hasattr(cpus, '__iter__'):
        raise CpuListError("expected a list of CPU numbers, got %r (a %s)" % (cpus, _kind(cpus)))
    # Plain CPU numbers, the usual case: nothing to convert.
    if isinstance(cpus, list) and _plain_numbers(cpus):
        return format_sorted(sorted(set(cpus)))
    return format_sorted(sorted(set(_cpu_number(cpu) for cpu in cpus)))


# The decimal text of the CPU numbers below 1024 (every CPU of most hosts), made once: str() per number would be a
# third of formatting the planner's lists, one per service.
_DECIMAL = tuple(map(str, range(1024)))


def format_sorted(ordered):
    """format_cpulist for CPU numbers already checked, sorted and unique (the planner's own lists), unchecked.

    One pass, each range written when the next CPU leaves it: the planner formats a list per service.
    """
    if not ordered:
        return ''
    text = _DECIMAL if ordered[0] >= 0 and ordered[-1] < len(_DECIMAL) else dict(zip(ordered, map(str, ordered)))
    ranges = []
    start = previous = ordered[0]
    for cpu in ordered:
        if cpu - previous > 1:
            ranges.append(text[start] if start == previous else text[start] + '-' + text[previous])
            start = cpu
        previous = cpu
    ranges.append(text[start] if start == previous else text[start] + '-' + text[previous])
    return ','.join(ranges)


def parse_cpumask(text):
    """Parse a kernel hex mask such as ``00000000,0000ff0f`` into CPU numbers.

    The rightmost 32-bit group holds CPUs 0-31.
    """
    if text is None:
        raise CpuListError("CPU mask is missing (got None)")
    if not isinstance(text, str):
        raise CpuListError("expected a CPU mask such as '0000ffff,00000000' (a string), got %r (a %s)"
                           % (text, _kind(text)))
    digits = text.strip().replace(',', '')
    if not digits:
        return []
    if re.fullmatch(r'[0-9A-Fa-f]+', digits) is None:
        raise CpuListError("malformed CPU mask %r: expected hexadecimal groups like 0000ffff,00000000" % (text,))
    value = int(digits, 16)
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
