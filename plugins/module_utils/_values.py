# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.core contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The collection's value rules, each one function: how a value is named in a message (one whose template the host
cannot render included: Unrendered), and what a management address, a network, a failure-domain label, an absolute
path, a unit name, a GPU or MIG device UUID, a whole number, a boolean and a percentage are.

Pure code, used on the controller (the fleet model, role checkers) and on hosts alike. Each ``*_problem`` function
returns None for a good value, else one sentence naming the variable, the value as given (with its YAML type where the
type is the mistake) and what is allowed. This is a private module: its API may change without notice.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import ipaddress
import json
import re

LABEL_PATTERN = r'[A-Za-z0-9_.-]+'
_LABEL = re.compile(LABEL_PATTERN)
# systemd's unit-name characters (systemd.unit(5)): letters, digits, ":", "-", "_", ".", "\" and one "@".
_UNIT_STEM = r'[A-Za-z0-9:_.\\-]+(?:@[A-Za-z0-9:_.\\-]*)?'
_UNIT_SUFFIXES = ('service', 'socket', 'target', 'timer', 'mount', 'path', 'slice', 'scope', 'device', 'swap')
# NVML's device names since R470: GPU-<uuid> for a whole GPU, MIG-<uuid> for a MIG device. Indices reorder, so the
# collection names devices only by these. (The older MIG-GPU-<uuid>/<gi>/<ci> form, with its slashes, is refused: it
# is no file name, and no driver this collection installs reports it.)
_DEVICE_UUID = re.compile(r'(?:GPU|MIG)-[0-9A-Za-z][0-9A-Za-z-]*')
_URL = re.compile(r'https?://[^\s/?#]+(?:/[^\s?#]*[^/\s?#])?')
_WHOLE = re.compile(r'[+]?[0-9]+')
_DECIMAL = re.compile(r'[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)')
_TRUE = ('true', 'yes', 'on', '1')
_FALSE = ('false', 'no', 'off', '0')


def _json(value):
    try:
        return json.dumps(value, sort_keys=False, default=str)
    except (TypeError, ValueError):
        return repr(value)


class Unrendered(object):
    """A value whose template the host cannot render, as the inventory gives it: the template as written, the variables
    it needs (in turn, through other variables) that the host does not have, and the template engine's words where
    those are not known. The controller's inventory reader gives it in place of the value (a KeyError or the engine's
    own message would name neither the host nor the variable)."""

    def __init__(self, template, missing=(), error=''):
        self.template = template
        self.missing = tuple(missing)
        self.error = error

    def __str__(self):
        return str(self.template)


def describe(value):
    """The value as a message shows it, with its YAML type: 'the integer 2', 'the string "85%"', 'the list [...]'."""
    if value is None:
        return 'empty (null)'
    if isinstance(value, Unrendered):
        if value.missing:
            return 'the template %s, which needs %s, not set for this host' % (
                _json(value.template), and_list(value.missing))
        return 'the template %s, which cannot be rendered (%s)' % (_json(value.template), value.error)
    if isinstance(value, bool):
        return 'the boolean %s' % ('true' if value else 'false')
    if isinstance(value, int):
        return 'the integer %d' % value
    if isinstance(value, float):
        return 'the number %s' % _json(value)
    if isinstance(value, str):
        return 'the string %s' % _json(value)
    if isinstance(value, dict):
        return 'the mapping %s' % _json(value)
    if isinstance(value, (list, tuple)):
        return 'the list %s' % _json(list(value))
    return '%s (%s)' % (_json(value), type(value).__name__)


def and_list(words):
    """'a', 'a and b', 'a, b and c': words in a sentence; '' for none."""
    words = [str(word) for word in words]
    return ', '.join(words[:-1]) + ' and ' + words[-1] if len(words) > 1 else ''.join(words)


def shown(value):
    """The value as JSON, for a message that already says which type it wants."""
    return _json(value)


# -- numbers and switches ----------------------------------------------------------------------------------------


def is_integer(value):
    """The one integer test: an int, and not a bool (which Python counts as one)."""
    return isinstance(value, int) and not isinstance(value, bool)


