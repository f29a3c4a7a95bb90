# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.core contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Just enough OpenPGP (RFC 4880 / RFC 9580) to dearmor a public key and compute its fingerprints.

Repository keys are verified against pinned fingerprints before apt ever trusts them, on targets
that may have no gpg. What counts as a pinned fingerprint (``fingerprint_problem``) is decided here once, in the
words every refusal of one uses. This is a private module: its API may change without notice.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import base64
import binascii
import hashlib
import re

from ansible_collections.gpufleet.core.plugins.module_utils._errors import GpufleetError
from ansible_collections.gpufleet.core.plugins.module_utils._values import describe

_PUBLIC_KEY = 6
_PUBLIC_SUBKEY = 14

# A full fingerprint once normalise()d: 40 hex digits (a version 4 key: nearly every repository key) or 64 (a version
# 5 or 6 key, whose fingerprints fingerprint() computes too).
_FINGERPRINT = re.compile(r'[0-9A-F]{40}|[0-9A-F]{64}')
# A short or long key id, as gpg prints one, with or without 0x: anyone can make a key with a given id.
_KEY_ID = re.compile(r'(?:0X)?(?:[0-9A-F]{8}|[0-9A-F]{16})')
EXAMPLE_FINGERPRINT = 'EB693B3035CD5710E231E123A4B469963BF863CC'


class OpenPgpError(GpufleetError, ValueError):
    """Data that is not an OpenPGP public key."""


def dearmor(data):
    """Binary key data from ASCII armor; binary data is returned as it is."""
    if not data.lstrip().startswith(b'-----BEGIN PGP PUBLIC KEY BLOCK-----'):
        return data
    lines = data.decode('ascii', 'replace').splitlines()
    body = []
    in_headers = True
    for line in lines[1:]:
        line = line.strip()
        if line.startswith('-----END PGP'):
            break
        if in_headers:
            # Armor headers ("Version: ...") end at the first blank line.
            if not line or ':' not in line:
                in_headers = False
                if not line:
                    continue
            else:
                continue
        if line.startswith('='):
            break  # CRC24 checksum line
        body.append(line)
    try:
        return base64.b64decode(''.join(body), validate=True)
    except (binascii.Error, ValueError):
        raise OpenPgpError('the armored key block is not valid base64')


def packets(binary):
    """(tag, body) for each packet, old and new header formats."""
    position = 0
    while position < len(binary):
        header = binary[position]
        if not header & 0x80:
            raise OpenPgpError('byte %d is not an OpenPGP packet header' % position)
        if header & 0x40:  # new format
            tag = header & 0x3F
            if position + 2 > len(binary):
                raise OpenPgpError('the key data is truncated (%d bytes end inside a packet header)' % len(binary))
            first = binary[position + 1]
            if first < 192:
                length, skip = first, 2
            elif first < 224:
                if position + 3 > len(binary):
                    raise OpenPgpError('the key data is truncated (%d bytes end inside a packet header)'
                                       % len(binary))
                length, skip = ((first - 192) << 8) + binary[position + 2] + 192, 3
            elif first == 255:
                length, skip = int.from_bytes(binary[position + 2:position + 6], 'big'), 6
            else:
                raise OpenPgpError('partial body lengths do not occur in public keys')
        else:
            tag = (header >> 2) & 0x0F
            kind = header & 0x03
            if kind == 3:
                raise OpenPgpError('indeterminate packet lengths do not occur in public keys')
            size = (1, 2, 4)[kind]
            length, skip = int.from_bytes(binary[position + 1:position + 1 + size], 'big'), 1 + size
        if position + skip > len(binary):
            raise OpenPgpError('the key data is truncated (%d bytes end inside a packet header)' % len(binary))
        body = binary[position + skip:position + skip + length]
        if len(body) != length:
            raise OpenPgpError('the key data is truncated')
        yield tag, body
        position += skip + length


def fingerprint(body):
    """Fingerprint of a public-key packet body, in upper-case hex."""
    if not body:
        raise OpenPgpError('a public-key packet is empty')
    version = body[0]
    if version == 4:
        if len(body) > 0xFFFF:
            raise OpenPgpError('a version 4 public-key packet cannot be longer than 65535 bytes')
        return hashlib.sha1(b'\x99' + len(body).to_bytes(2, 'big') + body).hexdigest().upper()
    if version == 6:
        return hashlib.sha256(b'\x9b' + len(body).to_bytes(4, 'big') + body).hexdigest().upper()
    if version == 5:
        return hashlib.sha256(b'\x9a' + len(body).to_bytes(4, 'big') + body).hexdigest().upper()
    raise OpenPgpError('OpenPGP key version %d is not supported' % version)


def primary_fingerprints(data):
    """Dearmored key data and the fingerprints of its primary keys (subkeys are bound to them)."""
    binary = dearmor(data)
    found = [fingerprint(body) for tag, body in packets(binary) if tag == _PUBLIC_KEY]
    if not found:
        raise OpenPgpError('no OpenPGP public key found')
    return binary, found


def normalise(fingerprint_text):
    """A fingerprint as compared: no spaces, upper case."""
    return ''.join(str(fingerprint_text).split()).upper()


def is_fingerprint(value):
    """Is VALUE a full fingerprint (spaces between groups and case do not matter)? A key id is not."""
    return isinstance(value, str) and _FINGERPRINT.fullmatch(normalise(value)) is not None


def fingerprint_problem(variable, value):
    """None for a full fingerprint; else one sentence naming VARIABLE (an option or a role variable), the value and
    the fix, telling a key id (8 or 16 digits) from anything else."""
    if is_fingerprint(value):
        return None
    if isinstance(value, str) and _KEY_ID.fullmatch(normalise(value)):
        return ('%s has %s, a key id, not a fingerprint; give the full 40-digit fingerprint, as gpg --show-keys '
                '--with-fingerprint prints it, such as %s' % (variable, describe(value), EXAMPLE_FINGERPRINT))
    return ('%s has %s, which is not a key fingerprint; give the full 40-digit fingerprint (hex digits, spaces between '
            'groups allowed), such as %s' % (variable, describe(value), EXAMPLE_FINGERPRINT))


def pinned_fingerprints(values, variable='fingerprints'):
    """VALUES normalised, for comparing with primary_fingerprints(); OpenPgpError naming every one that is not a full
    fingerprint. A key id pins nothing: refusing it says so, where comparing it would only say "not pinned"."""
    problems = [problem for problem in (fingerprint_problem(variable, value) for value in values) if problem]
    if problems:
        raise OpenPgpError('; '.join(problems))
    return [normalise(value) for value in values]