def whole_number(value):
    """The integer a value stands for (an integer, or a string of digits as -e and INI inventories give), else None."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, str) and _WHOLE.fullmatch(value.strip()):
        return int(value.strip())
    return None


def decimal_number(value):
    """The number a value stands for (int, float, or a string such as '0.02'), else None; booleans are no numbers."""
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return float(value)
    if isinstance(value, str) and _DECIMAL.fullmatch(value.strip()):
        return float(value.strip())
    return None


def boolean(value):
    """True or False for a YAML boolean or the words Ansible reads as one ('yes', 'false', ...), else None."""
    if isinstance(value, bool):
        return value
    if isinstance(value, str):
        word = value.strip().lower()
        if word in _TRUE:
            return True
        if word in _FALSE:
            return False
    return None


def whole_number_problem(variable, value, low=0, high=None, example=None):
    """A whole number from low to high (high None: no limit)."""
    number = whole_number(value)
    if number is not None and number >= low and (high is None or number <= high):
        return None
    allowed = 'a whole number from %d to %d' % (low, high) if high is not None else 'a whole number, %d or more' % low
    return '%s is %s; give %s%s' % (variable, describe(value), allowed, ', such as %s' % example if example else '')


def boolean_problem(variable, value):
    if boolean(value) is not None:
        return None
    return '%s is %s; give true or false' % (variable, describe(value))


def percentage(value):
    """(number, True) for 'N%' and (number, False) for a plain number; None for anything else."""
    if isinstance(value, str) and value.strip().endswith('%'):
        number = decimal_number(value.strip()[:-1])
        return None if number is None else (number, True)
    number = decimal_number(value)
    return None if number is None else (number, False)


# -- names and paths -----------------------------------------------------------------------------------------------


def label_problem(variable, value, what):
    """A failure-domain label (data centre, rack): a non-empty string of letters, digits, '_', '.' and '-'."""
    if isinstance(value, str) and _LABEL.fullmatch(value):
        return None
    if value is None or (isinstance(value, str) and not value):
        return "%s is not set; set it to the host's %s (letters, digits, _ . -), such as hk1-a" % (variable, what)
    if not isinstance(value, str):
        return '%s is %s; give a string, the %s (letters, digits, _ . -), such as "hk1-a"' % (
            variable, describe(value), what)
    return '%s is %s; a %s is letters, digits, _ . and - only' % (variable, describe(value), what)


def unrendered_problem(variable, value):
    """A value whose template the host cannot render (Unrendered): what it needs, and the fix."""
    if value.missing:
        return '%s is %s; set %s for the host, or give %s without it' % (
            variable, describe(value), and_list(value.missing), variable)
    return '%s is %s; fix the template' % (variable, describe(value))


def is_path(value, trailing_slash=False):
    """The path rule: an absolute path on one line, without whitespace, a '..' component or (unless trailing_slash)
    a trailing '/'; '/' itself is a path."""
    pattern = r'/(?:[^\s/]+(?:/[^\s/]+)*/?)?' if trailing_slash else r'/(?:[^\s/]+(?:/[^\s/]+)*)?'
    return isinstance(value, str) and re.fullmatch(pattern, value) is not None and '..' not in value.split('/')


def path_problem(variable, value, allow_empty=False, example='/etc/gpufleet/placement.json'):
    """The path rule's message: the variable, the value as given and an example."""
    if (allow_empty and value == '') or is_path(value):
        return None
    if not isinstance(value, str):
        return '%s is %s; give an absolute path as a string, such as %s' % (variable, describe(value), example)
    return ('%s is %s; give an absolute path on one line, without .., spaces or a trailing /, such as %s'
            % (variable, describe(value), example))


def is_unit_name(value, suffixes=_UNIT_SUFFIXES):
    """The unit-name rule (systemd.unit(5)): a stem of unit-name characters, at most one '@', and a unit type."""
    if not isinstance(value, str) or len(value) > 255:
        return False
    match = re.fullmatch(r'(%s)\.(%s)' % (_UNIT_STEM, '|'.join(suffixes)), value)
    return match is not None


def is_unit_prefix(value):
    """A unit-name prefix, such as 'gpufleet-mps@' or 'gpufleet-svc-', that a name and a type complete."""
    return isinstance(value, str) and re.fullmatch(_UNIT_STEM, value) is not None


def unit_name_problem(variable, value, allow_empty=False, suffixes=('service',)):
    if (allow_empty and value == '') or is_unit_name(value, suffixes):
        return None
    return ('%s is %s; give a systemd unit name such as gpufleet-mig.service (letters, digits, : _ . - \\ and one @)%s'
            % (variable, describe(value), ", or ''" if allow_empty else ''))


def is_device_uuid(value):
    """The device-name rule: a GPU-... or MIG-... UUID as NVML reports it."""
    return isinstance(value, str) and _DEVICE_UUID.fullmatch(value) is not None


def is_http_url(value):
    """The URL rule for a service's address: http(s)://host[:port][/path], without a trailing slash, query or
    fragment."""
    return isinstance(value, str) and _URL.fullmatch(value) is not None


def url_problem(variable, value, allow_empty=False, example='http://10.20.3.41:9090'):
    """An http(s) URL without a trailing slash, query or fragment."""
    if (allow_empty and value == '') or is_http_url(value):
        return None
    return '%s is %s; give an http(s) URL with no trailing slash, such as %s%s' % (
        variable, describe(value), example, ", or ''" if allow_empty else '')


# -- addresses and networks ------------------------------------------------------------------------------------------


def address(value):
    """The management-address rule: an IPv4 or IPv6 address alone (no prefix, no brackets), as an ipaddress object,
    else None. IPv6 written two ways (fd00::5, fd00:0::5) gives equal objects."""
    if not isinstance(value, str) or value != value.strip():
        return None
    try:
        return ipaddress.ip_address(value)
    except ValueError:
        return None


def address_problem(variable, value):
    if address(value) is not None:
        return None
    if isinstance(value, Unrendered) and value.missing:
        # The example's "{{ ansible_host }}" on a host listed without its ansible_host.
        return ("%s is %s: set %s for the host in the inventory, or %s in its host_vars, to the host's management IP "
                "address, such as 10.20.1.11" % (variable, describe(value), and_list(value.missing), variable))
    if value in ('', None):
        return "%s is not set; give the host's management IP address, such as 10.20.1.11" % variable
    if isinstance(value, str) and '/' in value and address(value.split('/')[0]) is not None:
        return '%s is %s, a network (with a prefix length); give the address alone, such as %s' % (
            variable, describe(value), value.split('/')[0])
    if isinstance(value, str) and value.startswith('[') and value.endswith(']') and address(value[1:-1]) is not None:
        return '%s is %s; write an IPv6 address without brackets, such as %s' % (variable, describe(value), value[1:-1])
    return "%s is %s, which is not an IP address; give the host's management IP, such as 10.20.1.11" % (
        variable, describe(value))


def network(value):
    """A network in CIDR form with no host bits set, as an ipaddress object, else None."""
    if not isinstance(value, str) or '/' not in value:
        return None
    try:
        return ipaddress.ip_network(value, strict=True)
    except ValueError:
        return None


def networks(variable, value):
    """(the networks, the problem or None) for a non-empty list of networks in CIDR form."""
    if isinstance(value, str):
        return [], ('%s is %s, but it must be a list of networks: write [%s]' % (
            variable, describe(value), ', '.join(_json(part.strip()) for part in value.split(',') if part.strip())))
    if not isinstance(value, (list, tuple)):
        return [], '%s is %s; give a list of networks in CIDR form, such as ["10.20.0.0/22"]' % (variable, describe(value))
    if not value:
        return [], '%s is empty; list the management networks, such as ["10.20.0.0/22"]' % variable
    found, bad = [], []
    for item in value:
        parsed = network(item)
        if parsed is None:
            bad.append(item)
        else:
            found.append(parsed)
    if bad:
        hints = []
        for item in bad:
            try:
                hint = ' (host bits set: the network is %s)' % ipaddress.ip_network(item, strict=False) \
                    if isinstance(item, str) and '/' in item else ''
            except ValueError:
                hint = ''
            hints.append('%s%s' % (_json(item), hint))
        return found, '%s has %s, which %s not a network in CIDR form (such as 10.20.0.0/22)' % (
            variable, ', '.join(hints), 'is' if len(bad) == 1 else 'are')
    return found, None


def usable_in(ip, net):
    """Whether an address can be a host's inside the network: in it, and (IPv4, prefix below 31) neither the network
    nor the broadcast address, as ansible.utils.network_in_usable has it."""
    if ip.version != net.version or ip not in net:
        return False
    if net.version == 4 and net.prefixlen < 31:
        return ip not in (net.network_address, net.broadcast_address)
    return True


def networks_of(ip, nets):
    """The networks among nets in which the address is usable."""
    return [net for net in nets if usable_in(ip, net)]


def addresses_in(addresses, cidrs):
    """The addresses (canonical, each once, in order) that a host can have inside any of the networks given in CIDR
    form (usable_in); entries that are not addresses or networks count for nothing."""
    nets = [net for net in (network(item) for item in cidrs) if net is not None]
    found = []
    for item in addresses:
        ip = address(item)
        if ip is not None and networks_of(ip, nets) and str(ip) not in found:
            found.append(str(ip))
    return found
